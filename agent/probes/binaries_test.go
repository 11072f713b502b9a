package probes

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/nodediag/nodediag/agent/host"
	"github.com/nodediag/nodediag/agent/host/hosttest"
	"github.com/nodediag/nodediag/agent/probe"
	nodediagv1 "github.com/nodediag/nodediag/proto/nodediag/v1"
)

// ---- parsers ---------------------------------------------------------------

type binVersionCase struct {
	name    string
	in      string
	want    string
	wantErr bool
}

func runBinVersionCases(t *testing.T, parse func([]byte) (string, error), tests []binVersionCase) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parse([]byte(tt.in))
			if (err != nil) != tt.wantErr {
				t.Fatalf("parse(%q) error = %v, wantErr %v", tt.in, err, tt.wantErr)
			}
			if got != tt.want {
				t.Errorf("parse(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

var kubeletVersionCases = []binVersionCase{
	{name: "release", in: "Kubernetes v1.35.0\n", want: "v1.35.0"},
	{name: "no newline", in: "Kubernetes v1.33.3", want: "v1.33.3"},
	{name: "built from the proxy", in: "Kubernetes v1.34.4\n", want: "v1.34.4"},
	{name: "LTS patch", in: "Kubernetes v1.31.100\n", want: "v1.31.100"},
	{name: "pre-release and build kept", in: "Kubernetes v1.33.0-rc.1+3f1b2c\n", want: "v1.33.0-rc.1+3f1b2c"},
	{name: "ci build", in: "Kubernetes v1.34.0-alpha.0.1234+abcdef0123456789\n", want: "v1.34.0-alpha.0.1234+abcdef0123456789"},
	{name: "warning before", in: "Flag --pod-infra-container-image has been deprecated\nKubernetes v1.30.4\n", want: "v1.30.4"},
	{name: "raw form", in: `version.Info{Major:"1", Minor:"30", GitVersion:"v1.30.4"}` + "\n", wantErr: true},
	{name: "empty", in: "", wantErr: true},
	{name: "error", in: "Error: unknown flag: --version\n", wantErr: true},
	{name: "trailing words", in: "Kubernetes v1.30.4 (patched)\n", wantErr: true},
}

func TestParseKubeletVersionOutput(t *testing.T) {
	runBinVersionCases(t, parseKubeletVersionOutput, kubeletVersionCases)
}

var kubeadmVersionCases = []binVersionCase{
	{name: "short", in: "v1.35.0\n", want: "v1.35.0"},
	{name: "short 1.30", in: "v1.30.0\n", want: "v1.30.0"},
	{name: "short LTS", in: "v1.31.100\n", want: "v1.31.100"},
	{name: "default form up to 1.32", in: `kubeadm version: &version.Info{Major:"1", Minor:"30", GitVersion:"v1.30.2", GitCommit:"3968350a5a1c1b1a1b1a1b1a1b1a1b1a1b1a1b1a", GitTreeState:"clean", BuildDate:"2024-06-11T20:27:59Z", GoVersion:"go1.22.4", Compiler:"gc", Platform:"linux/arm64"}` + "\n", want: "v1.30.2"},
	{name: "default form 1.33", in: `kubeadm version: &version.Info{Major:"1", Minor:"33", EmulationMajor:"", EmulationMinor:"", MinCompatibilityMajor:"", MinCompatibilityMinor:"", GitVersion:"v1.33.3", GitCommit:"80779bd6ff08b451e1c165a338a7b69351e9b0b8", GitTreeState:"clean", BuildDate:"2025-07-15T18:04:58Z", GoVersion:"go1.24.4", Compiler:"gc", Platform:"linux/amd64"}` + "\n", want: "v1.33.3"},
	{name: "unknown flag", in: "unknown shorthand flag: 'o' in -o\n", wantErr: true},
	{name: "empty", in: "", wantErr: true},
}

func TestParseKubeadmVersionOutput(t *testing.T) {
	runBinVersionCases(t, parseKubeadmVersionOutput, kubeadmVersionCases)
}

var kubectlVersionCases = []binVersionCase{
	{name: "json", in: `{
  "clientVersion": {
    "major": "1",
    "minor": "33",
    "gitVersion": "v1.33.1",
    "gitCommit": "8adc0f041b8e7ad1d30e29cc59c6ae7a15e19828",
    "gitTreeState": "clean",
    "buildDate": "2025-05-15T08:19:07Z",
    "goVersion": "go1.24.2",
    "compiler": "gc",
    "platform": "linux/amd64"
  },
  "kustomizeVersion": "v5.6.0"
}
`, want: "v1.33.1"},
	{name: "json vendor suffix", in: `{"clientVersion":{"major":"1","minor":"32+","gitVersion":"v1.32.4-dispatcher"},"kustomizeVersion":"v5.5.0"}`, want: "v1.32.4-dispatcher"},
	{name: "json cut short", in: "{\n  \"clientVersion\": {\n    \"major\": \"1\",\n    \"minor\": \"29\",\n    \"gitVersion\": \"v1.29.14\",\n", want: "v1.29.14"},
	{name: "text 1.28+", in: "Client Version: v1.33.1\nKustomize Version: v5.6.0\n", want: "v1.33.1"},
	{name: "short 1.27", in: "Client Version: v1.27.16\n", want: "v1.27.16"},
	{name: "text 1.24-1.27", in: `Client Version: version.Info{Major:"1", Minor:"27", GitVersion:"v1.27.16", GitCommit:"cbb86e0d7f4a049666fac0551e8b02ef3d6c3d9a", GitTreeState:"clean", BuildDate:"2024-07-17T01:44:24Z", GoVersion:"go1.22.5", Compiler:"gc", Platform:"linux/amd64"}` + "\nKustomize Version: v5.0.1\n", want: "v1.27.16"},
	{name: "kustomize only", in: "Kustomize Version: v5.6.0\n", wantErr: true},
	{name: "json without client", in: `{"kustomizeVersion":"v5.6.0"}`, wantErr: true},
	{name: "removed flag", in: "error: unknown flag: --short\n", wantErr: true},
	{name: "empty", in: "", wantErr: true},
}

func TestParseKubectlVersionOutput(t *testing.T) {
	runBinVersionCases(t, parseKubectlVersionOutput, kubectlVersionCases)
}

var containerdVersionCases = []binVersionCase{
	{name: "upstream 1.x", in: "containerd github.com/containerd/containerd v1.7.15 926c9586fe4a6236699318391cd44976a98e31f1\n", want: "v1.7.15"},
	{name: "upstream 2.x", in: "containerd github.com/containerd/containerd/v2 v2.1.1 cb1076646aa3740577fafbf3d914198b7fe8e3f7\n", want: "v2.1.1"},
	{name: "self-built dirty", in: "containerd github.com/containerd/containerd/v2 v2.3.2 fff62f0f61.m\n", want: "v2.3.2"},
	{name: "git describe", in: "containerd github.com/containerd/containerd/v2 v2.1.0-14-g926c958 926c958\n", want: "v2.1.0-14-g926c958"},
	{name: "release candidate", in: "containerd github.com/containerd/containerd v2.0.0-rc.3 abc123\n", want: "v2.0.0-rc.3"},
	{name: "docker containerd.io", in: "containerd containerd.io 1.7.20 8fc6bcff51318944179630522a095cc9dbf9f353\n", want: "v1.7.20"},
	{name: "docker containerd.io 1.6", in: "containerd containerd.io 1.6.24 61f9fd88f79f081d64d6fa3bb1a0dc71ec870523\n", want: "v1.6.24"},
	{name: "debian bookworm", in: "containerd github.com/containerd/containerd 1.6.20~ds1 1.6.20~ds1-1+b1\n", want: "v1.6.20"},
	{name: "debian older", in: "containerd github.com/containerd/containerd 1.5.4~ds1 1.5.4~ds1-1\n", want: "v1.5.4"},
	{name: "ubuntu no revision", in: "containerd github.com/containerd/containerd 1.7.28\n", want: "v1.7.28"},
	{name: "ubuntu trailing space", in: "containerd github.com/containerd/containerd 1.4.4-0ubuntu1 \n", want: "v1.4.4"},
	{name: "ubuntu backport", in: "containerd github.com/containerd/containerd 1.5.2-0ubuntu1~21.04.2 \n", want: "v1.5.2"},
	{name: "azure linux", in: "containerd github.com/containerd/containerd 1.7.13 7c3aca7a610df76212171d200ca3811ff6096eb8\n", want: "v1.7.13"},
	{name: "aks moby-containerd", in: "containerd github.com/containerd/containerd 1.7.22-1 7f7fdf5fed64eb6a7caf99b3e12efcf9d60e311c\n", want: "v1.7.22"},
	{name: "unstamped default", in: "containerd github.com/containerd/containerd 1.6.0-rc.4+unknown \n", want: "v1.6.0-rc.4+unknown"},
	{name: "empty package", in: "containerd  1.7.1 \n", want: "v1.7.1"},
	{name: "not containerd", in: "runc version 1.1.12\n", wantErr: true},
	{name: "no version", in: "containerd github.com/containerd/containerd\n", wantErr: true},
	{name: "empty", in: "", wantErr: true},
}

func TestParseContainerdVersionOutput(t *testing.T) {
	runBinVersionCases(t, parseContainerdVersionOutput, containerdVersionCases)
}

var crictlVersionCases = []binVersionCase{
	{name: "github release", in: "crictl version v1.34.0\n", want: "v1.34.0"},
	{name: "github release 1.30", in: "crictl version v1.30.0\n", want: "v1.30.0"},
	{name: "pkgs.k8s.io", in: "crictl version 1.32.0\n", want: "v1.32.0"},
	{name: "pkgs.k8s.io 1.27", in: "crictl version 1.27.0\n", want: "v1.27.0"},
	{name: "no version", in: "crictl version\n", wantErr: true},
	{name: "not a version", in: "crictl version unknown\n", wantErr: true},
	{name: "empty", in: "", wantErr: true},
}

func TestParseCrictlVersionOutput(t *testing.T) {
	runBinVersionCases(t, parseCrictlVersionOutput, crictlVersionCases)
}

var runcVersionCases = []binVersionCase{
	{name: "upstream", in: "runc version 1.1.12\ncommit: v1.1.12-0-g51d5e946\nspec: 1.0.2-dev\ngo: go1.20.13\nlibseccomp: 2.5.4\n", want: "v1.1.12"},
	{name: "debian", in: "runc version 1.1.5+ds1\ncommit: 1.1.5+ds1-1+deb12u1\nspec: 1.0.2-dev\ngo: go1.19.8\nlibseccomp: 2.5.4\n", want: "v1.1.5"},
	{name: "ubuntu", in: "runc version 1.3.3-0ubuntu1~22.04.3\nspec: 1.2.1\ngo: go1.23.1\nlibseccomp: 2.5.3\n", want: "v1.3.3"},
	{name: "release candidate", in: "runc version 1.2.0-rc.1\ncommit: v1.2.0-rc.1-0-g275e6d85\n", want: "v1.2.0-rc.1"},
	{name: "spec line only", in: "spec: 1.0.2-dev\n", wantErr: true},
	{name: "empty", in: "", wantErr: true},
}

func TestParseRuncVersionOutput(t *testing.T) {
	runBinVersionCases(t, parseRuncVersionOutput, runcVersionCases)
}

func TestNormalizeBinaryVersion(t *testing.T) {
	runBinVersionCases(t, func(b []byte) (string, error) { return normalizeBinaryVersion(string(b)) }, []binVersionCase{
		{name: "plain", in: "1.7.20", want: "v1.7.20"},
		{name: "with v", in: "v1.7.15", want: "v1.7.15"},
		{name: "debian tilde", in: "1.6.20~ds1", want: "v1.6.20"},
		{name: "ubuntu revision", in: "1.4.4-0ubuntu1", want: "v1.4.4"},
		{name: "debian revision", in: "1.7.22-1", want: "v1.7.22"},
		{name: "rpm revision", in: "1.7.13-2.azl3", want: "v1.7.13"},
		{name: "debian build", in: "1.1.5+ds1", want: "v1.1.5"},
		{name: "debian revision and build", in: "1.6.20-1+b1", want: "v1.6.20"},
		{name: "pre-release kept", in: "2.0.0-rc.3", want: "v2.0.0-rc.3"},
		{name: "beta kept", in: "v1.33.0-beta.0", want: "v1.33.0-beta.0"},
		{name: "git describe kept", in: "v2.1.0-14-g926c958", want: "v2.1.0-14-g926c958"},
		{name: "upstream build kept", in: "1.6.0-rc.4+unknown", want: "v1.6.0-rc.4+unknown"},
		{name: "LTS", in: "v1.31.100", want: "v1.31.100"},
		{name: "major.minor", in: "1.7", want: "v1.7"},
		{name: "dirty marker dropped", in: "v2.3.2.m", want: "v2.3.2"},
		{name: "words", in: "unknown", wantErr: true},
		{name: "empty", in: "", wantErr: true},
	})
}

func TestBinExcerpt(t *testing.T) {
	long := strings.Repeat("x", 600)
	tests := []struct {
		name, in, must, want string
	}{
		{"one line", "Kubernetes v1.35.0\n", "1.35.0", "Kubernetes v1.35.0"},
		{"first lines only", "1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n", "", "1\n2\n3\n4\n5\n6\n7\n8"},
		{"long line cut", long, "", long[:binOutputMaxBytes]},
		{"version line kept", "1\n2\n3\n4\n5\n6\n7\n8\n\"gitVersion\": \"v1.33.1\",\n", "1.33.1", "1\n2\n3\n4\n5\n6\n7\n8\n…\n\"gitVersion\": \"v1.33.1\","},
		{"invalid utf-8", "runc version 1.1.12\xff\n", "", "runc version 1.1.12\uFFFD"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := binExcerpt([]byte(tt.in), tt.must); got != tt.want {
				t.Errorf("binExcerpt = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestBuildInfoVersion(t *testing.T) {
	k8s := []string{"k8s.io/kubernetes"}
	ctd := []string{"github.com/containerd/containerd/v2", "github.com/containerd/containerd"}
	tests := []struct {
		name     string
		bi       *debug.BuildInfo
		modules  []string
		want     string
		wantLine string
	}{
		{
			name:    "main module tagged (Go >= 1.24)",
			bi:      &debug.BuildInfo{Path: "k8s.io/kubernetes/cmd/kubectl", Main: debug.Module{Path: "k8s.io/kubernetes", Version: "v1.33.1"}},
			modules: k8s, want: "v1.33.1", wantLine: "mod\tk8s.io/kubernetes\tv1.33.1",
		},
		{
			name:    "main module devel (Go <= 1.23)",
			bi:      &debug.BuildInfo{Path: "k8s.io/kubernetes/cmd/kubectl", Main: debug.Module{Path: "k8s.io/kubernetes", Version: "(devel)"}},
			modules: k8s,
		},
		{
			name: "ldflags before trimpath",
			bi: &debug.BuildInfo{Main: debug.Module{Path: "k8s.io/kubernetes", Version: "(devel)"}, Settings: []debug.BuildSetting{
				{Key: "-ldflags", Value: "all=-X 'k8s.io/client-go/pkg/version.gitVersion=v1.27.3' -X 'k8s.io/component-base/version.gitVersion=v1.27.3' -s -w"},
			}},
			modules: k8s, want: "v1.27.3", wantLine: "build\t-ldflags=...version.gitVersion=v1.27.3...",
		},
		{
			name:    "dependency",
			bi:      &debug.BuildInfo{Main: debug.Module{Path: "example.com/kubelet", Version: "(devel)"}, Deps: []*debug.Module{{Path: "k8s.io/api", Version: "v0.34.4"}, {Path: "k8s.io/kubernetes", Version: "v1.34.4"}}},
			modules: k8s, want: "v1.34.4", wantLine: "dep\tk8s.io/kubernetes\tv1.34.4",
		},
		{
			name:    "containerd 2",
			bi:      &debug.BuildInfo{Main: debug.Module{Path: "github.com/containerd/containerd/v2", Version: "v2.1.1"}},
			modules: ctd, want: "v2.1.1", wantLine: "mod\tgithub.com/containerd/containerd/v2\tv2.1.1",
		},
		{
			name: "containerd ldflags",
			bi: &debug.BuildInfo{Main: debug.Module{Path: "github.com/containerd/containerd", Version: "(devel)"}, Settings: []debug.BuildSetting{
				{Key: "-ldflags", Value: "-X github.com/containerd/containerd/version.Version=1.7.13 -X github.com/containerd/containerd/version.Revision=7c3aca7"},
			}},
			modules: ctd, want: "v1.7.13", wantLine: "build\t-ldflags=...version.Version=1.7.13...",
		},
		{
			name:    "another program",
			bi:      &debug.BuildInfo{Main: debug.Module{Path: "example.com/other", Version: "v9.9.9"}},
			modules: k8s,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, line := buildInfoVersion(tt.bi, tt.modules)
			if got != tt.want || line != tt.wantLine {
				t.Errorf("buildInfoVersion = %q, %q; want %q, %q", got, line, tt.want, tt.wantLine)
			}
		})
	}
}

// ---- fuzz: no parser may panic ------------------------------------------

func fuzzVersionParser(f *testing.F, parse func([]byte) (string, error), seeds []binVersionCase) {
	for _, s := range seeds {
		f.Add([]byte(s.in))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := parse(b)
		if err == nil && !strings.HasPrefix(v, "v") {
			t.Errorf("parse(%q) = %q: a version without a leading v", b, v)
		}
	})
}

func FuzzParseKubeletVersionOutput(f *testing.F) {
	fuzzVersionParser(f, parseKubeletVersionOutput, kubeletVersionCases)
}

func FuzzParseKubeadmVersionOutput(f *testing.F) {
	fuzzVersionParser(f, parseKubeadmVersionOutput, kubeadmVersionCases)
}

func FuzzParseKubectlVersionOutput(f *testing.F) {
	fuzzVersionParser(f, parseKubectlVersionOutput, kubectlVersionCases)
}

func FuzzParseContainerdVersionOutput(f *testing.F) {
	fuzzVersionParser(f, parseContainerdVersionOutput, containerdVersionCases)
}

func FuzzParseCrictlVersionOutput(f *testing.F) {
	fuzzVersionParser(f, parseCrictlVersionOutput, crictlVersionCases)
}

func FuzzParseRuncVersionOutput(f *testing.F) {
	fuzzVersionParser(f, parseRuncVersionOutput, runcVersionCases)
}

func FuzzBinExcerpt(f *testing.F) {
	for _, s := range kubectlVersionCases {
		f.Add([]byte(s.in), "1.33.1")
	}
	f.Fuzz(func(t *testing.T, b []byte, must string) {
		got := binExcerpt(b, must)
		if !strings.Contains(got, "\n…\n") && len(got) > binOutputMaxBytes {
			t.Errorf("excerpt of %d bytes", len(got))
		}
		if !utf8.ValidString(got) {
			t.Errorf("excerpt %q is not valid UTF-8", got)
		}
	})
}

// ---- probe wiring ------------------------------------------------------------

// Fake binaries that check their argv, so that a probe asking the wrong way
// fails: each answers the way the real one does.
const (
	fakeKubelet = "#!/bin/sh\n[ \"$*\" = \"--version\" ] || { echo \"unknown flag: $*\" >&2; exit 1; }\necho 'Kubernetes %s'\n"
	fakeKubeadm = "#!/bin/sh\n[ \"$*\" = \"version -o short\" ] || { echo \"unknown command: $*\" >&2; exit 1; }\necho '%s'\n"
	fakeKubectl = "#!/bin/sh\n[ \"$*\" = \"version --client -o json\" ] || { echo \"error: unknown: $*\" >&2; exit 1; }\ncat <<'EOF'\n{\n  \"clientVersion\": {\n    \"major\": \"1\",\n    \"minor\": \"33\",\n    \"gitVersion\": \"%s\",\n    \"gitTreeState\": \"clean\"\n  },\n  \"kustomizeVersion\": \"v5.6.0\"\n}\nEOF\n"
	fakeCtd     = "#!/bin/sh\n[ \"$*\" = \"--version\" ] || exit 1\necho 'containerd github.com/containerd/containerd %s 926c9586fe4a6236699318391cd44976a98e31f1'\n"
	fakeCrictl  = "#!/bin/sh\n[ \"$*\" = \"--version\" ] || exit 1\necho 'crictl version %s'\n"
	fakeRunc    = "#!/bin/sh\n[ \"$*\" = \"--version\" ] || exit 1\nprintf 'runc version %s\\ncommit: v1.1.12-0-g51d5e946\\nspec: 1.0.2-dev\\ngo: go1.20.13\\nlibseccomp: 2.5.4\\n'\n"
)

func fakeBinary(script, version string) string { return strings.Replace(script, "%s", version, 1) }

func runBinaries(t *testing.T, h *host.Host) []*nodediagv1.Binary {
	t.Helper()
	pe, err := binaries{}.Run(context.Background(), h)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if len(pe.GetUnreadable()) > 0 {
		t.Errorf("unexpected unreadable: %v", pe.GetUnreadable())
	}
	if pe.GetBinaries() == nil {
		t.Fatal("no Binaries data")
	}
	return pe.GetBinaries().GetBinaries()
}

func TestBinariesAllSix(t *testing.T) {
	h := hosttest.Tree(t, map[string]string{
		"usr/bin/kubelet":       fakeBinary(fakeKubelet, "v1.33.2"),
		"usr/bin/kubeadm":       fakeBinary(fakeKubeadm, "v1.33.2"),
		"usr/bin/kubectl":       fakeBinary(fakeKubectl, "v1.33.1"),
		"usr/bin/containerd":    fakeBinary(fakeCtd, "1.7.15"),
		"usr/local/bin/crictl":  fakeBinary(fakeCrictl, "1.32.0"),
		"usr/sbin/runc":         fakeBinary(fakeRunc, "1.1.12"),
		"usr/share/kubelet.txt": "not a binary",
	})
	got := runBinaries(t, h)
	want := []*nodediagv1.Binary{
		{Name: "kubelet", Path: "/usr/bin/kubelet", Version: "v1.33.2", Command: "/usr/bin/kubelet --version", Output: "Kubernetes v1.33.2", Effective: true, Method: "exec"},
		{Name: "kubeadm", Path: "/usr/bin/kubeadm", Version: "v1.33.2", Command: "/usr/bin/kubeadm version -o short", Output: "v1.33.2", Effective: true, Method: "exec"},
		{Name: "kubectl", Path: "/usr/bin/kubectl", Version: "v1.33.1", Command: "/usr/bin/kubectl version --client -o json", Output: "{\n  \"clientVersion\": {\n    \"major\": \"1\",\n    \"minor\": \"33\",\n    \"gitVersion\": \"v1.33.1\",\n    \"gitTreeState\": \"clean\"\n  },\n  \"kustomizeVersion\": \"v5.6.0\"", Effective: true, Method: "exec"},
		{Name: "containerd", Path: "/usr/bin/containerd", Version: "v1.7.15", Command: "/usr/bin/containerd --version", Output: "containerd github.com/containerd/containerd 1.7.15 926c9586fe4a6236699318391cd44976a98e31f1", Effective: true, Method: "exec"},
		{Name: "crictl", Path: "/usr/local/bin/crictl", Version: "v1.32.0", Command: "/usr/local/bin/crictl --version", Output: "crictl version 1.32.0", Effective: true, Method: "exec"},
		{Name: "runc", Path: "/usr/sbin/runc", Version: "v1.1.12", Command: "/usr/sbin/runc --version", Output: "runc version 1.1.12\ncommit: v1.1.12-0-g51d5e946\nspec: 1.0.2-dev\ngo: go1.20.13\nlibseccomp: 2.5.4", Effective: true, Method: "exec"},
	}
	if diff := cmp.Diff(want, got, protocmp.Transform()); diff != "" {
		t.Errorf("binaries (-want +got):\n%s", diff)
	}
}

// A merged-/usr host (/bin -> usr/bin) with a second kubelet in
// /usr/local/bin, as a failed binary replacement leaves it, and a symlink in
// /opt/bin to the /usr/bin copy.
func TestBinariesCopiesAndAliases(t *testing.T) {
	h := hosttest.Tree(t, map[string]string{
		"usr/bin/kubelet":       fakeBinary(fakeKubelet, "v1.33.2"),
		"usr/local/bin/kubelet": fakeBinary(fakeKubelet, "v1.32.0"),
		"bin":                   "->usr/bin",
		"sbin":                  "->usr/sbin",
		"usr/sbin/":             "",
		"opt/bin/kubelet":       "->/usr/bin/kubelet",
		"usr/sbin/kubeadm":      "->../bin/kubeadm-1.32",
		"usr/bin/kubeadm-1.32":  fakeBinary(fakeKubeadm, "v1.32.0"),
	})
	got := runBinaries(t, h)
	want := []*nodediagv1.Binary{
		{Name: "kubelet", Path: "/usr/local/bin/kubelet", Version: "v1.32.0", Command: "/usr/local/bin/kubelet --version", Output: "Kubernetes v1.32.0", Effective: true, Method: "exec"},
		{Name: "kubelet", Path: "/usr/bin/kubelet", Version: "v1.33.2", Command: "/usr/bin/kubelet --version", Output: "Kubernetes v1.33.2", Method: "exec", Aliases: []string{"/bin/kubelet", "/opt/bin/kubelet"}},
		{Name: "kubeadm", Path: "/usr/sbin/kubeadm", ResolvedPath: "/usr/bin/kubeadm-1.32", Version: "v1.32.0", Command: "/usr/sbin/kubeadm version -o short", Output: "v1.32.0", Effective: true, Method: "exec", Aliases: []string{"/sbin/kubeadm"}},
	}
	if diff := cmp.Diff(want, got, protocmp.Transform()); diff != "" {
		t.Errorf("binaries (-want +got):\n%s", diff)
	}
}

func TestBinariesFailures(t *testing.T) {
	h := hosttest.Tree(t, map[string]string{
		// Fails with a message on stderr.
		"usr/bin/kubeadm": "#!/bin/sh\necho 'error: unknown flag: --output' >&2\nexit 3\n",
		// Answers something else.
		"usr/bin/crictl": "#!/bin/sh\necho 'Segmentation fault'\n",
		// Prints its version to stderr.
		"usr/bin/runc": "#!/bin/sh\necho 'runc version 1.1.12' >&2\n",
		// Not executable, and not a Go program.
		"usr/bin/containerd": "containerd is not a program\n",
	})
	// None of these is meant to hang: a generous timeout, so that a loaded
	// machine starting sh slowly cannot turn an answer into a timeout. The
	// hung binary has its own test and its own short timeout.
	h.CmdTimeout = 30 * time.Second
	got := runBinaries(t, h)
	byName := map[string]*nodediagv1.Binary{}
	for _, b := range got {
		byName[b.Name] = b
	}
	tests := []struct {
		name, version, method string
		errHas                []string
	}{
		{"kubeadm", "", "exec", []string{"exit status 3", "error: unknown flag: --output"}},
		{"crictl", "", "exec", []string{"cannot read the version", "Segmentation fault"}},
		{"runc", "v1.1.12", "exec", nil},
		{"containerd", "", "exec", []string{"not executable", "no Go build info either", "/usr/bin/containerd"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := byName[tt.name]
			if b == nil {
				t.Fatalf("no %s in %v", tt.name, got)
			}
			if b.Version != tt.version || b.Method != tt.method {
				t.Errorf("version, method = %q, %q; want %q, %q", b.Version, b.Method, tt.version, tt.method)
			}
			if len(tt.errHas) == 0 && b.Error != "" {
				t.Errorf("error = %q, want none", b.Error)
			}
			for _, s := range tt.errHas {
				if !strings.Contains(b.Error, s) {
					t.Errorf("error = %q, want it to mention %q", b.Error, s)
				}
			}
			if strings.Contains(b.Error, h.Root) {
				t.Errorf("error %q names the path under the root", b.Error)
			}
		})
	}
	if got := byName["runc"].Output; got != "runc version 1.1.12" {
		t.Errorf("runc output = %q, want the stderr line it printed", got)
	}
	if got := byName["crictl"].Output; got != "Segmentation fault" {
		t.Errorf("crictl output = %q, want what it printed", got)
	}
}

// A binary that hangs is killed at the Host's timeout, and the evidence says
// so. It is alone on its Host: the short timeout applies to it only.
func TestBinariesHung(t *testing.T) {
	h := hosttest.Tree(t, map[string]string{
		"usr/bin/kubelet": "#!/bin/sh\nsleep 300\necho 'Kubernetes v1.33.2'\n",
	})
	h.CmdTimeout = 300 * time.Millisecond
	got := runBinaries(t, h)
	if len(got) != 1 || got[0].Name != "kubelet" {
		t.Fatalf("binaries = %v, want the kubelet", got)
	}
	b := got[0]
	if b.Version != "" || b.Method != "exec" || !strings.Contains(b.Error, "no answer within 300ms") {
		t.Errorf("version %q, method %q, error %q; want none, exec, no answer within 300ms", b.Version, b.Method, b.Error)
	}
	if strings.Contains(b.Error, h.Root) {
		t.Errorf("error %q names the path under the root", b.Error)
	}
}

func TestBinariesNoneInstalled(t *testing.T) {
	h := hosttest.Tree(t, map[string]string{"usr/bin/sh": "#!/bin/true\n"})
	got := runBinaries(t, h)
	if len(got) != 0 {
		t.Errorf("binaries = %v, want none", got)
	}
}

func TestBinariesNotApplicable(t *testing.T) {
	h := hosttest.Tree(t, map[string]string{"var/log/cloud-init-output.log": "x\n"})
	_, err := binaries{}.Run(context.Background(), h)
	if !errors.Is(err, probe.ErrNotApplicable) {
		t.Fatalf("Run error = %v, want ErrNotApplicable", err)
	}
}

func TestBinariesUnreadable(t *testing.T) {
	h := hosttest.Tree(t, map[string]string{
		"usr/bin/kubelet": fakeBinary(fakeKubelet, "v1.33.2"),
		// A symlink loop: neither present nor absent.
		"usr/local/bin/kubectl": "->/usr/local/bin/kubectl",
	})
	pe, err := binaries{}.Run(context.Background(), h)
	if err != nil {
		t.Fatal(err)
	}
	if len(pe.GetUnreadable()) != 1 || pe.GetUnreadable()[0].GetSource() != "/usr/local/bin/kubectl" {
		t.Errorf("unreadable = %v, want /usr/local/bin/kubectl", pe.GetUnreadable())
	}
	if bs := pe.GetBinaries().GetBinaries(); len(bs) != 1 || bs[0].GetVersion() != "v1.33.2" {
		t.Errorf("binaries = %v, want the kubelet still reported", bs)
	}
}

// goBuildTagged builds a tiny Go program as the main module modPath, committed
// and tagged tag in a git repository, as Kubernetes release binaries are
// built: Go >= 1.24 then records the tag as the main module's version. With
// tag "" it is built outside git (-buildvcs=false), and the build info
// records no version: "(devel)", as in an official release built with
// -trimpath.
func goBuildTagged(t *testing.T, modPath, tag string) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	if _, err := exec.LookPath("git"); err != nil && tag != "" {
		t.Skip("git is needed to stamp a module version: ", err)
	}
	dir := t.TempDir()
	files := map[string]string{
		"go.mod":  "module " + modPath + "\n\ngo 1.24\n",
		"main.go": "package main\n\nimport \"fmt\"\n\nfunc main() { fmt.Println(\"not a kubelet\") }\n",
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	run := func(name string, args ...string) {
		t.Helper()
		cmd := exec.Command(name, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOTOOLCHAIN=local", "GOFLAGS=", "CGO_ENABLED=0",
			"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com",
			"GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s %v: %v\n%s", name, args, err, out)
		}
	}
	out := filepath.Join(t.TempDir(), "bin")
	if tag == "" {
		run(goBin, "build", "-buildvcs=false", "-trimpath", "-o", out, ".")
		return out
	}
	run("git", "init", "-q")
	run("git", "add", ".")
	run("git", "commit", "-q", "-m", "release")
	run("git", "tag", tag)
	run(goBin, "build", "-buildvcs=true", "-trimpath", "-o", out, ".")
	return out
}

func installBinary(t *testing.T, h *host.Host, hostPath, src string, mode os.FileMode) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(h.Root, hostPath)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, b, mode); err != nil {
		t.Fatal(err)
	}
}

// When binaries cannot run (a copy of a host, a file without the execute
// bit), the version comes from the Go build info.
func TestBinariesBuildInfoFallback(t *testing.T) {
	k8sBin := goBuildTagged(t, "k8s.io/kubernetes", "v1.33.1")
	ctdBin := goBuildTagged(t, "github.com/containerd/containerd/v2", "v2.1.1")

	t.Run("exec disabled", func(t *testing.T) {
		h := hosttest.Tree(t, map[string]string{
			"usr/bin/crictl": fakeBinary(fakeCrictl, "1.32.0"), // a script: no build info
		})
		installBinary(t, h, "usr/bin/kubelet", k8sBin, 0o755)
		installBinary(t, h, "usr/local/bin/containerd", ctdBin, 0o755)
		h.Exec = host.NoExec{}
		got := runBinaries(t, h)
		want := []*nodediagv1.Binary{
			{Name: "kubelet", Path: "/usr/bin/kubelet", Version: "v1.33.1", Command: "/usr/bin/kubelet --version", Method: "buildinfo", Effective: true,
				Error: "not run: running host binaries is disabled"},
			{Name: "containerd", Path: "/usr/local/bin/containerd", Version: "v2.1.1", Command: "/usr/local/bin/containerd --version", Method: "buildinfo", Effective: true,
				Error: "not run: running host binaries is disabled"},
			{Name: "crictl", Path: "/usr/bin/crictl", Command: "/usr/bin/crictl --version", Method: "exec", Effective: true},
		}
		ignoreOutput := protocmp.IgnoreFields(&nodediagv1.Binary{}, "output")
		if diff := cmp.Diff(want[:2], got[:2], protocmp.Transform(), ignoreOutput); diff != "" {
			t.Errorf("binaries (-want +got):\n%s", diff)
		}
		if !strings.HasPrefix(got[0].Output, "mod\tk8s.io/kubernetes\tv1.33.1\ngo\tgo") {
			t.Errorf("kubelet output = %q, want the build info lines, the version first", got[0].Output)
		}
		if !strings.HasPrefix(got[1].Output, "mod\tgithub.com/containerd/containerd/v2\tv2.1.1\n") {
			t.Errorf("containerd output = %q", got[1].Output)
		}
		if c := got[2]; c.Version != "" || !strings.Contains(c.Error, "disabled") || !strings.Contains(c.Error, "no Go build info") {
			t.Errorf("crictl = %v, want no version and both failures named", c)
		}
	})

	t.Run("not executable", func(t *testing.T) {
		h := hosttest.Tree(t, nil)
		installBinary(t, h, "usr/bin/kubeadm", k8sBin, 0o644)
		got := runBinaries(t, h)
		if len(got) != 1 {
			t.Fatalf("binaries = %v", got)
		}
		if b := got[0]; b.Version != "v1.33.1" || b.Method != "buildinfo" || !strings.Contains(b.Error, "not executable") {
			t.Errorf("kubeadm = %v, want v1.33.1 from buildinfo after a permission error", b)
		}
	})

	t.Run("runs when it can", func(t *testing.T) {
		h := hosttest.Tree(t, nil)
		installBinary(t, h, "usr/bin/kubelet", k8sBin, 0o755)
		got := runBinaries(t, h)
		// The program prints "not a kubelet": exec worked, so build info is
		// not consulted and the unparsable answer is what is reported.
		if b := got[0]; b.Method != "exec" || b.Version != "" || b.Output != "not a kubelet" {
			t.Errorf("kubelet = %v, want the exec answer", b)
		}
	})
}

// A real kubectl, where this machine has one (the Google Cloud SDK ships
// several): the probe must read it both by running it and from its build info.
func TestBinariesRealKubectl(t *testing.T) {
	const real = "/usr/lib/google-cloud-sdk/bin/kubectl.1.33"
	if _, err := os.Stat(real); err != nil {
		t.Skip("no real kubectl on this machine: ", err)
	}
	h := hosttest.Tree(t, nil)
	p := filepath.Join(h.Root, "usr/bin/kubectl")
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(real, p); err != nil {
		installBinary(t, h, "usr/bin/kubectl", real, 0o755)
	}
	got := runBinaries(t, h)
	if len(got) != 1 || got[0].Method != "exec" || !strings.HasPrefix(got[0].Version, "v1.33.") {
		t.Fatalf("exec: binaries = %v, want kubectl v1.33.x", got)
	}
	if !strings.Contains(got[0].Output, `"gitVersion": "`+got[0].Version+`"`) {
		t.Errorf("output %q does not show the version line", got[0].Output)
	}
	h.Exec = host.NoExec{}
	got = runBinaries(t, h)
	if len(got) != 1 || got[0].Method != "buildinfo" || !strings.HasPrefix(got[0].Version, "v1.33.") {
		t.Errorf("buildinfo: binaries = %v, want kubectl v1.33.x", got)
	}
}

// ---- dpkg: the fallback when the build info records no version ----------

// A stanza as pkgs.k8s.io's kubelet leaves it in /var/lib/dpkg/status.
const dpkgKubeletStanza = `Package: kubelet
Status: install ok installed
Priority: optional
Section: admin
Installed-Size: 77297
Maintainer: Kubernetes Authors <dev@kubernetes.io>
Architecture: amd64
Version: 1.32.3-1.1
Depends: iptables (>= 1.4.21), iproute2, socat, util-linux, mount, ethtool, conntrack
Description: Node agent for Kubernetes clusters
 The node agent of Kubernetes, the container cluster manager.
 .
 A continuation line: part of the Description.
Homepage: https://kubernetes.io
`

const dpkgKubeletList = "/.\n/usr\n/usr/bin\n/usr/bin/kubelet\n/usr/lib\n/usr/lib/systemd\n/usr/lib/systemd/system\n/usr/lib/systemd/system/kubelet.service\n"

// dpkgStatus joins stanzas as dpkg writes them: an empty line after each.
func dpkgStatus(stanzas ...string) string {
	var b strings.Builder
	for _, s := range stanzas {
		b.WriteString(strings.TrimRight(s, "\n") + "\n\n")
	}
	return b.String()
}

func dpkgStanzaText(pkg, status, version string) string {
	return "Package: " + pkg + "\nStatus: " + status + "\nArchitecture: amd64\nVersion: " + version + "\nDescription: " + pkg + "\n"
}

// notGoELF is an ELF header and nothing else: not a Go program (no build
// info), not text either.
var notGoELF = "\x7fELF\x02\x01\x01\x00" + strings.Repeat("\x00", 120)

func TestParseDpkgStatus(t *testing.T) {
	type st struct{ pkg, status, version, arch, pkgLine, statusLine, versionLine string }
	all := func(string) bool { return true }
	tests := []struct {
		name string
		in   string
		want []st
	}{
		{
			name: "pkgs.k8s.io stanza",
			in:   dpkgStatus("Package: adduser\nStatus: install ok installed\nVersion: 3.134\n", dpkgKubeletStanza),
			want: []st{
				{"adduser", "install ok installed", "3.134", "", "Package: adduser", "Status: install ok installed", "Version: 3.134"},
				{"kubelet", "install ok installed", "1.32.3-1.1", "amd64", "Package: kubelet", "Status: install ok installed", "Version: 1.32.3-1.1"},
			},
		},
		{
			name: "lines kept verbatim, values trimmed",
			in:   "Package:  kubelet \nStatus:\tinstall ok installed\nversion: 1.32.3-1.1\n",
			want: []st{{"kubelet", "install ok installed", "1.32.3-1.1", "", "Package:  kubelet ", "Status:\tinstall ok installed", "version: 1.32.3-1.1"}},
		},
		{
			name: "no final newline, CRLF, blank line of spaces",
			in:   "Package: a\r\nVersion: 1-1\r\n  \t\nPackage: b\nVersion: 2-1",
			want: []st{{pkg: "a", version: "1-1", pkgLine: "Package: a", versionLine: "Version: 1-1"}, {pkg: "b", version: "2-1", pkgLine: "Package: b", versionLine: "Version: 2-1"}},
		},
		{
			name: "malformed stanzas skipped, the rest read",
			in: dpkgStatus(
				"Package: kubelet\nStatus: install ok installed\nVersion: 1.32.3-1.1\nVersion: 1.33.0-1.1\n", // twice
				"Package: kubeadm\nStatus: install ok installed\nVersion: 1.32.3\n -1.1\n",                   // continued
				"Package: kubectl\nthis line is no field\nVersion: 1.32.3-1.1\n",
				" continuation first\nPackage: runc\nVersion: 1.1.12-1\n",
				"Package : crictl\nVersion: 1.32.0-1.1\n",        // a space in the name
				"Status: install ok installed\nVersion: 1.0-1\n", // no Package
				"Package: cri-tools\nStatus: install ok installed\nVersion: 1.32.0-1.1\n",
			),
			want: []st{{"cri-tools", "install ok installed", "1.32.0-1.1", "", "Package: cri-tools", "Status: install ok installed", "Version: 1.32.0-1.1"}},
		},
		{name: "empty", in: ""},
		{name: "only blank lines", in: "\n\n \n"},
		{name: "binary junk", in: "\x00\xff\xfe:\n\x7fELF"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []st
			for _, s := range parseDpkgStatus([]byte(tt.in), all) {
				got = append(got, st{s.pkg, s.status, s.version, s.arch, s.pkgLine, s.statusLine, s.versionLine})
			}
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(st{})); diff != "" {
				t.Errorf("stanzas (-want +got):\n%s", diff)
			}
		})
	}
	t.Run("only wanted packages", func(t *testing.T) {
		got := parseDpkgStatus([]byte(dpkgStatus("Package: adduser\nVersion: 3.134\n", dpkgKubeletStanza)), func(p string) bool { return p == "kubelet" })
		if len(got) != 1 || got[0].pkg != "kubelet" {
			t.Errorf("stanzas = %+v, want the kubelet's only", got)
		}
	})
}

