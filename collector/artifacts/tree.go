// Package artifacts reads CI artifact trees: what the Cluster API and CAPZ
// end-to-end tests leave behind once their VMs are gone.
//
//	build-log.txt                                   the job's output
//	clusters/CLUSTER/machines/MACHINE/              one directory per Machine:
//	    journal.log       journalctl --no-pager --output=short-precise
//	    kubelet.log       the same, -u kubelet.service
//	    containerd.log    the same, -u containerd.service
//	    kern.log          the same, -k
//	    cloud-init.log, cloud-init-output.log   /var/log's, after CAPZ's
//	                                            preamble (see collected.go)
//	    kubelet-version.txt                     kubelet --version
//	    sentinel-file-dir.txt                   ls -la /run/cluster-api/
//	clusters/CLUSTER/machine-pools/POOL/INSTANCE/   the same, per pool instance
//	clusters/MGMT/resources/NAMESPACE/KIND/NAME.yaml  DumpAllResources
//	clusters/CLUSTER/resources/Node/NAME.yaml         the workload cluster's
//	clusters/CLUSTER/resources/NS/Pod/NAME.yaml       Nodes and Pods
//	                                                  (DumpResourcesForCluster)
//
// (each machine file is written even when its command failed, with its
// stdout only: an empty one is unknown, not empty)
//
// (names and commands as in kubernetes-sigs/cluster-api-provider-azure
// test/e2e/azure_logcollector.go and cluster-api test/framework's
// DumpAllResources; the resources sit under the management cluster's
// directory, the machines under the workload cluster's.)
//
// A machine directory becomes a node view for the agent's own probes (see
// machine.go); the resource dumps become Cluster API state (capi.Objects).
// The tree is hostile input: symlinks are never followed, only regular files
// are read, sizes and counts are bounded, and what could not be used is
// said.
package artifacts

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Limits of a tree walk.
const (
	// maxEntries bounds the directory entries walked.
	maxEntries = 200_000
	// maxDepth bounds how deep below the given path the layout is looked for.
	maxDepth = 10
)

// Tree is what was found in an artifact tree.
type Tree struct {
	// Root is the path given.
	Root string
	// Machines are the machine directories, sorted by cluster and name.
	Machines []*Machine
	// Resources are the resource YAML files (resources/NS/KIND/NAME.yaml).
	Resources []string
	// WorkloadDumps are, per workload cluster directory, the Node and Pod
	// dumps of that cluster (clusters/CLUSTER/resources/Node/NAME.yaml,
	// clusters/CLUSTER/resources/NS/Pod/NAME.yaml).
	WorkloadDumps map[string][]string
	// WorkloadTexts are, per workload cluster directory, the kubectl
	// describe texts and pod logs CAPZ's collector writes instead of dumps
	// (clusters/CLUSTER/nodes/NODE/node-describe.txt,
	// clusters/CLUSTER/NS/POD/pod-describe.txt and CONTAINER.log), for
	// the chain's namespaces.
	WorkloadTexts map[string]*WorkloadTexts
	// Events are the management side's events.log files
	// (clusters/MGMT/resources/NS/events.log).
	Events []string
	// ControllerLogs are the management controllers' logs
	// (clusters/MGMT/logs/NS/DEPLOYMENT/POD/CONTAINER.log, and the older
	// clusters/MGMT/controllers/DEPLOYMENT/POD/CONTAINER.log).
	ControllerLogs []ControllerLog
	// ActivityLogs are CAPZ's Azure activity logs
	// (clusters/CLUSTER/azure-activity-logs/RG.log).
	ActivityLogs []string
	// BuildLog is the path of build-log.txt, "" when there is none.
	BuildLog string
	// Problems are what could not be used, as sentences naming the path.
	Problems []string
}

// WorkloadTexts are one workload cluster's describe texts and pod logs.
type WorkloadTexts struct {
	// Nodes are node-describe.txt paths by node name.
	Nodes map[string]string
	// Pods are by NS/POD.
	Pods map[string]*PodFiles
}

// PodFiles are one pod's pod-describe.txt and container logs (by
// container name).
type PodFiles struct {
	Describe string
	Logs     map[string]string
}

