package rules_test

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/nodediag/nodediag/agent/logline"
	"github.com/nodediag/nodediag/agent/rules"
	nodediagv1 "github.com/nodediag/nodediag/proto/nodediag/v1"
)

// engineParams are filled by the engine for every signature finding. Every
// other parameter of a problem's title and remediation must be provided, for
// every example, by a named group of the signature or by the problem's
// Defaults (for what a log line may not carry).
var engineParams = map[string]bool{"count": true, "detail": true, "duration": true}

func loadShipped(t *testing.T) []*rules.Signature {
	t.Helper()
	sigs, err := rules.LoadSignatures(nil)
	if err != nil {
		t.Fatalf("LoadSignatures(nil), as at startup: %v", err)
	}
	return sigs
}

func exampleKind(s *rules.Signature) string {
	if len(s.Kinds) > 0 {
		return s.Kinds[0]
	}
	return ""
}

// TestShippedSignatures checks the embedded signatures exactly as the agent
// loads them: every example is claimed by its own signature through the
// whole ordered set, no counterexample matches its signature, the logs probe
// keeps every example, and the templates' parameters are provided.
func TestShippedSignatures(t *testing.T) {
	sigs := loadShipped(t)
	if len(sigs) == 0 {
		t.Fatal("no signatures shipped")
	}
	for i, s := range sigs {
		name := s.File() + "/" + s.ID
		kind := exampleKind(s)
		re := regexp.MustCompile(s.Match)
		if s.Fact != "" {
			name = s.File() + "/" + s.Fact
			for _, ex := range s.Examples {
				if !s.Matches(kind, ex) {
					t.Errorf("%s: example does not match its fact:\n\t%s", name, ex)
				}
				if !logline.Notable(ex) {
					t.Errorf("%s: logline.Notable drops the example, so the logs probe would not keep it:\n\t%s", name, ex)
				}
			}
			for _, cx := range s.Counterexamples {
				if s.Matches(kind, cx) {
					t.Errorf("%s: counterexample matches:\n\t%s", name, cx)
				}
			}
			continue
		}
		p, ok := rules.Lookup(s.ID)
		if !ok {
			t.Fatalf("%s: unknown problem", name)
		}
		for _, ex := range s.Examples {
			if got := rules.Claim(sigs, kind, ex); got != s {
				by := "nothing"
				if got != nil {
					by = got.File() + "/" + got.ID
				}
				t.Errorf("%s (#%d): example claimed by %s, not by its signature:\n\t%s", name, i, by, ex)
			}
			if !logline.Notable(ex) {
				t.Errorf("%s: logline.Notable drops the example, so the logs probe would not keep it:\n\t%s", name, ex)
			}
			sub := re.FindStringSubmatch(ex)
			if sub == nil {
				continue // reported above
			}
			provided := map[string]bool{}
			for j, g := range re.SubexpNames() {
				if g != "" && sub[j] != "" {
					provided[g] = true
				}
			}
			for _, param := range p.TemplateParams() {
				if provided[param] || engineParams[param] {
					continue
				}
				if _, ok := p.Defaults[param]; ok {
					continue
				}
				t.Errorf("%s: the template uses {%s}, which the example does not provide (add a named group, or a default to the problem):\n\t%s", name, param, ex)
			}
		}
		for _, cx := range s.Counterexamples {
			if s.Matches(kind, cx) {
				t.Errorf("%s: counterexample matches:\n\t%s", name, cx)
			}
		}
	}
}

// TestSignatureCoverage names the problems a log line must be able to prove;
// a signature file that loses one of them fails here.
func TestSignatureCoverage(t *testing.T) {
	have := map[string]bool{}
	for _, s := range loadShipped(t) {
		have[s.ID] = true
	}
	for _, id := range []string{
		"KubeletUnknownFlag", "KubeletConfigInvalid", "SwapEnabled", "RuntimeCRIDisabled", "RuntimeNotRunning",
		"RegistryEndpointInvalid", "ImageNotFound", "ImagePullAuthFailed", "RegistryUnreachable", "ImagePullFailed",
		"KubeadmPreflightKubeletVersion", "KubeadmPreflightFailed", "KubeadmInitFailed", "KubeadmJoinFailed", "KubeadmFailed",
		"KubeletNotHealthy", "KubeletTLSBootstrapFailed", "APIServerUnreachable", "JoinTokenInvalid",
		"APIServerCertificateUntrusted", "CertificateExpired", "ClockSkew", "BootstrapDownloadFailed",
		"PackageInstallFailed", "BootstrapCommandFailed", "DiskNoSpaceLogged", "KubeletDiskEviction",
		"CNINotInitialized", "KubeletCgroupDriverMismatch",
	} {
		if !have[id] {
			t.Errorf("no signature proves %s", id)
		}
	}
}

