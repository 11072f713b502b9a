package bundle

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"filippo.io/age"

	"github.com/nodediag/nodediag/agent/host"
	"github.com/nodediag/nodediag/agent/host/hosttest"
	"github.com/nodediag/nodediag/agent/probe"
	"github.com/nodediag/nodediag/agent/probes"
	"github.com/nodediag/nodediag/agent/redact"
	"github.com/nodediag/nodediag/agent/report"
	"github.com/nodediag/nodediag/agent/rules"
	nodediagv1 "github.com/nodediag/nodediag/proto/nodediag/v1"
)

// Secrets planted in the test host: none may appear in a bundle.
const (
	plantedToken    = "abcdef.0123456789abcdef"
	plantedPassword = "s3cr3t-Passw0rd"
	plantedKeyLine  = "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7VJTUt9Us8cKj"
)

// secretHost is a node that failed its join, whose files carry secrets: a
// join configuration with a bootstrap token, a containerd registry
// password, a private key beside the kubelet's files, a kubeconfig, and a
// long log.
func secretHost(t *testing.T) *host.Host {
	t.Helper()
	var log strings.Builder
	for i := range 3000 {
		log.WriteString("[2024-05-01 11:50:00] line " + strings.Repeat("x", 40) + " " + string(rune('a'+i%26)) + "\n")
	}
	log.WriteString("[preflight] Running pre-flight checks\nerror execution phase preflight: couldn't validate the identity of the API Server: invalid bootstrap token " + plantedToken + "\n")
	h := hosttest.Tree(t, map[string]string{
		"etc/os-release":                                "PRETTY_NAME=\"Ubuntu 24.04 LTS\"\nID=ubuntu\n",
		"etc/hostname":                                  "node-a\n",
		"etc/sysconfig/kubelet":                         "KUBELET_EXTRA_ARGS=--node-labels=x=y\n",
		"run/kubeadm/kubeadm-join-config.yaml":          "apiVersion: kubeadm.k8s.io/v1beta4\nkind: JoinConfiguration\ndiscovery:\n  bootstrapToken:\n    apiServerEndpoint: cp.example:6443\n    token: " + plantedToken + "\n",
		"etc/containerd/config.toml":                    "version = 2\n[plugins.\"io.containerd.grpc.v1.cri\".registry.configs.\"reg.example\".auth]\n  username = \"pull\"\n  password = \"" + plantedPassword + "\"\n",
		"etc/containerd/certs.d/reg.example/hosts.toml": "server = \"https://reg.example\"\n",
		"etc/kubernetes/pki/ca.key":                     "-----BEGIN PRIVATE KEY-----\n" + plantedKeyLine + "\n-----END PRIVATE KEY-----\n",
		"etc/kubernetes/kubelet.conf":                   "apiVersion: v1\nkind: Config\nusers:\n- user:\n    token: " + plantedToken + "\n",
		"etc/kubernetes/manifests/inline-key.yaml":      "# -----BEGIN RSA PRIVATE KEY-----\n# " + plantedKeyLine + "\n# -----END RSA PRIVATE KEY-----\n",
		"var/log/cloud-init-output.log":                 log.String(),
		"var/lib/kubelet/config.yaml":                   "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n",
		"run/cluster-api/escape":                        "->/../../../../../../etc/passwd",
	})
	return h
}

// checkHost is the agent's check of h (no binaries run, no network).
func checkHost(t testing.TB, h *host.Host) *nodediagv1.Report {
	t.Helper()
	h.Exec = host.NoExec{}
	h.Net = host.NoNetwork{}
	e, err := rules.NewEngine()
	if err != nil {
		t.Fatal(err)
	}
	ev := probe.RunAll(context.Background(), h, probes.All())
	return report.Build(ev, e.Analyze(ev, rules.Context{}), "node-a")
}

func write(t testing.TB, h *host.Host, r *nodediagv1.Report, o Options) ([]byte, *Manifest) {
	t.Helper()
	var buf bytes.Buffer
	m, err := Write(&buf, h, r, o)
	if err != nil {
		t.Fatal(err)
	}
	return buf.Bytes(), m
}