// ControllerLog is one controller container's log.
type ControllerLog struct {
	Path, Namespace, Deployment, Pod, Container string
}

// Machine is one machine directory.
type Machine struct {
	// Cluster is the directory name under clusters/ ("" when the tree does
	// not say); Pool the machine pool of an instance.
	Cluster, Pool string
	// Name is the directory's name: the Machine's (or the pool instance's).
	Name string
	// Dir is the directory's path.
	Dir string
	// Files are the regular files of the directory, by name.
	Files map[string]string
	// PodLogs are the files of its pods/ directory (CAPD's copy of
	// /var/log/pods), by their path below it (NS_POD_UID/CONTAINER/N.log).
	PodLogs map[string]string
	// Problems are what could not be used in it.
	Problems []string
}

// IsTree says whether dir looks like an artifact tree (or a part of one: a
// clusters/ directory, one cluster's, one machine's).
func IsTree(dir string) bool {
	for _, n := range []string{"build-log.txt", "clusters", "machines", "machine-pools", "resources"} {
		if _, err := os.Lstat(filepath.Join(dir, n)); err == nil {
			return true
		}
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	for _, e := range ents {
		if knownFiles[e.Name()] {
			return true
		}
	}
	return false
}

// Discover walks the tree at root. It fails only when root cannot be read
// at all; everything else is in Tree.Problems.
func Discover(root string) (*Tree, error) {
	fi, err := os.Stat(root)
	if err != nil {
		return nil, err
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("%s: not a directory", root)
	}
	root = filepath.Clean(root)
	t := &Tree{Root: root}
	machines := map[string]*Machine{}
	entries := 0
	buildLogRel := ""
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		rel, _ := filepath.Rel(root, p)
		if err != nil {
			t.Problems = append(t.Problems, fmt.Sprintf("%s: %v", p, err))
			if d != nil && d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		entries++
		if entries > maxEntries {
			t.Problems = append(t.Problems, fmt.Sprintf("%s: more than %d entries: the rest of the tree was not walked", root, maxEntries))
			return fs.SkipAll
		}
		parts := strings.Split(filepath.ToSlash(rel), "/")
		if rel == "." {
			parts = nil
		}
		if d.IsDir() {
			if len(parts) > maxDepth {
				return fs.SkipDir
			}
			return nil
		}
		name := d.Name()
		// A symlink, to a file or a directory, is named and never
		// followed (out of the tree or not).
		if d.Type()&fs.ModeSymlink != 0 {
			target, _ := os.Readlink(p)
			if cluster, pool, machine, ok := machineOf(parts); ok && knownFiles[name] {
				m := machineAt(machines, filepath.Dir(p), cluster, pool, machine)
				m.Problems = append(m.Problems, fmt.Sprintf("%s: a symbolic link (to %s), not followed", name, target))
			} else {
				t.problem(fmt.Sprintf("%s: a symbolic link (to %s), not followed", p, target))
			}
			return nil
		}
		if !d.Type().IsRegular() {
			if knownFiles[name] || name == "build-log.txt" || strings.HasSuffix(name, ".yaml") {
				t.problem(fmt.Sprintf("%s: not a regular file (%s), not read", p, d.Type()))
			}
			return nil
		}
		switch {
		case name == "build-log.txt" && (t.BuildLog == "" || depth(rel) < depth(buildLogRel)):
			// The shallowest: the job's own, not a copy somewhere inside.
			t.BuildLog, buildLogRel = p, rel
		case workloadDump(parts) != "":
			if t.WorkloadDumps == nil {
				t.WorkloadDumps = map[string][]string{}
			}
			c := workloadDump(parts)
			t.WorkloadDumps[c] = append(t.WorkloadDumps[c], p)
		case isResource(parts):
			t.Resources = append(t.Resources, p)
		case t.managementFile(p, parts):
		case t.workloadText(p, parts):
		default:
			if cluster, pool, machine, ok := machineOf(parts); ok {
				machineAt(machines, filepath.Dir(p), cluster, pool, machine).Files[name] = p
			} else if dir, cluster, pool, machine, rel, ok := podLogOf(p, parts); ok {
				m := machineAt(machines, dir, cluster, pool, machine)
				if m.PodLogs == nil {
					m.PodLogs = map[string]string{}
				}
				m.PodLogs[rel] = p
			}
		}
		return nil
	})
	if err != nil && !errors.Is(err, fs.SkipAll) {
		return nil, err
	}
	// The root itself may be one machine's directory.
	if len(machines) == 0 {
		if m := rootMachine(root); m != nil {
			machines[root] = m
		}
	}
	for _, m := range machines {
		if !hasKnownFile(m) && len(m.PodLogs) == 0 && len(m.Problems) == 0 {
			continue
		}
		t.Machines = append(t.Machines, m)
	}
	sort.Slice(t.Machines, func(i, j int) bool {
		a, b := t.Machines[i], t.Machines[j]
		if a.Cluster != b.Cluster {
			return a.Cluster < b.Cluster
		}
		if a.Pool != b.Pool {
			return a.Pool < b.Pool
		}
		return a.Name < b.Name
	})
	sort.Strings(t.Resources)
	sort.Strings(t.Events)
	sort.Strings(t.ActivityLogs)
	sort.Slice(t.ControllerLogs, func(i, j int) bool { return t.ControllerLogs[i].Path < t.ControllerLogs[j].Path })
	for _, ps := range t.WorkloadDumps {
		sort.Strings(ps)
	}
	return t, nil
}

