// Package artifacttree writes the example CI artifact tree of nodediag
// analyze (collector/artifacts/testdata/capz-e2e, `go run
// ./hack/genartifacts`): the tree a failed CAPZ e2e job leaves, written the
// way the job's log collectors write it.
//
//   - clusters/capz-e2e/machines/MACHINE/: the journal exports are made by
//     the real tools: the node's log lines become a real journal file
//     (systemd-journal-remote), which the real journalctl prints with the
//     CAPZ collector's arguments (--no-pager --output=short-precise, with
//     -u kubelet.service and -u containerd.service); cloud-init's logs are
//     copies; kubelet-version.txt is what the node's kubelet answers to
//     --version; sentinel-file-dir.txt is `ls /run/cluster-api/`.
//   - clusters/bootstrap/resources/NS/KIND/NAME.yaml: the demo cluster's
//     objects (hack/democluster/cluster.yaml), one file each, as
//     DumpAllResources marshals them.
//   - build-log.txt: a Ginkgo run whose spec timed out waiting for the
//     worker.
//
// The nodes are the example hosts the demo uses for the two Machines:
// healthy-control-plane for the control plane, join-token-expired for the
// worker, whose kubelet, never configured, restarts in a loop.
package artifacttree

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/nodediag/nodediag/agent/journal/journaltest"
	"github.com/nodediag/nodediag/collector/capi"
)

// Machines of the tree: the demo cluster's Machine, the VM (host) name, and
// the example host whose files it is made of.
var Machines = []struct{ Machine, VM, Host string }{
	{"capz-e2e-control-plane-t8x5m", "capz-e2e-control-plane-t8x5m", "healthy-control-plane"},
	{"capz-e2e-md-0-6b8f9-x7k2l", "capz-e2e-md-0-p9s2d", "join-token-expired"},
}

// bootID is the boot of every node of the tree.
const bootID = "5c1a0d6e2b7f4a9c8e3d1f0a6b2c4d8e"

// Write writes the tree into dir (which must not exist yet) from the
// repository at repo. It needs systemd-journal-remote and journalctl.
func Write(repo, dir string) error {
	if _, err := os.Stat(dir); err == nil {
		return fmt.Errorf("%s exists", dir)
	}
	for _, m := range Machines {
		if err := writeMachine(repo, filepath.Join(dir, "clusters/capz-e2e/machines", m.Machine), m.VM, m.Host); err != nil {
			return fmt.Errorf("machine %s: %w", m.Machine, err)
		}
	}
	if err := writeResources(filepath.Join(repo, "hack/democluster/cluster.yaml"), filepath.Join(dir, "clusters/bootstrap/resources")); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "build-log.txt"), []byte(buildLog), 0o644)
}

func writeMachine(repo, dir, vm, hostName string) error {
	root := filepath.Join(repo, "agent/testdata/hosts", hostName, "root")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, name := range []string{"cloud-init-output.log", "cloud-init.log"} {
		b, err := os.ReadFile(filepath.Join(root, "var/log", name))
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			return err
		}
	}
	// kubelet --version, as the node's kubelet answers it.
	out, err := exec.Command("sh", filepath.Join(root, "usr/bin/kubelet"), "--version").Output()
	if err != nil {
		return fmt.Errorf("kubelet --version: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "kubelet-version.txt"), out, 0o644); err != nil {
		return err
	}
	// ls /run/cluster-api/: no dot files.
	var names []string
	ents, _ := os.ReadDir(filepath.Join(root, "run/cluster-api"))
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), ".") {
			names = append(names, e.Name()+"\n")
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "sentinel-file-dir.txt"), []byte(strings.Join(names, "")), 0o644); err != nil {
		return err
	}
	entries, err := nodeEntries(root, vm, hostName)
	if err != nil {
		return err
	}
	return writeJournalExports(dir, entries)
}

// syslogLine is rsyslog's high-precision line, as the example hosts keep it.
var syslogLine = regexp.MustCompile(`^(\S+) (\S+) ([^\s\[]+)\[(\d+)\]: (.*)$`)

