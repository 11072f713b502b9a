// Package corpus reads the real-failure corpus (agent/testdata/real): cases
// of real node failures taken from public sources, each with its sources
// (URL and verbatim quote), what was adapted and reconstructed, the node it
// happened on, and the expectation an expert wrote from the source before the
// agent was run on it. Build turns a case into a host root the way the
// example hosts are made (internal/hostgen), with its journal lines written
// as real journal files by systemd-journal-remote.
//
// The package only reads cases and builds roots; scoring the agent on them
// is agent/check's corpus test.
package corpus

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// A Case is one file of the corpus.
type Case struct {
	// Name is the file's name without .yaml.
	Name string `yaml:"-"`
	// Path is the file the case was read from.
	Path string `yaml:"-"`

	Title         string   `yaml:"title"`
	Sources       []Source `yaml:"sources"`
	Adapted       []string `yaml:"adapted,omitempty"`
	Reconstructed []string `yaml:"reconstructed,omitempty"`
	// Errata say what was corrected in the case after it was written, and
	// why (a misread source), with the date.
	Errata  []string          `yaml:"errata,omitempty"`
	Node    Node              `yaml:"node"`
	Journal []string          `yaml:"journal,omitempty"`
	Files   map[string]string `yaml:"files,omitempty"`
	Remove  []string          `yaml:"remove,omitempty"`
	Expect  Expect            `yaml:"expect"`
}

// A Source is where the failure was found.
type Source struct {
	URL   string `yaml:"url"`
	Quote string `yaml:"quote"`
}

// Node describes the node the failure happened on.
type Node struct {
	OS       string `yaml:"os"`
	Hostname string `yaml:"hostname"`
	// Role is control-plane, worker or none (no Kubernetes at all).
	Role string `yaml:"role"`
	// CAPI: bootstrapped by Cluster API (cloud-init, /run/kubeadm).
	CAPI bool `yaml:"capi"`
	// Bootstrap is cloud-init's state: done, failed, running or none.
	Bootstrap string `yaml:"bootstrap,omitempty"`
	// Joined: kubeadm init/join wrote its files. Default: true but for
	// role none.
	Joined *bool `yaml:"joined,omitempty"`
	// CNI: calico's configuration and plugins are installed. Default:
	// Joined.
	CNI      *bool             `yaml:"cni,omitempty"`
	Versions map[string]string `yaml:"versions,omitempty"`
	// Paths are where binaries are installed when not at the packages'
	// place (kubelet: /usr/local/bin/kubelet): the version answer moves
	// with the binary.
	Paths               map[string]string `yaml:"paths,omitempty"`
	ControlPlaneVersion string            `yaml:"control_plane_version,omitempty"`
	CgroupDriver        string            `yaml:"cgroup_driver,omitempty"`
	ExpectVersion       string            `yaml:"expect_version,omitempty"`
	// ClientCertsRotated are the times the kubelet rotated its client
	// certificate: each writes kubelet-client-<time>.pem valid for a year,
	// kubelet-client-current.pem points to the last, and the older files
	// stay, as the kubelet leaves them.
	ClientCertsRotated []time.Time `yaml:"client_certs_rotated,omitempty"`
	// Endpoint is the control plane endpoint (host:port).
	Endpoint string    `yaml:"endpoint,omitempty"`
	Boot     time.Time `yaml:"boot"`
	Now      time.Time `yaml:"now"`
}

// Expect is the verdict an expert names from the source.
type Expect struct {
	// Category of the first finding; "none" for a healthy node.
	Category string `yaml:"category"`
	// Evidence is a substring of the first finding's quoted evidence.
	Evidence string `yaml:"evidence"`
	// PointsTo is a source of the first finding's evidence: a host path
	// or journal:UNIT.
	PointsTo string `yaml:"points_to"`
	// Verdict, for a negative, is what the report must say of the root as
	// a whole ("not-a-kubernetes-node").
	Verdict string `yaml:"verdict,omitempty"`
}

// None is the expected category of a healthy node.
const None = "none"

// Roles of Node.Role.
const (
	RoleControlPlane = "control-plane"
	RoleWorker       = "worker"
	RoleNone         = "none"
)