func TestDpkgStanzaInstalled(t *testing.T) {
	for status, want := range map[string]bool{
		"install ok installed":             true,
		"hold ok installed":                true, // apt-mark hold kubelet kubeadm kubectl
		"deinstall ok installed":           true, // marked for removal, still there
		"install ok half-configured":       true, // its postinst failed: the files are the new ones
		"install ok unpacked":              true,
		"install ok triggers-pending":      true,
		"deinstall ok config-files":        false,
		"purge ok not-installed":           false,
		"install reinstreq half-installed": false,
		"install ok half-installed":        false,
		"install reinstreq installed":      false,
		"installed":                        false,
		"":                                 false,
	} {
		s := dpkgStanza{status: status}
		if got := s.installed(); got != want {
			t.Errorf("installed(%q) = %v, want %v", status, got, want)
		}
	}
}

var dpkgVersionCases = []binVersionCase{
	{name: "pkgs.k8s.io", in: "1.32.3-1.1", want: "v1.32.3"},
	{name: "apt.kubernetes.io", in: "1.27.3-00", want: "v1.27.3"},
	{name: "containerd.io", in: "1.7.24-1", want: "v1.7.24"},
	{name: "cri-tools", in: "1.32.0-1.1", want: "v1.32.0"},
	{name: "epoch", in: "1:1.7.24-1", want: "v1.7.24"},
	{name: "debian containerd", in: "1.6.20~ds1-1+b1", want: "v1.6.20"},
	{name: "debian runc", in: "1.1.5+ds1-1+deb12u1", want: "v1.1.5"},
	{name: "ubuntu runc", in: "1.1.12-0ubuntu2~22.04.1", want: "v1.1.12"},
	{name: "upstream pre-release kept", in: "1.2.0-rc.1-1", want: "v1.2.0-rc.1"},
	{name: "native, no revision", in: "1.32.3", want: "v1.32.3"},
	{name: "bad epoch", in: "x:1.2.3-1", wantErr: true},
	{name: "empty epoch", in: ":1.2.3-1", wantErr: true},
	{name: "words", in: "unknown-1", wantErr: true},
	{name: "empty", in: "", wantErr: true},
}

