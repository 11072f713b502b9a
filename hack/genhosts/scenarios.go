package main

import (
	"fmt"
	"strings"
	"time"
)

// A scenario is an example host: a root tree and the extra arguments of
// `nodediag-agent check` it needs (--now for copies whose logs carry no year:
// git does not keep file times, so the time of the copy must be given). Each is built from a failure described in
// ../shared/domain or from public reports of real kubelet, kubeadm,
// containerd and cloud-init messages (quoted verbatim where they are known).
type scenario struct {
	name string
	args []string
	tree tree
}

var boot = time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC)

const ciVersion = "24.4.1-0ubuntu0~24.04.1"

func worker(os, host, k8s string) node {
	return node{OS: os, Hostname: host, Kubelet: k8s, Kubeadm: k8s, Kubectl: k8s, Containerd: "v1.7.25", Crictl: "v1.32.0", Runc: "v1.2.4",
		Endpoint: "capz-e2e-a1b2c3.eastus.cloudapp.azure.com:6443", Joined: true, Boot: boot}
}

const joinOK = `[preflight] Running pre-flight checks
[preflight] Reading configuration from the "kubeadm-config" ConfigMap in namespace "kube-system"...
[preflight] Use 'kubeadm init phase upload-config --config your-config.yaml' to re-upload it.
[kubelet-start] Writing kubelet configuration to file "/var/lib/kubelet/config.yaml"
[kubelet-start] Writing kubelet environment file with flags to file "/var/lib/kubelet/kubeadm-flags.env"
[kubelet-start] Starting the kubelet
[kubelet-check] Waiting for a healthy kubelet at http://127.0.0.1:10248/healthz. This can take up to 4m0s
[kubelet-check] The kubelet is healthy after 1.002345167s
[kubelet-start] Waiting for the kubelet to perform the TLS Bootstrap

This node has joined the cluster:
* Certificate signing request was sent to apiserver and a response was received.
* The Kubelet was informed of the new secure connection details.

Run 'kubectl get nodes' on the control-plane to see this node join the cluster.

`

const scriptsUserFailed = `2024-05-01 00:%s,512 - cc_scripts_user.py[WARNING]: Failed to run module scripts_user (scripts in /var/lib/cloud/instance/scripts)
2024-05-01 00:%s,513 - log_util.py[WARNING]: Running module scripts_user (<module 'cloudinit.config.cc_scripts_user' from '/usr/lib/python3/dist-packages/cloudinit/config/cc_scripts_user.py'>) failed
`

const runpartsError = "('scripts_user', RuntimeError('Runparts: 1 failures (runcmd) in 1 attempted commands'))"

func scriptsFailed(mmss string) string { return fmt.Sprintf(scriptsUserFailed, mmss, mmss) }

func scenarios() []scenario {
	return []scenario{
		healthyWorker(),
		healthyControlPlane(),
		healthyRebootedAfterAYear(),
		kubeadmWithoutCAPI(),
		airgapModuleError(),
		bootstrapInProgress(),
		azl3RemovedFlag(),
		containerRuntimeFlag(),
		gallerySkew(),
		kubeletTwoBinaries(),
		dkpMissingScheme(),
		ltsImageNotFound(),
		registryUnreachable(),
		containerdBrokenConfig(),
		criPluginDisabled(),
		swapEnabled(),
		diskFull(),
		kubeletCertExpired(),
		clockBehind(),
		cniNotReady(),
		joinAPIUnreachable(),
		joinTokenExpired(),
		preflightSmallVM(),
		downloadFailed(),
		kubeletConfigInvalid(),
		plantedSecrets(),
		rhelLocalTimeFlag(),
	}
}

// healthyWorker: a CAPZ worker that joined. Its logs hold the usual bootstrap
// transients (connection refused to :6443, node not found, cni plugin not
// initialized for a minute), none of which may become a finding.
func healthyWorker() scenario {
	n := worker("ubuntu-24.04", "capz-e2e-md-0-7xk2p", "v1.32.3")
	ci := ciRun{Boot: boot, FinalStart: boot.Add(28 * time.Second), FinalEnd: boot.Add(57 * time.Second), Sentinel: true}
	t := n.Files().Add(ci.Files())
	t["var/log/cloud-init-output.log"] = outputLog(ci, ciVersion, joinOK)
	s := &syslog{host: n.Hostname}
	kubeletStartupNoise(s, boot.Add(41*time.Second), 1876, n.Hostname, n.Endpoint)
	at := boot.Add(3 * time.Minute)
	s.line(at, "kubelet", 1876, klog('I', at, 1876, "kubelet_node_status.go:502", `"Fast updating node status as it just became ready"`))
	t["var/log/syslog"] = s.String()
	return scenario{name: "healthy-worker", tree: t}
}

// bootstrapInProgress: cloud-init is still in modules-final, four minutes in:
// not a failure yet.
func bootstrapInProgress() scenario {
	n := worker("ubuntu-24.04", "capz-e2e-md-0-q8w4v", "v1.32.3")
	n.Joined = false
	ci := ciRun{Boot: boot, FinalStart: boot.Add(28 * time.Second)}
	t := n.Files().Add(ci.Files())
	t["var/log/cloud-init-output.log"] = outputLog(ci, ciVersion, `+++ [2024-05-01T00:00:31+00:00] running 'kubeadm join --config /run/kubeadm/kubeadm-join-config.yaml'
[preflight] Running pre-flight checks
[preflight] Reading configuration from the "kubeadm-config" ConfigMap in namespace "kube-system"...
`)
	t["var/log/cloud-init.log"] = "2024-05-01 00:04:30,001 - util.py[DEBUG]: Running command ['/var/lib/cloud/instance/scripts/runcmd'] with allowed return codes [0] (shell=False, capture=False)\n"
	return scenario{name: "bootstrap-in-progress", tree: t}
}