// maxTreeProblems bounds the tree's problems (a tree of a million symlinks).
const maxTreeProblems = 100

func (t *Tree) problem(s string) {
	switch n := len(t.Problems); {
	case n < maxTreeProblems:
		t.Problems = append(t.Problems, s)
	case n == maxTreeProblems:
		t.Problems = append(t.Problems, "more problems: not listed")
	}
}

func depth(rel string) int { return strings.Count(filepath.ToSlash(rel), "/") }

// machineAt returns the machine of dir, adding it first.
func machineAt(machines map[string]*Machine, dir, cluster, pool, name string) *Machine {
	m := machines[dir]
	if m == nil {
		m = &Machine{Cluster: cluster, Pool: pool, Name: name, Dir: dir, Files: map[string]string{}}
		machines[dir] = m
	}
	return m
}

// workloadDump is the cluster of a workload Node or Pod dump
// (clusters/C/resources/Node/NAME.yaml, clusters/C/resources/NS/Pod/NAME.yaml),
// "" for any other path (split).
func workloadDump(parts []string) string {
	n := len(parts)
	if n < 4 || !strings.HasSuffix(parts[n-1], ".yaml") {
		return ""
	}
	switch {
	case parts[n-2] == "Node" && parts[n-3] == "resources" && n >= 5 && parts[n-5] == "clusters":
		return parts[n-4]
	case parts[n-2] == "Pod" && n >= 6 && parts[n-4] == "resources" && parts[n-6] == "clusters":
		return parts[n-5]
	}
	return ""
}

// reserved are the names under clusters/CLUSTER/ that are not a pod
// namespace.
var reserved = map[string]bool{"machines": true, "machine-pools": true, "nodes": true, "azure-activity-logs": true,
	"resources": true, "infrastructure": true, "logs": true, "controllers": true, "metrics": true}

// chainNamespaces are the namespaces whose pods' texts are read: the
// chain's (workload.Namespaces).
var chainNamespaces = map[string]bool{"kube-system": true, "calico-system": true, "kube-flannel": true}

// workloadText files a node-describe.txt, pod-describe.txt or pod log.
func (t *Tree) workloadText(p string, parts []string) bool {
	n := len(parts)
	if n < 5 {
		return false
	}
	name := parts[n-1]
	texts := func(cluster string) *WorkloadTexts {
		if t.WorkloadTexts == nil {
			t.WorkloadTexts = map[string]*WorkloadTexts{}
		}
		w := t.WorkloadTexts[cluster]
		if w == nil {
			w = &WorkloadTexts{Nodes: map[string]string{}, Pods: map[string]*PodFiles{}}
			t.WorkloadTexts[cluster] = w
		}
		return w
	}
	switch {
	case name == "node-describe.txt" && parts[n-3] == "nodes" && parts[n-5] == "clusters":
		texts(parts[n-4]).Nodes[parts[n-2]] = p
		return true
	case parts[n-5] == "clusters" && !reserved[parts[n-3]] && chainNamespaces[parts[n-3]] && (name == "pod-describe.txt" || strings.HasSuffix(name, ".log")):
		w := texts(parts[n-4])
		key := parts[n-3] + "/" + parts[n-2]
		pf := w.Pods[key]
		if pf == nil {
			pf = &PodFiles{Logs: map[string]string{}}
			w.Pods[key] = pf
		}
		if name == "pod-describe.txt" {
			pf.Describe = p
		} else {
			pf.Logs[strings.TrimSuffix(name, ".log")] = p
		}
		return true
	}
	return false
}