// nodeEntries are the node's journal: its syslog's lines (the example host
// keeps its journal as rsyslog's copy), and for the worker whose join
// failed, the kubelet's restart loop without a configuration.
func nodeEntries(root, vm, hostName string) ([]journaltest.Entry, error) {
	var es []journaltest.Entry
	boot := time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC)
	add := func(t time.Time, ident string, pid int, msg string) {
		unit := map[string]string{"kubelet": "kubelet.service", "containerd": "containerd.service", "cloud-init": "cloud-final.service"}[ident]
		e := journaltest.Entry{
			{Name: "__REALTIME_TIMESTAMP", Value: strconv.FormatInt(t.UnixMicro(), 10)},
			{Name: "__MONOTONIC_TIMESTAMP", Value: strconv.FormatInt(t.Sub(boot).Microseconds()+5_000_000, 10)},
			{Name: "_BOOT_ID", Value: bootID},
			{Name: "_HOSTNAME", Value: vm},
			{Name: "_PID", Value: strconv.Itoa(pid)},
			{Name: "SYSLOG_IDENTIFIER", Value: ident},
			{Name: "PRIORITY", Value: "6"},
			{Name: "MESSAGE", Value: msg},
		}
		if pid == 1 {
			e = append(e, journaltest.Field{Name: "_SYSTEMD_UNIT", Value: "init.scope"})
			if u, _, ok := strings.Cut(msg, ": "); ok && strings.HasSuffix(u, ".service") {
				e = append(e, journaltest.Field{Name: "UNIT", Value: u})
			} else if strings.HasPrefix(msg, "Started kubelet.service") {
				e = append(e, journaltest.Field{Name: "UNIT", Value: "kubelet.service"})
			}
		} else if unit != "" {
			e = append(e, journaltest.Field{Name: "_SYSTEMD_UNIT", Value: unit})
		}
		es = append(es, e)
	}
	add(boot.Add(2*time.Second), "kernel", 0, "Linux version 6.8.0-1021-azure (buildd@lcy02-amd64-046) #25~22.04.1-Ubuntu SMP")
	es[0] = dropField(es[0], "_PID")
	add(boot.Add(20*time.Second), "containerd", 812, `time="2024-05-01T00:00:20.000000000Z" level=info msg="containerd successfully booted in 0.041s"`)
	if b, err := os.ReadFile(filepath.Join(root, "var/log/syslog")); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			m := syslogLine.FindStringSubmatch(line)
			if m == nil {
				continue
			}
			t, err := time.Parse("2006-01-02T15:04:05.000000-07:00", m[1])
			if err != nil {
				continue
			}
			pid, _ := strconv.Atoi(m[4])
			add(t, m[3], pid, m[5])
		}
	}
	if hostName == "join-token-expired" {
		// The kubelet is enabled before kubeadm join runs; the join
		// failed, so it never gets its configuration.
		for i := 0; i < 8; i++ {
			t := boot.Add(3*time.Minute + time.Duration(i)*10*time.Second)
			pid := 3100 + i
			add(t, "systemd", 1, "Started kubelet.service - kubelet: The Kubernetes Node Agent.")
			add(t.Add(300*time.Millisecond), "kubelet", pid, fmt.Sprintf(`E0501 %s %7d run.go:72] "command failed" err="failed to load kubelet config file, path: /var/lib/kubelet/config.yaml, error: failed to load Kubelet config file /var/lib/kubelet/config.yaml, error failed to read kubelet config file \"/var/lib/kubelet/config.yaml\", error: open /var/lib/kubelet/config.yaml: no such file or directory"`, t.Add(300*time.Millisecond).Format("15:04:05.000000"), pid))
			add(t.Add(400*time.Millisecond), "systemd", 1, "kubelet.service: Main process exited, code=exited, status=1/FAILURE")
			add(t.Add(401*time.Millisecond), "systemd", 1, "kubelet.service: Failed with result 'exit-code'.")
			add(t.Add(10*time.Second), "systemd", 1, fmt.Sprintf("kubelet.service: Scheduled restart job, restart counter is at %d.", i+1))
		}
	}
	sort.SliceStable(es, func(i, j int) bool { return es[i].Get("__REALTIME_TIMESTAMP") < es[j].Get("__REALTIME_TIMESTAMP") })
	return es, nil
}

func dropField(e journaltest.Entry, name string) journaltest.Entry {
	var out journaltest.Entry
	for _, f := range e {
		if f.Name != name {
			out = append(out, f)
		}
	}
	return out
}