// azl3RemovedFlag: the Azure Linux 3 gallery image ships /etc/sysconfig/kubelet
// with --pod-infra-container-image; the custom-builds script replaced the
// binaries with v1.35.0, which removed that flag; the kubelet never starts
// and kubeadm init times out waiting for it (capz-cluster-debugging, "Stale
// /etc/sysconfig/kubelet on azl3").
func azl3RemovedFlag() scenario {
	n := node{OS: "azurelinux-3", Hostname: "capz-dalec-control-plane-9hx2q", Kubelet: "v1.35.0", Kubeadm: "v1.35.0", Kubectl: "v1.35.0",
		Containerd: "v2.0.0", Crictl: "v1.35.0", Runc: "v1.2.2", ControlPlane: true, CPVersion: "v1.35.0",
		Endpoint: "capz-dalec-8f2k1.westus2.cloudapp.azure.com:6443", Boot: boot}
	ci := ciRun{Boot: boot, FinalStart: boot.Add(31 * time.Second), FinalEnd: boot.Add(5*time.Minute + 12*time.Second), Errors: []string{runpartsError}}
	t := n.Files().Add(ci.Files())
	t["etc/sysconfig/kubelet"] = "KUBELET_EXTRA_ARGS=--pod-infra-container-image=mcr.microsoft.com/oss/kubernetes/pause:3.6\n"
	t["var/lib/kubelet/config.yaml"] = kubeletConfigYAML("systemd", "")
	t["var/lib/kubelet/kubeadm-flags.env"] = `KUBELET_KUBEADM_ARGS="--cloud-provider=external --container-runtime-endpoint=unix:///var/run/containerd/containerd.sock"` + "\n"
	t["etc/kubernetes/manifests/kube-apiserver.yaml"] = staticPod("kube-apiserver", "registry.k8s.io/kube-apiserver:v1.35.0")
	t["etc/kubernetes/manifests/kube-controller-manager.yaml"] = staticPod("kube-controller-manager", "registry.k8s.io/kube-controller-manager:v1.35.0")
	t["etc/kubernetes/manifests/kube-scheduler.yaml"] = staticPod("kube-scheduler", "registry.k8s.io/kube-scheduler:v1.35.0")
	t["etc/kubernetes/manifests/etcd.yaml"] = staticPod("etcd", "registry.k8s.io/etcd:3.6.5-0")
	t["etc/kubernetes/pki/ca.crt"] = string(caPEM)
	t["etc/kubernetes/pki/apiserver.crt"] = string(certPEM("kube-apiserver", caStart, caStart.AddDate(1, 0, 0), false, 2))
	t["var/log/cloud-init-output.log"] = outputLog(ci, "24.1.4", `+ curl -fsSL --retry 5 -o /tmp/kubernetes-node.rpm https://capzdalec.blob.core.windows.net/rpms/kubernetes-node-1.35.0-1.azl3.x86_64.rpm
+ rpm2cpio /tmp/kubernetes-node.rpm
+ cpio -idmv
+ cp -f ./usr/bin/kubelet ./usr/bin/kubeadm ./usr/bin/kubectl /usr/bin/
[init] Using Kubernetes version: v1.35.0
[preflight] Running pre-flight checks
[preflight] Pulling images required for setting up a Kubernetes cluster
[certs] Using certificateDir folder "/etc/kubernetes/pki"
[certs] Generating "apiserver" certificate and key
[kubeconfig] Writing "kubelet.conf" kubeconfig file
[etcd] Creating static Pod manifest for local etcd in "/etc/kubernetes/manifests"
[control-plane] Creating static Pod manifest for "kube-apiserver"
[kubelet-start] Writing kubelet environment file with flags to file "/var/lib/kubelet/kubeadm-flags.env"
[kubelet-start] Writing kubelet configuration to file "/var/lib/kubelet/config.yaml"
[kubelet-start] Starting the kubelet
[wait-control-plane] Waiting for the kubelet to boot up the control plane as static Pods from directory "/etc/kubernetes/manifests"
[kubelet-check] Waiting for a healthy kubelet at http://127.0.0.1:10248/healthz. This can take up to 4m0s
[kubelet-check] The kubelet is not healthy after 4m0.000305186s

Unfortunately, an error has occurred, likely caused by:
	- The kubelet is not running
	- The kubelet is unhealthy due to a misconfiguration of the node in some way (required cgroups disabled)

If you are on a systemd-powered system, you can try to troubleshoot the error with the following commands:
	- 'systemctl status kubelet'
	- 'journalctl -xeu kubelet'

error: error execution phase wait-control-plane: failed while waiting for the kubelet to start: The HTTP call equal to 'curl -sSL http://127.0.0.1:10248/healthz' returned error: Get "http://127.0.0.1:10248/healthz": dial tcp 127.0.0.1:10248: connect: connection refused
To see the stack trace of this error execute with --v=5 or higher
`+scriptsFailed("05:12"))
	return scenario{name: "azl3-stale-sysconfig-flag", tree: t}
}

// containerRuntimeFlag: a custom Ubuntu 22.04 image bakes
// KUBELET_EXTRA_ARGS=--container-runtime=remote into /etc/default/kubelet;
// kubelet v1.27 removed that flag and exits at once, every 10 seconds; the
// join waits for the TLS bootstrap and times out.
func containerRuntimeFlag() scenario {
	n := worker("ubuntu-22.04", "capi-quickstart-md-0-5c8d7-zt4rp", "v1.27.16")
	n.Containerd = "v1.7.13"
	n.Crictl = "v1.27.1"
	n.Endpoint = "10.0.0.100:6443"
	ci := ciRun{Boot: boot, FinalStart: boot.Add(28 * time.Second), FinalEnd: boot.Add(4*time.Minute + 50*time.Second), Errors: []string{runpartsError}}
	t := n.Files().Add(ci.Files())
	delete(t, "etc/kubernetes/kubelet.conf")
	delete(t, "var/lib/kubelet/pki/kubelet-client-current.pem")
	t["etc/kubernetes/bootstrap-kubelet.conf"] = "apiVersion: v1\nclusters:\n- cluster:\n    server: https://10.0.0.100:6443\n  name: kubernetes\nkind: Config\n"
	t["etc/default/kubelet"] = `KUBELET_EXTRA_ARGS="--container-runtime=remote --container-runtime-endpoint=unix:///run/containerd/containerd.sock --pod-infra-container-image=registry.k8s.io/pause:3.9"` + "\n"
	t["var/log/cloud-init-output.log"] = outputLog(ci, "23.3.3-0ubuntu0~22.04.1", `[preflight] Running pre-flight checks
[preflight] Reading configuration from the cluster...
[preflight] FYI: You can look at this config file with 'kubectl -n kube-system get cm kubeadm-config -o yaml'
[kubelet-start] Writing kubelet configuration to file "/var/lib/kubelet/config.yaml"
[kubelet-start] Writing kubelet environment file with flags to file "/var/lib/kubelet/kubeadm-flags.env"
[kubelet-start] Starting the kubelet
[kubelet-start] Waiting for the kubelet to perform the TLS Bootstrap...
[kubelet-check] Initial timeout of 40s passed.
[kubelet-check] It seems like the kubelet isn't running or healthy.
[kubelet-check] The HTTP call equal to 'curl -sSL http://localhost:10248/healthz' failed with error: Get "http://localhost:10248/healthz": dial tcp 127.0.0.1:10248: connect: connection refused.

Unfortunately, an error has occurred:
	timed out waiting for the condition

This error is likely caused by:
	- The kubelet is not running
	- The kubelet is unhealthy due to a misconfiguration of the node in some way (required cgroups disabled)

error execution phase kubelet-start: timed out waiting for the condition
To see the stack trace of this error execute with --v=5 or higher
`+scriptsFailed("04:50"))
	s := &syslog{host: n.Hostname, traditional: true}
	every(boot.Add(35*time.Second), boot.Add(4*time.Minute+50*time.Second), 10*time.Second, func(at time.Time, i int) {
		pid := 2100 + i*7
		s.line(at, "systemd", 1, "Started kubelet.service - kubelet: The Kubernetes Node Agent.")
		s.line(at.Add(40*time.Millisecond), "kubelet", pid, klog('E', at.Add(40*time.Millisecond), pid, "run.go:74", `"command failed" err="failed to parse kubelet flag: unknown flag: --container-runtime"`))
		s.line(at.Add(45*time.Millisecond), "systemd", 1, "kubelet.service: Main process exited, code=exited, status=1/FAILURE")
		s.line(at.Add(46*time.Millisecond), "systemd", 1, "kubelet.service: Failed with result 'exit-code'.")
	})
	t["var/log/syslog"] = s.String()
	return scenario{name: "kubelet-1.27-container-runtime-flag", args: []string{"--now", "2024-05-01T00:05:00Z"}, tree: t}
}