// Verdicts a negative may expect.
const VerdictNotANode = "not-a-kubernetes-node"

// Negative says whether the case is of a node where nothing is wrong.
func (c *Case) Negative() bool { return c.Expect.Category == None }

// Load reads every *.yaml of dir, sorted by name. A file that cannot be read
// or parsed is an error naming it; the others are still returned.
func Load(dir string) ([]*Case, error) {
	names, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	var out []*Case
	var errs []error
	for _, p := range names {
		c, err := LoadFile(p)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, c)
	}
	return out, errors.Join(errs...)
}

// LoadFile reads one case. Unknown fields are errors: a misspelt field
// would otherwise silently change the node.
func LoadFile(path string) (*Case, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	c, err := parse(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	c.Path = path
	c.Name = strings.TrimSuffix(filepath.Base(path), ".yaml")
	return c, nil
}

func parse(b []byte) (*Case, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return nil, err
	}
	if len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, errors.New("not a YAML mapping")
	}
	if err := fixJournal(doc.Content[0], strings.Split(string(b), "\n")); err != nil {
		return nil, err
	}
	fixed, err := yaml.Marshal(&doc)
	if err != nil {
		return nil, err
	}
	dec := yaml.NewDecoder(bytes.NewReader(fixed))
	dec.KnownFields(true)
	c := &Case{}
	if err := dec.Decode(c); err != nil {
		return nil, err
	}
	return c, nil
}

// fixJournal makes the journal a list of strings. It may be written as one
// block of lines (continuation lines of a message indented), or as a list;
// a list item written without quotes whose only ": " is the one after
// IDENT[PID] is a one-key mapping to YAML, and is taken back as the line
// of the file that it is.
func fixJournal(m *yaml.Node, src []string) error {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value != "journal" {
			continue
		}
		v := m.Content[i+1]
		var lines []string
		switch v.Kind {
		case yaml.ScalarNode:
			lines = splitJournalBlock(v.Value)
		case yaml.SequenceNode:
			for _, it := range v.Content {
				switch it.Kind {
				case yaml.ScalarNode:
					lines = append(lines, it.Value)
				case yaml.MappingNode:
					if it.Line < 1 || it.Line > len(src) || len(it.Content) != 2 {
						return fmt.Errorf("journal line at line %d: quote it", it.Line)
					}
					raw := strings.TrimSpace(src[it.Line-1])
					raw = strings.TrimSpace(strings.TrimPrefix(raw, "-"))
					lines = append(lines, raw)
				default:
					return fmt.Errorf("journal item at line %d: want a line", it.Line)
				}
			}
		default:
			return fmt.Errorf("journal at line %d: want a block of lines or a list", v.Line)
		}
		seq := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq"}
		for _, l := range lines {
			seq.Content = append(seq.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: l, Style: yaml.DoubleQuotedStyle})
		}
		m.Content[i+1] = seq
	}
	return nil
}

// splitJournalBlock splits a block of journal lines: a line that starts with
// white space continues the message above it.
func splitJournalBlock(s string) []string {
	var out []string
	for _, l := range strings.Split(strings.TrimRight(s, "\n"), "\n") {
		if len(out) > 0 && l != "" && (l[0] == ' ' || l[0] == '\t') {
			out[len(out)-1] += "\n" + strings.TrimLeft(l, " \t")
			continue
		}
		if strings.TrimSpace(l) == "" {
			continue
		}
		out = append(out, l)
	}
	return out
}

var (
	nameShape = regexp.MustCompile(`^[a-z0-9]+(?:[-.][a-z0-9]+)*$`)
	urlShape  = regexp.MustCompile(`^https?://[^\s/]+\.[^\s/]+/\S*$`)
)

