// Package reports loads node reports from files, for the collector's inputs
// that are not a live agent (`nodediag diagnose --reports PATH...`): an
// agent's JSON report (`nodediag-agent check --output json`), a node record
// as `nodediag node NAME -o json` prints it, an agent bundle (`nodediag-agent
// collect --bundle`), or a host root (a node's / or a
// copy of it), which is checked here by the agent's own pipeline, read-only,
// running no binary of the root and touching no network.
package reports

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"filippo.io/age"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/nodediag/nodediag/agent/bundle"

	"github.com/nodediag/nodediag/agent/check"
	"github.com/nodediag/nodediag/agent/host"
	"github.com/nodediag/nodediag/agent/redact"
	"github.com/nodediag/nodediag/agent/rules"
	nodediagv1 "github.com/nodediag/nodediag/proto/nodediag/v1"
)

// MaxFileBytes bounds a report file: a report with its evidence is at most
// a few MiB.
const MaxFileBytes = 64 << 20

// ErrNotReport is returned (wrapped) for a path that is neither a report
// file nor a host root.
var ErrNotReport = errors.New("not a nodediag report or a host root")

// Load reads the report at path: a JSON file (a Report or a NodeRecord), an
// agent bundle (`nodediag-agent collect --bundle`, not encrypted), or a
// directory that is a host root (it has etc/ or var/), checked now.
func Load(ctx context.Context, path string) (*nodediagv1.Report, error) {
	l, err := Read(ctx, path, Options{})
	if err != nil {
		return nil, err
	}
	return l.Report, nil
}

// Kinds of input (Loaded.Kind).
const (
	KindReport   = "report"    // an agent JSON report or a node record
	KindBundle   = "bundle"    // nodediag-agent collect --bundle
	KindHostRoot = "host root" // a node's / or a copy of it, checked here
)

// Options tune Read.
type Options struct {
	// Identities open encrypted bundles (age).
	Identities []age.Identity
}

// Loaded is one input as read.
type Loaded struct {
	Path   string
	Kind   string
	Report *nodediagv1.Report
	// Problems are what was wrong with the input but did not stop it
	// being used (a bundle cut short, a member failing its hash, a bundle
	// of a newer format), as sentences.
	Problems []string
}

// Read reads the input at path (see Load), saying what kind it was and
// what was wrong with it.
func Read(ctx context.Context, path string, o Options) (*Loaded, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if fi.IsDir() {
		r, err := checkRoot(ctx, path)
		if err != nil {
			return nil, err
		}
		return &Loaded{Path: path, Kind: KindHostRoot, Report: r}, nil
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: %w: %s, not a file", path, ErrNotReport, fi.Mode().Type())
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	br := bufio.NewReader(io.LimitReader(f, MaxFileBytes+1))
	head, _ := br.Peek(32)
	if bundle.IsBundle(head) {
		b, err := bundle.Read(br, o.Identities...)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		clipUntrusted(b.Report)
		return &Loaded{Path: path, Kind: KindBundle, Report: b.Report, Problems: b.Problems}, nil
	}
	b, err := io.ReadAll(br)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(b) > MaxFileBytes {
		return nil, fmt.Errorf("%s: larger than %d MiB: %w", path, MaxFileBytes>>20, ErrNotReport)
	}
	r, err := parse(path, b)
	if err != nil {
		return nil, err
	}
	clipUntrusted(r)
	return &Loaded{Path: path, Kind: KindReport, Report: r}, nil
}

// MaxUntrustedString bounds every string of a report read from a file
// (a bundle, a JSON report): what another machine wrote reaches a terminal
// or a page only redacted and clipped (redact.Received).
const MaxUntrustedString = redact.MaxUntrusted

// clipUntrusted redacts every string of r and clips it at
// MaxUntrustedString bytes (on a rune boundary), saying how much was cut.
func clipUntrusted(r *nodediagv1.Report) { redact.Received(r, MaxUntrustedString) }

// Rejudge judges a report's evidence again with this nodediag's rules (the
// agent's own engine), in the report's own window: a bundle or a report
// from an older agent gets today's verdict. A report without evidence is
// returned as it is.
func Rejudge(e *rules.Engine, r *nodediagv1.Report) (*nodediagv1.Report, error) {
	// Evidence from a file is redacted again: its agent may be older.
	return check.Rejudge(r, check.Options{Engine: e}, true)
}

// parse takes b as a NodeRecord when it has a "report" and "summary", else
// as a Report.
func parse(path string, b []byte) (*nodediagv1.Report, error) {
	b = redact.ClipJSON(b, 4*redact.MaxUntrusted) // see clipUntrusted
	opts := protojson.UnmarshalOptions{DiscardUnknown: true}
	rec := &nodediagv1.NodeRecord{}
	if err := opts.Unmarshal(b, rec); err == nil && rec.GetReport() != nil && rec.GetSummary() != nil {
		r := rec.GetReport()
		if r.GetHost().GetNodeName() == "" && rec.GetSummary().GetNodeName() != "" {
			if r.Host == nil {
				r.Host = &nodediagv1.HostInfo{}
			}
			r.Host.NodeName = rec.GetSummary().GetNodeName()
		}
		return r, nil
	}
	r := &nodediagv1.Report{}
	if err := opts.Unmarshal(b, r); err != nil {
		return nil, fmt.Errorf("%s: %w: %v", path, ErrNotReport, err)
	}
	if r.GetAgent() == nil && r.GetHost() == nil {
		return nil, fmt.Errorf("%s: %w: JSON without an agent or host", path, ErrNotReport)
	}
	return r, nil
}

// checkRoot runs the agent's pipeline over a host root: --exec none, no
// network (the root is not the machine this runs on).
func checkRoot(ctx context.Context, root string) (*nodediagv1.Report, error) {
	if !isDir(filepath.Join(root, "etc")) && !isDir(filepath.Join(root, "var")) {
		return nil, fmt.Errorf("%s: %w: a directory without etc/ or var/", root, ErrNotReport)
	}
	h, err := host.New(root, host.NoExec{})
	if err != nil {
		return nil, err
	}
	h.Net = host.NoNetwork{}
	r, err := check.Host(ctx, h, check.Options{Root: root})
	if err != nil {
		return nil, err
	}
	if r.Host.GetNodeName() == "" {
		r.Host.NodeName = nodeName(r.GetEvidence(), root)
	}
	return r, nil
}

// nodeName is the host's name as its files say, else the root's directory
// name (a tree named after its node, as CI artifacts are).
func nodeName(ev *nodediagv1.Evidence, root string) string {
	if n := ev.GetHost().GetNodeName(); n != "" {
		return n
	}
	if n := ev.GetHost().GetHostname(); n != "" {
		return n
	}
	base := filepath.Base(filepath.Clean(root))
	if base == "root" {
		base = filepath.Base(filepath.Dir(filepath.Clean(root)))
	}
	return strings.TrimSpace(base)
}

func isDir(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}