// gallerySkew: the custom-builds script meant to replace the gallery image's
// v1.33.2 binaries with v1.32.0 but its download failed without stopping
// cloud-init; kubeadm init's preflight then refuses the newer kubelet
// (capz-cluster-debugging, "Version Skew" and "Silent binary replacement
// failure"). The Machine expects v1.32.0.
func gallerySkew() scenario {
	n := node{OS: "ubuntu-22.04", Hostname: "capz-ci-control-plane-w2rz8", Kubelet: "v1.33.2", Kubeadm: "v1.33.2", Kubectl: "v1.33.2",
		Containerd: "v1.7.27", Crictl: "v1.33.0", Runc: "v1.2.5", ControlPlane: true, CPVersion: "v1.32.0",
		Endpoint: "capz-ci-5bd8a.eastus.cloudapp.azure.com:6443", Boot: boot}
	ci := ciRun{Boot: boot, FinalStart: boot.Add(29 * time.Second), FinalEnd: boot.Add(41 * time.Second), Errors: []string{runpartsError}}
	t := n.Files().Add(ci.Files())
	t["var/log/cloud-init-output.log"] = outputLog(ci, "23.3.3-0ubuntu0~22.04.1", `+ KUBE_VERSION=v1.32.0
+ echo 'Installing Kubernetes binaries v1.32.0'
Installing Kubernetes binaries v1.32.0
+ curl -fsSL --retry 3 https://capzcustombuilds.blob.core.windows.net/debs/v1.32.0/kubelet_1.32.0-1_amd64.deb
+ tee /tmp/kubelet.deb
curl: (22) The requested URL returned error: 404
+ dpkg -i /tmp/kubelet.deb
dpkg-deb: error: '/tmp/kubelet.deb' is not a Debian format archive
dpkg: error processing archive /tmp/kubelet.deb (--install):
 dpkg-deb --control subprocess returned error exit status 2
Errors were encountered while processing:
 /tmp/kubelet.deb
[init] Using Kubernetes version: v1.32.0
[preflight] Running pre-flight checks
	[WARNING KubernetesVersion]: Kubernetes version is greater than kubeadm version. Please consider to upgrade kubeadm. Kubernetes version: 1.32.0. Kubeadm version: 1.33.x
error execution phase preflight: [preflight] Some fatal errors occurred:
	[ERROR KubeletVersion]: the kubelet version is higher than the control plane version. This is not a supported version skew and may lead to a malfunctional cluster. Kubelet version: "1.33.2" Control plane version: "1.32.0"
[preflight] If you know what you are doing, you can make a check non-fatal with `+"`--ignore-preflight-errors=...`"+`
To see the stack trace of this error execute with --v=5 or higher
`+scriptsFailed("00:41"))
	return scenario{name: "gallery-kubelet-version-skew", args: []string{"--expect-version", "v1.32.0"}, tree: t}
}

// kubeletTwoBinaries: the install script put v1.32.0 in /usr/local/bin, but
// kubelet.service still runs the image's /usr/bin/kubelet v1.33.2. kubeadm
// (first in PATH) checked the new copy and passed; the node runs the old one.
func kubeletTwoBinaries() scenario {
	n := worker("ubuntu-22.04", "capz-ci-md-0-8c6f9-ltb2s", "v1.33.2")
	n.Kubeadm = ""
	ci := ciRun{Boot: boot, FinalStart: boot.Add(28 * time.Second), FinalEnd: boot.Add(66 * time.Second), Sentinel: true}
	t := n.Files().Add(ci.Files())
	t["usr/local/bin/kubelet"] = script("--version", "Kubernetes v1.32.0")
	t["usr/local/bin/kubeadm"] = script("version -o short", "v1.32.0")
	t["var/log/cloud-init-output.log"] = outputLog(ci, "23.3.3-0ubuntu0~22.04.1", "+ install -m 0755 /tmp/bin/kubelet /tmp/bin/kubeadm /usr/local/bin/\n"+joinOK)
	return scenario{name: "kubelet-two-binaries", args: []string{"--expect-version", "v1.32.0"}, tree: t}
}