var (
	t0 = time.Date(2024, 5, 1, 10, 0, 0, 0, time.UTC)
	// collected is when the evidence was collected: after every line.
	collected = t0.Add(2 * time.Hour)
)

func logLine(n int32, at time.Duration, text string) *nodediagv1.LogLine {
	return &nodediagv1.LogLine{N: n, Time: timestamppb.New(t0.Add(at)), Text: text}
}

func logsEvidence(sources ...*nodediagv1.LogExcerpt) *nodediagv1.Evidence {
	return &nodediagv1.Evidence{
		CollectedAt: timestamppb.New(collected),
		Probes: []*nodediagv1.ProbeEvidence{{
			Name: "logs", Status: "ok",
			Data: &nodediagv1.ProbeEvidence_Logs{Logs: &nodediagv1.Logs{Sources: sources}},
		}},
	}
}

func analyze(t *testing.T, ev *nodediagv1.Evidence, c rules.Context) []*nodediagv1.Finding {
	t.Helper()
	e, err := rules.NewEngine()
	if err != nil {
		t.Fatal(err)
	}
	return e.Analyze(ev, c).Findings
}

func findingByID(fs []*nodediagv1.Finding, id string) *nodediagv1.Finding {
	for _, f := range fs {
		if f.Id == id {
			return f
		}
	}
	return nil
}

func indexOf(fs []*nodediagv1.Finding, id string) int {
	for i, f := range fs {
		if f.Id == id {
			return i
		}
	}
	return -1
}