func members(t *testing.T, b []byte) []string {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	var names []string
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return names
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, hdr.Name)
	}
}

func TestWriteRead(t *testing.T) {
	h := secretHost(t)
	r := checkHost(t, h)
	// A finding quoting a key file and a kubeconfig: both withheld.
	r.Findings = append(r.Findings, &nodediagv1.Finding{Id: "Planted", Evidence: []*nodediagv1.Quote{
		{Source: "/etc/kubernetes/pki/ca.key", Excerpt: "x"}, {Source: "/etc/kubernetes/kubelet.conf", Excerpt: "x"},
	}})
	b, m := write(t, h, r, Options{MaxFileBytes: 32 << 10})
	if len(m.Withheld) != 2 || m.Withheld[0].Source != "/etc/kubernetes/pki/ca.key" || !strings.Contains(m.Withheld[1].Reason, "kubeconfig") {
		t.Errorf("withheld %+v, want the key and the kubeconfig", m.Withheld)
	}

	// Nothing secret leaves, in any member, compressed or not.
	raw := allBytes(t, b)
	for _, s := range []string{plantedPassword, "0123456789abcdef", plantedKeyLine} {
		if bytes.Contains(raw, []byte(s)) {
			t.Errorf("the bundle carries the secret %q", s)
		}
	}
	if !bytes.Contains(raw, []byte(redact.Mark)) {
		t.Errorf("nothing marked as redacted")
	}

	names := members(t, b)
	if names[0] != ManifestName || names[1] != ReportName {
		t.Fatalf("members start %v, want manifest then report", names[:2])
	}
	if !slices.IsSorted(names[2:]) {
		t.Errorf("files not in sorted order: %v", names[2:])
	}
	for _, want := range []string{"files/run/kubeadm/kubeadm-join-config.yaml", "files/etc/containerd/config.toml", "files/etc/containerd/certs.d/reg.example/hosts.toml", "files/var/log/cloud-init-output.log", "files/etc/sysconfig/kubelet"} {
		if !slices.Contains(names, want) {
			t.Errorf("no member %s in %v", want, names)
		}
	}
	for _, never := range []string{"files/etc/kubernetes/pki/ca.key", "files/etc/kubernetes/kubelet.conf", "files/etc/passwd", "files/run/cluster-api/escape"} {
		if slices.Contains(names, never) {
			t.Errorf("member %s must not be in the bundle", never)
		}
	}

	// The manifest says what was redacted, withheld, truncated.
	if !hasRedaction(m, "files/run/kubeadm/kubeadm-join-config.yaml", 6) || !hasRedaction(m, "files/etc/containerd/config.toml", 4) {
		t.Errorf("redactions %+v, want the token's and the password's lines", m.Redacted)
	}
	var log *Member
	for i := range m.Members {
		if m.Members[i].Name == "files/var/log/cloud-init-output.log" {
			log = &m.Members[i]
		}
	}
	if log == nil || !log.Truncated || log.Size > 32<<10 || log.SourceSize <= log.Size {
		t.Errorf("the long log %+v, want its tail within 32 KiB", log)
	}

	got, err := Read(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Problems) > 0 {
		t.Errorf("problems reading a sound bundle: %v", got.Problems)
	}
	if ids(got.Report) != ids(r) {
		t.Errorf("findings read back %q, want %q", ids(got.Report), ids(r))
	}
	tail := string(got.Files["/var/log/cloud-init-output.log"])
	if !strings.Contains(tail, "couldn't validate the identity of the API Server") || strings.Contains(tail, plantedToken) {
		t.Errorf("the log's tail lost its last line or kept the token: %.200q", tail[max(0, len(tail)-200):])
	}
	if !strings.HasPrefix(tail, "[2024-05-01") {
		t.Errorf("the log's tail does not start at a line: %.60q", tail)
	}

	// The same report and host give the same bytes.
	again, _ := write(t, h, r, Options{MaxFileBytes: 32 << 10})
	if !bytes.Equal(b, again) {
		t.Errorf("two bundles of the same report differ")
	}
}

func hasRedaction(m *Manifest, member string, line int) bool {
	for _, r := range m.Redacted {
		if r.Member == member && slices.Contains(r.Lines, line) {
			return true
		}
	}
	return false
}