// dkpMissingScheme: air-gapped DKP. The mirror endpoint was written without
// http(s)://, containerd cannot parse it, and kubeadm init's image pull fails
// (dkp-airgapped-registry.txt, error 1).
func dkpMissingScheme() scenario {
	n := node{OS: "rhel-8", Hostname: "dkp-airgap-control-plane-6j2gk", Kubelet: "v1.22.8", Kubeadm: "v1.22.8", Kubectl: "v1.22.8",
		Containerd: "v1.4.13", Crictl: "v1.22.0", Runc: "v1.0.3", ControlPlane: true, CPVersion: "v1.22.8",
		Endpoint: "10.20.0.10:6443", Boot: boot}
	ci := ciRun{Boot: boot, FinalStart: boot.Add(40 * time.Second), FinalEnd: boot.Add(3 * time.Minute), Errors: []string{runpartsError}}
	t := n.Files().Add(ci.Files())
	t["etc/containerd/config.toml"] = `version = 2

[plugins."io.containerd.grpc.v1.cri".registry.mirrors."*"]
  endpoint = ["://registry.airgap.local:5000/dkp"]
`
	t["var/log/cloud-init-output.log"] = outputLog(ci, "22.1-5.el8", `[init] Using Kubernetes version: v1.22.8
[preflight] Running pre-flight checks
[preflight] Pulling images required for setting up a Kubernetes cluster
[preflight] This might take a minute or two, depending on the speed of your internet connection
[preflight] You can also perform this action in beforehand using 'kubeadm config images pull'
error execution phase preflight: [preflight] Some fatal errors occurred:
	[ERROR ImagePull]: failed to pull image k8s.gcr.io/kube-apiserver:v1.22.8: output: time="2024-05-01T00:02:51Z" level=fatal msg="pulling image: rpc error: code = Unknown desc = failed to pull and unpack image \"k8s.gcr.io/kube-apiserver:v1.22.8\": failed to resolve reference \"k8s.gcr.io/kube-apiserver:v1.22.8\": get registry endpoints: parse endpoint url: parse \":///v2/registry.airgap.local:5000/dkp\": missing protocol scheme"
, error: exit status 1
[preflight] If you know what you are doing, you can make a check non-fatal with `+"`--ignore-preflight-errors=...`"+`
To see the stack trace of this error execute with --v=5 or higher
`+scriptsFailed("03:00"))
	return scenario{name: "dkp-registry-missing-scheme", tree: t}
}

// ltsImageNotFound: an LTS build (v1.31.100) joined, but kube-proxy's image
// tag does not exist upstream, so kube-proxy never starts (capz-cluster-debugging,
// "LTS version image pull failure").
func ltsImageNotFound() scenario {
	n := worker("ubuntu-24.04", "capz-lts-md-0-9d2kq", "v1.31.100")
	ci := ciRun{Boot: boot, FinalStart: boot.Add(28 * time.Second), FinalEnd: boot.Add(58 * time.Second), Sentinel: true}
	t := n.Files().Add(ci.Files())
	t["var/log/cloud-init-output.log"] = outputLog(ci, ciVersion, joinOK)
	s := &syslog{host: n.Hostname}
	every(boot.Add(70*time.Second), boot.Add(25*time.Minute), 150*time.Second, func(at time.Time, i int) {
		s.line(at, "containerd", 912, logrus(at, "error", `"PullImage \"registry.k8s.io/kube-proxy:v1.31.100\" failed" error="rpc error: code = NotFound desc = failed to pull and unpack image \"registry.k8s.io/kube-proxy:v1.31.100\": failed to resolve reference \"registry.k8s.io/kube-proxy:v1.31.100\": registry.k8s.io/kube-proxy:v1.31.100: not found"`))
		s.line(at.Add(time.Millisecond), "kubelet", 1876, klog('E', at.Add(time.Millisecond), 1876, "log.go:32", `"PullImage from image service failed" err="rpc error: code = NotFound desc = failed to pull and unpack image \"registry.k8s.io/kube-proxy:v1.31.100\": failed to resolve reference \"registry.k8s.io/kube-proxy:v1.31.100\": registry.k8s.io/kube-proxy:v1.31.100: not found" image="registry.k8s.io/kube-proxy:v1.31.100"`))
		s.line(at.Add(2*time.Millisecond), "kubelet", 1876, klog('E', at.Add(2*time.Millisecond), 1876, "pod_workers.go:1301", `"Error syncing pod, skipping" err="failed to \"StartContainer\" for \"kube-proxy\" with ErrImagePull: \"rpc error: code = NotFound desc = failed to pull and unpack image \\\"registry.k8s.io/kube-proxy:v1.31.100\\\": not found\"" pod="kube-system/kube-proxy-x7k2m"`))
	})
	t["var/log/syslog"] = s.String()
	return scenario{name: "lts-kube-proxy-image-not-found", tree: t}
}

// registryUnreachable: a worker in an isolated VNet cannot reach
// registry.k8s.io; every pod sandbox fails on the pause image.
func registryUnreachable() scenario {
	n := worker("ubuntu-24.04", "capz-private-md-0-4kq7d", "v1.32.3")
	ci := ciRun{Boot: boot, FinalStart: boot.Add(28 * time.Second), FinalEnd: boot.Add(59 * time.Second), Sentinel: true}
	t := n.Files().Add(ci.Files())
	t["var/log/cloud-init-output.log"] = outputLog(ci, ciVersion, joinOK)
	s := &syslog{host: n.Hostname}
	every(boot.Add(75*time.Second), boot.Add(32*time.Minute), 4*time.Minute, func(at time.Time, i int) {
		s.line(at, "containerd", 902, logrus(at, "info", `"trying next host" error="failed to do request: Head \"https://registry.k8s.io/v2/pause/manifests/3.10\": dial tcp 34.96.108.209:443: i/o timeout" host=registry.k8s.io`))
		s.line(at.Add(time.Millisecond), "kubelet", 1876, klog('E', at.Add(time.Millisecond), 1876, "log.go:32", `"RunPodSandbox from runtime service failed" err="rpc error: code = DeadlineExceeded desc = failed to get sandbox image \"registry.k8s.io/pause:3.10\": failed to pull image \"registry.k8s.io/pause:3.10\": failed to pull and unpack image \"registry.k8s.io/pause:3.10\": failed to resolve reference \"registry.k8s.io/pause:3.10\": failed to do request: Head \"https://registry.k8s.io/v2/pause/manifests/3.10\": dial tcp 34.96.108.209:443: i/o timeout"`))
	})
	t["var/log/syslog"] = s.String()
	return scenario{name: "registry-unreachable", tree: t}
}