// TestSignatureFindings runs single lines through the engine and checks the
// finding they prove, its title (the parameters the line provides) and
// its quote.
func TestSignatureFindings(t *testing.T) {
	tests := []struct {
		name, kind, source, text string
		wantID, wantTitle        string
	}{
		{
			name: "DKP missing protocol scheme", kind: "kubeadm", source: "/var/log/kubeadm-init.log",
			text:      `[ERROR ImagePull]: failed to pull image k8s.gcr.io/kube-apiserver:v1.22.8: output: time="" level=fatalmsg="pulling image: rpc error: code = Unknown desc = failed to pull and unpack image \"k8s.gcr.io/kube-apiserver:v1.22.8\": failed to resolve reference \"k8s.gcr.io/kube-apiserver:v1.22.8\": get registry endpoints: parse endpoint url: parse \":///v2/<REGISTRY_URL>/dkp\": missing protocol scheme"`,
			wantID:    "RegistryEndpointInvalid",
			wantTitle: `a registry or mirror endpoint is malformed: parse ":///v2/<REGISTRY_URL>/dkp": missing protocol scheme`,
		},
		{
			name: "kubelet unknown flag in syslog", kind: "syslog", source: "/var/log/syslog",
			text:      `May  1 10:00:00 node-1 kubelet[1234]: E0501 10:00:00.000000    1234 run.go:72] "command failed" err="failed to parse kubelet flag: unknown flag: --network-plugin"`,
			wantID:    "KubeletUnknownFlag",
			wantTitle: "kubelet refuses to start: unknown flag --network-plugin",
		},
		{
			name: "preflight check", kind: "cloud-init-output", source: "/var/log/cloud-init-output.log",
			text:      "\t[ERROR Port-10250]: Port 10250 is in use",
			wantID:    "KubeadmPreflightFailed",
			wantTitle: "kubeadm preflight check failed: Port-10250",
		},
		{
			name: "join-only phase", kind: "cloud-init-output", source: "/var/log/cloud-init-output.log",
			text:      `error execution phase control-plane-prepare/download-certs: error downloading certs: error downloading the secret: etcdserver: leader changed`,
			wantID:    "KubeadmJoinFailed",
			wantTitle: "kubeadm join failed in phase control-plane-prepare/download-certs",
		},
		{
			name: "phase init and join share", kind: "cloud-init-output", source: "/var/log/cloud-init-output.log",
			text:      `error: error execution phase preflight: preflight checks failed`,
			wantID:    "KubeadmFailed",
			wantTitle: "kubeadm failed in phase preflight",
		},
		{
			name: "expired certificate of an endpoint", kind: "kubelet", source: "/var/log/kubelet.log",
			text:      `E0502 10:00:00.000000    1234 kubelet_node_status.go:108] "Unable to register node with API server" err="Post \"https://10.0.0.4:6443/api/v1/nodes\": tls: failed to verify certificate: x509: certificate has expired or is not yet valid: current time 2025-05-02T10:00:00Z is after 2025-05-01T09:12:44Z" node="node-1"`,
			wantID:    "CertificateExpired",
			wantTitle: "certificate https://10.0.0.4:6443 expired on 2025-05-01T09:12:44Z",
		},
		{
			name: "image not found, in kubeadm's output", kind: "kubeadm", source: "/var/log/kubeadm-init.log",
			text:      `level=error msg="PullImage \"elasticsearch:8.2.6\" failed" error="rpc error: code = NotFound desc = failed to pull and unpack image \"docker.io/library/elasticsearch:8.2.6\": failed to resolve reference \"docker.io/library/elasticsearch:8.2.6\": docker.io/library/elasticsearch:8.2.6: not found"`,
			wantID:    "ImageNotFound",
			wantTitle: "image docker.io/library/elasticsearch:8.2.6 does not exist in its registry",
		},
		{
			name: "download", kind: "cloud-init-output", source: "/var/log/cloud-init-output.log",
			text:      `curl: (22) The requested URL returned error: 404`,
			wantID:    "BootstrapDownloadFailed",
			wantTitle: "the download of a bootstrap file failed: curl: (22) The requested URL returned error: 404",
		},
		{
			name: "scripts_user", kind: "cloud-init", source: "/var/log/cloud-init.log",
			text:      `2024-05-01 10:00:00,624 - cc_scripts_user.py[WARNING]: Failed to run module scripts_user (scripts in /var/lib/cloud/instance/scripts)`,
			wantID:    "BootstrapCommandFailed",
			wantTitle: "a bootstrap command failed: scripts_user (scripts in /var/lib/cloud/instance/scripts)",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := logLine(7, 0, tt.text)
			if p := logline.Parse(tt.text, t0).Program; p != "" {
				l.Program = p
			}
			ev := logsEvidence(&nodediagv1.LogExcerpt{Source: tt.source, Kind: tt.kind, Lines: []*nodediagv1.LogLine{l}})
			f := findingByID(analyze(t, ev, rules.Context{}), tt.wantID)
			if f == nil {
				t.Fatalf("no %s finding", tt.wantID)
			}
			if f.Title != tt.wantTitle {
				t.Errorf("title\n got %s\nwant %s", f.Title, tt.wantTitle)
			}
			if strings.Contains(f.Title+f.Remediation, "{") {
				t.Errorf("unfilled parameter: %q / %q", f.Title, f.Remediation)
			}
			if len(f.Evidence) != 1 || f.Evidence[0].Source != tt.source || f.Evidence[0].Line != 7 || f.Evidence[0].Excerpt != tt.text {
				t.Errorf("evidence %v, want line 7 of %s quoted", f.Evidence, tt.source)
			}
		})
	}
}

// TestSignatureContext: the line a script echoed before the failing command
// is quoted with the failure, and names what failed.
func TestSignatureContext(t *testing.T) {
	ev := logsEvidence(&nodediagv1.LogExcerpt{
		Source: "/var/log/cloud-init-output.log", Kind: "cloud-init-output",
		Lines: []*nodediagv1.LogLine{
			logLine(10, 0, "+ curl -fsSL --retry 3 https://example.blob.core.windows.net/debs/kubelet_1.32.0-1_amd64.deb"),
			logLine(11, 0, "+ tee /tmp/kubelet.deb"),
			logLine(12, 0, "curl: (22) The requested URL returned error: 404"),
			// Too far above to be this failure's context.
			logLine(20, 0, "+ curl -fsSL https://example.com/other"),
			logLine(25, 0, "curl: (6) Could not resolve host: example.org"),
		},
	})
	f := findingByID(analyze(t, ev, rules.Context{}), "BootstrapDownloadFailed")
	if f == nil {
		t.Fatal("no BootstrapDownloadFailed finding")
	}
	if want := "the download of https://example.blob.core.windows.net/debs/kubelet_1.32.0-1_amd64.deb failed: curl: (22) The requested URL returned error: 404"; f.Title != want {
		t.Errorf("title\n got %s\nwant %s", f.Title, want)
	}
	var lines []int32
	for _, q := range f.Evidence {
		lines = append(lines, q.Line)
	}
	if diff := cmp.Diff([]int32{10, 12, 25}, lines); diff != "" {
		t.Errorf("quoted lines (-want +got):\n%s", diff)
	}
}

