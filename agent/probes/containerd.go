package probes

import (
	"context"
	"fmt"
	"path"

	"github.com/nodediag/nodediag/agent/ctdconfig"
	"github.com/nodediag/nodediag/agent/host"
	"github.com/nodediag/nodediag/agent/probe"
	nodediagv1 "github.com/nodediag/nodediag/proto/nodediag/v1"
)

// containerdBinaryDirs are where a containerd binary is installed: the
// distribution package (/usr/bin), the upstream release tarball and the
// CAPZ/image-builder images (/usr/local/bin), and the rest of the search
// path the binaries probe uses.
var containerdBinaryDirs = []string{"/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin", "/opt/bin"}

// containerdUnitDirs are systemd's unit directories, where containerd.service
// comes from (the package in /lib or /usr/lib, the release tarball's copy in
// /usr/local/lib or /etc).
var containerdUnitDirs = []string{"/etc/systemd/system", "/run/systemd/system", "/usr/local/lib/systemd/system", "/usr/lib/systemd/system", "/lib/systemd/system"}

// containerdConfig reports containerd's configuration as its files say it
// (ctdconfig.Read): /etc/containerd/config.toml, its imports, and the
// registry hosts files of its config_path.
//
// A node without a config file still gets evidence when containerd is
// installed (a binary or a containerd.service unit): containerd then runs on
// its defaults, which is itself evidence (no SystemdCgroup, no mirrors). The
// probe is skipped only on a root with no sign of containerd at all (no
// config file, no binary, no unit), where its defaults would mean nothing:
// a node running another runtime, or a root that is not a node.
type containerdConfig struct{}

func (containerdConfig) Name() string { return "containerd-config" }

func (containerdConfig) Run(ctx context.Context, h *host.Host) (*nodediagv1.ProbeEvidence, error) {
	cfg, unreadable := ctdconfig.Read(h)
	pe := &nodediagv1.ProbeEvidence{
		Data:       &nodediagv1.ProbeEvidence_Containerd{Containerd: cfg},
		Unreadable: unreadable,
	}
	if cfg.ConfigPresent || len(unreadable) > 0 {
		return pe, nil
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if containerdInstalled(h, pe) {
		return pe, nil
	}
	return nil, fmt.Errorf("%w: no %s, no containerd binary and no containerd.service unit", probe.ErrNotApplicable, ctdconfig.ConfigFile)
}

// containerdInstalled says whether the root shows a containerd binary or
// unit. A path that cannot be checked counts as a sign (and is recorded):
// the probe must not skip what it could not look at.
func containerdInstalled(h *host.Host, pe *nodediagv1.ProbeEvidence) bool {
	var candidates []string
	for _, d := range containerdBinaryDirs {
		candidates = append(candidates, path.Join(d, "containerd"))
	}
	for _, d := range containerdUnitDirs {
		candidates = append(candidates, path.Join(d, "containerd.service"))
	}
	for _, p := range candidates {
		ok, err := h.Exists(p)
		if err != nil {
			probe.Unreadable(pe, p, err)
			return true
		}
		if ok {
			return true
		}
	}
	return false
}