// containerdBrokenConfig: a preKubeadmCommand appended to config.toml and
// broke it; containerd exits at load and kubeadm join's preflight finds no runtime.
func containerdBrokenConfig() scenario {
	n := worker("ubuntu-22.04", "capz-e2e-md-0-2b9sx", "v1.29.10")
	n.Joined = false
	ci := ciRun{Boot: boot, FinalStart: boot.Add(28 * time.Second), FinalEnd: boot.Add(33 * time.Second), Errors: []string{runpartsError}}
	t := n.Files().Add(ci.Files())
	t["etc/containerd/config.toml"] = "version = 2\n[plugins.\"io.containerd.grpc.v1.cri\"\n  sandbox_image = \"registry.k8s.io/pause:3.9\"\n"
	t["var/log/cloud-init-output.log"] = outputLog(ci, "23.3.3-0ubuntu0~22.04.1", `+ cat /tmp/containerd-extra.toml
+ systemctl restart containerd
Job for containerd.service failed because the control process exited with error code.
See "systemctl status containerd.service" and "journalctl -xeu containerd.service" for details.
[preflight] Running pre-flight checks
error execution phase preflight: [preflight] Some fatal errors occurred:
	[ERROR CRI]: container runtime is not running: output: time="2024-05-01T00:00:32Z" level=fatal msg="validate service connection: validate CRI v1 runtime API for endpoint \"unix:///var/run/containerd/containerd.sock\": rpc error: code = Unavailable desc = connection error: desc = \"transport: Error while dialing: dial unix /var/run/containerd/containerd.sock: connect: no such file or directory\""
, error: exit status 1
[preflight] If you know what you are doing, you can make a check non-fatal with `+"`--ignore-preflight-errors=...`"+`
To see the stack trace of this error execute with --v=5 or higher
`+scriptsFailed("00:33"))
	s := &syslog{host: n.Hostname, traditional: true}
	at := boot.Add(30 * time.Second)
	s.line(at, "systemd", 1, "Starting containerd.service - containerd container runtime...")
	s.line(at.Add(20*time.Millisecond), "containerd", 1024, `containerd: failed to load TOML: /etc/containerd/config.toml: (2, 40): unexpected token table key cannot contain '"', was expecting a table key`)
	s.line(at.Add(25*time.Millisecond), "systemd", 1, "containerd.service: Main process exited, code=exited, status=1/FAILURE")
	s.line(at.Add(26*time.Millisecond), "systemd", 1, "containerd.service: Failed with result 'exit-code'.")
	t["var/log/syslog"] = s.String()
	return scenario{name: "containerd-broken-config", args: []string{"--now", "2024-05-01T00:01:00Z"}, tree: t}
}

// criPluginDisabled: Docker's containerd.io package ships config.toml with
// disabled_plugins = ["cri"]; containerd runs but serves no CRI.
func criPluginDisabled() scenario {
	n := worker("ubuntu-22.04", "capi-byoh-worker-3", "v1.30.6")
	n.Joined = false
	ci := ciRun{Boot: boot, FinalStart: boot.Add(28 * time.Second), FinalEnd: boot.Add(31 * time.Second), Errors: []string{runpartsError}}
	t := n.Files().Add(ci.Files())
	t["etc/containerd/config.toml"] = "#   Copyright 2018-2022 Docker Inc.\n\ndisabled_plugins = [\"cri\"]\n"
	t["usr/bin/containerd"] = script("--version", "containerd containerd.io 1.7.22 7f7fdf5fed64eb6a7caf99b3e12efcf9d60e311c")
	t["var/log/cloud-init-output.log"] = outputLog(ci, "23.3.3-0ubuntu0~22.04.1", `[preflight] Running pre-flight checks
error execution phase preflight: [preflight] Some fatal errors occurred:
	[ERROR CRI]: container runtime is not running: output: time="2024-05-01T00:00:30Z" level=fatal msg="validate service connection: validate CRI v1 runtime API for endpoint \"unix:///var/run/containerd/containerd.sock\": rpc error: code = Unimplemented desc = unknown service runtime.v1.RuntimeService"
, error: exit status 1
[preflight] If you know what you are doing, you can make a check non-fatal with `+"`--ignore-preflight-errors=...`"+`
To see the stack trace of this error execute with --v=5 or higher
`+scriptsFailed("00:31"))
	return scenario{name: "containerd-cri-plugin-disabled", tree: t}
}

// swapEnabled: the image has a swap file; kubeadm only warns, the kubelet
// refuses to run and the join times out.
func swapEnabled() scenario {
	n := worker("ubuntu-22.04", "capz-e2e-md-0-r5t2w", "v1.30.6")
	ci := ciRun{Boot: boot, FinalStart: boot.Add(28 * time.Second), FinalEnd: boot.Add(4*time.Minute + 40*time.Second), Errors: []string{runpartsError}}
	t := n.Files().Add(ci.Files())
	delete(t, "etc/kubernetes/kubelet.conf")
	delete(t, "var/lib/kubelet/pki/kubelet-client-current.pem")
	t["proc/swaps"] = "Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n/swapfile                               file\t\t2097148\t\t0\t\t-2\n"
	t["var/log/cloud-init-output.log"] = outputLog(ci, "23.3.3-0ubuntu0~22.04.1", `[preflight] Running pre-flight checks
	[WARNING Swap]: swap is supported for cgroup v2 only; the NodeSwap feature gate of the kubelet is beta but disabled by default
[preflight] Reading configuration from the cluster...
[kubelet-start] Writing kubelet configuration to file "/var/lib/kubelet/config.yaml"
[kubelet-start] Starting the kubelet
[kubelet-check] Waiting for a healthy kubelet at http://127.0.0.1:10248/healthz. This can take up to 4m0s
[kubelet-check] The kubelet is not healthy after 4m0.000544432s

Unfortunately, an error has occurred, likely caused by:
	- The kubelet is not running
	- The kubelet is unhealthy due to a misconfiguration of the node in some way (required cgroups disabled)

error execution phase kubelet-start: The HTTP call equal to 'curl -sSL http://127.0.0.1:10248/healthz' returned error: Get "http://127.0.0.1:10248/healthz": context deadline exceeded
To see the stack trace of this error execute with --v=5 or higher
`+scriptsFailed("04:40"))
	s := &syslog{host: n.Hostname, traditional: true}
	every(boot.Add(36*time.Second), boot.Add(4*time.Minute+40*time.Second), 10*time.Second, func(at time.Time, i int) {
		pid := 3100 + i*5
		s.line(at, "kubelet", pid, klog('I', at, pid, "swap_util.go:115", `"Swap is on" /proc/swaps contents=<`))
		s.line(at.Add(90*time.Millisecond), "kubelet", pid, klog('E', at.Add(90*time.Millisecond), pid, "run.go:72", `"command failed" err="failed to run Kubelet: running with swap on is not supported, please disable swap or set --fail-swap-on flag to false"`))
		s.line(at.Add(95*time.Millisecond), "systemd", 1, "kubelet.service: Main process exited, code=exited, status=1/FAILURE")
	})
	t["var/log/syslog"] = s.String()
	return scenario{name: "swap-enabled", args: []string{"--now", "2024-05-01T00:05:00Z"}, tree: t}
}

