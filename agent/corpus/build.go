package corpus

import (
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/nodediag/nodediag/agent/host"
	"github.com/nodediag/nodediag/agent/journal/journaltest"
	"github.com/nodediag/nodediag/internal/hostgen"
)

// Built is a case's host root, ready to be checked as a copy of a host.
type Built struct {
	Root string
	// Runner answers the binaries' version questions from the node's
	// versions; it runs nothing.
	Runner host.Runner
	// Now is the time the node was looked at (check --now).
	Now time.Time
	// ExpectVersion is the version its Machine expects, if known.
	ExpectVersion string
}

// Tree is the case's host root as files (hostgen's conventions), and its
// journal lines: what Build writes.
func (c *Case) Tree() (hostgen.Tree, []JournalLine, error) {
	lines, err := c.JournalLines()
	if err != nil {
		return nil, nil, err
	}
	n := c.hostgenNode()
	var t hostgen.Tree
	if c.Node.Role == RoleNone {
		t = n.OSFiles()
		t["proc/swaps"] = "Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n"
	} else {
		t = n.Files()
		if !c.Node.CAPI {
			// /run/kubeadm holds what the CAPI bootstrap wrote.
			for p := range t {
				if strings.HasPrefix(p, "run/kubeadm/") {
					delete(t, p)
				}
			}
		}
		if !c.cni() {
			for p := range t {
				if strings.HasPrefix(p, "etc/cni/net.d/") || strings.HasPrefix(p, "opt/cni/bin/") {
					delete(t, p)
				}
			}
		}
		if c.joined() {
			for _, at := range c.Node.ClientCertsRotated {
				name := "kubelet-client-" + at.UTC().Format("2006-01-02-15-04-05") + ".pem"
				t["var/lib/kubelet/pki/"+name] = string(n.CA.ClientPEM("system:node:"+n.Hostname, at, at.AddDate(1, 0, 0)))
				t["var/lib/kubelet/pki/kubelet-client-current.pem"] = "->/var/lib/kubelet/pki/" + name
			}
		}
		if c.joined() && c.Node.CgroupDriver == "cgroupfs" {
			t["var/lib/kubelet/config.yaml"] = hostgen.KubeletConfigYAML("cgroupfs", "")
		}
		for _, a := range n.Answers() {
			name := a.Path[strings.LastIndexByte(a.Path, '/')+1:]
			if p, ok := c.Node.Paths[name]; ok {
				t[strings.TrimPrefix(p, "/")] = t[a.Path]
				delete(t, a.Path)
			}
		}
		switch {
		case c.Node.Versions["kubelet"] == "":
			// No kubelet version: the kubernetes packages are not
			// installed, so neither is the unit they ship.
			for p := range t {
				if strings.HasPrefix(p, "usr/lib/systemd/system/kubelet.service") || p == "etc/systemd/system/multi-user.target.wants/kubelet.service" {
					delete(t, p)
				}
			}
		case n.Deb():
			// The kubelet package's environment file, empty as it ships.
			t["etc/default/kubelet"] = "KUBELET_EXTRA_ARGS=\n"
		default:
			t["etc/sysconfig/kubelet"] = "KUBELET_EXTRA_ARGS=\n"
		}
		if n.Containerd != "" {
			t["etc/containerd/config.toml"] = containerdConfig(c.Node.CgroupDriver != "cgroupfs")
		}
		if c.Node.Role == RoleControlPlane && c.joined() {
			for name, f := range staticPods(n) {
				t["etc/kubernetes/manifests/"+name] = f
			}
		}
		if c.Node.CAPI {
			t.Add(c.cloudInit(n))
		}
	}
	for p, content := range c.Files {
		rel := strings.TrimPrefix(p, "/")
		// A file of the case replaces a base directory or link of that
		// name, and its parents' placeholders.
		delete(t, rel+"/")
		t[rel] = content
	}
	for _, p := range c.Remove {
		rel := strings.TrimPrefix(p, "/")
		if _, ok := t[rel]; !ok {
			if _, dir := t[rel+"/"]; !dir && !hasUnder(t, rel+"/") {
				return nil, nil, fmt.Errorf("remove: %s is not a file of the base node", p)
			}
		}
		delete(t, rel)
		delete(t, rel+"/")
		for q := range t {
			if strings.HasPrefix(q, rel+"/") {
				delete(t, q)
			}
		}
	}
	return t, lines, nil
}

