# nodediag: `make help` lists the targets.
PKG      := github.com/nodediag/nodediag
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
REVISION ?= $(shell git rev-parse HEAD 2>/dev/null)
LDFLAGS  := -s -w -X $(PKG)/internal/version.Version=$(VERSION) -X $(PKG)/internal/version.Revision=$(REVISION)
GOBUILD  := CGO_ENABLED=0 go build -trimpath -ldflags '$(LDFLAGS)'
PROTOS   := proto/nodediag/v1/nodediag.proto

.PHONY: all build test lint protos check-protos demo bench hosts golden help clean image

all: lint check-protos test build ## what CI runs

build: ## static binaries in bin/ (CGO_ENABLED=0, version stamped)
	$(GOBUILD) -o bin/nodediag-agent ./cmd/nodediag-agent
	$(GOBUILD) -o bin/nodediag ./cmd/nodediag

test: ## unit, scenario and end-to-end tests
	go test ./...

lint: ## gofmt and go vet
	@out=$$(gofmt -l $$(git ls-files '*.go' | grep -v '\.pb\.go$$')); \
	  if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	go vet ./...

protos: ## regenerate the Go code of proto/ (needs protoc: apt-get install protobuf-compiler)
	protoc -I proto \
	  --plugin=protoc-gen-go=$$(go tool -n protoc-gen-go) \
	  --plugin=protoc-gen-go-grpc=$$(go tool -n protoc-gen-go-grpc) \
	  --go_out=proto --go_opt=paths=source_relative \
	  --go-grpc_out=proto --go-grpc_opt=paths=source_relative \
	  $(PROTOS)

check-protos: protos ## fail when the committed generated code differs from the .proto
	@git diff --exit-code -- proto/ || { echo "generated code is stale: run make protos and commit"; exit 1; }
	@test -z "$$(git status --porcelain -- proto/)" || { git status --porcelain -- proto/; echo "untracked generated files"; exit 1; }

demo: build ## the agent on every example host, a fleet on loopback (collector, agents, a sweep), then a Cluster API diagnosis when `make testbin` was run
	@./scripts/demo.sh bin/nodediag-agent
	@./scripts/demo-fleet.sh bin/nodediag bin/nodediag-agent
	@./scripts/demo-cluster.sh bin/nodediag bin/nodediag-agent

bench: ## benchmarks: the agent's full check (process and in process, beside the manual script); the collector's sweep of 1,000 and 10,000 simulated agents
	go test -run '^$$' -bench . -benchmem -benchtime 10x ./cmd/nodediag-agent ./agent/...
	go test -run '^$$' -bench Sweep -benchtime 3x -timeout 30m ./cmd/nodediag

hosts: ## regenerate the example hosts of agent/testdata/hosts from hack/genhosts
	go run ./hack/genhosts

golden: ## rewrite the golden outputs of the example hosts (review the diff!)
	go test ./agent/cli -update

# make image: hack/image builds the images with no Docker engine. IMAGE_REPO names them
# (IMAGE_REPO/nodediag-agent:VERSION, IMAGE_REPO/nodediag:VERSION); IMAGE_ARCHES="amd64 arm64"
# cross-builds the other architectures into bin/linux_ARCH/ and makes each archive an image index;
# SOURCE_DATE_EPOCH (default: the commit's time) is every time in the images: same inputs, same digests.
IMAGE_REPO        ?= ghcr.io/nodediag
IMAGE_ARCHES      ?= $(shell go env GOARCH)
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null || echo 0)

image: build ## OCI image archives bin/images/nodediag-agent.oci.tar and nodediag.oci.tar from the static binaries (no Docker engine); digests printed
	@set -e; host=$$(go env GOARCH); bins=""; \
	for a in $(IMAGE_ARCHES); do \
	  if [ "$$a" = "$$host" ]; then bins="$$bins -bin bin"; continue; fi; \
	  echo "building bin/linux_$$a/"; \
	  GOARCH=$$a $(GOBUILD) -o bin/linux_$$a/nodediag-agent ./cmd/nodediag-agent; \
	  GOARCH=$$a $(GOBUILD) -o bin/linux_$$a/nodediag ./cmd/nodediag; \
	  bins="$$bins -bin bin/linux_$$a"; \
	done; \
	go run ./hack/image $$bins -out bin/images -repo '$(IMAGE_REPO)' \
	  -version '$(VERSION)' -revision '$(REVISION)' -source-date-epoch '$(SOURCE_DATE_EPOCH)'

clean:
	rm -rf bin

help: ## this list
	@awk -F':.*## ' '/^[a-z-]+:.*## / {printf "  %-14s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: testbin
testbin: ## kube-apiserver and etcd for the Cluster API tests, built into .testbin/ from the Go module proxy (no-op when up to date)
	hack/testbin/build.sh