func TestDpkgUpstreamVersion(t *testing.T) {
	runBinVersionCases(t, func(b []byte) (string, error) { return dpkgUpstreamVersion(string(b)) }, dpkgVersionCases)
}

// binByPath indexes a probe's answer by path.
func binByPath(bs []*nodediagv1.Binary) map[string]*nodediagv1.Binary {
	m := map[string]*nodediagv1.Binary{}
	for _, b := range bs {
		m[b.Path] = b
	}
	return m
}

// A copied root (nothing runs) whose binaries are not Go programs: their
// versions come from dpkg, for the files the packages own only.
func TestBinariesDpkgFallback(t *testing.T) {
	noDpkg := func(t *testing.T, b *nodediagv1.Binary) {
		t.Helper()
		if b == nil {
			t.Fatal("binary missing")
		}
		if b.Version != "" || b.Method == "dpkg" || strings.Contains(b.Output, "Package:") {
			t.Errorf("%s: version %q, method %q, output %q; want nothing from dpkg", b.Path, b.Version, b.Method, b.Output)
		}
	}

	t.Run("owned by the packages", func(t *testing.T) {
		h := hosttest.Tree(t, map[string]string{
			"usr/bin/kubelet":    notGoELF,
			"usr/bin/kubeadm":    notGoELF,
			"usr/bin/containerd": notGoELF,
			"usr/bin/runc":       notGoELF,
			"var/lib/dpkg/status": dpkgStatus(
				"Package: adduser\nStatus: install ok installed\nVersion: 3.134\n",
				dpkgKubeletStanza,
				dpkgStanzaText("kubeadm", "hold ok installed", "1.32.3-1.1"),
				dpkgStanzaText("containerd.io", "install ok installed", "1.7.24-1"),
			),
			"var/lib/dpkg/info/kubelet.list": dpkgKubeletList,
			// kubeadm's, under the Multi-Arch: same name.
			"var/lib/dpkg/info/kubeadm:amd64.list": "/.\n/usr/bin\n/usr/bin/kubeadm\n",
			// containerd.io also installs runc, at containerd's version:
			// runc gets no version from it.
			"var/lib/dpkg/info/containerd.io.list": "/.\n/usr/bin/containerd\n/usr/bin/containerd-shim-runc-v2\n/usr/bin/ctr\n/usr/bin/runc\n",
		})
		h.Exec = host.NoExec{}
		got := binByPath(runBinaries(t, h))
		want := []*nodediagv1.Binary{
			{Name: "kubelet", Path: "/usr/bin/kubelet", Version: "v1.32.3", Command: "/usr/bin/kubelet --version", Effective: true, Method: "dpkg",
				Output: "Package: kubelet\nStatus: install ok installed\nVersion: 1.32.3-1.1\n/usr/bin/kubelet"},
			{Name: "kubeadm", Path: "/usr/bin/kubeadm", Version: "v1.32.3", Command: "/usr/bin/kubeadm version -o short", Effective: true, Method: "dpkg",
				Output: "Package: kubeadm\nStatus: hold ok installed\nVersion: 1.32.3-1.1\n/usr/bin/kubeadm"},
			{Name: "containerd", Path: "/usr/bin/containerd", Version: "v1.7.24", Command: "/usr/bin/containerd --version", Effective: true, Method: "dpkg",
				Output: "Package: containerd.io\nStatus: install ok installed\nVersion: 1.7.24-1\n/usr/bin/containerd"},
		}
		for _, w := range want {
			b := got[w.Path]
			if b == nil {
				t.Fatalf("no %s", w.Path)
			}
			if diff := cmp.Diff(w, b, protocmp.Transform(), protocmp.IgnoreFields(&nodediagv1.Binary{}, "error")); diff != "" {
				t.Errorf("%s (-want +got):\n%s", w.Path, diff)
			}
			// What was tried before stays said.
			if !strings.HasPrefix(b.Error, "not run: running host binaries is disabled; no Go build info either: ") || strings.Contains(b.Error, h.Root) {
				t.Errorf("%s: error = %q", w.Path, b.Error)
			}
		}
		noDpkg(t, got["/usr/bin/runc"])
		if strings.Contains(got["/usr/bin/runc"].Error, "dpkg") {
			t.Errorf("runc error = %q: nothing to say from dpkg", got["/usr/bin/runc"].Error)
		}
	})

	t.Run("not the package's file", func(t *testing.T) {
		// A kubelet a script downloaded into /usr/local/bin, first in
		// PATH, in front of the package's.
		h := hosttest.Tree(t, map[string]string{
			"usr/local/bin/kubelet":          notGoELF,
			"usr/bin/kubelet":                notGoELF,
			"var/lib/dpkg/status":            dpkgStatus(dpkgKubeletStanza),
			"var/lib/dpkg/info/kubelet.list": dpkgKubeletList,
		})
		h.Exec = host.NoExec{}
		got := binByPath(runBinaries(t, h))
		local := got["/usr/local/bin/kubelet"]
		noDpkg(t, local)
		if !local.Effective || strings.Contains(local.Error, "dpkg") {
			t.Errorf("/usr/local/bin/kubelet = %v: effective, and nothing said from dpkg", local)
		}
		if b := got["/usr/bin/kubelet"]; b.Version != "v1.32.3" || b.Method != "dpkg" || b.Effective {
			t.Errorf("/usr/bin/kubelet = %v, want v1.32.3 from dpkg, not effective", b)
		}
	})

	t.Run("owned at an alias or where the symlinks lead", func(t *testing.T) {
		h := hosttest.Tree(t, map[string]string{
			// merged /usr; runc's .list from before the merge names /bin/runc.
			"bin":          "->usr/bin",
			"usr/bin/runc": notGoELF,
			// crictl is a symlink to the package's file.
			"usr/bin/crictl":           "->/opt/cri-tools/bin/crictl",
			"opt/cri-tools/bin/crictl": notGoELF,
			"var/lib/dpkg/status": dpkgStatus(
				dpkgStanzaText("runc", "install ok installed", "1.1.5+ds1-1+deb12u1"),
				dpkgStanzaText("cri-tools", "install ok installed", "1.32.0-1.1"),
			),
			"var/lib/dpkg/info/runc.list":      "/.\n/bin\n/bin/runc\n",
			"var/lib/dpkg/info/cri-tools.list": "/.\n/opt/cri-tools/bin/crictl\n",
		})
		h.Exec = host.NoExec{}
		got := binByPath(runBinaries(t, h))
		if b := got["/usr/bin/runc"]; b == nil || b.Version != "v1.1.5" || b.Method != "dpkg" || !strings.HasSuffix(b.Output, "\nVersion: 1.1.5+ds1-1+deb12u1\n/bin/runc") {
			t.Errorf("runc = %v, want v1.1.5 from dpkg, owned as /bin/runc", b)
		}
		if b := got["/usr/bin/crictl"]; b == nil || b.Version != "v1.32.0" || b.Method != "dpkg" || !strings.HasSuffix(b.Output, "\n/opt/cri-tools/bin/crictl") {
			t.Errorf("crictl = %v, want v1.32.0 from dpkg, owned at its resolved path", b)
		}
	})

	t.Run("removed, config files left", func(t *testing.T) {
		h := hosttest.Tree(t, map[string]string{
			"usr/bin/kubelet":                notGoELF,
			"var/lib/dpkg/status":            dpkgStatus(dpkgStanzaText("kubelet", "deinstall ok config-files", "1.32.3-1.1")),
			"var/lib/dpkg/info/kubelet.list": dpkgKubeletList,
		})
		h.Exec = host.NoExec{}
		got := runBinaries(t, h)
		noDpkg(t, got[0])
	})

	t.Run("malformed status", func(t *testing.T) {
		h := hosttest.Tree(t, map[string]string{
			"usr/bin/kubelet": notGoELF,
			"usr/bin/kubeadm": notGoELF,
			"usr/bin/kubectl": notGoELF,
			"var/lib/dpkg/status": "\x00\xff garbage without a colon\n" +
				"Package: kubelet\nStatus: install ok installed\nVersion: 1.32.3-1.1\nVersion: 1.31.0-1.1\n\n" +
				"Package: kubectl\nStatus: install ok installed\nVersion: not-a-version\n\n" +
				dpkgStanzaText("kubeadm", "install ok installed", "1.32.3-1.1") +
				"\n\n\nPackage: cut short",
			"var/lib/dpkg/info/kubelet.list": dpkgKubeletList,
			"var/lib/dpkg/info/kubeadm.list": "/usr/bin/kubeadm\n",
			"var/lib/dpkg/info/kubectl.list": "/usr/bin/kubectl\n",
		})
		h.Exec = host.NoExec{}
		got := binByPath(runBinaries(t, h))
		noDpkg(t, got["/usr/bin/kubelet"])
		if b := got["/usr/bin/kubeadm"]; b.Version != "v1.32.3" || b.Method != "dpkg" {
			t.Errorf("kubeadm = %v, want v1.32.3 from dpkg after the malformed stanzas", b)
		}
		kubectl := got["/usr/bin/kubectl"]
		noDpkg(t, kubectl)
		if !strings.Contains(kubectl.Error, `the dpkg package kubectl owns the file but has no usable version: "not-a-version" is not a version`) {
			t.Errorf("kubectl error = %q, want the unusable version named", kubectl.Error)
		}
	})

	t.Run("status too large", func(t *testing.T) {
		h := hosttest.Tree(t, map[string]string{
			"usr/bin/kubelet":                notGoELF,
			"var/lib/dpkg/status":            dpkgStatus(dpkgKubeletStanza) + strings.Repeat("Description: x\n", dpkgStatusMaxBytes/15+1),
			"var/lib/dpkg/info/kubelet.list": dpkgKubeletList,
		})
		h.Exec = host.NoExec{}
		pe, err := binaries{}.Run(context.Background(), h)
		if err != nil {
			t.Fatal(err)
		}
		b := pe.GetBinaries().GetBinaries()[0]
		noDpkg(t, b)
		if !strings.Contains(b.Error, "the dpkg database was not read: /var/lib/dpkg/status is larger than 16 MiB: not read") {
			t.Errorf("error = %q, want the cap named", b.Error)
		}
		if u := pe.GetUnreadable(); len(u) != 1 || u[0].GetSource() != dpkgStatusPath {
			t.Errorf("unreadable = %v, want %s", u, dpkgStatusPath)
		}
	})

	t.Run("status not a regular file", func(t *testing.T) {
		h := hosttest.Tree(t, map[string]string{"usr/bin/kubelet": notGoELF, "var/lib/dpkg/status/": ""})
		h.Exec = host.NoExec{}
		pe, err := binaries{}.Run(context.Background(), h)
		if err != nil {
			t.Fatal(err)
		}
		b := pe.GetBinaries().GetBinaries()[0]
		if !strings.Contains(b.Error, "the dpkg database was not read: ") || strings.Contains(b.Error, h.Root) {
			t.Errorf("error = %q", b.Error)
		}
		if u := pe.GetUnreadable(); len(u) != 1 || u[0].GetSource() != dpkgStatusPath {
			t.Errorf("unreadable = %v, want %s", u, dpkgStatusPath)
		}
	})

	t.Run("rpm database not read", func(t *testing.T) {
		h := hosttest.Tree(t, map[string]string{
			"usr/bin/kubelet":          notGoELF,
			"var/lib/rpm/rpmdb.sqlite": "SQLite format 3\x00",
		})
		h.Exec = host.NoExec{}
		b := runBinaries(t, h)[0]
		if b.Version != "" || !strings.HasSuffix(b.Error, "; /var/lib/rpm exists but the rpm database is not read: the version of a binary rpm installed is not known here") {
			t.Errorf("kubelet = %v, want the rpm database named as not read", b)
		}
	})

	t.Run("nothing said without a package database", func(t *testing.T) {
		h := hosttest.Tree(t, map[string]string{"usr/bin/kubelet": notGoELF})
		h.Exec = host.NoExec{}
		b := runBinaries(t, h)[0]
		if strings.Contains(b.Error, "dpkg") || strings.Contains(b.Error, "rpm") {
			t.Errorf("error = %q: no package database to speak of", b.Error)
		}
	})

	t.Run("text in the binary's place", func(t *testing.T) {
		h := hosttest.Tree(t, map[string]string{
			"usr/bin/kubelet":                "404: Not Found\n",
			"var/lib/dpkg/status":            dpkgStatus(dpkgKubeletStanza),
			"var/lib/dpkg/info/kubelet.list": dpkgKubeletList,
		})
		h.Exec = host.NoExec{}
		b := runBinaries(t, h)[0]
		noDpkg(t, b)
		if b.NotAProgram != "404: Not Found" {
			t.Errorf("not_a_program = %q", b.NotAProgram)
		}
	})

	t.Run("exec first where it runs", func(t *testing.T) {
		h := hosttest.Tree(t, map[string]string{
			"usr/bin/kubelet":                fakeBinary(fakeKubelet, "v1.33.2"),
			"var/lib/dpkg/status":            dpkgStatus(dpkgKubeletStanza),
			"var/lib/dpkg/info/kubelet.list": dpkgKubeletList,
		})
		h.CmdTimeout = 30 * time.Second
		if b := runBinaries(t, h)[0]; b.Method != "exec" || b.Version != "v1.33.2" {
			t.Errorf("kubelet = %v, want v1.33.2 from exec", b)
		}
	})
}