func hasUnder(t hostgen.Tree, prefix string) bool {
	for p := range t {
		if strings.HasPrefix(p, prefix) {
			return true
		}
	}
	return false
}

// CheckExpectation checks that the expectation can be met by what the case
// holds: the evidence is a line of its files or journal, and the place it
// points to exists.
func (c *Case) CheckExpectation(t hostgen.Tree, lines []JournalLine) error {
	if c.Negative() {
		return nil
	}
	e := c.Expect
	found := false
	for _, l := range lines {
		if strings.Contains(l.Message, e.Evidence) {
			found = true
			break
		}
	}
	for _, content := range t {
		if strings.Contains(content, e.Evidence) {
			found = true
			break
		}
	}
	if !found {
		return fmt.Errorf("%s: expect.evidence %q is in none of the case's files or journal lines", c.Path, e.Evidence)
	}
	if unit, ok := strings.CutPrefix(e.PointsTo, "journal:"); ok {
		for _, l := range lines {
			if l.Source() == "journal:"+unit {
				return nil
			}
		}
		return fmt.Errorf("%s: expect.points_to %s: no journal line of that unit", c.Path, e.PointsTo)
	}
	if _, ok := t[strings.TrimPrefix(e.PointsTo, "/")]; !ok {
		return fmt.Errorf("%s: expect.points_to %s is not a file of the node", c.Path, e.PointsTo)
	}
	return nil
}

// Build writes the case's host root under dir (dir/root) and returns it.
// The journal is written by systemd-journal-remote (journaltest.Write).
func (c *Case) Build(dir string) (*Built, error) {
	t, lines, err := c.Tree()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", c.Path, err)
	}
	root := filepath.Join(dir, "root")
	if err := hostgen.WriteTree(root, t); err != nil {
		return nil, err
	}
	n := c.hostgenNode()
	if len(lines) > 0 {
		es := entries(c, lines, n.Hostname, n.MachineID())
		path := filepath.Join(root, "var/log/journal", n.MachineID(), "system.journal")
		if err := journaltest.Write(path, journaltest.Options{}, journaltest.Entries(es...)); err != nil {
			return nil, fmt.Errorf("%s: writing the journal: %w", c.Path, err)
		}
	}
	// The copy's file times are the copy's own, as with a git checkout:
	// what the agent knows of the time is --now.
	// Every stand-in binary of the tree (the node's, and any the case
	// writes) answers its question; nothing is run.
	rec := host.Recorded{}
	for p, content := range t {
		if args, out, ok := hostgen.ParseScript(content); ok {
			rec[host.RecordedKey("/"+p, args...)] = host.Output{Stdout: []byte(out + "\n")}
		}
	}
	b := &Built{Root: root, Runner: rec, Now: c.Node.Now, ExpectVersion: c.Node.ExpectVersion}
	return b, nil
}

func (c *Case) joined() bool {
	if c.Node.Joined != nil {
		return *c.Node.Joined
	}
	return c.Node.Role != RoleNone
}

func (c *Case) cni() bool {
	if c.Node.CNI != nil {
		return *c.Node.CNI
	}
	return c.joined()
}