func ids(r *nodediagv1.Report) string {
	var out []string
	for _, f := range r.GetFindings() {
		out = append(out, f.GetId())
	}
	return strings.Join(out, ",")
}

// allBytes is the bundle decompressed.
func allBytes(t *testing.T, b []byte) []byte {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

func TestMaxBytesSkipsFilesNotTheReport(t *testing.T) {
	h := secretHost(t)
	r := checkHost(t, h)
	_, m := write(t, h, r, Options{MaxBytes: 1})
	if len(m.Members) != 1 || m.Members[0].Name != ReportName {
		t.Fatalf("members %+v, want only the report", m.Members)
	}
	if len(m.Skipped) == 0 || !strings.Contains(m.Skipped[0].Reason, "size bound") {
		t.Errorf("skipped %+v, want the files named with the bound", m.Skipped)
	}
}

func TestEncrypted(t *testing.T) {
	h := secretHost(t)
	r := checkHost(t, h)
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := write(t, h, r, Options{Recipients: []age.Recipient{id.Recipient()}})
	if _, err := Read(bytes.NewReader(b)); !errors.Is(err, ErrNeedIdentity) {
		t.Errorf("read without identity: %v, want ErrNeedIdentity", err)
	}
	other, _ := age.GenerateX25519Identity()
	if _, err := Read(bytes.NewReader(b), other); !errors.Is(err, ErrNeedIdentity) {
		t.Errorf("read with another identity: %v, want ErrNeedIdentity", err)
	}
	got, err := Read(bytes.NewReader(b), id)
	if err != nil || ids(got.Report) != ids(r) {
		t.Fatalf("read with the identity: %v, findings %q", err, ids(got.Report))
	}
}

// rawBundle writes members as given (name → content; a name ending in "@"
// is a symlink to the content) without a manifest check.
func rawBundle(t *testing.T, ms [][2]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, m := range ms {
		name, body := m[0], m[1]
		if n, ok := strings.CutSuffix(name, "@"); ok {
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: n, Linkname: body}); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Size: int64(len(body)), Mode: 0o644}); err != nil {
			t.Fatal(err)
		}
		tw.Write([]byte(body))
	}
	tw.Close()
	zw.Close()
	return buf.Bytes()
}

func TestReadBadInput(t *testing.T) {
	h := secretHost(t)
	r := checkHost(t, h)
	good, _ := write(t, h, r, Options{})
	rep, _ := report.MarshalJSON(r)
	newer, _ := json.Marshal(map[string]any{"format": "nodediag-bundle/v9", "agent": map[string]any{"version": "v9.0.0"}, "members": []any{}, "future_field": true})

	for _, tc := range []struct {
		name    string
		in      []byte
		err     error  // wanted error, nil: the report is read
		problem string // in Problems
	}{
		{"garbage", []byte("this is not a bundle at all"), ErrNotBundle, ""},
		{"empty", nil, ErrNotBundle, ""},
		{"truncated after the report", good[:len(good)*2/3], nil, "cut short"},
		{"truncated in the manifest", good[:40], ErrNotBundle, ""},
		{"newer format", rawBundle(t, [][2]string{{ManifestName, string(newer)}, {ReportName, string(rep)}}), nil, `"nodediag-bundle/v9"`},
		{"symlink member", rawBundle(t, [][2]string{{ReportName, string(rep)}, {"files/etc/shadow@", "/etc/shadow"}}), nil, "symbolic link"},
		{"escaping name", rawBundle(t, [][2]string{{ReportName, string(rep)}, {"../../etc/cron.d/x", "boom"}}), nil, "leaves the bundle"},
		{"no report", rawBundle(t, [][2]string{{"files/etc/os-release", "ID=x\n"}}), ErrNotBundle, ""},
		{"report not JSON", rawBundle(t, [][2]string{{ReportName, "\x00\x01garbage"}}), nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := Read(bytes.NewReader(tc.in))
			switch {
			case tc.err != nil:
				if !errors.Is(err, tc.err) {
					t.Fatalf("error %v, want %v", err, tc.err)
				}
				return
			case tc.name == "report not JSON":
				if err == nil || !strings.Contains(err.Error(), "does not decode") {
					t.Fatalf("error %v, want the report not decoding", err)
				}
				return
			case err != nil:
				t.Fatalf("error %v, want the report read", err)
			}
			if b.Report == nil || ids(b.Report) != ids(r) {
				t.Errorf("report %q, want %q", ids(b.Report), ids(r))
			}
			if !strings.Contains(strings.Join(b.Problems, "\n"), tc.problem) {
				t.Errorf("problems %q, want one saying %q", b.Problems, tc.problem)
			}
			if _, ok := b.Files["/etc/shadow"]; ok {
				t.Errorf("a symlink member was read as a file")
			}
		})
	}

	// A member changed after collection fails its hash.
	tampered := rawFromBundle(t, good, func(name string, body []byte) []byte {
		if name == "files/etc/sysconfig/kubelet" {
			return []byte("KUBELET_EXTRA_ARGS=--changed\n")
		}
		return body
	})
	b, err := Read(bytes.NewReader(tampered))
	if err != nil || !strings.Contains(strings.Join(b.Problems, "\n"), "files/etc/sysconfig/kubelet does not match") {
		t.Errorf("tampered member: %v, problems %q", err, b.Problems)
	}
}

