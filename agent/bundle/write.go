package bundle

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"filippo.io/age"

	"github.com/nodediag/nodediag/agent/host"
	"github.com/nodediag/nodediag/agent/redact"
	"github.com/nodediag/nodediag/agent/report"
	nodediagv1 "github.com/nodediag/nodediag/proto/nodediag/v1"
)

// Options bound and shape a bundle.
type Options struct {
	// MaxFileBytes and MaxBytes: DefaultMaxFileBytes and DefaultMaxBytes
	// when zero.
	MaxFileBytes, MaxBytes int64
	// Recipients, when set, encrypt the bundle to these age recipients
	// ("age1..." X25519 public keys): only their identities open it.
	Recipients []age.Recipient
}

// supportFiles are copied when they exist, after the files the findings
// quote: the node's kubelet flags and configuration, the runtime's
// configuration and registry hosts, the bootstrap's own files and logs.
// A trailing "/*" copies the directory's regular files (not recursively).
var supportFiles = []string{
	"/etc/sysconfig/kubelet",
	"/etc/default/kubelet",
	"/var/lib/kubelet/kubeadm-flags.env",
	"/var/lib/kubelet/config.yaml",
	"/etc/systemd/system/kubelet.service.d/*",
	"/usr/lib/systemd/system/kubelet.service.d/*",
	"/etc/containerd/config.toml",
	"/etc/containerd/certs.d/*",
	"/etc/cni/net.d/*",
	"/etc/kubernetes/manifests/*",
	"/run/kubeadm/*",
	"/run/cluster-api/*",
	"/run/cloud-init/status.json",
	"/run/cloud-init/result.json",
	"/var/lib/cloud/data/status.json",
	"/var/lib/cloud/data/result.json",
	"/var/log/cloud-init-output.log",
	"/var/log/cloud-init.log",
	"/etc/os-release",
}

// withheld says why a host path is never copied, "" when it may be: files
// whose purpose is to hold keys and credentials. Redaction would blank
// their secrets, but a file that is nothing else is better left home.
func withheld(p string) string {
	base := path.Base(p)
	switch {
	case strings.HasPrefix(p, "/etc/kubernetes/pki/"), strings.HasPrefix(p, "/var/lib/kubelet/pki/"), strings.Contains(p, "/ssl/private/"):
		return "a certificate and key directory"
	case strings.HasSuffix(base, ".key"), strings.HasSuffix(base, ".pem"), strings.HasSuffix(base, ".p12"), strings.HasSuffix(base, ".pfx"):
		return "a key or certificate file"
	case strings.HasSuffix(base, ".conf") && path.Dir(p) == "/etc/kubernetes", strings.HasSuffix(base, "kubeconfig"), base == "config" && strings.HasSuffix(path.Dir(p), "/.kube"):
		return "a kubeconfig (its credentials); its server URL is in the report"
	case strings.HasPrefix(p, "/var/log/journal/"), strings.HasPrefix(p, "/run/log/journal/"):
		return "a binary journal file, which cannot be redacted line by line; its excerpts are in report.json"
	case strings.HasPrefix(p, "/var/lib/waagent/"), strings.HasPrefix(p, "/var/lib/cloud/instance/user-data"), strings.HasPrefix(p, "/var/lib/cloud/instances/"):
		return "cloud provisioning data (it carries the bootstrap secrets)"
	}
	return ""
}