// writeJournalExports writes the entries into a real journal file and
// prints it with journalctl as the CAPZ log collector does.
func writeJournalExports(dir string, es []journaltest.Entry) error {
	tmp, err := os.MkdirTemp("", "genartifacts-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	file := filepath.Join(tmp, "system.journal")
	if err := journaltest.Write(file, journaltest.Options{}, journaltest.Entries(es...)); err != nil {
		return err
	}
	for _, x := range []struct{ name, unit, flag string }{
		{"journal.log", "", ""}, {"kern.log", "", "-k"},
		{"kubelet.log", "kubelet.service", ""}, {"containerd.log", "containerd.service", ""},
	} {
		args := []string{"--file", file, "--no-pager", "--output=short-precise"}
		if x.unit != "" {
			args = append(args, "-u", x.unit)
		}
		if x.flag != "" {
			args = append(args, x.flag)
		}
		cmd := exec.Command("journalctl", args...)
		cmd.Env = append(os.Environ(), "TZ=UTC", "SYSTEMD_COLORS=0")
		out, err := cmd.Output()
		if err != nil {
			return fmt.Errorf("journalctl %v: %w", args, err)
		}
		if err := os.WriteFile(filepath.Join(dir, x.name), out, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// created is when the job created the cluster's objects (its build log's
// "Creating the workload cluster" step).
var created = time.Date(2024, 5, 1, 0, 0, 30, 0, time.UTC)

// writeResources splits the demo cluster into one YAML per object.
func writeResources(src, dir string) error {
	f, err := os.Open(src)
	if err != nil {
		return err
	}
	defer f.Close()
	objs, err := capi.DecodeObjects(f)
	if err != nil {
		return err
	}
	for _, u := range objs {
		// What the API server adds and DumpAllResources keeps: the
		// cluster's objects were created as the job's spec began.
		if ts := u.GetCreationTimestamp(); ts.IsZero() {
			u.SetCreationTimestamp(metav1.NewTime(created))
		}
		b, err := yaml.Marshal(u.Object)
		if err != nil {
			return err
		}
		p := filepath.Join(dir, u.GetNamespace(), u.GetKind(), u.GetName()+".yaml")
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// buildLog is the job's output, Ginkgo v2 with Prow's colours stripped but
// one: the spec that timed out waiting for the worker.
const buildLog = `+ make test-e2e
GINKGO_SKIP="" GINKGO_FOCUS="Creating a cluster that uses the external cloud provider"
Running Suite: capz-e2e - /home/prow/go/src/sigs.k8s.io/cluster-api-provider-azure/test/e2e
==========================================================================================
Random Seed: 1714521600

Will run 1 of 27 specs
------------------------------
[It] Workload cluster creation Creating a cluster that uses the external cloud provider and external azurediskcsi driver [OPTIONAL] with a 1 control plane nodes and 1 worker nodes
/home/prow/go/src/sigs.k8s.io/cluster-api-provider-azure/test/e2e/azure_test.go:412
  STEP: Creating namespace "demo" for hosting the cluster @ 05/01/24 00:00:00.120
  INFO: Creating the workload cluster with name "capz-e2e" using the "external-cloud-provider" template (Kubernetes v1.32.3, 1 control-plane machines, 1 worker machines)
  INFO: Waiting for the cluster infrastructure of cluster demo/capz-e2e to be provisioned
  STEP: Waiting for cluster to enter the provisioned phase @ 05/01/24 00:00:30.340
  INFO: Waiting for control plane of cluster demo/capz-e2e to be initialized
  INFO: Waiting for the first control plane machine managed by demo/capz-e2e-control-plane to be provisioned
  STEP: Waiting for one control plane node to exist @ 05/01/24 00:00:31.002
  INFO: Waiting for control plane of cluster demo/capz-e2e to be ready
  STEP: Waiting for control plane demo/capz-e2e-control-plane to be ready (implies underlying nodes to be ready as well) @ 05/01/24 00:05:12.551
  STEP: Checking all the control plane machines are in the expected failure domains @ 05/01/24 00:06:40.019
  INFO: Waiting for the machine deployments of cluster demo/capz-e2e to be provisioned
  STEP: Waiting for the workload nodes to exist @ 05/01/24 00:06:40.233
  [FAILED] in [It] - /home/prow/go/src/sigs.k8s.io/cluster-api/test/framework/machinedeployment_helpers.go:131 @ 05/01/24 00:26:40.240
  STEP: Dumping logs from the "capz-e2e" workload cluster @ 05/01/24 00:26:40.241
  Failed to get logs for Machine capz-e2e-md-0-6b8f9-x7k2l, Cluster demo/capz-e2e: dialing from control plane to target node at capz-e2e-md-0-p9s2d: ssh: rejected: connect failed (Connection refused)
  STEP: Dumping all the Cluster API resources in the "demo" namespace @ 05/01/24 00:27:10.870
• [FAILED] [1630.812 seconds]
Workload cluster creation Creating a cluster that uses the external cloud provider and external azurediskcsi driver [OPTIONAL] [It] with a 1 control plane nodes and 1 worker nodes
/home/prow/go/src/sigs.k8s.io/cluster-api-provider-azure/test/e2e/azure_test.go:412

  [FAILED] Timed out after 1200.001s.
  Timed out waiting for 1 nodes to be created for MachineDeployment demo/capz-e2e-md-0
  Expected
      <int>: 0
  to equal
      <int>: 1
  In [It] at: /home/prow/go/src/sigs.k8s.io/cluster-api/test/framework/machinedeployment_helpers.go:131 @ 05/01/24 00:26:40.240
------------------------------

Summarizing 1 Failure:
  [FAIL] Workload cluster creation Creating a cluster that uses the external cloud provider and external azurediskcsi driver [OPTIONAL] [It] with a 1 control plane nodes and 1 worker nodes
  /home/prow/go/src/sigs.k8s.io/cluster-api/test/framework/machinedeployment_helpers.go:131

Ran 1 of 27 Specs in 1712.404 seconds
FAIL! -- 0 Passed | 1 Failed | 0 Pending | 26 Skipped
--- FAIL: TestE2E (1712.41s)
FAIL
make: *** [Makefile:680: test-e2e-run] Error 1
`