// TestSignaturesRankCauseFirst: a failed join whose token expired shows the
// token as the cause and cloud-init's report as a symptom after it.
func TestSignaturesRankCauseFirst(t *testing.T) {
	ev := logsEvidence(&nodediagv1.LogExcerpt{
		Source: "/var/log/cloud-init-output.log", Kind: "cloud-init-output",
		Lines: []*nodediagv1.LogLine{
			logLine(1, 0, "Cloud-init v. 24.1.3 running 'modules:final' at Wed, 01 May 2024 10:00:00 +0000. Up 18.02 seconds."),
			logLine(208, time.Minute, `error execution phase preflight: couldn't validate the identity of the API Server: could not find a JWS signature in the cluster-info ConfigMap for token ID "5xf60f"`),
			logLine(210, 6*time.Minute, `2024-05-01 10:06:01,624 - cc_scripts_user.py[WARNING]: Failed to run module scripts_user (scripts in /var/lib/cloud/instance/scripts)`),
		},
	})
	fs := analyze(t, ev, rules.Context{})
	token, script := indexOf(fs, "JoinTokenInvalid"), indexOf(fs, "BootstrapCommandFailed")
	if token < 0 || script < 0 {
		t.Fatalf("findings %v: want JoinTokenInvalid and BootstrapCommandFailed", ids(fs))
	}
	if token > script {
		t.Errorf("findings %v: the expired token must rank before the failed script it explains", ids(fs))
	}
	if q := fs[token].Evidence; len(q) != 1 || q[0].Line != 208 {
		t.Errorf("JoinTokenInvalid quotes %v, want line 208", q)
	}
}

// TestSignaturePersist: a bootstrap transient becomes a finding only when
// its lines form a run of the signature's persist duration (10m) that goes
// on to the end of the log.
func TestSignaturePersist(t *testing.T) {
	const refused = `E0501 %s    1234 kubelet_node_status.go:108] "Unable to register node with API server" err="Post \"https://controlplane:6553/api/v1/nodes\": dial tcp 192.168.227.136:6553: connect: connection refused" node="node01"`
	lines := func(span time.Duration) []*nodediagv1.LogLine {
		var out []*nodediagv1.LogLine
		for i, at := range []time.Duration{0, span / 2, span} {
			out = append(out, logLine(int32(i+1), at, strings.Replace(refused, "%s", t0.Add(at).Format("15:04:05.000000"), 1)))
		}
		return out
	}
	at := func(n int32, d time.Duration) *nodediagv1.LogLine {
		return logLine(n, d, strings.Replace(refused, "%s", t0.Add(d).Format("15:04:05.000000"), 1))
	}
	other := func(n int32, d time.Duration) *nodediagv1.LogLine {
		return logLine(n, d, `I0501 10:00:00.000000    1234 kubelet.go:2452] "SyncLoop (PLEG): event for pod"`)
	}
	tests := []struct {
		name  string
		lines []*nodediagv1.LogLine
		want  bool
	}{
		{"3 minutes is bootstrap", lines(3 * time.Minute), false},
		{"12 minutes persists", lines(12 * time.Minute), true},
		{"two blips three days apart are not an outage", []*nodediagv1.LogLine{at(1, 0), at(2, time.Second), at(3, 72*time.Hour), at(4, 72*time.Hour+time.Second)}, false},
		{"an outage of 15 minutes that ended hours ago is over", []*nodediagv1.LogLine{at(1, 0), at(2, 5*time.Minute), at(3, 10*time.Minute), at(4, 15*time.Minute), other(5, 3*time.Hour)}, false},
		{"an outage still going on at the end of the log", []*nodediagv1.LogLine{other(1, 0), at(2, 90*time.Minute), at(3, 96*time.Minute), at(4, 102*time.Minute)}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ev := logsEvidence(&nodediagv1.LogExcerpt{Source: "/var/log/kubelet.log", Kind: "kubelet", Lines: tt.lines})
			f := findingByID(analyze(t, ev, rules.Context{}), "APIServerUnreachable")
			if (f != nil) != tt.want {
				t.Fatalf("APIServerUnreachable found: %v, want %v", f != nil, tt.want)
			}
			if f != nil && f.Title != "the API server controlplane:6553 cannot be reached from the node" {
				t.Errorf("title %q", f.Title)
			}
		})
	}
}