// diskFull: a running worker whose disk filled up: image pulls fail to write
// layers and the kubelet evicts pods.
func diskFull() scenario {
	n := worker("ubuntu-24.04", "capz-prod-md-0-6hj8k", "v1.32.3")
	ci := ciRun{Boot: boot, FinalStart: boot.Add(28 * time.Second), FinalEnd: boot.Add(57 * time.Second), Sentinel: true}
	t := n.Files().Add(ci.Files())
	t["var/log/cloud-init-output.log"] = outputLog(ci, ciVersion, joinOK)
	s := &syslog{host: n.Hostname}
	day := boot.Add(36 * time.Hour)
	every(day, day.Add(20*time.Minute), 5*time.Minute, func(at time.Time, i int) {
		s.line(at, "kubelet", 1876, klog('I', at, 1876, "eviction_manager.go:369", `"Eviction manager: attempting to reclaim" resourceName="ephemeral-storage"`))
		s.line(at.Add(time.Millisecond), "kubelet", 1876, klog('I', at.Add(time.Millisecond), 1876, "eviction_manager.go:380", `"Eviction manager: must evict pod(s) to reclaim" resourceName="ephemeral-storage"`))
		s.line(at.Add(3*time.Second), "containerd", 902, logrus(at.Add(3*time.Second), "error", `"PullImage \"mcr.microsoft.com/oss/kubernetes/azure-cloud-node-manager:v1.32.0\" failed" error="failed to pull and unpack image \"mcr.microsoft.com/oss/kubernetes/azure-cloud-node-manager:v1.32.0\": failed to extract layer sha256:b37d7f2c0e4a: write /var/lib/containerd/io.containerd.snapshotter.v1.overlayfs/snapshots/291/fs/usr/bin/cloud-node-manager: no space left on device: unknown"`))
	})
	t["var/log/syslog"] = s.String()
	return scenario{name: "disk-full", tree: t}
}

// kubeletCertExpired: a worker powered off for more than a year comes back;
// its kubelet client certificate expired and the bootstrap kubeconfig is
// gone, so the kubelet cannot authenticate.
func kubeletCertExpired() scenario {
	n := worker("ubuntu-22.04", "capz-edge-md-0-k2v8n", "v1.30.6")
	ci := ciRun{Boot: boot, FinalStart: boot.Add(28 * time.Second), FinalEnd: boot.Add(57 * time.Second), Sentinel: true}
	t := n.Files().Add(ci.Files())
	t["var/log/cloud-init-output.log"] = outputLog(ci, "23.3.3-0ubuntu0~22.04.1", joinOK)
	later := time.Date(2025, 6, 12, 8, 55, 0, 0, time.UTC)
	s := &syslog{host: n.Hostname, traditional: true}
	every(later, later.Add(3*time.Minute), 10*time.Second, func(at time.Time, i int) {
		pid := 261533 + i*3
		s.line(at, "kubelet", pid, klog('E', at, pid, "bootstrap.go:266", "part of the existing bootstrap client certificate in /etc/kubernetes/kubelet.conf is expired: 2025-05-01 00:01:10 +0000 UTC"))
		s.line(at.Add(time.Millisecond), "kubelet", pid, klog('E', at.Add(time.Millisecond), pid, "run.go:74", `"command failed" err="failed to run Kubelet: unable to load bootstrap kubeconfig: stat /etc/kubernetes/bootstrap-kubelet.conf: no such file or directory"`))
	})
	t["var/log/syslog"] = s.String()
	return scenario{name: "kubelet-client-cert-expired", args: []string{"--now", "2025-06-12T09:00:00Z"}, tree: t}
}

// clockBehind: the VM's clock is four days behind (time sync broken at
// boot); the cluster CA is "not yet valid" and kubeadm join's discovery
// fails TLS verification.
func clockBehind() scenario {
	n := worker("ubuntu-24.04", "capz-e2e-md-0-c4l9z", "v1.32.3")
	n.Joined = false
	skewed := boot.AddDate(0, 0, -4)
	ci := ciRun{Boot: skewed, FinalStart: skewed.Add(28 * time.Second), FinalEnd: skewed.Add(5*time.Minute + 30*time.Second), Errors: []string{runpartsError}}
	t := n.Files().Add(ci.Files())
	t["etc/kubernetes/pki/ca.crt"] = string(caPEM)
	t["var/log/cloud-init-output.log"] = outputLog(ci, ciVersion, `[preflight] Running pre-flight checks
error execution phase preflight: couldn't validate the identity of the API Server: Get "https://capz-e2e-a1b2c3.eastus.cloudapp.azure.com:6443/api/v1/namespaces/kube-public/configmaps/cluster-info?timeout=10s": tls: failed to verify certificate: x509: certificate has expired or is not yet valid: current time 2024-04-27T00:05:29Z is before 2024-04-30T23:50:00Z
To see the stack trace of this error execute with --v=5 or higher
`+strings.ReplaceAll(scriptsFailed("05:30"), "2024-05-01", "2024-04-27"))
	return scenario{name: "clock-behind", tree: t}
}

// cniNotReady: the worker joined, but no CNI was installed (the Cluster lacks
// the cni: calico label, so no HelmChartProxy matched); the node stays
// NotReady and the runtime reports the network plugin not ready for 45 minutes.
func cniNotReady() scenario {
	n := worker("ubuntu-24.04", "capz-e2e-md-0-h7g3t", "v1.32.3")
	ci := ciRun{Boot: boot, FinalStart: boot.Add(28 * time.Second), FinalEnd: boot.Add(57 * time.Second), Sentinel: true}
	t := n.Files().Add(ci.Files())
	delete(t, "etc/cni/net.d/10-calico.conflist")
	t["etc/cni/net.d/"] = ""
	t["var/log/cloud-init-output.log"] = outputLog(ci, ciVersion, joinOK)
	s := &syslog{host: n.Hostname}
	every(boot.Add(45*time.Second), boot.Add(46*time.Minute), 5*time.Minute, func(at time.Time, i int) {
		s.line(at, "kubelet", 1876, klog('E', at, 1876, "kubelet.go:3008", `"Container runtime network not ready" networkReady="NetworkReady=false reason:NetworkPluginNotReady message:Network plugin returns error: cni plugin not initialized"`))
	})
	t["var/log/syslog"] = s.String()
	return scenario{name: "cni-not-installed", tree: t}
}

