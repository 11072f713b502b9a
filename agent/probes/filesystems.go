package probes

import (
	"context"
	"errors"
	"fmt"
	"io/fs"

	"github.com/nodediag/nodediag/agent/host"
	"github.com/nodediag/nodediag/agent/probe"
	nodediagv1 "github.com/nodediag/nodediag/proto/nodediag/v1"
)

// filesystemPaths are the directories whose filesystems a node needs room
// on, in the order they are reported; only those that exist are measured.
var filesystemPaths = []string{
	"/",
	"/var",
	// The kubelet's root directory: its filesystem is the kubelet's "nodefs"
	// (pod volumes, emptyDirs, logs of containers via /var/log/pods).
	"/var/lib/kubelet",
	// containerd's root: its filesystem is the kubelet's "imagefs" (images
	// and container layers).
	"/var/lib/containerd",
	// etcd's data directory on control plane nodes (kubeadm's default).
	"/var/lib/etcd",
	"/var/log",
}

// filesystems measures the space and inodes of the filesystems holding
// filesystemPaths with statfs. Paths on one filesystem (same st_dev) are
// reported once, the first listed carrying the others in also. A filesystem
// mounted read-only says so (read_only): an immutable image is always 100%
// used, which is no problem since nothing can write to it.
//
// Measuring needs a live root: on a copy of a host statfs would measure the
// disk of the machine doing the analysis. There only the paths on a
// filesystem mounted inside the root are measured (host.Host.Usage), the
// others are reported as unreadable, and the probe is skipped when nothing
// could be measured.
type filesystems struct{}

func (filesystems) Name() string { return "filesystems" }

func (filesystems) Run(ctx context.Context, h *host.Host) (*nodediagv1.ProbeEvidence, error) {
	pe := &nodediagv1.ProbeEvidence{}
	data := &nodediagv1.Filesystems{}
	byDev := map[uint64]*nodediagv1.Filesystem{}
	var notMeasurable []string
	for _, p := range filesystemPaths {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		u, err := h.Usage(p)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			continue
		case errors.Is(err, host.ErrNotMeasurable):
			notMeasurable = append(notMeasurable, p)
			probe.Unreadable(pe, p, err)
			continue
		case err != nil:
			probe.Unreadable(pe, p, err)
			continue
		}
		if f, ok := byDev[u.Dev]; ok {
			f.Also = append(f.Also, p)
			continue
		}
		f := &nodediagv1.Filesystem{
			Path:              p,
			TotalBytes:        u.TotalBytes,
			FreeBytes:         u.FreeBytes,
			UsedBytes:         u.UsedBytes,
			UsedPercent:       u.UsedPercent,
			InodesTotal:       u.InodesTotal,
			InodesFree:        u.InodesFree,
			InodesUsedPercent: u.InodesUsedPercent,
			ReadOnly:          u.ReadOnly,
			Method:            "statfs",
		}
		// The mount point names the filesystem for the operator; without it
		// the numbers still stand.
		if mp, fstype, err := h.MountPoint(p); err == nil {
			f.MountPoint, f.Fstype = mp, fstype
		}
		byDev[u.Dev] = f
		data.Filesystems = append(data.Filesystems, f)
	}
	if len(data.Filesystems) == 0 && len(notMeasurable) > 0 {
		return nil, fmt.Errorf("%w: %v", probe.ErrNotApplicable, host.ErrNotMeasurable)
	}
	pe.Data = &nodediagv1.ProbeEvidence_Filesystems{Filesystems: data}
	return pe, nil
}
