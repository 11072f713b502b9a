package artifacts

// MachineFile is a file the collectors write into a machine directory, the
// command that wrote it, and what analyze does with it: read as a node's
// file, or not read, and why. The table is the contract of docs/ci-trees.md
// (checked by TestMachineFilesDoc).
type MachineFile struct {
	Name string
	// Who is the collector that writes it: "capz" (CAPZ's
	// AzureLogCollector, Linux), "capz-windows", "capd" (Cluster API's
	// DockerLogCollector), or "capz, capd".
	Who string
	// Command is what wrote it (its stdout only).
	Command string
	// Read: analyze reads it; Use says how, or why not.
	Read bool
	Use  string
}

// MachineFiles lists every file of a machine directory that analyze knows,
// read or not. (Sources: CAPZ test/e2e/azure_logcollector.go linuxLogs,
// windowsK8sLogs, windowsInfo, windowsNetworkLogs, windowsCrashDumpLogs and
// collectBootLog; cluster-api test/framework/docker_logcollector.go; see
// testdata/upstream-layout.md.)
var MachineFiles = []MachineFile{
	{"journal.log", "capz, capd", "journalctl --no-pager --output=short-precise", true, "the node's journal, as its text export"},
	{"kubelet.log", "capz, capd", "journalctl ... -u kubelet.service", true, "the kubelet's journal; a file that is not journalctl output (Windows: the klog files of C:\\var\\log\\kubelet\\, concatenated) is read as /var/log/kubelet.log"},
	{"containerd.log", "capz, capd", "journalctl ... -u containerd.service", true, "containerd's journal; a file that is not journalctl output (Windows: C:\\var\\log\\containerd\\containerd.log) is read as /var/log/containerd.log"},
	{"kern.log", "capz, capd", "journalctl ... -k", true, "the kernel's messages, when journal.log cannot be read (journal.log holds them too: read once)"},
	{"ignition.log", "capz", "journalctl ... -at ignition", true, "Ignition's messages (Flatcar's provisioning), read as a provisioning log like cloud-init's output"},
	{"cloud-init.log", "capz", "cat /var/log/cloud-init.log, after a preamble", true, "/var/log/cloud-init.log (the preamble is not the node's)"},
	{"cloud-init-output.log", "capz", "cloud-init status --wait, then cat /var/log/cloud-init-output.log", true, "/var/log/cloud-init-output.log, and cloud-init's own verdict from the preamble"},
	{"kubelet-version.txt", "capz, capd", "kubelet --version", true, "the answer of kubelet --version"},
	{"sentinel-file-dir.txt", "capz", "ls -la /run/cluster-api/", true, "/run/cluster-api/ as ls listed it (empty: unknown)"},
	{"cni.log", "capz", "cat /var/log/calico/cni/cni.log", true, "/var/log/calico/cni/cni.log"},
	{"kube-apiserver.log", "capz", "crictl logs of each kube-apiserver container, each after a '===== Pod ..., container ... =====' header", true, "each container's log as the kube-apiserver static pod's log under /var/log/pods"},
	{"boot.log", "capz, capz-windows", "the VM's boot diagnostics (serial console)", true, "cloud-init's output and the kernel's messages the console shows, when the node's own logs are missing (SSH failed)"},
	{"pods", "capd", "tar of /var/log/pods", true, "the kubelet's container logs, at /var/log/pods"},
	{"containerd-info.txt", "capd", "crictl info", false, "the CRI's status as JSON: no probe reads a recorded CRI answer; its NetworkReady condition is in the kubelet's log too"},
	{"cloudbase-init.log", "capz-windows", "Get-Content of cloudbase-init's log", false, "Windows' provisioning log: no signature knows cloudbase-init's lines yet (a Windows machine is judged from its kubelet.log and containerd.log)"},
	{"cloudbase-init-unattend.log", "capz-windows", "Get-Content of cloudbase-init's unattend log", false, "the image's sysprep stage, before the bootstrap: no signature reads it"},
	{"services.log", "capz-windows", "Get-Service", false, "a table of Windows services: no rule reads it"},
	{"reboots.log", "capz-windows", "Get-WinEvent (reboot event ids)", false, "Windows event tables: no rule reads them"},
	{"scm.log", "capz-windows", "Get-WinEvent (Service Control Manager)", false, "Windows event tables: no rule reads them"},
	{"pagefile.log", "capz-windows", "Get-CimInstance win32_pagefileusage", false, "no rule reads it"},
	{"hyperv-operation.log", "capz-windows", "Get-WinEvent (Hyper-V-Compute)", false, "Windows event tables: no rule reads them"},
	{"containerd-containers.log", "capz-windows", "ctr -n k8s.io containers list", false, "no rule reads it"},
	{"containerd-tasks.log", "capz-windows", "ctr -n k8s.io tasks list", false, "no rule reads it"},
	{"containers-hcs.log", "capz-windows", "hcsdiag list", false, "no rule reads it"},
	{"network.log", "capz-windows", "Get-HnsNetwork", false, "Windows' HNS network state: no rule reads it"},
	{"network-detailed.log", "capz-windows", "Get-HnsNetwork | ConvertTo-Json", false, "Windows' HNS network state: no rule reads it"},
	{"network-individual-detailed.log", "capz-windows", "Get-HnsNetwork per network, as JSON", false, "Windows' HNS network state: no rule reads it"},
	{"hnsendpoints.log", "capz-windows", "Get-HnsEndpoint", false, "Windows' HNS network state: no rule reads it"},
	{"hnsendpolicy-detailed.log", "capz-windows", "Get-HnsPolicyList as JSON", false, "Windows' HNS network state: no rule reads it"},
	{"ipconfig.log", "capz-windows", "ipconfig /allcompartments /all", false, "no rule reads it"},
	{"ips.log", "capz-windows", "Get-NetIPAddress", false, "no rule reads it"},
	{"interfaces.log", "capz-windows", "Get-NetIPInterface", false, "no rule reads it"},
	{"hnsdiag.txt", "capz-windows", "hnsdiag list all -d", false, "no rule reads it"},
	{"dir-localdumps.log", "capz-windows", "ls c:\\localdumps", false, "crash dumps are not analysed"},
	{"tar-crashdumps.log", "capz-windows", "tar of c:\\crashdumps", false, "crash dumps are not analysed"},
	{"crashdumps.tar", "capz-windows", "the crash dumps (SFTP)", false, "crash dumps are not analysed (and never unpacked)"},
}

// knownFiles are the files that make a directory a machine directory.
var knownFiles = func() map[string]bool {
	m := map[string]bool{}
	for _, f := range MachineFiles {
		if f.Name != "pods" {
			m[f.Name] = true
		}
	}
	return m
}()

// windowsFiles are the files only a Windows machine has.
var windowsFiles = func() map[string]bool {
	m := map[string]bool{}
	for _, f := range MachineFiles {
		if f.Who == "capz-windows" {
			m[f.Name] = true
		}
	}
	return m
}()

// notRead is why a known file is not read, "" for a file that is.
func notRead(name string) string {
	for _, f := range MachineFiles {
		if f.Name == name && !f.Read {
			return f.Use
		}
	}
	return ""
}