func (c *Case) hostgenNode() hostgen.Node {
	v := c.Node.Versions
	n := hostgen.Node{
		OS: c.Node.OS, Hostname: c.Node.Hostname,
		Kubelet: v["kubelet"], Kubeadm: v["kubeadm"], Kubectl: v["kubectl"],
		Containerd: v["containerd"], Crictl: v["crictl"], Runc: v["runc"],
		ControlPlane: c.Node.Role == RoleControlPlane,
		CPVersion:    c.Node.ControlPlaneVersion,
		Endpoint:     c.Node.Endpoint,
		Joined:       c.joined(),
		Boot:         c.Node.Boot,
	}
	if n.Hostname == "" {
		n.Hostname = "node-1"
	}
	if n.Endpoint == "" {
		n.Endpoint = "10.0.0.4:6443"
	}
	if n.ControlPlane && n.CPVersion == "" {
		n.CPVersion = n.Kubelet
	}
	if n.Boot.IsZero() {
		n.Boot = c.Node.Now.Add(-time.Hour)
	}
	// The cluster's CA was made before the node booted: a day before, on
	// the case's own clock (the example CA of 2024 would be "not yet
	// valid" on a node of 2019).
	n.CA = hostgen.NewCA("corpus CA "+c.Name, n.Boot.Add(-24*time.Hour))
	// A node looked at within a minute of its boot got its certificate
	// before it was looked at.
	if j := n.Boot.Add(45 * time.Second); j.After(c.Node.Now) {
		n.JoinedAt = c.Node.Now.Add(-5 * time.Second)
	}
	return n
}

// cloudInit is the state of a Cluster API bootstrap: cloud-init's files,
// the sentinel when it succeeded, and a cloud-init-output.log unless the
// case gives its own.
func (c *Case) cloudInit(n hostgen.Node) hostgen.Tree {
	boot := n.Boot
	ci := hostgen.CIRun{Boot: boot, FinalStart: boot.Add(28 * time.Second)}
	cmd := "kubeadm join --config /run/kubeadm/kubeadm-join-config.yaml"
	if n.ControlPlane {
		cmd = "kubeadm init --config /run/kubeadm/kubeadm.yaml"
	}
	final := fmt.Sprintf("+++ [%s] running '%s'\n", boot.Add(31*time.Second).Format("2006-01-02T15:04:05+00:00"), cmd)
	switch c.Node.Bootstrap {
	case "", "done":
		ci.FinalEnd, ci.Sentinel = boot.Add(90*time.Second), true
		final += "[preflight] Running pre-flight checks\n"
	case "failed":
		ci.FinalEnd = boot.Add(5 * time.Minute)
		ci.Errors = []string{"('scripts_user', RuntimeError('Runparts: 1 failures (runcmd) in 1 attempted commands'))"}
		final += "[preflight] Running pre-flight checks\n"
	case "running":
		final += "[preflight] Running pre-flight checks\n"
	case "none":
		return hostgen.Tree{"run/cluster-api/": ""}
	}
	t := ci.Files()
	t["var/log/cloud-init-output.log"] = hostgen.OutputLog(ci, "24.4.1-0ubuntu0~24.04.1", final)
	return t
}

// containerdConfig is the version 2 config.toml of a kubeadm node's
// containerd, as the Kubernetes docs have it.
func containerdConfig(systemdCgroup bool) string {
	return fmt.Sprintf(`version = 2

[plugins]
  [plugins."io.containerd.grpc.v1.cri"]
    sandbox_image = "registry.k8s.io/pause:3.9"
    [plugins."io.containerd.grpc.v1.cri".containerd]
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes]
        [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
          runtime_type = "io.containerd.runc.v2"
          [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
            SystemdCgroup = %t
    [plugins."io.containerd.grpc.v1.cri".registry]
      config_path = "/etc/containerd/certs.d"
`, systemdCgroup)
}

// staticPods are a kubeadm control plane's manifests.
func staticPods(n hostgen.Node) map[string]string {
	out := map[string]string{"etcd.yaml": hostgen.StaticPod("etcd", "registry.k8s.io/etcd:3.5.15-0")}
	for _, c := range []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler"} {
		out[c+".yaml"] = hostgen.StaticPod(c, "registry.k8s.io/"+c+":"+n.CPVersion)
	}
	return out
}

// Files lists the host paths of a tree, sorted, for messages.
func Files(t hostgen.Tree) []string {
	var out []string
	for p := range t {
		out = append(out, "/"+p)
	}
	sort.Strings(out)
	return out
}