// Write checks nothing: it writes the bundle of r (the agent's report with
// its Evidence, already redacted by report.Build) and of the files of h
// that support it to w. It returns the manifest written.
func Write(w io.Writer, h *host.Host, r *nodediagv1.Report, o Options) (*Manifest, error) {
	if r.GetEvidence() == nil {
		return nil, errors.New("bundle: the report has no evidence")
	}
	if o.MaxFileBytes <= 0 {
		o.MaxFileBytes = DefaultMaxFileBytes
	}
	if o.MaxBytes <= 0 {
		o.MaxBytes = DefaultMaxBytes
	}
	m := &Manifest{Format: Format, Node: r.GetHost().GetNodeName(), Hostname: r.GetHost().GetHostname(), Root: r.GetHost().GetRoot()}
	m.Agent.Version, m.Agent.Revision = r.GetAgent().GetVersion(), r.GetAgent().GetRevision()
	m.CollectedAt = r.GetEvidence().GetCollectedAt().AsTime().UTC().Truncate(time.Second)
	m.Limits.MaxFileBytes, m.Limits.MaxBytes = o.MaxFileBytes, o.MaxBytes
	m.Notes = []string{
		"report.json is the agent's report with its evidence; nodediag analyze judges the evidence again with its own rules.",
		"Journal files are not copied (binary, not redactable line by line): report.json holds their excerpts.",
	}
	for _, pe := range r.GetEvidence().GetProbes() {
		if pe.GetStatus() == "error" && pe.GetError() != "" {
			m.Unreadable = append(m.Unreadable, Problem{Source: "probe " + pe.GetName(), Reason: pe.GetError()})
		}
		for _, u := range pe.GetUnreadable() {
			m.Unreadable = append(m.Unreadable, Problem{Source: u.GetSource(), Reason: u.GetError()})
		}
	}

	rep, err := report.MarshalJSON(r)
	if err != nil {
		return nil, fmt.Errorf("bundle: encoding the report: %w", err)
	}
	members := []member{{Member: Member{Name: ReportName}, data: rep}}
	total := int64(len(rep))
	for _, src := range candidates(h, r) {
		if why := withheld(src); why != "" {
			m.Withheld = append(m.Withheld, Problem{Source: escapePath(src), Reason: why})
			continue
		}
		mb, skip, err := readMember(h, src, o.MaxFileBytes)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			m.Skipped = append(m.Skipped, Problem{Source: escapePath(src), Reason: "does not exist (a finding may quote its absence)"})
			continue
		case err != nil:
			m.Unreadable = append(m.Unreadable, Problem{Source: escapePath(src), Reason: err.Error()})
			continue
		case skip != "":
			m.Skipped = append(m.Skipped, Problem{Source: escapePath(src), Reason: skip})
			continue
		case total+int64(len(mb.data)) > o.MaxBytes:
			m.Skipped = append(m.Skipped, Problem{Source: escapePath(src), Reason: fmt.Sprintf("the bundle's size bound (%d bytes; --max-bytes)", o.MaxBytes)})
			continue
		}
		total += int64(len(mb.data))
		if len(mb.redacted) > 0 {
			m.Redacted = append(m.Redacted, Redaction{Member: mb.Name, Lines: mb.redacted})
		}
		members = append(members, mb)
	}
	sort.SliceStable(members[1:], func(i, j int) bool { return members[1+i].Name < members[1+j].Name })
	for i := range members {
		sum := sha256.Sum256(members[i].data)
		members[i].Size, members[i].SHA256 = int64(len(members[i].data)), hex.EncodeToString(sum[:])
		m.Members = append(m.Members, members[i].Member)
	}
	mj, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("bundle: encoding the manifest: %w", err)
	}
	if err := writeArchive(w, m.CollectedAt, append([]member{{Member: Member{Name: ManifestName}, data: append(mj, '\n')}}, members...), o.Recipients); err != nil {
		return nil, err
	}
	return m, nil
}

// member is a Member with its bytes and redacted lines.
type member struct {
	Member
	data     []byte
	redacted []int
}

// candidates are the host paths to copy: the files the findings quote, in
// the findings' order, then the support files; each once.
func candidates(h *host.Host, r *nodediagv1.Report) []string {
	var out []string
	seen := map[string]bool{}
	add := func(p string) {
		p = path.Clean(p)
		if !path.IsAbs(p) || seen[p] {
			return
		}
		seen[p] = true
		out = append(out, p)
	}
	for _, f := range r.GetFindings() {
		for _, q := range f.GetEvidence() {
			if strings.HasPrefix(q.GetSource(), "/") {
				add(q.GetSource())
			}
		}
	}
	for _, p := range supportFiles {
		dir, ok := strings.CutSuffix(p, "/*")
		if !ok {
			if fi, err := h.Stat(p); err == nil && fi.Mode().IsRegular() {
				add(p)
			}
			continue
		}
		ents, err := h.ReadDir(dir)
		if err != nil {
			continue
		}
		names := make([]string, 0, len(ents))
		for _, e := range ents {
			names = append(names, e.Name())
		}
		sort.Strings(names)
		for _, n := range names {
			sub := path.Join(dir, n)
			if fi, err := h.Stat(sub); err == nil && fi.Mode().IsRegular() {
				add(sub)
			} else if err == nil && fi.IsDir() && dir == "/etc/containerd/certs.d" {
				// certs.d/<registry>/hosts.toml
				if fi, err := h.Stat(path.Join(sub, "hosts.toml")); err == nil && fi.Mode().IsRegular() {
					add(path.Join(sub, "hosts.toml"))
				}
			}
		}
	}
	return out
}