// A Go kubelet whose build info records no version (official releases) gets
// its version from dpkg; one whose build info does keeps that.
func TestBinariesDpkgAfterBuildInfo(t *testing.T) {
	untagged := goBuildTagged(t, "k8s.io/kubernetes", "")
	tagged := goBuildTagged(t, "k8s.io/kubernetes", "v1.33.1")
	h := hosttest.Tree(t, map[string]string{
		"var/lib/dpkg/status":            dpkgStatus(dpkgKubeletStanza, dpkgStanzaText("kubeadm", "install ok installed", "1.32.3-1.1")),
		"var/lib/dpkg/info/kubelet.list": dpkgKubeletList,
		"var/lib/dpkg/info/kubeadm.list": "/usr/bin/kubeadm\n",
	})
	installBinary(t, h, "usr/bin/kubelet", untagged, 0o755)
	installBinary(t, h, "usr/bin/kubeadm", tagged, 0o755)
	h.Exec = host.NoExec{}
	got := binByPath(runBinaries(t, h))
	kubelet := got["/usr/bin/kubelet"]
	if kubelet.Version != "v1.32.3" || kubelet.Method != "dpkg" || kubelet.Output != "Package: kubelet\nStatus: install ok installed\nVersion: 1.32.3-1.1\n/usr/bin/kubelet" {
		t.Errorf("kubelet = %v, want v1.32.3 from dpkg", kubelet)
	}
	if want := "not run: running host binaries is disabled; the Go build info records no version of k8s.io/kubernetes"; kubelet.Error != want {
		t.Errorf("kubelet error = %q, want %q", kubelet.Error, want)
	}
	if b := got["/usr/bin/kubeadm"]; b.Version != "v1.33.1" || b.Method != "buildinfo" {
		t.Errorf("kubeadm = %v, want v1.33.1 from its build info, dpkg not asked", b)
	}
}