// rawFromBundle rewrites a bundle's members through f (the manifest kept).
func rawFromBundle(t *testing.T, b []byte, f func(string, []byte) []byte) []byte {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	var ms [][2]string
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(tr)
		ms = append(ms, [2]string{hdr.Name, string(f(hdr.Name, body))})
	}
	return rawBundle(t, ms)
}

// A root whose files are unreadable: the bundle says so and holds the rest.
func TestUnreadableFileListed(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root reads every file")
	}
	h := secretHost(t)
	p := filepath.Join(h.Root, "etc/sysconfig/kubelet")
	if err := os.Chmod(p, 0); err != nil {
		t.Fatal(err)
	}
	r := checkHost(t, h)
	r.Findings = append(r.Findings, &nodediagv1.Finding{Id: "X", Evidence: []*nodediagv1.Quote{{Source: "/etc/sysconfig/kubelet"}}})
	_, m := write(t, h, r, Options{})
	found := false
	for _, u := range m.Unreadable {
		found = found || u.Source == "/etc/sysconfig/kubelet"
	}
	if !found {
		t.Errorf("unreadable %+v, want /etc/sysconfig/kubelet", m.Unreadable)
	}
	if len(m.Members) < 3 {
		t.Errorf("members %+v: the rest is missing", m.Members)
	}
}

func FuzzRead(f *testing.F) {
	f.Add([]byte{0x1f, 0x8b, 0x08, 0x00})
	f.Add([]byte("age-encryption.org/v1\n"))
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: ReportName, Size: 2})
	tw.Write([]byte("{}"))
	tw.Close()
	zw.Close()
	f.Add(buf.Bytes())
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := Read(bytes.NewReader(b))
		if err == nil && got.Report == nil {
			t.Fatal("no error and no report")
		}
	})
}

// A hostile bundle is read within budgets and says what it left: members
// past the kept budget are ignored, a stream that decompresses past its
// budget (a gzip bomb) stops there, and the report read before either is
// still judged.
func TestReadBudgets(t *testing.T) {
	h := secretHost(t)
	r := checkHost(t, h)
	rep, _ := report.MarshalJSON(r)
	zeros := string(make([]byte, 60<<20))
	// Three members of 60 MiB of zeros: the third would pass the 128 MiB
	// kept budget.
	big := rawBundle(t, [][2]string{{ReportName, string(rep)}, {"files/var/log/a", zeros}, {"files/var/log/b", zeros}, {"files/var/log/c", zeros}})
	b, err := Read(bytes.NewReader(big))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := b.Files["/var/log/c"]; ok || len(b.Files["/var/log/a"]) != 60<<20 {
		t.Errorf("files %d/%d/%d bytes, want a and b read, c ignored", len(b.Files["/var/log/a"]), len(b.Files["/var/log/b"]), len(b.Files["/var/log/c"]))
	}
	if !strings.Contains(strings.Join(b.Problems, "\n"), `member "files/var/log/c" ignored: with it the members read would pass`) {
		t.Errorf("problems %q, want the third member named", b.Problems)
	}
	// The same bundle under a stream budget of 100 MiB: reading stops in
	// the second member; the report read first is judged.
	defer func(v int64) { streamBudget = v }(streamBudget)
	streamBudget = 100 << 20
	b, err = Read(bytes.NewReader(big))
	if err != nil || b.Report == nil || ids(b.Report) != ids(r) {
		t.Fatalf("report not read (%v), want it read", err)
	}
	if !strings.Contains(strings.Join(b.Problems, "\n"), "the reading budget") {
		t.Errorf("problems %q, want the stream budget said", b.Problems)
	}
}