// Validate checks what can be checked without building the node: the
// sources, the expectation's shape, the node's fields, the journal's lines.
// categories are the known categories besides None.
func (c *Case) Validate(categories []string) error {
	var errs []string
	bad := func(format string, a ...any) { errs = append(errs, fmt.Sprintf(format, a...)) }
	if !nameShape.MatchString(c.Name) {
		bad("file name %q is not lower-case kebab", c.Name)
	}
	if strings.TrimSpace(c.Title) == "" {
		bad("no title")
	}
	if len(c.Sources) == 0 {
		bad("no sources: a case is a real failure from a public source")
	}
	for i, s := range c.Sources {
		if !urlShape.MatchString(s.URL) {
			bad("source %d: %q is not a URL", i+1, s.URL)
		}
		if strings.TrimSpace(s.Quote) == "" {
			bad("source %d: no verbatim quote", i+1)
		}
	}
	known := map[string]bool{None: true}
	for _, k := range categories {
		known[k] = true
	}
	e := c.Expect
	if !known[e.Category] {
		bad("expect.category %q is not a category of docs/CONTRACTS.md", e.Category)
	}
	if c.Negative() {
		if e.Evidence != "" || e.PointsTo != "" {
			bad("a negative expects no evidence and points nowhere")
		}
		switch e.Verdict {
		case "", VerdictNotANode:
		default:
			bad("expect.verdict %q: want %q or nothing", e.Verdict, VerdictNotANode)
		}
	} else {
		if strings.TrimSpace(e.Evidence) == "" {
			bad("expect.evidence is empty")
		}
		if !strings.HasPrefix(e.PointsTo, "/") && !strings.HasPrefix(e.PointsTo, "journal:") {
			bad("expect.points_to %q: want a host path or journal:UNIT", e.PointsTo)
		}
		if e.Verdict != "" {
			bad("expect.verdict is for negatives")
		}
	}
	n := c.Node
	switch n.Role {
	case RoleControlPlane, RoleWorker, RoleNone:
	default:
		bad("node.role %q: want control-plane, worker or none", n.Role)
	}
	switch n.Bootstrap {
	case "", "done", "failed", "running", "none":
	default:
		bad("node.bootstrap %q: want done, failed, running or none", n.Bootstrap)
	}
	if _, ok := osNames[n.OS]; !ok {
		bad("node.os %q: want one of %s", n.OS, strings.Join(sortedKeys(osNames), ", "))
	}
	for k := range n.Versions {
		if _, ok := binaries[k]; !ok {
			bad("node.versions.%s: want one of %s", k, strings.Join(sortedKeys(binaries), ", "))
		}
	}
	for k, p := range n.Paths {
		if _, ok := n.Versions[k]; !ok {
			bad("node.paths.%s: no version of %s", k, k)
		}
		if !strings.HasPrefix(p, "/") || strings.Contains(p, "..") {
			bad("node.paths.%s: %q is not an absolute host path", k, p)
		}
	}
	switch n.CgroupDriver {
	case "", "systemd", "cgroupfs":
	default:
		bad("node.cgroup_driver %q: want systemd or cgroupfs", n.CgroupDriver)
	}
	if n.Now.IsZero() {
		bad("node.now is required: the time the node was looked at")
	}
	if !n.Boot.IsZero() && n.Now.Before(n.Boot) {
		bad("node.now %s is before node.boot %s", n.Now.Format(time.RFC3339), n.Boot.Format(time.RFC3339))
	}
	for p := range c.Files {
		if !strings.HasPrefix(p, "/") || strings.Contains(p, "..") || strings.HasSuffix(p, "/") {
			bad("files: %q is not an absolute host path of a file", p)
		}
	}
	for _, p := range c.Remove {
		if !strings.HasPrefix(p, "/") || strings.Contains(p, "..") {
			bad("remove: %q is not an absolute host path", p)
		}
	}
	if _, err := c.JournalLines(); err != nil {
		bad("%v", err)
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s: %s", c.Path, strings.Join(errs, "; "))
	}
	return nil
}

// osNames are the node.os values the base node knows.
var osNames = map[string]bool{
	"ubuntu-24.04": true, "ubuntu-22.04": true, "ubuntu-20.04": true, "debian-12": true,
	"azurelinux-3": true, "rhel-9": true, "rhel-8": true, "flatcar": true,
}

// binaries are the node.versions keys.
var binaries = map[string]bool{"kubelet": true, "kubeadm": true, "kubectl": true, "containerd": true, "crictl": true, "runc": true}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