func FuzzParseDpkgStatus(f *testing.F) {
	f.Add([]byte(dpkgStatus(dpkgKubeletStanza, dpkgStanzaText("kubeadm", "hold ok installed", "1:1.32.3-1.1"))))
	f.Add([]byte("Package: kubelet\nVersion: 1.32.3-1.1\nVersion: 1.31.0\n\n Package: x\n\nStatus: install ok installed"))
	f.Add([]byte("Package: a\r\nStatus: deinstall ok config-files\r\n \t\nPackage:\nVersion: -\n"))
	for _, c := range dpkgVersionCases {
		f.Add([]byte("Package: kubelet\nStatus: install ok installed\nVersion: " + c.in + "\n"))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, s := range parseDpkgStatus(b, func(string) bool { return true }) {
			if s.pkg == "" || !strings.Contains(s.pkgLine, s.pkg) {
				t.Errorf("stanza %+v: Package %q not in its line", s, s.pkg)
			}
			for _, l := range []string{s.pkgLine, s.statusLine, s.versionLine} {
				if strings.ContainsAny(l, "\n") {
					t.Errorf("line %q holds a newline", l)
				}
			}
			if s.versionLine != "" && !strings.Contains(s.versionLine, s.version) {
				t.Errorf("Version %q not in its line %q", s.version, s.versionLine)
			}
			if !s.installed() {
				continue
			}
			if v, err := dpkgUpstreamVersion(s.version); err == nil && !strings.HasPrefix(v, "v") {
				t.Errorf("dpkgUpstreamVersion(%q) = %q: no leading v", s.version, v)
			}
		}
	})
}