// TestPersistInAShortWindow: in a window the operator made shorter than a
// transient's persist time (--since 8m), an error that fills the window
// persists in it; the same lines judged without --since are a bootstrap's.
func TestPersistInAShortWindow(t *testing.T) {
	var ls []*nodediagv1.LogLine
	for i := 0; i <= 16; i++ {
		ls = append(ls, logLine(int32(i+1), time.Duration(i)*30*time.Second, `E0410 03:19:34.348346   19807 kubelet_node_status.go:108] "Unable to register node with API server" err="Post \"https://controlplane:6553/api/v1/nodes\": dial tcp 192.168.227.136:6553: connect: connection refused" node="node01"`))
	}
	ev := logsEvidence(&nodediagv1.LogExcerpt{Source: "/var/log/kubelet.log", Kind: "kubelet", Lines: ls})
	now := t0.Add(8*time.Minute + time.Second)
	if f := findingByID(analyze(t, ev, rules.Context{Now: now}), "APIServerUnreachable"); f != nil {
		t.Errorf("8 minutes of errors without --since: %v, want nothing (a bootstrap transient)", f)
	}
	if f := findingByID(analyze(t, ev, rules.Context{Now: now, SinceAgo: 8 * time.Minute}), "APIServerUnreachable"); f == nil {
		t.Error("--since 8m, the errors throughout it: no finding")
	}
}

// TestSignatureWindow: lines before the window are ignored.
func TestSignatureWindow(t *testing.T) {
	flag := func(n int32, at time.Duration, f string) *nodediagv1.LogLine {
		return logLine(n, at, `E0501 10:00:00.000000    8691 run.go:72] "command failed" err="failed to parse kubelet flag: unknown flag: `+f+`"`)
	}
	ev := logsEvidence(&nodediagv1.LogExcerpt{Source: "/var/log/kubelet.log", Kind: "kubelet", Lines: []*nodediagv1.LogLine{
		flag(1, 0, "--old-boot-flag"),
		flag(2, time.Hour, "--network-plugin"),
	}})
	fs := analyze(t, ev, rules.Context{Since: t0.Add(30 * time.Minute)})
	f := findingByID(fs, "KubeletUnknownFlag")
	if f == nil {
		t.Fatalf("findings %v: want KubeletUnknownFlag", ids(fs))
	}
	if diff := cmp.Diff("kubelet refuses to start: unknown flag --network-plugin", f.Title); diff != "" {
		t.Errorf("title (-want +got):\n%s", diff)
	}
	if len(f.Evidence) != 1 || f.Evidence[0].Line != 2 {
		t.Errorf("evidence %v: want only line 2, the line before the window ignored", f.Evidence)
	}
	fs = analyze(t, ev, rules.Context{Since: t0.Add(90 * time.Minute)})
	if f := findingByID(fs, "KubeletUnknownFlag"); f != nil {
		t.Errorf("a finding from lines all before the window: %v", f)
	}
}

func ids(fs []*nodediagv1.Finding) []string {
	var out []string
	for _, f := range fs {
		out = append(out, f.Id)
	}
	return out
}