// joinAPIUnreachable: the worker cannot reach the control plane endpoint
// (NSG, load balancer); kubeadm join's discovery gives up.
func joinAPIUnreachable() scenario {
	n := worker("ubuntu-24.04", "capz-e2e-md-0-m3n6b", "v1.32.3")
	n.Joined = false
	ci := ciRun{Boot: boot, FinalStart: boot.Add(28 * time.Second), FinalEnd: boot.Add(5*time.Minute + 31*time.Second), Errors: []string{runpartsError}}
	t := n.Files().Add(ci.Files())
	t["var/log/cloud-init-output.log"] = outputLog(ci, ciVersion, `[preflight] Running pre-flight checks
error execution phase preflight: couldn't validate the identity of the API Server: Get "https://capz-e2e-a1b2c3.eastus.cloudapp.azure.com:6443/api/v1/namespaces/kube-public/configmaps/cluster-info?timeout=10s": dial tcp 20.81.4.12:6443: i/o timeout
To see the stack trace of this error execute with --v=5 or higher
`+scriptsFailed("05:31"))
	return scenario{name: "join-api-server-unreachable", tree: t}
}

// joinTokenExpired: the Machine's VM came up after its bootstrap token expired.
func joinTokenExpired() scenario {
	n := worker("ubuntu-24.04", "capz-e2e-md-0-p9s2d", "v1.32.3")
	n.Joined = false
	ci := ciRun{Boot: boot, FinalStart: boot.Add(28 * time.Second), FinalEnd: boot.Add(5*time.Minute + 31*time.Second), Errors: []string{runpartsError}}
	t := n.Files().Add(ci.Files())
	t["var/log/cloud-init-output.log"] = outputLog(ci, ciVersion, `[preflight] Running pre-flight checks
error execution phase preflight: couldn't validate the identity of the API Server: could not find a JWS signature in the cluster-info ConfigMap for token ID "5xf60f"
To see the stack trace of this error execute with --v=5 or higher
`+scriptsFailed("05:31"))
	return scenario{name: "join-token-expired", tree: t}
}

// preflightSmallVM: the control plane VM size has one vCPU and under 1 GiB.
func preflightSmallVM() scenario {
	n := node{OS: "ubuntu-24.04", Hostname: "capz-tiny-control-plane-x2m4p", Kubelet: "v1.32.3", Kubeadm: "v1.32.3", Kubectl: "v1.32.3",
		Containerd: "v1.7.25", Crictl: "v1.32.0", Runc: "v1.2.4", ControlPlane: true, CPVersion: "v1.32.3",
		Endpoint: "capz-tiny-3kd9.eastus.cloudapp.azure.com:6443", Boot: boot}
	ci := ciRun{Boot: boot, FinalStart: boot.Add(28 * time.Second), FinalEnd: boot.Add(33 * time.Second), Errors: []string{runpartsError}}
	t := n.Files().Add(ci.Files())
	t["var/log/cloud-init-output.log"] = outputLog(ci, ciVersion, `[init] Using Kubernetes version: v1.32.3
[preflight] Running pre-flight checks
[preflight] Some fatal errors occurred:
	[ERROR NumCPU]: the number of available CPUs 1 is less than the required 2
	[ERROR Mem]: the system RAM (921 MB) is less than the minimum 1700 MB
[preflight] If you know what you are doing, you can make a check non-fatal with `+"`--ignore-preflight-errors=...`"+`
error: error execution phase preflight: preflight checks failed
To see the stack trace of this error execute with --v=5 or higher
`+scriptsFailed("00:33"))
	return scenario{name: "kubeadm-preflight-small-vm", tree: t}
}

// downloadFailed: a bare image whose preKubeadmCommands download the CI
// build; the URL does not exist, so no kubelet or kubeadm is installed.
func downloadFailed() scenario {
	n := worker("ubuntu-24.04", "capz-ci-version-md-0-t4w8r", "")
	n.Kubeadm, n.Kubectl = "", ""
	n.Joined = false
	ci := ciRun{Boot: boot, FinalStart: boot.Add(28 * time.Second), FinalEnd: boot.Add(35 * time.Second), Errors: []string{runpartsError}}
	t := n.Files().Add(ci.Files())
	t["var/log/cloud-init-output.log"] = outputLog(ci, ciVersion, `+ CI_VERSION=v1.33.0-alpha.1.52+7c2a9b3e1f0d4c
+ for b in kubeadm kubelet kubectl
+ curl --retry 10 --retry-delay 5 -sSLf -o /usr/bin/kubeadm https://dl.k8s.io/ci/v1.33.0-alpha.1.52+7c2a9b3e1f0d4c/bin/linux/amd64/kubeadm
curl: (22) The requested URL returned error: 404
+ curl --retry 10 --retry-delay 5 -sSLf -o /usr/bin/kubelet https://dl.k8s.io/ci/v1.33.0-alpha.1.52+7c2a9b3e1f0d4c/bin/linux/amd64/kubelet
curl: (22) The requested URL returned error: 404
+ systemctl restart kubelet
Failed to restart kubelet.service: Unit kubelet.service has a bad unit file setting.
/var/lib/cloud/instance/scripts/runcmd: 3: kubeadm: not found
`+scriptsFailed("00:35"))
	return scenario{name: "bootstrap-download-failed", tree: t}
}

// kubeletConfigInvalid: a KubeadmConfig patch wrote a tab into the
// KubeletConfiguration; the kubelet cannot load it.
func kubeletConfigInvalid() scenario {
	n := worker("ubuntu-24.04", "capz-e2e-md-0-f2d7c", "v1.32.3")
	ci := ciRun{Boot: boot, FinalStart: boot.Add(28 * time.Second), FinalEnd: boot.Add(4*time.Minute + 45*time.Second), Errors: []string{runpartsError}}
	t := n.Files().Add(ci.Files())
	delete(t, "etc/kubernetes/kubelet.conf")
	delete(t, "var/lib/kubelet/pki/kubelet-client-current.pem")
	t["var/lib/kubelet/config.yaml"] = kubeletConfigYAML("systemd", "evictionHard:\n\tmemory.available: 200Mi\n")
	t["var/log/cloud-init-output.log"] = outputLog(ci, ciVersion, `[preflight] Running pre-flight checks
[kubelet-start] Writing kubelet configuration to file "/var/lib/kubelet/config.yaml"
[kubelet-start] Starting the kubelet
[kubelet-check] Waiting for a healthy kubelet at http://127.0.0.1:10248/healthz. This can take up to 4m0s
[kubelet-check] The kubelet is not healthy after 4m0.000121343s
error execution phase kubelet-start: The HTTP call equal to 'curl -sSL http://127.0.0.1:10248/healthz' returned error: Get "http://127.0.0.1:10248/healthz": context deadline exceeded
To see the stack trace of this error execute with --v=5 or higher
`+scriptsFailed("04:45"))
	s := &syslog{host: n.Hostname}
	every(boot.Add(41*time.Second), boot.Add(4*time.Minute+45*time.Second), 10*time.Second, func(at time.Time, i int) {
		pid := 4200 + i*4
		s.line(at, "kubelet", pid, klog('E', at, pid, "run.go:72", `"command failed" err="failed to load kubelet config file, path: /var/lib/kubelet/config.yaml, error: failed to load Kubelet config file /var/lib/kubelet/config.yaml, error failed to decode: yaml: line 55: found character that cannot start any token"`))
	})
	t["var/log/syslog"] = s.String()
	return scenario{name: "kubelet-config-invalid", tree: t}
}