// A member over MaxMemberBytes is ignored whole and said, and a tar of more
// than MaxMembers members stops there; the report read first is judged.
func TestReadMemberLimits(t *testing.T) {
	h := secretHost(t)
	r := checkHost(t, h)
	rep, _ := report.MarshalJSON(r)
	huge := rawBundle(t, [][2]string{{ReportName, string(rep)}, {"files/var/log/huge", string(make([]byte, MaxMemberBytes+1))}, {"files/var/log/after", "kept\n"}})
	b, err := Read(bytes.NewReader(huge))
	if err != nil || b.Report == nil || ids(b.Report) != ids(r) {
		t.Fatalf("report not read (%v), want it read", err)
	}
	if _, ok := b.Files["/var/log/huge"]; ok || string(b.Files["/var/log/after"]) != "kept\n" {
		t.Errorf("files huge %d bytes, after %q: want huge ignored, the member after it read", len(b.Files["/var/log/huge"]), b.Files["/var/log/after"])
	}
	if want := fmt.Sprintf(`member "files/var/log/huge" ignored: %d bytes, more than %d`, MaxMemberBytes+1, MaxMemberBytes); !strings.Contains(strings.Join(b.Problems, "\n"), want) {
		t.Errorf("problems %q, want %q", b.Problems, want)
	}

	ms := [][2]string{{ReportName, string(rep)}}
	for i := range MaxMembers + 10 {
		ms = append(ms, [2]string{fmt.Sprintf("files/var/log/m%06d", i), ""})
	}
	b, err = Read(bytes.NewReader(rawBundle(t, ms)))
	if err != nil || b.Report == nil {
		t.Fatalf("report not read (%v), want it read", err)
	}
	if want := fmt.Sprintf("reading stopped: more than %d members", MaxMembers); !strings.Contains(strings.Join(b.Problems, "\n"), want) {
		t.Errorf("problems %q, want %q", b.Problems, want)
	}
	if len(b.Files) > MaxMembers {
		t.Errorf("%d files kept, want at most %d", len(b.Files), MaxMembers)
	}
}

// A host file whose name is not UTF-8 is named alike in the manifest (JSON,
// UTF-8 only) and in the tar: the agent's own bundle reads back whole.
func TestNonUTF8NamesRoundTrip(t *testing.T) {
	h := secretHost(t)
	odd := "etc/kubernetes/manifests/etcd-\xff\xfe%.yaml"
	if err := os.WriteFile(filepath.Join(h.Root, odd), []byte("apiVersion: v1\nkind: Pod\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := checkHost(t, h)
	bb, m := write(t, h, r, Options{})
	var listed bool
	for _, mb := range m.Members {
		listed = listed || mb.Source == "/etc/kubernetes/manifests/etcd-%FF%FE%25.yaml"
	}
	if !listed {
		t.Fatalf("manifest members %v, want the file named with its bytes escaped", m.Members)
	}
	b, err := Read(bytes.NewReader(bb))
	if err != nil {
		t.Fatal(err)
	}
	if len(b.Problems) != 0 {
		t.Errorf("the agent's own bundle has problems: %q", b.Problems)
	}
	if string(b.Files["/etc/kubernetes/manifests/etcd-%FF%FE%25.yaml"]) != "apiVersion: v1\nkind: Pod\n" {
		t.Errorf("files %v, want the escaped name's content", keys(b.Files))
	}
}

func keys(m map[string][]byte) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
