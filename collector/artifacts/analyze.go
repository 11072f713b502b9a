package artifacts

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/nodediag/nodediag/agent/rules"
	"github.com/nodediag/nodediag/collector/capi"
	"github.com/nodediag/nodediag/collector/incident"
	"github.com/nodediag/nodediag/collector/workload"
)

// Limits of the resource dumps read.
const (
	maxResourceFile  = 4 << 20
	maxResourceTotal = 256 << 20
)

// Result is the analysis of one artifact tree.
type Result struct {
	Tree *Tree
	// Machines are the machine directories and their reports.
	Machines []*MachineResult
	// Clusters are the incidents of the Clusters the resource dumps hold.
	Clusters []*ClusterResult
	// Build is the first failure of build-log.txt; BuildErr why there is
	// none (ErrNoFailure: the log has no failure).
	Build    *BuildFailure
	BuildErr error
	// Problems are the tree's and the resource dumps' problems.
	Problems []string
}

// MachineResult is one machine directory, checked.
type MachineResult struct {
	Machine *Machine
	Checked *Checked
	Err     error
}

// ClusterResult is one Cluster of the dumps, diagnosed.
type ClusterResult struct {
	Namespace, Name string
	Incident        *incident.Incident
	Err             error
}

// Analyze reads the tree at root: every machine directory checked by the
// agent's probes and judged by e, the resource dumps assembled into each
// Cluster they hold and diagnosed with the machines' reports (the incident
// report the collector would write), and the build log's first failure.
func Analyze(ctx context.Context, root string, e *rules.Engine) (*Result, error) {
	t, err := Discover(root)
	if err != nil {
		return nil, err
	}
	res := &Result{Tree: t, Problems: append([]string(nil), t.Problems...)}
	for _, m := range t.Machines {
		mr := &MachineResult{Machine: m}
		mr.Checked, mr.Err = m.Check(ctx, e)
		res.Machines = append(res.Machines, mr)
	}
	if t.BuildLog != "" {
		res.Build, res.BuildErr = FirstFailure(t.BuildLog)
	}
	objs, probs := readResources(t.Resources)
	res.Problems = append(res.Problems, probs...)
	if len(objs) == 0 {
		return res, nil
	}
	o := capi.NewObjects(objs)
	now := res.clock(newestTime(objs))
	logs := res.objectLogs()
	for _, nn := range o.Clusters() {
		cr := &ClusterResult{Namespace: nn[0], Name: nn[1]}
		res.Clusters = append(res.Clusters, cr)
		c, err := o.Cluster(ctx, nn[0], nn[1])
		if err != nil {
			cr.Err = err
			continue
		}
		cr.Incident, cr.Err = incident.Diagnose(c, res.reportsOf(nn[1]), incident.Options{Now: now, Engine: e, Workload: res.workloadOf(nn[1], now), ObjectLogs: logs})
	}
	return res, nil
}

// workloadOf is the workload cluster's state from its Node and Pod dumps,
// nil when the tree holds none for that cluster.
func (r *Result) workloadOf(cluster string, now time.Time) *workload.State {
	paths := r.Tree.WorkloadDumps[cluster]
	if len(paths) == 0 {
		return nil
	}
	objs, probs := readResources(paths)
	r.Problems = append(r.Problems, probs...)
	return workload.FromDump(fmt.Sprintf("the Node and Pod dumps of clusters/%s/resources", cluster), objs, now)
}

// clock is when the tree was collected: the newest of its machines'
// clocks, the times its resource dumps state (objects) and the build log's
// last time; now when none says.
func (r *Result) clock(objects time.Time) time.Time {
	t := objects
	for _, m := range r.Machines {
		if m.Checked != nil && m.Checked.Clock.After(t) {
			t = m.Checked.Clock
		}
	}
	if r.Build != nil && r.Build.Last.After(t) {
		t = r.Build.Last
	}
	if t.IsZero() {
		return time.Now()
	}
	return t
}

// newestTime is the newest creationTimestamp or condition
// lastTransitionTime of the objects.
func newestTime(objs []*unstructured.Unstructured) time.Time {
	var t time.Time
	see := func(s string) {
		if v, err := time.Parse(time.RFC3339, s); err == nil && v.After(t) {
			t = v
		}
	}
	for _, u := range objs {
		see(u.GetCreationTimestamp().Format(time.RFC3339))
		conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		for _, c := range conds {
			if m, ok := c.(map[string]any); ok {
				if s, ok := m["lastTransitionTime"].(string); ok {
					see(s)
				}
			}
		}
	}
	return t
}

// reportsOf returns the reports of the machines of cluster: those under
// clusters/CLUSTER/, else (a tree without that level) every machine's.
func (r *Result) reportsOf(cluster string) []incident.NodeReport {
	var mine, unplaced []incident.NodeReport
	for _, m := range r.Machines {
		if m.Checked == nil {
			continue
		}
		nr := incident.NodeReport{Report: m.Checked.Report, Machine: m.Machine.Name}
		if m.Machine.Pool != "" {
			// machine-pools/POOL/COMPUTERNAME/: the Machines of a pool
			// are not named after the directory.
			nr.Machine = ""
			if id, ok := vmssInstanceID(m.Machine.Name); ok {
				nr.PoolInstance = m.Machine.Pool + "/virtualmachines/" + id
			}
		}
		switch m.Machine.Cluster {
		case cluster:
			mine = append(mine, nr)
		case "":
			unplaced = append(unplaced, nr)
		}
	}
	if len(mine) > 0 {
		return mine
	}
	return unplaced
}

// readResources decodes the resource dumps. A file that cannot be read or
// decoded is a problem; the others are used.
func readResources(paths []string) ([]*unstructured.Unstructured, []string) {
	var objs []*unstructured.Unstructured
	var probs []string
	total := int64(0)
	for _, p := range paths {
		f, fi, err := openRegular(p)
		if err != nil {
			probs = append(probs, err.Error())
			continue
		}
		if fi.Size() > maxResourceFile {
			f.Close()
			probs = append(probs, fmt.Sprintf("%s: %d bytes, over the %d MiB a resource dump may have: not read", p, fi.Size(), maxResourceFile>>20))
			continue
		}
		if total += fi.Size(); total > maxResourceTotal {
			f.Close()
			probs = append(probs, fmt.Sprintf("%s and the dumps after it: over %d MiB of resources in all: not read", p, maxResourceTotal>>20))
			break
		}
		got, err := capi.DecodeObjects(io.LimitReader(f, maxResourceFile))
		f.Close()
		if err != nil {
			probs = append(probs, fmt.Sprintf("%s: %v", p, err))
		}
		objs = append(objs, got...)
	}
	return objs, probs
}

// IsNoFailure says whether err is a build log without failure.
func IsNoFailure(err error) bool { return errors.Is(err, ErrNoFailure) }

// vmssInstanceID reads the instance ID of a VMSS instance of uniform
// orchestration from its computer name: the scale set's computer name
// prefix, then the instance ID in six base-36 digits (vmss000000 is
// instance 0, vmss00000a instance 10).
func vmssInstanceID(computerName string) (string, bool) {
	if len(computerName) <= 6 {
		return "", false
	}
	n, err := strconv.ParseUint(strings.ToLower(computerName[len(computerName)-6:]), 36, 64)
	if err != nil {
		return "", false
	}
	return strconv.FormatUint(n, 10), true
}