// escapePath is a host path as a bundle names it: the bytes that are not
// UTF-8 as %XX, and "%" as %25, so that the manifest (JSON, UTF-8 only)
// and the tar name the member alike and no two paths meet.
func escapePath(p string) string {
	if utf8.ValidString(p) && !strings.Contains(p, "%") {
		return p
	}
	var b strings.Builder
	for i := 0; i < len(p); {
		r, n := utf8.DecodeRuneInString(p[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, "%%%02X", p[i])
		case r == '%':
			b.WriteString("%25")
		default:
			b.WriteString(p[i : i+n])
		}
		i += n
	}
	return b.String()
}

// readMember reads one host file for the bundle: its tail when larger than
// max, refused when binary, redacted line by line.
func readMember(h *host.Host, src string, max int64) (member, string, error) {
	first, last, size, skipped, err := h.ReadHeadTail(src, 0, max)
	if err != nil {
		return member{}, "", err
	}
	data := append(first, last...)
	esc := escapePath(src)
	mb := member{Member: Member{Name: FilesDir + strings.TrimPrefix(esc, "/"), Source: esc}}
	if skipped > 0 {
		mb.Truncated, mb.SourceSize = true, size
		// Start at a line: the cut is in the middle of one.
		if i := bytes.IndexByte(data, '\n'); i >= 0 && i+1 < len(data) {
			data = data[i+1:]
		}
	}
	if bytes.IndexByte(data, 0) >= 0 || !utf8.Valid(data) && !mostlyText(data) {
		return member{}, "binary content, not redactable line by line", nil
	}
	mb.data, mb.redacted = redactLines(data)
	return mb, "", nil
}

// mostlyText: a text file with a few invalid bytes (a log with a torn
// write) is still text; invalid sequences become U+FFFD.
func mostlyText(b []byte) bool {
	bad := 0
	for len(b) > 0 {
		r, n := utf8.DecodeRune(b)
		if r == utf8.RuneError && n == 1 {
			bad++
		}
		b = b[n:]
	}
	return bad < 16
}

// redactLines redacts data line by line (private key blocks as a whole) and
// returns the 1-based numbers of the lines it changed.
func redactLines(data []byte) ([]byte, []int) {
	lines := strings.SplitAfter(strings.ToValidUTF8(string(data), "\uFFFD"), "\n")
	var kb redact.KeyBlock
	var changed []int
	var out strings.Builder
	out.Grow(len(data))
	for i, l := range lines {
		body, nl := strings.CutSuffix(l, "\n")
		r := redact.String(kb.Line(body))
		if r != body {
			changed = append(changed, i+1)
		}
		out.WriteString(r)
		if nl {
			out.WriteByte('\n')
		}
	}
	return []byte(out.String()), changed
}

// writeArchive writes the members as a gzip'd tar, encrypted when
// recipients are given. Headers are fixed but for name, size and time.
func writeArchive(w io.Writer, at time.Time, members []member, recipients []age.Recipient) (err error) {
	dst := w
	var enc io.WriteCloser
	if len(recipients) > 0 {
		if enc, err = age.Encrypt(w, recipients...); err != nil {
			return fmt.Errorf("bundle: encrypting: %w", err)
		}
		dst = enc
	}
	zw := gzip.NewWriter(dst)
	tw := tar.NewWriter(zw)
	for _, mb := range members {
		hdr := &tar.Header{Typeflag: tar.TypeReg, Name: mb.Name, Size: int64(len(mb.data)), Mode: 0o644, ModTime: at, Format: tar.FormatPAX}
		if err := tw.WriteHeader(hdr); err != nil {
			return fmt.Errorf("bundle: %s: %w", mb.Name, err)
		}
		if _, err := tw.Write(mb.data); err != nil {
			return fmt.Errorf("bundle: %s: %w", mb.Name, err)
		}
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("bundle: %w", err)
	}
	if err := zw.Close(); err != nil {
		return fmt.Errorf("bundle: %w", err)
	}
	if enc != nil {
		if err := enc.Close(); err != nil {
			return fmt.Errorf("bundle: encrypting: %w", err)
		}
	}
	return nil
}
