package probes

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/nodediag/nodediag/agent/host"
	"github.com/nodediag/nodediag/agent/host/hosttest"
	"github.com/nodediag/nodediag/agent/probe"
	nodediagv1 "github.com/nodediag/nodediag/proto/nodediag/v1"
)

func TestParseUnitFile(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []unitDirective
	}{
		{
			name: "sections, comments and whitespace around =",
			in:   "# comment\n[Unit]\nDescription = kubelet\n; another\n\n[Service]\n  ExecStart=/usr/bin/kubelet  \n",
			want: []unitDirective{
				{Section: "Unit", Key: "Description", Value: "kubelet", Line: 3, Text: "Description = kubelet"},
				{Section: "Service", Key: "ExecStart", Value: "/usr/bin/kubelet", Line: 7, Text: "  ExecStart=/usr/bin/kubelet  "},
			},
		},
		{
			name: "continuation joins lines with a space and skips comments inside",
			in:   "[Service]\nExecStart=/usr/bin/kubelet \\\n  --v=2 \\\n# not here\n  --config=/c.yaml\nRestart=always\n",
			want: []unitDirective{
				{Section: "Service", Key: "ExecStart", Value: "/usr/bin/kubelet    --v=2    --config=/c.yaml", Line: 2,
					Text: "ExecStart=/usr/bin/kubelet \\\n  --v=2 \\\n# not here\n  --config=/c.yaml"},
				{Section: "Service", Key: "Restart", Value: "always", Line: 6, Text: "Restart=always"},
			},
		},
		{
			name: "whitespace after the backslash ends the continuation",
			in:   "[Service]\nExecStart=/usr/bin/kubelet \\ \n--v=2\n",
			want: []unitDirective{
				{Section: "Service", Key: "ExecStart", Value: `/usr/bin/kubelet \`, Line: 2, Text: `ExecStart=/usr/bin/kubelet \ `},
				{Section: "Service", Key: "--v", Value: "2", Line: 3, Text: "--v=2"},
			},
		},
		{
			name: "an escaped backslash at the end does not continue",
			in:   "[Service]\nEnvironment=A=x\\\\\nExecStart=/bin/true\n",
			want: []unitDirective{
				{Section: "Service", Key: "Environment", Value: `A=x\\`, Line: 2, Text: `Environment=A=x\\`},
				{Section: "Service", Key: "ExecStart", Value: "/bin/true", Line: 3, Text: "ExecStart=/bin/true"},
			},
		},
		{
			name: "continuation at end of file",
			in:   "[Service]\nExecStart=/usr/bin/kubelet \\",
			want: []unitDirective{
				{Section: "Service", Key: "ExecStart", Value: "/usr/bin/kubelet", Line: 2, Text: "ExecStart=/usr/bin/kubelet \\"},
			},
		},
		{
			name: "assignments outside a section and lines without = are skipped",
			in:   "ExecStart=/nowhere\n[Service]\nnonsense\nExecStart=\n",
			want: []unitDirective{
				{Section: "Service", Key: "ExecStart", Value: "", Line: 4, Text: "ExecStart="},
			},
		},
		{
			name: "CRLF line endings",
			in:   "[Service]\r\nEnvironment=\"A=b c\"\r\n",
			want: []unitDirective{
				{Section: "Service", Key: "Environment", Value: `"A=b c"`, Line: 2, Text: `Environment="A=b c"`},
			},
		},
		{
			name: "empty input",
			in:   "",
			want: nil,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := parseUnitFile([]byte(tt.in))
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("parseUnitFile (-want +got):\n%s", diff)
			}
		})
	}
}

func FuzzParseUnitFile(f *testing.F) {
	for _, s := range []string{
		"[Service]\nExecStart=/usr/bin/kubelet \\\n  --v=2\n",
		"[Service]\nEnvironment=\"A=b c\" D=e\nExecStart=\nExecStart=-/usr/bin/kubelet $A ${D}\n",
		"ExecStart=x\n[", "[a]\n\\", "\\\\\\\n#\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, d := range parseUnitFile(b) {
			if d.Line < 1 || d.Section == "" {
				t.Fatalf("bad directive %+v", d)
			}
			if !strings.Contains(strings.ReplaceAll(string(b), "\r", ""), strings.ReplaceAll(d.Text, "\r", "")) {
				t.Fatalf("text %q is not verbatim input", d.Text)
			}
			// The rest of the pipeline must not panic on any directive.
			_ = collectService([]unitSource{{Path: "/x", Directives: []unitDirective{d}}})
		}
	})
}

func TestParseEnvFile(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []envFileAssignment
	}{
		{
			name: "unquoted value, trailing whitespace dropped",
			in:   "KUBELET_EXTRA_ARGS=--node-labels=a=b --v=2   \n",
			want: []envFileAssignment{{Key: "KUBELET_EXTRA_ARGS", Value: "--node-labels=a=b --v=2", Line: 1, Text: "KUBELET_EXTRA_ARGS=--node-labels=a=b --v=2   "}},
		},
		{
			name: "double quotes with escapes, single quotes literal",
			in:   "A=\"x \\\"y\\\" \\$z \\q\"\nB='it''s \\n'\n",
			want: []envFileAssignment{
				{Key: "A", Value: `x "y" $z \q`, Line: 1, Text: `A="x \"y\" \$z \q"`},
				{Key: "B", Value: `its \n`, Line: 2, Text: `B='it''s \n'`},
			},
		},
		{
			name: "quotes in the middle of an unquoted value are literal",
			in:   `KUBELET_EXTRA_ARGS=--node-labels="a=b,c=d"` + "\n",
			want: []envFileAssignment{{Key: "KUBELET_EXTRA_ARGS", Value: `--node-labels="a=b,c=d"`, Line: 1, Text: `KUBELET_EXTRA_ARGS=--node-labels="a=b,c=d"`}},
		},
		{
			name: "comments, blank lines, whitespace around the key, lines without =",
			in:   "# KUBELET_EXTRA_ARGS=--old\n; also a comment\n\n  KEY  =  value\nnot an assignment\n",
			want: []envFileAssignment{{Key: "KEY", Value: "value", Line: 4, Text: "  KEY  =  value"}},
		},
		{
			name: "backslash-newline continues the value",
			in:   "KUBELET_EXTRA_ARGS=--a \\\n--b\nNEXT=1\n",
			want: []envFileAssignment{
				{Key: "KUBELET_EXTRA_ARGS", Value: "--a --b", Line: 1, Text: "KUBELET_EXTRA_ARGS=--a \\\n--b"},
				{Key: "NEXT", Value: "1", Line: 3, Text: "NEXT=1"},
			},
		},
		{
			name: "a double-quoted value spans lines",
			in:   "A=\"one\ntwo\"\nB=3",
			want: []envFileAssignment{
				{Key: "A", Value: "one\ntwo", Line: 1, Text: "A=\"one\ntwo\""},
				{Key: "B", Value: "3", Line: 3, Text: "B=3"},
			},
		},
		{
			name: "export is parsed but marked",
			in:   "export KUBELET_EXTRA_ARGS=--v=2\nexported=1\n",
			want: []envFileAssignment{
				{Key: "KUBELET_EXTRA_ARGS", Value: "--v=2", Line: 1, Text: "export KUBELET_EXTRA_ARGS=--v=2", Export: true},
				{Key: "exported", Value: "1", Line: 2, Text: "exported=1"},
			},
		},
		{
			name: "empty value and no final newline",
			in:   "KUBELET_EXTRA_ARGS=\nB=x",
			want: []envFileAssignment{
				{Key: "KUBELET_EXTRA_ARGS", Value: "", Line: 1, Text: "KUBELET_EXTRA_ARGS="},
				{Key: "B", Value: "x", Line: 2, Text: "B=x"},
			},
		},
		{
			name: "quoted parts concatenate",
			in:   `A="x" 'y'z` + "\n",
			want: []envFileAssignment{{Key: "A", Value: "xyz", Line: 1, Text: `A="x" 'y'z`}},
		},
		{
			name: "CRLF",
			in:   "A=1\r\nB=\"2\"\r\n",
			want: []envFileAssignment{
				{Key: "A", Value: "1", Line: 1, Text: "A=1"},
				{Key: "B", Value: "2", Line: 2, Text: `B="2"`},
			},
		},
		{
			name: "a comment ending in a backslash does not continue",
			in:   "# c \\\nA=1\n",
			want: []envFileAssignment{{Key: "A", Value: "1", Line: 2, Text: "A=1"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := parseEnvFile([]byte(tt.in))
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("parseEnvFile (-want +got):\n%s", diff)
			}
		})
	}
}

func FuzzParseEnvFile(f *testing.F) {
	for _, s := range []string{
		"KUBELET_EXTRA_ARGS=--node-labels=a=b --v=2   \n",
		"A=\"x \\\"y\\\" \\$z \\q\"\nB='it''s \\n'\n",
		"export A=1\n# c \\\nA=\"one\ntwo\"", "A=\\", "A='", "=\n=", "\r\r=\"\\\r",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		lines := int32(strings.Count(string(b), "\n") + 1)
		for _, a := range parseEnvFile(b) {
			if a.Line < 1 || a.Line > lines {
				t.Fatalf("line %d out of 1..%d: %+v", a.Line, lines, a)
			}
			if !strings.Contains(strings.ReplaceAll(string(b), "\r", ""), strings.ReplaceAll(a.Text, "\r", "")) {
				t.Fatalf("text %q is not verbatim input", a.Text)
			}
		}
	})
}

func TestSplitSystemdWords(t *testing.T) {
	tests := []struct {
		name      string
		in        string
		cunescape bool
		relax     bool
		want      []string
		wantErr   error
	}{
		{name: "whitespace separates", in: "  a\tb  c ", want: []string{"a", "b", "c"}},
		{name: "quotes group anywhere in a word", in: `"A=b c" D="e f" 'g h'`, want: []string{"A=b c", "D=e f", "g h"}},
		{name: "backslash escapes", in: `a\ b \"c`, want: []string{"a b", `"c`}},
		{name: "C escapes", in: `a\tb \x41 \101 \s`, cunescape: true, want: []string{"a\tb", "A", "A", " "}},
		{name: "without C unescaping the character is kept", in: `a\tb`, want: []string{"atb"}},
		{name: "empty quotes are an empty word", in: `a "" b`, want: []string{"a", "", "b"}},
		{name: "unbalanced quote", in: `"a b`, wantErr: errUnbalancedQuote},
		{name: "unbalanced quote relaxed", in: `"a b`, relax: true, want: []string{"a b"}},
		{name: "trailing backslash", in: `a\`, wantErr: errTrailingBackslash},
		{name: "trailing backslash relaxed", in: `a\`, relax: true, want: []string{`a\`}},
		{name: "empty", in: "   ", want: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := splitSystemdWords(tt.in, tt.cunescape, tt.relax)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("error = %v, want %v", err, tt.wantErr)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("splitSystemdWords (-want +got):\n%s", diff)
			}
		})
	}
}

func FuzzSplitSystemdWords(f *testing.F) {
	for _, s := range []string{`"A=b c" D="e f"`, `a\x4`, `\u12`, `\U0010FFFF`, `\7`, `'`} {
		f.Add(s, true, false)
	}
	f.Fuzz(func(t *testing.T, s string, cunescape, relax bool) {
		_, _ = splitSystemdWords(s, cunescape, relax)
	})
}

func TestParseExecStart(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    execCommand
		wantErr bool
	}{
		{name: "plain", in: "/usr/bin/kubelet $KUBELET_EXTRA_ARGS", want: execCommand{Path: "/usr/bin/kubelet", Args: []string{"$KUBELET_EXTRA_ARGS"}}},
		{name: "prefixes are stripped", in: "-+/usr/bin/kubelet --v=2", want: execCommand{Prefix: "-+", Path: "/usr/bin/kubelet", Args: []string{"--v=2"}}},
		{name: "@ makes the second word argv[0]", in: "@/usr/bin/kubelet kubelet --v=2", want: execCommand{Prefix: "@", Path: "/usr/bin/kubelet", Args: []string{"--v=2"}}},
		{name: "quoted argument", in: `/usr/bin/kubelet "--node-labels=a=b c" %%`, want: execCommand{Path: "/usr/bin/kubelet", Args: []string{"--node-labels=a=b c", "%"}}},
		{name: "a lone ; ends the first command", in: "/usr/bin/kubelet --v=2 ; /bin/true", want: execCommand{Path: "/usr/bin/kubelet", Args: []string{"--v=2"}}},
		{name: "unbalanced quote", in: `/usr/bin/kubelet "--v=2`, wantErr: true},
		{name: "only prefixes", in: "-", wantErr: true},
		{name: "@ without argv0", in: "@/usr/bin/kubelet", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseExecStart(tt.in)
			if (err != nil) != tt.wantErr {
				t.Fatalf("error = %v, want error %v", err, tt.wantErr)
			}
			if diff := cmp.Diff(tt.want, got, cmp.Comparer(func(a, b []string) bool { return strings.Join(a, "\x00") == strings.Join(b, "\x00") })); diff != "" {
				t.Errorf("parseExecStart (-want +got):\n%s", diff)
			}
		})
	}
}

func TestExpandExecArgs(t *testing.T) {
	env := map[string]string{
		"EXTRA":  `--node-labels="a=b c" --v=2`,
		"ONE":    "--x=1 --y=2",
		"EMPTY":  "",
		"CONFIG": "/var/lib/kubelet/config.yaml",
	}
	tests := []struct {
		name     string
		args     []string
		want     []argWord
		wantRefs []string
	}{
		{
			name:     "$VAR splits into words, quotes group",
			args:     []string{"$EXTRA"},
			want:     []argWord{{Text: "--node-labels=a=b c", Var: "EXTRA"}, {Text: "--v=2", Var: "EXTRA"}},
			wantRefs: []string{"EXTRA"},
		},
		{
			name:     "${VAR} stays one word",
			args:     []string{"${ONE}"},
			want:     []argWord{{Text: "--x=1 --y=2", Var: "ONE"}},
			wantRefs: []string{"ONE"},
		},
		{
			name:     "unset $VAR is no word, unset ${VAR} an empty word",
			args:     []string{"$UNSET", "${UNSET}", "$EMPTY"},
			want:     []argWord{{Text: "", Var: "UNSET"}},
			wantRefs: []string{"UNSET", "UNSET", "EMPTY"},
		},
		{
			name:     "${VAR} inside a word belongs to the word",
			args:     []string{"--config=${CONFIG}"},
			want:     []argWord{{Text: "--config=/var/lib/kubelet/config.yaml"}},
			wantRefs: []string{"CONFIG"},
		},
		{
			name: "$VAR inside a word and $$ are literal",
			args: []string{"--a=$CONFIG", "$$CONFIG", "--b=$${x}"},
			want: []argWord{{Text: "--a=$CONFIG"}, {Text: "$CONFIG"}, {Text: "--b=${x}"}},
		},
		{
			name: "an unclosed brace is literal",
			args: []string{"${CONFIG"},
			want: []argWord{{Text: "${CONFIG"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, refs := expandExecArgs(tt.args, env)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("words (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantRefs, refs); diff != "" {
				t.Errorf("refs (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSplitKubeletFlags(t *testing.T) {
	tests := []struct {
		name  string
		words []string
		want  []kubeletFlagWord
	}{
		{
			name:  "name=value, short, double dash",
			words: []string{"--pod-infra-container-image=registry.k8s.io/pause:3.9", "-v=2", "--node-labels=a=b"},
			want: []kubeletFlagWord{
				{Name: "pod-infra-container-image", Value: "registry.k8s.io/pause:3.9", Index: 0},
				{Name: "v", Value: "2", Index: 1},
				{Name: "node-labels", Value: "a=b", Index: 2},
			},
		},
		{
			name:  "value in the next word, except after a boolean flag",
			words: []string{"--config", "/c.yaml", "--fail-swap-on", "stray", "-v", "4"},
			want: []kubeletFlagWord{
				{Name: "config", Value: "/c.yaml", Index: 0},
				{Name: "fail-swap-on", Index: 2},
				{Name: "v", Value: "4", Index: 4},
			},
		},
		{
			name:  "a flag before another flag has no value",
			words: []string{"--register-with-taints", "--v=2"},
			want:  []kubeletFlagWord{{Name: "register-with-taints", Index: 0}, {Name: "v", Value: "2", Index: 1}},
		},
		{
			name:  "-- ends the flags, words and lone dashes are skipped",
			words: []string{"positional", "-", "--network_plugin=cni", "--", "--v=9"},
			want:  []kubeletFlagWord{{Name: "network_plugin", Value: "cni", Index: 2}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := splitKubeletFlags(tt.words)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("splitKubeletFlags (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCollectService(t *testing.T) {
	unit := unitSource{Path: "/usr/lib/systemd/system/kubelet.service", Directives: parseUnitFile([]byte(
		"[Service]\nExecStart=/usr/bin/kubelet\nEnvironment=OLD=--old\n"))}
	dropin := unitSource{Path: "/etc/systemd/system/kubelet.service.d/20.conf", Directives: parseUnitFile([]byte(
		"[Service]\n" +
			"Environment=\n" +
			"Environment=\"A=--a=1 --b\" B=--c\n" +
			"EnvironmentFile=/etc/one\n" +
			"EnvironmentFile=\n" +
			"EnvironmentFile=-/etc/two\n" +
			"ExecStart=\n" +
			"ExecStart=-/opt/bin/kubelet $A ${B}\n" +
			"ExecStart=/broken \"unbalanced\n" +
			"[Install]\nEnvironment=IGNORED=1\n"))}
	sc := collectService([]unitSource{unit, dropin})

	type env struct{ Name, Value, Ignored string }
	var gotEnv []env
	for _, a := range sc.env {
		gotEnv = append(gotEnv, env{a.name, a.value, a.ignored})
	}
	wantEnv := []env{
		{"OLD", "--old", "reset by the empty Environment= at /etc/systemd/system/kubelet.service.d/20.conf:2"},
		{"A", "--a=1 --b", ""},
		{"B", "--c", ""},
	}
	if diff := cmp.Diff(wantEnv, gotEnv); diff != "" {
		t.Errorf("env (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]envFileRef{{path: "/etc/two", optional: true}}, sc.envFiles, cmp.AllowUnexported(envFileRef{})); diff != "" {
		t.Errorf("env files (-want +got):\n%s", diff)
	}
	if sc.exec == nil {
		t.Fatal("no ExecStart")
	}
	if diff := cmp.Diff(execCommand{Prefix: "-", Path: "/opt/bin/kubelet", Args: []string{"$A", "${B}"}}, sc.exec.cmd); diff != "" {
		t.Errorf("ExecStart (-want +got):\n%s", diff)
	}
	wantSrc := &nodediagv1.SourceLine{Path: dropin.Path, Line: 8, Text: "ExecStart=-/opt/bin/kubelet $A ${B}"}
	if diff := cmp.Diff(wantSrc, sc.exec.src, protocmp.Transform()); diff != "" {
		t.Errorf("ExecStart source (-want +got):\n%s", diff)
	}

	reset := collectService([]unitSource{unit, {Path: "/x.conf", Directives: parseUnitFile([]byte("[Service]\nExecStart=\n"))}})
	if reset.exec != nil {
		t.Errorf("ExecStart after a reset = %+v, want none", reset.exec)
	}
}

func TestParseKubeletConfigFile(t *testing.T) {
	const p = "/var/lib/kubelet/config.yaml"
	tru, fls := true, false
	tests := []struct {
		name string
		in   string
		want *nodediagv1.KubeletConfigFile
	}{
		{
			name: "kubeadm config",
			in: `apiVersion: kubelet.config.k8s.io/v1beta1
authentication:
  x509:
    clientCAFile: /etc/kubernetes/pki/ca.crt
cgroupDriver: systemd
containerRuntimeEndpoint: unix:///run/containerd/containerd.sock
evictionHard:
  memory.available: 100Mi
  nodefs.available: 10%
failSwapOn: false
kind: KubeletConfiguration
memorySwap:
  swapBehavior: LimitedSwap
staticPodPath: /etc/kubernetes/manifests
`,
			want: &nodediagv1.KubeletConfigFile{
				Path: p, Present: true, ApiVersion: "kubelet.config.k8s.io/v1beta1", Kind: "KubeletConfiguration",
				CgroupDriver: "systemd", FailSwapOn: &fls, ContainerRuntimeEndpoint: "unix:///run/containerd/containerd.sock",
				StaticPodPath: "/etc/kubernetes/manifests", ClientCaFile: "/etc/kubernetes/pki/ca.crt",
				EvictionHard: map[string]string{"memory.available": "100Mi", "nodefs.available": "10%"}, SwapBehavior: "LimitedSwap",
				CgroupDriverLine: &nodediagv1.SourceLine{Path: p, Line: 5, Text: "cgroupDriver: systemd"},
				FailSwapOnLine:   &nodediagv1.SourceLine{Path: p, Line: 10, Text: "failSwapOn: false"},
			},
		},
		{
			name: "JSON, nested key of the same name does not win",
			in:   "{\n  \"x\": {\n    \"cgroupDriver\": \"no\"\n  },\n  \"kind\": \"KubeletConfiguration\",\n  \"apiVersion\": \"kubelet.config.k8s.io/v1beta1\",\n \"cgroupDriver\": \"cgroupfs\",\n \"failSwapOn\": true\n}\n",
			want: &nodediagv1.KubeletConfigFile{
				Path: p, Present: true, ApiVersion: "kubelet.config.k8s.io/v1beta1", Kind: "KubeletConfiguration",
				CgroupDriver: "cgroupfs", FailSwapOn: &tru,
				CgroupDriverLine: &nodediagv1.SourceLine{Path: p, Line: 7, Text: ` "cgroupDriver": "cgroupfs",`},
				FailSwapOnLine:   &nodediagv1.SourceLine{Path: p, Line: 8, Text: ` "failSwapOn": true`},
			},
		},
		{
			name: "malformed YAML names its line",
			in:   "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\ncgroupDriver: systemd: x\n",
			want: &nodediagv1.KubeletConfigFile{
				Path: p, Present: true,
				ParseError:     "error converting YAML to JSON: yaml: line 3: mapping values are not allowed in this context",
				ParseErrorLine: &nodediagv1.SourceLine{Path: p, Line: 3, Text: "cgroupDriver: systemd: x"},
			},
		},
		{
			name: "a field of the wrong type",
			in:   "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nfailSwapOn: sometimes\n",
			want: &nodediagv1.KubeletConfigFile{
				Path: p, Present: true,
				ParseError:     "error unmarshaling JSON: while decoding JSON: json: cannot unmarshal string into Go struct field kubeletConfiguration.failSwapOn of type bool",
				ParseErrorLine: &nodediagv1.SourceLine{Path: p, Line: 3, Text: "failSwapOn: sometimes"},
			},
		},
		{
			name: "a scalar where the kubelet wants a map (a template's nil)",
			in:   "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nevictionHard:\n  memory.available: 100Mi\nevictionSoft: nil\nkubeReserved:\n",
			want: &nodediagv1.KubeletConfigFile{
				Path: p, Present: true, ApiVersion: "kubelet.config.k8s.io/v1beta1", Kind: "KubeletConfiguration",
				EvictionHard:   map[string]string{"memory.available": "100Mi"},
				ParseError:     "evictionSoft is a string (nil), the kubelet wants a map (it fails to decode the file)",
				ParseErrorLine: &nodediagv1.SourceLine{Path: p, Line: 5, Text: "evictionSoft: nil"},
			},
		},
		{
			name: "a string where the kubelet wants a list",
			in:   "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nclusterDNS: 10.96.0.10\n",
			want: &nodediagv1.KubeletConfigFile{
				Path: p, Present: true, ApiVersion: "kubelet.config.k8s.io/v1beta1", Kind: "KubeletConfiguration",
				ParseError:     "clusterDNS is a string (10.96.0.10), the kubelet wants a list (it fails to decode the file)",
				ParseErrorLine: &nodediagv1.SourceLine{Path: p, Line: 3, Text: "clusterDNS: 10.96.0.10"},
			},
		},
		{
			name: "wrong kind",
			in:   "apiVersion: kubeadm.k8s.io/v1beta4\nkind: JoinConfiguration\n",
			want: &nodediagv1.KubeletConfigFile{
				Path: p, Present: true, ApiVersion: "kubeadm.k8s.io/v1beta4", Kind: "JoinConfiguration",
				ParseError:     `kind is "JoinConfiguration", want "KubeletConfiguration"`,
				ParseErrorLine: &nodediagv1.SourceLine{Path: p, Line: 2, Text: "kind: JoinConfiguration"},
			},
		},
		{
			name: "wrong group",
			in:   "apiVersion: v1\nkind: KubeletConfiguration\n",
			want: &nodediagv1.KubeletConfigFile{
				Path: p, Present: true, ApiVersion: "v1", Kind: "KubeletConfiguration",
				ParseError:     `apiVersion "v1" is not in kubelet.config.k8s.io`,
				ParseErrorLine: &nodediagv1.SourceLine{Path: p, Line: 1, Text: "apiVersion: v1"},
			},
		},
		{
			name: "missing kind",
			in:   "cgroupDriver: systemd\n",
			want: &nodediagv1.KubeletConfigFile{
				Path: p, Present: true, CgroupDriver: "systemd",
				CgroupDriverLine: &nodediagv1.SourceLine{Path: p, Line: 1, Text: "cgroupDriver: systemd"},
				ParseError:       `kind is missing (want "KubeletConfiguration")`,
			},
		},
		{
			name: "empty file",
			in:   "\n  \n",
			want: &nodediagv1.KubeletConfigFile{Path: p, Present: true, ParseError: "the file is empty"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := parseKubeletConfigFile(p, []byte(tt.in))
			if diff := cmp.Diff(tt.want, got, protocmp.Transform()); diff != "" {
				t.Errorf("parseKubeletConfigFile (-want +got):\n%s", diff)
			}
		})
	}
}

func FuzzParseKubeletConfigFile(f *testing.F) {
	for _, s := range []string{"apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\ncgroupDriver: systemd\n", "a: b: c", "{", "- x", "kind: [1"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		kf := parseKubeletConfigFile("/c.yaml", b)
		if !kf.Present {
			t.Fatal("present must be true")
		}
	})
}

// ---- scenarios -----------------------------------------------------------

// The kubelet deb's unit and drop-in (kubernetes/release, cmd/krel/templates/latest).
const (
	debKubeletService = `[Unit]
Description=kubelet: The Kubernetes Node Agent
Documentation=https://kubernetes.io/docs/
Wants=network-online.target
After=network-online.target

[Service]
ExecStart=/usr/bin/kubelet
Restart=always
StartLimitInterval=0
RestartSec=10

[Install]
WantedBy=multi-user.target
`
	debKubeadmDropIn = `# Note: This dropin only works with kubeadm and kubelet v1.11+
[Service]
Environment="KUBELET_KUBECONFIG_ARGS=--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf --kubeconfig=/etc/kubernetes/kubelet.conf"
Environment="KUBELET_CONFIG_ARGS=--config=/var/lib/kubelet/config.yaml"
# This is a file that "kubeadm init" and "kubeadm join" generates at runtime, populating the KUBELET_KUBEADM_ARGS variable dynamically
EnvironmentFile=-/var/lib/kubelet/kubeadm-flags.env
# This is a file that the user can use for overrides of the kubelet args as a last resort. Preferably, the user should use
# the .NodeRegistration.KubeletExtraArgs object in the configuration files instead. KUBELET_EXTRA_ARGS should be sourced from this file.
EnvironmentFile=-/etc/default/kubelet
ExecStart=
ExecStart=/usr/bin/kubelet $KUBELET_KUBECONFIG_ARGS $KUBELET_CONFIG_ARGS $KUBELET_KUBEADM_ARGS $KUBELET_EXTRA_ARGS
`
	kubeadmFlagsEnvText = `KUBELET_KUBEADM_ARGS="--container-runtime-endpoint=unix:///var/run/containerd/containerd.sock --pod-infra-container-image=registry.k8s.io/pause:3.9"` + "\n"
	kubeletConfigYAML   = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\ncgroupDriver: systemd\n"
)

// rpmKubeadmDropIn is the rpm's drop-in: the same with /etc/sysconfig/kubelet.
var rpmKubeadmDropIn = strings.Replace(debKubeadmDropIn, "/etc/default/kubelet", "/etc/sysconfig/kubelet", 1)

func runKubeletConfig(t *testing.T, h *host.Host) (*nodediagv1.ProbeEvidence, *nodediagv1.KubeletConfig) {
	t.Helper()
	pe, err := kubeletConfig{}.Run(context.Background(), h)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	kc := pe.GetKubeletConfig()
	if kc == nil {
		t.Fatal("no KubeletConfig in the evidence")
	}
	return pe, kc
}

func sl(path string, line int32, text string) *nodediagv1.SourceLine {
	return &nodediagv1.SourceLine{Path: path, Line: line, Text: text}
}

func TestKubeletConfigUbuntuKubeadm(t *testing.T) {
	const (
		unit   = "/usr/lib/systemd/system/kubelet.service"
		dropin = "/usr/lib/systemd/system/kubelet.service.d/10-kubeadm.conf"
	)
	h := hosttest.Tree(t, map[string]string{
		"usr/lib/systemd/system/kubelet.service":                   debKubeletService,
		"usr/lib/systemd/system/kubelet.service.d/10-kubeadm.conf": debKubeadmDropIn,
		// merged /usr: /lib is /usr/lib
		"lib":                               "->usr/lib",
		"etc/default/kubelet":               "KUBELET_EXTRA_ARGS=--node-labels=node.kubernetes.io/role=worker\n",
		"var/lib/kubelet/kubeadm-flags.env": kubeadmFlagsEnvText,
		"var/lib/kubelet/config.yaml":       kubeletConfigYAML,
		// systemctl enable kubelet
		"etc/systemd/system/multi-user.target.wants/kubelet.service": "->/usr/lib/systemd/system/kubelet.service",
	})
	pe, kc := runKubeletConfig(t, h)

	kubeconfigLine := sl(dropin, 3, `Environment="KUBELET_KUBECONFIG_ARGS=--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf --kubeconfig=/etc/kubernetes/kubelet.conf"`)
	flagsLine := sl(kubeadmFlagsEnv, 1, strings.TrimSuffix(kubeadmFlagsEnvText, "\n"))
	want := &nodediagv1.KubeletConfig{
		UnitFiles:  []string{unit, dropin},
		ExecStart:  sl(dropin, 11, "ExecStart=/usr/bin/kubelet $KUBELET_KUBECONFIG_ARGS $KUBELET_CONFIG_ARGS $KUBELET_KUBEADM_ARGS $KUBELET_EXTRA_ARGS"),
		ExecPath:   "/usr/bin/kubelet",
		Enablement: "enabled",
		WantedBy:   "/etc/systemd/system/multi-user.target.wants/kubelet.service",
		EnvFiles: []*nodediagv1.EnvFile{
			{Path: kubeadmFlagsEnv, Present: true, Optional: true},
			{Path: "/etc/default/kubelet", Present: true, Optional: true},
		},
		Flags: []*nodediagv1.KubeletFlag{
			{Name: "bootstrap-kubeconfig", Value: "/etc/kubernetes/bootstrap-kubelet.conf", Source: kubeconfigLine, Variable: "KUBELET_KUBECONFIG_ARGS", Active: true},
			{Name: "kubeconfig", Value: "/etc/kubernetes/kubelet.conf", Source: kubeconfigLine, Variable: "KUBELET_KUBECONFIG_ARGS", Active: true},
			{Name: "config", Value: "/var/lib/kubelet/config.yaml", Source: sl(dropin, 4, `Environment="KUBELET_CONFIG_ARGS=--config=/var/lib/kubelet/config.yaml"`), Variable: "KUBELET_CONFIG_ARGS", Active: true},
			{Name: "container-runtime-endpoint", Value: "unix:///var/run/containerd/containerd.sock", Source: flagsLine, Variable: "KUBELET_KUBEADM_ARGS", Active: true},
			{Name: "pod-infra-container-image", Value: "registry.k8s.io/pause:3.9", Source: flagsLine, Variable: "KUBELET_KUBEADM_ARGS", Active: true},
			{Name: "node-labels", Value: "node.kubernetes.io/role=worker", Source: sl("/etc/default/kubelet", 1, "KUBELET_EXTRA_ARGS=--node-labels=node.kubernetes.io/role=worker"), Variable: "KUBELET_EXTRA_ARGS", Active: true},
		},
		Config: &nodediagv1.KubeletConfigFile{
			Path: "/var/lib/kubelet/config.yaml", Present: true, ApiVersion: "kubelet.config.k8s.io/v1beta1", Kind: "KubeletConfiguration",
			CgroupDriver: "systemd", CgroupDriverLine: sl("/var/lib/kubelet/config.yaml", 3, "cgroupDriver: systemd"),
		},
	}
	if diff := cmp.Diff(want, kc, protocmp.Transform()); diff != "" {
		t.Errorf("KubeletConfig (-want +got):\n%s", diff)
	}
	if len(pe.Unreadable) != 0 {
		t.Errorf("unreadable = %v, want none", pe.Unreadable)
	}
}

// kubeadmFlagsEnv is the host path used in scenario expectations.
const kubeadmFlagsEnv = kubeadmFlagsEnvFile

func TestKubeletConfigAzureLinux3(t *testing.T) {
	const sysconfig = "KUBELET_EXTRA_ARGS=--pod-infra-container-image=mcr.microsoft.com/oss/kubernetes/pause:3.6"
	h := hosttest.Tree(t, map[string]string{
		"usr/lib/systemd/system/kubelet.service":                   debKubeletService,
		"usr/lib/systemd/system/kubelet.service.d/10-kubeadm.conf": rpmKubeadmDropIn,
		"etc/sysconfig/kubelet":                                    sysconfig + "\n",
		"var/lib/kubelet/config.yaml":                              kubeletConfigYAML,
	})
	pe, kc := runKubeletConfig(t, h)
	want := &nodediagv1.KubeletFlag{
		Name: "pod-infra-container-image", Value: "mcr.microsoft.com/oss/kubernetes/pause:3.6",
		Source: sl("/etc/sysconfig/kubelet", 1, sysconfig), Variable: "KUBELET_EXTRA_ARGS", Active: true,
	}
	if diff := cmp.Diff(want, findKubeletFlag(kc, "pod-infra-container-image"), protocmp.Transform()); diff != "" {
		t.Errorf("flag (-want +got):\n%s", diff)
	}
	// kubeadm has not run yet: its flags file is absent, which is not an error.
	wantFiles := []*nodediagv1.EnvFile{
		{Path: kubeadmFlagsEnv, Optional: true},
		{Path: "/etc/sysconfig/kubelet", Present: true, Optional: true},
	}
	if diff := cmp.Diff(wantFiles, kc.EnvFiles, protocmp.Transform()); diff != "" {
		t.Errorf("env files (-want +got):\n%s", diff)
	}
	if len(pe.Unreadable) != 0 {
		t.Errorf("unreadable = %v, want none", pe.Unreadable)
	}
}

func TestKubeletConfigDropInOverridesExecStart(t *testing.T) {
	const override = "/etc/systemd/system/kubelet.service.d/20-custom.conf"
	h := hosttest.Tree(t, map[string]string{
		"lib/systemd/system/kubelet.service":                   debKubeletService,
		"lib/systemd/system/kubelet.service.d/10-kubeadm.conf": debKubeadmDropIn,
		// Same name in /etc masks nothing else; a different name adds.
		"etc/systemd/system/kubelet.service.d/20-custom.conf": "[Service]\nExecStart=\nExecStart=/opt/bin/kubelet \\\n    ${KUBELET_CONFIG_ARGS} $KUBELET_EXTRA_ARGS --v=4\n",
		// A drop-in of the same name in a lower-priority directory is masked.
		"usr/lib/systemd/system/kubelet.service.d/20-custom.conf": "[Service]\nExecStart=\nExecStart=/masked\n",
		"etc/default/kubelet": "KUBELET_EXTRA_ARGS=--max-pods=50\n",
	})
	_, kc := runKubeletConfig(t, h)
	wantUnits := []string{"/lib/systemd/system/kubelet.service", "/lib/systemd/system/kubelet.service.d/10-kubeadm.conf", override}
	if diff := cmp.Diff(wantUnits, kc.UnitFiles); diff != "" {
		t.Errorf("unit files (-want +got):\n%s", diff)
	}
	execLine := sl(override, 3, "ExecStart=/opt/bin/kubelet \\\n    ${KUBELET_CONFIG_ARGS} $KUBELET_EXTRA_ARGS --v=4")
	if diff := cmp.Diff(execLine, kc.ExecStart, protocmp.Transform()); diff != "" {
		t.Errorf("ExecStart (-want +got):\n%s", diff)
	}
	if kc.ExecPath != "/opt/bin/kubelet" {
		t.Errorf("exec path = %q", kc.ExecPath)
	}
	type flag struct {
		Name, Value, Variable, Source string
		Active                        bool
		Reason                        string
	}
	var got []flag
	for _, f := range kc.Flags {
		got = append(got, flag{f.Name, f.Value, f.Variable, f.Source.GetPath(), f.Active, f.InactiveReason})
	}
	const dropin = "/lib/systemd/system/kubelet.service.d/10-kubeadm.conf"
	want := []flag{
		{"config", "/var/lib/kubelet/config.yaml", "KUBELET_CONFIG_ARGS", dropin, true, ""},
		{"max-pods", "50", "KUBELET_EXTRA_ARGS", "/etc/default/kubelet", true, ""},
		{"v", "4", "", override, true, ""},
		// The override dropped $KUBELET_KUBECONFIG_ARGS: dormant.
		{"bootstrap-kubeconfig", "/etc/kubernetes/bootstrap-kubelet.conf", "KUBELET_KUBECONFIG_ARGS", dropin, false, "ExecStart does not use $KUBELET_KUBECONFIG_ARGS"},
		{"kubeconfig", "/etc/kubernetes/kubelet.conf", "KUBELET_KUBECONFIG_ARGS", dropin, false, "ExecStart does not use $KUBELET_KUBECONFIG_ARGS"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("flags (-want +got):\n%s", diff)
	}
	// No config.yaml yet: reported absent.
	if diff := cmp.Diff(&nodediagv1.KubeletConfigFile{Path: "/var/lib/kubelet/config.yaml"}, kc.Config, protocmp.Transform()); diff != "" {
		t.Errorf("config (-want +got):\n%s", diff)
	}
}

func TestKubeletConfigDormantFlags(t *testing.T) {
	h := hosttest.Tree(t, map[string]string{
		// rpm wiring: /etc/default/kubelet is not read.
		"usr/lib/systemd/system/kubelet.service":                   debKubeletService,
		"usr/lib/systemd/system/kubelet.service.d/10-kubeadm.conf": rpmKubeadmDropIn,
		"etc/default/kubelet":                                      "KUBELET_EXTRA_ARGS=--network-plugin=cni\n",
		"etc/sysconfig/kubelet":                                    "export KUBELET_EXTRA_ARGS=--cloud-config=/etc/kubernetes/azure.json\nUNUSED_ARGS=--container-runtime=remote\n",
		"var/lib/kubelet/kubeadm-flags.env":                        kubeadmFlagsEnvText,
	})
	_, kc := runKubeletConfig(t, h)
	tests := []struct {
		flag, reason string
	}{
		{"network-plugin", "/etc/default/kubelet is not an EnvironmentFile of kubelet.service"},
		{"cloud-config", `systemd ignores "export KUBELET_EXTRA_ARGS=" (shell syntax, not an assignment)`},
		{"container-runtime", "ExecStart does not use $UNUSED_ARGS"},
	}
	for _, tt := range tests {
		t.Run(tt.flag, func(t *testing.T) {
			f := findKubeletFlag(kc, tt.flag)
			if f == nil {
				t.Fatalf("flag %s not reported", tt.flag)
			}
			if f.Active || f.InactiveReason != tt.reason {
				t.Errorf("active=%v reason=%q, want inactive with %q", f.Active, f.InactiveReason, tt.reason)
			}
		})
	}
	if f := findKubeletFlag(kc, "pod-infra-container-image"); f == nil || !f.Active {
		t.Errorf("kubeadm-flags.env flag = %v, want active", f)
	}
}

func TestKubeletConfigOverriddenAssignment(t *testing.T) {
	h := hosttest.Tree(t, map[string]string{
		"usr/lib/systemd/system/kubelet.service": "[Service]\n" +
			"Environment=KUBELET_EXTRA_ARGS=--from-unit\n" +
			"EnvironmentFile=/etc/kubernetes/kubelet.env\n" +
			"ExecStart=/usr/bin/kubelet $KUBELET_EXTRA_ARGS\n",
		"etc/kubernetes/kubelet.env": "KUBELET_EXTRA_ARGS=--first\nKUBELET_EXTRA_ARGS=--second\n",
	})
	_, kc := runKubeletConfig(t, h)
	type flag struct {
		Name   string
		Line   int32
		Active bool
		Reason string
	}
	var got []flag
	for _, f := range kc.Flags {
		got = append(got, flag{f.Name, f.Source.GetLine(), f.Active, f.InactiveReason})
	}
	want := []flag{
		{"second", 2, true, ""},
		{"from-unit", 2, false, "KUBELET_EXTRA_ARGS is set again at /etc/kubernetes/kubelet.env:2"},
		{"first", 1, false, "KUBELET_EXTRA_ARGS is set again at /etc/kubernetes/kubelet.env:2"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("flags (-want +got):\n%s", diff)
	}
	// A required environment file is reported as such.
	if diff := cmp.Diff([]*nodediagv1.EnvFile{{Path: "/etc/kubernetes/kubelet.env", Present: true}}, kc.EnvFiles, protocmp.Transform()); diff != "" {
		t.Errorf("env files (-want +got):\n%s", diff)
	}
	// No --config and no /var/lib/kubelet: no configuration file to look at.
	if kc.Config != nil {
		t.Errorf("config = %v, want none", kc.Config)
	}
}

func TestKubeletConfigUnreadableEnvFile(t *testing.T) {
	h := hosttest.Tree(t, map[string]string{
		"usr/lib/systemd/system/kubelet.service":                   debKubeletService,
		"usr/lib/systemd/system/kubelet.service.d/10-kubeadm.conf": debKubeadmDropIn,
		// A directory where the file should be: the read fails.
		"etc/default/kubelet/":              "",
		"var/lib/kubelet/kubeadm-flags.env": kubeadmFlagsEnvText,
		"var/lib/kubelet/config.yaml":       kubeletConfigYAML,
	})
	pe, kc := runKubeletConfig(t, h)
	if len(pe.Unreadable) != 1 || pe.Unreadable[0].Source != "/etc/default/kubelet" {
		t.Fatalf("unreadable = %v, want /etc/default/kubelet", pe.Unreadable)
	}
	var ef *nodediagv1.EnvFile
	for _, e := range kc.EnvFiles {
		if e.Path == "/etc/default/kubelet" {
			ef = e
		}
	}
	if ef == nil || !ef.Present || !strings.Contains(ef.Error, "not a regular file") {
		t.Errorf("env file = %v, want present with a read error", ef)
	}
	// The rest is still reported.
	if f := findKubeletFlag(kc, "pod-infra-container-image"); f == nil || !f.Active {
		t.Errorf("kubeadm flag = %v, want active", f)
	}
	if kc.Config.GetCgroupDriver() != "systemd" {
		t.Errorf("config = %v, want parsed", kc.Config)
	}
}

func TestKubeletConfigMalformedConfig(t *testing.T) {
	h := hosttest.Tree(t, map[string]string{
		"usr/lib/systemd/system/kubelet.service":                   debKubeletService,
		"usr/lib/systemd/system/kubelet.service.d/10-kubeadm.conf": debKubeadmDropIn,
		"var/lib/kubelet/config.yaml":                              "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n\tcgroupDriver: systemd\n",
	})
	_, kc := runKubeletConfig(t, h)
	c := kc.Config
	if !c.GetPresent() || c.GetParseError() == "" {
		t.Fatalf("config = %v, want present with a parse error", c)
	}
	if c.ParseErrorLine.GetLine() != 3 {
		t.Errorf("parse error line = %v, want line 3", c.ParseErrorLine)
	}
}

func TestKubeletConfigAssumedWiring(t *testing.T) {
	const sysconfig = "KUBELET_EXTRA_ARGS=--pod-infra-container-image=mcr.microsoft.com/oss/kubernetes/pause:3.6"
	h := hosttest.Tree(t, map[string]string{
		"etc/sysconfig/kubelet":       sysconfig + "\n",
		"var/lib/kubelet/config.yaml": kubeletConfigYAML,
	})
	_, kc := runKubeletConfig(t, h)
	if !kc.AssumedWiring || len(kc.UnitFiles) != 0 {
		t.Fatalf("assumed = %v, units = %v; want assumed wiring and no unit", kc.AssumedWiring, kc.UnitFiles)
	}
	want := &nodediagv1.KubeletFlag{
		Name: "pod-infra-container-image", Value: "mcr.microsoft.com/oss/kubernetes/pause:3.6",
		Source: sl("/etc/sysconfig/kubelet", 1, sysconfig), Variable: "KUBELET_EXTRA_ARGS", Active: true,
	}
	if diff := cmp.Diff(want, findKubeletFlag(kc, "pod-infra-container-image"), protocmp.Transform()); diff != "" {
		t.Errorf("flag (-want +got):\n%s", diff)
	}
	if kc.ExecStart.GetPath() != assumedDropInSource || kc.ExecPath != "/usr/bin/kubelet" {
		t.Errorf("ExecStart = %v (%s), want the assumed one", kc.ExecStart, kc.ExecPath)
	}
	if !kc.Config.GetPresent() || kc.Config.GetCgroupDriver() != "systemd" {
		t.Errorf("config = %v", kc.Config)
	}
}

func TestKubeletConfigNotApplicable(t *testing.T) {
	h := hosttest.Tree(t, map[string]string{"etc/hostname": "node\n", "usr/lib/systemd/system/containerd.service": "[Service]\n"})
	pe, err := kubeletConfig{}.Run(context.Background(), h)
	if !errors.Is(err, probe.ErrNotApplicable) {
		t.Fatalf("error = %v, want ErrNotApplicable", err)
	}
	if pe != nil {
		t.Errorf("evidence = %v, want none", pe)
	}
}

func TestKubeletConfigUnreadableUnit(t *testing.T) {
	h := hosttest.Tree(t, map[string]string{
		// The highest-priority copy is unreadable: no fallback to the lower one.
		"etc/systemd/system/kubelet.service/":    "",
		"usr/lib/systemd/system/kubelet.service": "[Service]\nExecStart=/usr/bin/kubelet --v=2\n",
		"var/lib/kubelet/":                       "",
	})
	pe, kc := runKubeletConfig(t, h)
	if len(pe.Unreadable) != 1 || pe.Unreadable[0].Source != "/etc/systemd/system/kubelet.service" {
		t.Errorf("unreadable = %v", pe.Unreadable)
	}
	if diff := cmp.Diff([]string{"/etc/systemd/system/kubelet.service"}, kc.UnitFiles); diff != "" {
		t.Errorf("unit files (-want +got):\n%s", diff)
	}
	if kc.AssumedWiring || kc.ExecStart != nil || len(kc.Flags) != 0 {
		t.Errorf("assumed = %v, ExecStart = %v, flags = %v; want none", kc.AssumedWiring, kc.ExecStart, kc.Flags)
	}
}

func TestKubeletConfigEnvFileNamedTwice(t *testing.T) {
	h := hosttest.Tree(t, map[string]string{
		"usr/lib/systemd/system/kubelet.service": "[Service]\n" +
			"EnvironmentFile=-/etc/kubelet.env\nEnvironmentFile=-/etc/absent.env\n" +
			"EnvironmentFile=/etc/kubelet.env\nEnvironmentFile=-/etc/absent.env\n" +
			"ExecStart=/usr/bin/kubelet $ARGS\n",
		"etc/kubelet.env": "ARGS=--v=2\n",
	})
	_, kc := runKubeletConfig(t, h)
	want := []*nodediagv1.EnvFile{
		{Path: "/etc/kubelet.env", Present: true, Optional: true},
		{Path: "/etc/absent.env", Optional: true},
		{Path: "/etc/kubelet.env", Present: true},
		{Path: "/etc/absent.env", Optional: true},
	}
	if diff := cmp.Diff(want, kc.EnvFiles, protocmp.Transform()); diff != "" {
		t.Errorf("env files (-want +got):\n%s", diff)
	}
	if len(kc.Flags) != 1 || !kc.Flags[0].Active {
		t.Errorf("flags = %v, want --v active once", kc.Flags)
	}
}

func TestKubeletConfigMasked(t *testing.T) {
	for _, tt := range []struct {
		name, unit string
	}{
		{"symlink to /dev/null (no /dev in the copied root)", "->/dev/null"},
		{"empty unit file", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := hosttest.Tree(t, map[string]string{
				"etc/systemd/system/kubelet.service":                       tt.unit,
				"usr/lib/systemd/system/kubelet.service":                   debKubeletService,
				"usr/lib/systemd/system/kubelet.service.d/10-kubeadm.conf": debKubeadmDropIn,
				"etc/default/kubelet":                                      "KUBELET_EXTRA_ARGS=--max-pods=50\n",
			})
			_, kc := runKubeletConfig(t, h)
			if !kc.Masked || kc.AssumedWiring || kc.ExecStart != nil {
				t.Errorf("masked = %v, assumed = %v, ExecStart = %v; want masked only", kc.Masked, kc.AssumedWiring, kc.ExecStart)
			}
			if diff := cmp.Diff([]string{"/etc/systemd/system/kubelet.service"}, kc.UnitFiles); diff != "" {
				t.Errorf("unit files (-want +got):\n%s", diff)
			}
			f := findKubeletFlag(kc, "max-pods")
			if f == nil || f.Active || f.InactiveReason != "kubelet.service is masked" {
				t.Errorf("flag = %v, want dormant because the unit is masked", f)
			}
		})
	}
}

func TestKubeletConfigMaskedDropIn(t *testing.T) {
	h := hosttest.Tree(t, map[string]string{
		"usr/lib/systemd/system/kubelet.service":                   debKubeletService,
		"usr/lib/systemd/system/kubelet.service.d/10-kubeadm.conf": debKubeadmDropIn,
		"etc/systemd/system/kubelet.service.d/10-kubeadm.conf":     "->/dev/null",
	})
	_, kc := runKubeletConfig(t, h)
	if diff := cmp.Diff([]string{"/usr/lib/systemd/system/kubelet.service"}, kc.UnitFiles); diff != "" {
		t.Errorf("unit files (-want +got):\n%s", diff)
	}
	if kc.Masked || kc.ExecStart.GetLine() != 8 || len(kc.Flags) != 0 {
		t.Errorf("masked = %v, ExecStart = %v, flags = %v; want the bare unit's ExecStart", kc.Masked, kc.ExecStart, kc.Flags)
	}
}

func TestKubeletConfigProbeName(t *testing.T) {
	var p probe.Probe = kubeletConfig{}
	if p.Name() != "kubelet-config" {
		t.Errorf("name = %q", p.Name())
	}
	// The evidence is a valid message (round-trips).
	h := hosttest.Tree(t, map[string]string{"etc/sysconfig/kubelet": "KUBELET_EXTRA_ARGS=\n"})
	pe, _ := runKubeletConfig(t, h)
	b, err := proto.Marshal(pe)
	if err != nil {
		t.Fatal(err)
	}
	var back nodediagv1.ProbeEvidence
	if err := proto.Unmarshal(b, &back); err != nil || !proto.Equal(pe, &back) {
		t.Errorf("round trip: %v", err)
	}
}

func findKubeletFlag(kc *nodediagv1.KubeletConfig, name string) *nodediagv1.KubeletFlag {
	for _, f := range kc.GetFlags() {
		if f.Name == name {
			return f
		}
	}
	return nil
}