// managementFile files an events.log, a controller's log or an activity
// log.
func (t *Tree) managementFile(p string, parts []string) bool {
	n := len(parts)
	name := parts[n-1]
	switch {
	case name == "events.log" && n >= 3 && parts[n-3] == "resources":
		t.Events = append(t.Events, p)
	case strings.HasSuffix(name, ".log") && n >= 5 && parts[n-5] == "logs":
		t.ControllerLogs = append(t.ControllerLogs, ControllerLog{Path: p, Namespace: parts[n-4], Deployment: parts[n-3], Pod: parts[n-2], Container: strings.TrimSuffix(name, ".log")})
	case strings.HasSuffix(name, ".log") && n >= 4 && parts[n-4] == "controllers":
		t.ControllerLogs = append(t.ControllerLogs, ControllerLog{Path: p, Deployment: parts[n-3], Pod: parts[n-2], Container: strings.TrimSuffix(name, ".log")})
	case strings.HasSuffix(name, ".log") && n >= 2 && parts[n-2] == "azure-activity-logs":
		t.ActivityLogs = append(t.ActivityLogs, p)
	default:
		return false
	}
	return true
}

// isResource says whether a path (split) is resources/NS/KIND/NAME.yaml.
func isResource(parts []string) bool {
	n := len(parts)
	return n >= 4 && parts[n-4] == "resources" && strings.HasSuffix(parts[n-1], ".yaml")
}

// machineOf reads a file's path (split) as clusters/C/machines/M/FILE or
// clusters/C/machine-pools/P/I/FILE (the clusters/C part optional).
func machineOf(parts []string) (cluster, pool, machine string, ok bool) {
	n := len(parts)
	if n >= 3 && parts[n-3] == "machines" {
		if n >= 5 && parts[n-5] == "clusters" {
			cluster = parts[n-4]
		}
		return cluster, "", parts[n-2], true
	}
	if n >= 4 && parts[n-4] == "machine-pools" {
		if n >= 6 && parts[n-6] == "clusters" {
			cluster = parts[n-5]
		}
		return cluster, parts[n-3], parts[n-2], true
	}
	return "", "", "", false
}

// podLogOf reads a file's path (split) as a machine's
// pods/NS_POD_UID/CONTAINER/FILE: the machine directory, its names and the
// path below pods/.
func podLogOf(p string, parts []string) (dir, cluster, pool, machine, rel string, ok bool) {
	n := len(parts)
	if n < 5 || parts[n-4] != "pods" {
		return "", "", "", "", "", false
	}
	cluster, pool, machine, ok = machineOf(parts[:n-3])
	if !ok {
		return "", "", "", "", "", false
	}
	dir = filepath.Dir(filepath.Dir(filepath.Dir(filepath.Dir(p))))
	return dir, cluster, pool, machine, strings.Join(parts[n-3:], "/"), true
}

// rootMachine reads root as one machine's directory.
func rootMachine(root string) *Machine {
	ents, err := os.ReadDir(root)
	if err != nil {
		return nil
	}
	m := &Machine{Name: filepath.Base(filepath.Clean(root)), Dir: root, Files: map[string]string{}}
	for _, e := range ents {
		if e.Type().IsRegular() && knownFiles[e.Name()] {
			m.Files[e.Name()] = filepath.Join(root, e.Name())
		}
	}
	if len(m.Files) == 0 {
		return nil
	}
	return m
}

func hasKnownFile(m *Machine) bool {
	for name := range m.Files {
		if knownFiles[name] {
			return true
		}
	}
	return false
}
