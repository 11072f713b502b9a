// Package reports loads node reports from files, for the collector's inputs
// that are not a live agent (`nodediag diagnose --reports PATH...`): an
// agent's JSON report (`nodediag-agent check --output json`), a node record
// as `nodediag node NAME -o json` prints it, or a host root (a node's / or a
// copy of it), which is checked here by the agent's own pipeline, read-only,
// running no binary of the root and touching no network.
package reports

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/nodediag/nodediag/agent/host"
	"github.com/nodediag/nodediag/agent/probe"
	"github.com/nodediag/nodediag/agent/probes"
	"github.com/nodediag/nodediag/agent/report"
	"github.com/nodediag/nodediag/agent/rules"
	nodediagv1 "github.com/nodediag/nodediag/proto/nodediag/v1"
)

// MaxFileBytes bounds a report file: a report with its evidence is at most
// a few MiB.
const MaxFileBytes = 64 << 20

// ErrNotReport is returned (wrapped) for a path that is neither a report
// file nor a host root.
var ErrNotReport = errors.New("not a nodediag report or a host root")

// Load reads the report at path: a JSON file (a Report or a NodeRecord), or
// a directory that is a host root (it has etc/ or var/), checked now.
func Load(ctx context.Context, path string) (*nodediagv1.Report, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if fi.IsDir() {
		return checkRoot(ctx, path)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: %w: %s, not a file", path, ErrNotReport, fi.Mode().Type())
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(b) > MaxFileBytes {
		return nil, fmt.Errorf("%s: larger than %d MiB: %w", path, MaxFileBytes>>20, ErrNotReport)
	}
	return parse(path, b)
}

// parse takes b as a NodeRecord when it has a "report" and "summary", else
// as a Report.
func parse(path string, b []byte) (*nodediagv1.Report, error) {
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
	e, err := rules.NewEngine()
	if err != nil {
		return nil, err
	}
	ev := probe.RunAll(ctx, h, probes.All())
	ev.Host.Root = root
	return report.Build(ev, e.Analyze(ev, rules.Context{}), nodeName(ev, root)), nil
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