// TestBenignLinesClaimNothing: lines every healthy bootstrap writes (the
// research notes' known-benign list) prove nothing: no signature claims
// them, but a transient's (persist), which counts them only when they last.
func TestBenignLinesClaimNothing(t *testing.T) {
	sigs := loadShipped(t)
	tests := []struct{ kind, text string }{
		{"kubelet", `E0306 09:50:33.106476   45471 kubelet.go:1343] "Image garbage collection failed once. Stats initialization may not have completed yet" err="failed to get imageFs info: unable to find data in memory cache"`},
		{"kubelet", `E0124 13:32:15.718850   19151 run.go:72] "command failed" err="failed to load kubelet config file, path: /var/lib/kubelet/config.yaml, error: failed to load Kubelet config file /var/lib/kubelet/config.yaml, error failed to read kubelet config file \"/var/lib/kubelet/config.yaml\", error: open /var/lib/kubelet/config.yaml: no such file or directory"`},
		{"kubelet", `E0501 10:00:00.000000    1980 kubelet.go:2412] "Error getting node" err="node \"k8s-master-1\" not found"`},
		{"kubelet", `I0610 17:39:22.955481    1980 kubelet_node_status.go:73] "Attempting to register node" node="worker1"`},
		{"syslog", `May  1 10:00:00 node-1 systemd[1]: kubelet.service: Referenced but unset environment variable evaluates to an empty string: KUBELET_KUBEADM_ARGS`},
		{"containerd", `time="2024-05-01T10:00:00.000000000Z" level=warning msg="failed to load plugin io.containerd.snapshotter.v1.devmapper" error="devmapper not configured"`},
		{"containerd", `time="2024-05-01T10:00:00.000000000Z" level=info msg="trying next host - response was http.StatusNotFound" host=127.0.0.1:5000`},
		{"cloud-init-output", "\t[WARNING Swap]: swap is supported for cgroup v2 only. The kubelet must be properly configured to use swap. Please refer to https://kubernetes.io/docs/concepts/architecture/nodes/#swap-memory, or disable swap on the node"},
		{"cloud-init-output", "\t[WARNING SystemVerification]: cgroups v1 support is in maintenance mode, please migrate to cgroups v2"},
		{"cloud-init-output", `W0513 21:18:32.812024    6481 checks.go:835] detected that the sandbox image "registry.k8s.io/pause:3.6" of the container runtime is inconsistent with that used by kubeadm. It is recommended that using "registry.k8s.io/pause:3.9" as the CRI sandbox image.`},
		{"cloud-init-output", `[kubelet-check] Initial timeout of 40s passed.`},
		{"cloud-init-output", `[kubelet-check] The kubelet is healthy after 500.939992ms`},
		{"cloud-init-output", `[api-check] The API server is healthy after 3.00043501s`},
		{"cloud-init-output", `Your Kubernetes control-plane has initialized successfully!`},
		{"cloud-init-output", `Cloud-init v. 24.2-0ubuntu1~20.04.1 finished at Mon, 30 Sep 2024 04:34:00 +0000. Datasource DataSourceAzure [seed=/var/lib/waagent].  Up 31.94 seconds`},
		{"cloud-init", `2024-05-01 10:00:00,123 - cc_final_message.py[WARNING]: Used fallback datasource`},
	}
	for _, tt := range tests {
		if s := rules.Claim(sigs, tt.kind, tt.text); s != nil && s.Persist == "" {
			t.Errorf("%s/%s claims a benign %s line:\n\t%s", s.File(), s.ID, tt.kind, tt.text)
		}
	}
}

// A pull that fails once in the runtime's log and then succeeds is not a
// cause; the same failure for ten minutes to the end of the log is.
func TestRuntimePullFailureMustPersist(t *testing.T) {
	const notFound = `time="2024-05-01T10:00:00Z" level=error msg="PullImage \"registry.k8s.io/pause:3.10\" failed" error="rpc error: code = NotFound desc = failed to pull and unpack image \"registry.k8s.io/pause:3.10\": failed to resolve reference \"registry.k8s.io/pause:3.10\": registry.k8s.io/pause:3.10: not found"`
	once := logsEvidence(&nodediagv1.LogExcerpt{Source: "/var/log/containerd.log", Kind: "containerd", Lines: []*nodediagv1.LogLine{logLine(1, 0, notFound)}})
	if f := findingByID(analyze(t, once, rules.Context{}), "ImageNotFound"); f != nil {
		t.Errorf("one failed pull became a finding: %v", f)
	}
	var lines []*nodediagv1.LogLine
	for i := 0; i < 5; i++ {
		lines = append(lines, logLine(int32(i+1), time.Duration(i)*5*time.Minute, notFound))
	}
	lasting := logsEvidence(&nodediagv1.LogExcerpt{Source: "/var/log/containerd.log", Kind: "containerd", Lines: lines})
	if f := findingByID(analyze(t, lasting, rules.Context{}), "ImageNotFound"); f == nil {
		t.Error("a pull failing for 20 minutes is a finding")
	}
}