// plantedSecrets: a failed control plane join whose files and logs carry
// every kind of secret the agent must never let out: a join token, a
// certificate key, a registry password, a SAS URL, a private key, a
// kubeconfig token. The test of this scenario searches every output for them.
func plantedSecrets() scenario {
	n := worker("ubuntu-24.04", "capz-secret-control-plane-z8k3q", "v1.32.3")
	n.Joined = false
	ci := ciRun{Boot: boot, FinalStart: boot.Add(28 * time.Second), FinalEnd: boot.Add(5*time.Minute + 31*time.Second), Errors: []string{runpartsError}}
	t := n.Files().Add(ci.Files())
	t["etc/default/kubelet"] = "KUBELET_EXTRA_ARGS=--node-labels=role=cp --register-with-taints=dedicated=cp:NoSchedule\nREGISTRY_PASSWORD=Tr0ub4dor&3\n"
	t["etc/kubernetes/pki/sa.key"] = string(clientPEM("service-accounts", boot, boot.AddDate(1, 0, 0)))
	t["etc/kubernetes/pki/front-proxy-ca.crt"] = string(clientPEM("front-proxy-ca", boot, boot.AddDate(1, 0, 0)))
	t["etc/kubernetes/admin.conf"] = "apiVersion: v1\nclusters:\n- cluster:\n    server: https://10.0.0.100:6443\n  name: c\nusers:\n- name: admin\n  user:\n    token: eyJhbGciOiJSUzI1NiIsImtpZCI6InNlY3JldCJ9.c2VjcmV0LXBheWxvYWQ.c2lnbmF0dXJl\n"
	t["var/log/cloud-init-output.log"] = outputLog(ci, ciVersion, `+ echo 'Pulling the custom kubelet from https://capzsecret.blob.core.windows.net/bins/kubelet?sv=2022-11-02&ss=b&srt=o&sp=r&se=2024-04-30T00:00:00Z&st=2024-04-01T00:00:00Z&spr=https&sig=Zm9vYmFyYmF6cXV4cXV1eGNvcmdlZ3JhdWx0%3D'
Pulling the custom kubelet from https://capzsecret.blob.core.windows.net/bins/kubelet?sv=2022-11-02&ss=b&srt=o&sp=r&se=2024-04-30T00:00:00Z&st=2024-04-01T00:00:00Z&spr=https&sig=Zm9vYmFyYmF6cXV4cXV1eGNvcmdlZ3JhdWx0%3D
+ curl -fsSL -u capzci:Hunter2curl -o /usr/local/bin/kubelet 'https://capzsecret.blob.core.windows.net/bins/kubelet?sv=2022-11-02&ss=b&srt=o&sp=r&se=2024-04-30T00:00:00Z&st=2024-04-01T00:00:00Z&spr=https&sig=Zm9vYmFyYmF6cXV4cXV1eGNvcmdlZ3JhdWx0%3D'
curl: (22) The requested URL returned error: 403 https://capzsecret.blob.core.windows.net/bins/kubelet?sv=2022-11-02&ss=b&srt=o&sp=r&se=2024-04-30T00:00:00Z&st=2024-04-01T00:00:00Z&spr=https&sig=Zm9vYmFyYmF6cXV4cXV1eGNvcmdlZ3JhdWx0%3D
+ docker login registry.example.com -u ci -p Tr0ub4dor&3
Error response from daemon: Get "https://registry.example.com/v2/": unauthorized: incorrect username or password
+ echo '{"auths":{"registry.example.com":{"auth":"YWRtaW46SHVudGVyMmF1dGg="}}}'
+ export REGISTRY_PASS=Hunter2pass DB_PWD=Hunter2pwd
+ printf 'password: "correct horse battery staple"\n'
password: "correct horse battery staple"
+ git clone https://deploy:Hunter2/slash@git.example.com/ops/node-scripts.git
level=error msg="registry login failed" err="POST https://registry.example.com/token: 401 {\"username\":\"ci\",\"password\":\"Hunter2escaped\"}"
+ cp /tmp/join-token_5xf60f.jlq4b8e3ns7kz2rd /etc/kubeadm-token
+ cat /tmp/signing.asc
-----BEGIN PGP PRIVATE KEY BLOCK-----

lQOYBGYxAAABCADplanted0pgp0secret0body0AAAAAAAAAAAAAAAAAAAAAAAAAAAA
Zm9vPGPtail
=Ab3d
-----END PGP PRIVATE KEY BLOCK-----
+ kubeadm join capz-secret.eastus.cloudapp.azure.com:6443 --token 5xf60f.jlq4b8e3ns7kz2rd --discovery-token-ca-cert-hash sha256:8c62b24d4b1f4a4c2f1b0b6e0d8b9a1e6a5b2c3d4e5f60718293a4b5c6d7e8f9 --control-plane --certificate-key 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08
[preflight] Running pre-flight checks
error execution phase preflight: unable to fetch the kubeadm-config ConfigMap: failed to get config map: Unauthorized
To see the stack trace of this error execute with --v=5 or higher
error: failed to run kubeadm join --token 5xf60f.jlq4b8e3ns7kz2rd --certificate-key 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08
-----BEGIN RSA PRIVATE KEY-----
MIIEowIBAAKCAQEA0planted0secret0key0material0do0not0leak0xxxxxxxxxxxxx
-----END RSA PRIVATE KEY-----
`+scriptsFailed("05:31"))
	return scenario{name: "planted-secrets", tree: t}
}
