package cli

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/nodediag/nodediag/agent/host/hosttest"
	nodediagv1 "github.com/nodediag/nodediag/proto/nodediag/v1"
)

// garbageTree is a node whose files hold bytes that are not UTF-8 (0xff,
// Latin-1 letters), terminal escapes and NULs, in every place a probe reads:
// host identity, the kubelet's environment file (on a line a finding
// quotes), /proc/swaps, logs, and file names.
func garbageTree(t *testing.T) string {
	t.Helper()
	h := hosttest.Tree(t, map[string]string{
		"etc/hostname":                "node-\xff\xfe\n",
		"etc/machine-id":              "4f1c\xff9a2e\n",
		"proc/sys/kernel/osrelease":   "6.8.0-1021-azure\xe9\n",
		"etc/os-release":              "NAME=\"Ubuntu\"\nPRETTY_NAME=\"Ubuntu 24.04 LTS \xe9dition sp\xe9ciale\"\nID=ubuntu\nVERSION_ID=\"24.04\xff\"\n",
		"usr/bin/kubelet":             "#!/bin/sh\necho 'Kubernetes v1.35.0'\n",
		"usr/bin/kubeadm":             "#!/bin/sh\nprintf 'kubeadm version: &version.Info{GitVersion:\"v1.35.0\\377\"}\\n'\n",
		"etc/default/kubelet":         "# Gr\xfc\xdfe\nKUBELET_EXTRA_ARGS=\"--pod-infra-container-image=mcr.microsoft.com/oss/kubernetes/pause:3.6 --node-labels=team=caf\xe9\"\n",
		"var/lib/kubelet/config.yaml": "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\ncgroupDriver: syst\xffemd\nevictionHard:\n  \"memory.available\xff\": \"100Mi\xe9\"\n",
		"proc/swaps":                  "Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n/swap\\040f\xe9ile\xff                        file\t\t2097148\t\t0\t\t-2\n",
		"var/log/cloud-init-output.log": "Cloud-init v. 24.1.3 running 'modules:final' at Wed, 01 May 2024 00:00:28 +0000. Up 28.00 seconds.\n" +
			"+ curl -fsSL https://example.com/k\xe9belet -o /usr/bin/kubelet\n" +
			"curl: (22) The requested URL returned error: 404 \xff\xfe\x1b[31m\n" +
			"error execution phase preflight: couldn't validate the identity of the API Server: Get \"https://10.0.0.4:6443/api/v1/namespaces/kube-public/configmaps/cluster-info?timeout=10s\xff\": dial tcp 10.0.0.4:6443: connect: connection refused\n",
		"var/log/syslog":                              "May  1 00:01:00 node-\xff kubelet[1876]: E0501 00:01:00.000000    1876 run.go:72] \"command failed\" err=\"failed to parse kubelet flag: unknown flag: --pod-infra-container-image \xe9\x00\x1b]0;x\x07\"\n",
		"etc/kubernetes/pki/caf\xe9.crt":              "-----BEGIN CERTIFICATE-----\n\xff\xfe\n-----END CERTIFICATE-----\n",
		"var/lib/kubelet/pki/kubelet-client-\xff.pem": "->/var/lib/kubelet/pki/missing-\xe9.pem",
		"etc/cni/net.d/10-caf\xe9.conflist":           "{\"cniVersion\":\"1.0.0\",\"name\":\"caf\xe9\",\"plugins\":[{\"type\":\"brid\xffge\"}]}",
	})
	return h.Root
}

// TestGarbageBytesNeverBreakTheOutputs: whatever bytes the node holds, the
// agent runs (exit 0 or 1, never 2), --output json is valid JSON and a
// Report, and the full evidence marshals with protojson and proto.Marshal
// (the bundle and the stream carry it).
func TestGarbageBytesNeverBreakTheOutputs(t *testing.T) {
	root := garbageTree(t)

	js, stderr, code := run(t, "check", "--root", root, "--output", "json")
	if code == ExitUsage {
		t.Fatalf("--output json: exit 2: %s", stderr)
	}
	if !json.Valid([]byte(js)) {
		t.Fatalf("--output json is not valid JSON:\n%s", js)
	}
	var rep nodediagv1.Report
	if err := protojson.Unmarshal([]byte(js), &rep); err != nil {
		t.Fatalf("--output json is not a Report: %v", err)
	}
	for _, o := range []string{"text", "compact"} {
		out, stderr, code := run(t, "check", "--root", root, "--output", o)
		if code == ExitUsage {
			t.Fatalf("--output %s: exit 2: %s", o, stderr)
		}
		if strings.ContainsAny(out, "\x1b\x00\x07") || strings.Contains(out, "\xff") {
			t.Errorf("--output %s passes control or invalid bytes to the terminal:\n%q", o, out)
		}
	}

	r, err := checkOnce(context.Background(), checkOptions{root: root, output: "json", exec: "local", timeout: timeoutForTests})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := protojson.Marshal(r); err != nil {
		t.Errorf("protojson.Marshal of the full report: %v", err)
	}
	if _, err := proto.Marshal(r); err != nil {
		t.Errorf("proto.Marshal of the full report: %v", err)
	}

	// The garbage really reached the report: the test proves nothing
	// otherwise.
	if got := r.GetHost().GetHostname(); got != "node-\uFFFD" {
		t.Errorf("hostname %q, want node-\uFFFD", got)
	}
	quoted := false
	for _, f := range r.GetFindings() {
		for _, q := range f.GetEvidence() {
			if q.GetSource() == "/etc/default/kubelet" && strings.Contains(q.GetExcerpt(), "caf\uFFFD") {
				quoted = true
			}
		}
	}
	if !quoted {
		t.Errorf("no finding quotes the Latin-1 line of /etc/default/kubelet; findings:\n%s", js)
	}
}