// kubeadm's preflight names every check that failed: the finding names and
// quotes them all, not the first three.
func TestPreflightNamesEveryCheck(t *testing.T) {
	src := &nodediagv1.LogExcerpt{Source: "/var/log/kubeadm-join.log", Kind: "kubeadm"}
	for i, l := range []string{
		"[preflight] Running pre-flight checks.",
		"\t[ERROR Port-10250]: Port 10250 is in use",
		"\t[ERROR DirAvailable--etc-kubernetes-manifests]: /etc/kubernetes/manifests is not empty",
		"\t[ERROR FileAvailable--etc-kubernetes-pki-ca.crt]: /etc/kubernetes/pki/ca.crt already exists",
		"\t[ERROR FileAvailable--etc-kubernetes-kubelet.conf]: /etc/kubernetes/kubelet.conf already exists",
		"[preflight] If you know what you are doing, you can make a check non-fatal with `--ignore-preflight-errors=...`",
	} {
		src.Lines = append(src.Lines, logLine(int32(i+1), 0, l))
	}
	f := findingByID(analyze(t, logsEvidence(src), rules.Context{}), "KubeadmPreflightFailed")
	if f == nil {
		t.Fatal("no KubeadmPreflightFailed")
	}
	for _, check := range []string{"Port-10250", "DirAvailable--etc-kubernetes-manifests", "FileAvailable--etc-kubernetes-pki-ca.crt", "FileAvailable--etc-kubernetes-kubelet.conf"} {
		if !strings.Contains(f.Title, check) {
			t.Errorf("title %q does not name %s", f.Title, check)
		}
		quoted := false
		for _, q := range f.Evidence {
			quoted = quoted || strings.Contains(q.Excerpt, "[ERROR "+check+"]")
		}
		if !quoted {
			t.Errorf("%s not quoted", check)
		}
	}
}

// A transient with until: a failed pull that did not last stands when no
// pull succeeded after it (kubeadm gave up), and is refuted by one that did.
func TestTransientUntilRefuted(t *testing.T) {
	failed := `time="2024-05-01T10:00:00Z" level=error msg="PullImage \"registry.k8s.io/kube-apiserver:v1.30.0\" failed" error="failed to pull and unpack image \"registry.k8s.io/kube-apiserver:v1.30.0\": failed to resolve reference \"registry.k8s.io/kube-apiserver:v1.30.0\": failed to do request: Head \"https://registry.k8s.io/v2/kube-apiserver/manifests/v1.30.0\": dial tcp 34.96.108.209:443: connect: connection timed out"`
	pulled := `time="2024-05-01T10:05:00Z" level=info msg="PullImage \"registry.k8s.io/kube-apiserver:v1.30.0\" returns image reference \"sha256:0123\""`
	other := `time="2024-05-01T11:50:00Z" level=info msg="loading plugin" id=io.containerd.grpc.v1.cri`
	src := func(lines ...*nodediagv1.LogLine) *nodediagv1.Evidence {
		return logsEvidence(&nodediagv1.LogExcerpt{Source: "journal:containerd.service", Kind: "containerd", Lines: lines, TotalLines: int64(len(lines))})
	}
	fs := analyze(t, src(logLine(1, 0, failed), logLine(2, time.Minute, failed), logLine(3, 110*time.Minute, other)), rules.Context{})
	if findingByID(fs, "RegistryUnreachable") == nil {
		t.Error("pulls that failed and were never retried with success: no RegistryUnreachable")
	}
	fs = analyze(t, src(logLine(1, 0, failed), logLine(2, 5*time.Minute, pulled), logLine(3, 110*time.Minute, other)), rules.Context{})
	if f := findingByID(fs, "RegistryUnreachable"); f != nil {
		t.Errorf("a pull that failed once and then succeeded: %s", f.Title)
	}
}
