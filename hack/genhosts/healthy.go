package main

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"strings"
	"time"
)

// Healthy nodes in the shapes real healthy nodes have, beyond a freshly
// joined worker: each is a false positive the agent must not raise.

// healthyControlPlane: the first control plane node of a CAPZ cluster, a
// few minutes after kubeadm init: static pods, the cluster PKI, kubeadm's
// kubeconfigs, and the API server's own start-up in the kubelet's log.
func healthyControlPlane() scenario {
	n := node{OS: "ubuntu-24.04", Hostname: "capz-e2e-control-plane-t8x5m", Kubelet: "v1.32.3", Kubeadm: "v1.32.3", Kubectl: "v1.32.3",
		Containerd: "v1.7.25", Crictl: "v1.32.0", Runc: "v1.2.4", ControlPlane: true, CPVersion: "v1.32.3", Joined: true,
		Endpoint: "capz-e2e-a1b2c3.eastus.cloudapp.azure.com:6443", Boot: boot}
	ci := ciRun{Boot: boot, FinalStart: boot.Add(28 * time.Second), FinalEnd: boot.Add(2*time.Minute + 40*time.Second), Sentinel: true}
	t := n.Files().Add(ci.Files())
	for _, c := range []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler"} {
		t["etc/kubernetes/manifests/"+c+".yaml"] = staticPod(c, "registry.k8s.io/"+c+":v1.32.3")
	}
	t["etc/kubernetes/manifests/etcd.yaml"] = staticPod("etcd", "registry.k8s.io/etcd:3.5.16-0")
	year := caStart.AddDate(1, 0, 0)
	for i, name := range []string{"apiserver", "apiserver-kubelet-client", "front-proxy-client", "apiserver-etcd-client", "etcd/server", "etcd/peer", "etcd/healthcheck-client"} {
		t["etc/kubernetes/pki/"+name+".crt"] = string(certPEM(name, caStart, year, false, int64(100+i)))
	}
	t["etc/kubernetes/pki/etcd/ca.crt"] = string(caPEM)
	t["etc/kubernetes/pki/front-proxy-ca.crt"] = string(caPEM)
	t["etc/kubernetes/admin.conf"] = "apiVersion: v1\nclusters:\n- cluster:\n    server: https://" + n.Endpoint + "\n  name: capz-e2e\nusers:\n- name: kubernetes-admin\n  user:\n    client-certificate-data: " +
		base64.StdEncoding.EncodeToString(certPEM("kubernetes-admin", caStart, year, false, 200)) + "\n"
	t["var/log/cloud-init-output.log"] = outputLog(ci, ciVersion, `[init] Using Kubernetes version: v1.32.3
[preflight] Running pre-flight checks
[certs] Using certificateDir folder "/etc/kubernetes/pki"
[kubelet-start] Starting the kubelet
[wait-control-plane] Waiting for the kubelet to boot up the control plane as static Pods from directory "/etc/kubernetes/manifests"
[kubelet-check] Waiting for a healthy kubelet at http://127.0.0.1:10248/healthz. This can take up to 4m0s
[kubelet-check] The kubelet is healthy after 501.28ms
[api-check] Waiting for a healthy API server. This can take up to 4m0s
[api-check] The API server is healthy after 21.003546s
[upload-config] Storing the configuration used in ConfigMap "kubeadm-config" in the "kube-system" Namespace
[mark-control-plane] Marking the node capz-e2e-control-plane-t8x5m as control-plane by adding the labels: [node-role.kubernetes.io/control-plane node.kubernetes.io/exclude-from-external-load-balancers]
[bootstrap-token] Configured RBAC rules to allow certificate rotation for all node client certificates in the cluster
[addons] Applied essential addon: CoreDNS
[addons] Applied essential addon: kube-proxy

Your Kubernetes control-plane has initialized successfully!

`)
	s := &syslog{host: n.Hostname}
	kubeletStartupNoise(s, boot.Add(60*time.Second), 2210, n.Hostname, n.Endpoint)
	at := boot.Add(62 * time.Second)
	s.line(at, "kubelet", 2210, klog('E', at, 2210, "reflector.go:158", `"Unhandled Error" err="k8s.io/client-go/informers/factory.go:160: Failed to watch *v1.Service: failed to list *v1.Service: Get \"https://`+n.Endpoint+`/api/v1/services?limit=500&resourceVersion=0\": dial tcp 10.0.0.100:6443: connect: connection refused" logger="UnhandledError"`))
	at = boot.Add(70 * time.Second)
	s.line(at, "kubelet", 2210, klog('E', at, 2210, "controller.go:145", `"Failed to ensure lease exists, will retry" err="Get \"https://`+n.Endpoint+`/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/`+n.Hostname+`?timeout=10s\": dial tcp 10.0.0.100:6443: connect: connection refused" interval="400ms"`))
	at = boot.Add(4 * time.Minute)
	s.line(at, "kubelet", 2210, klog('I', at, 2210, "kubelet_node_status.go:502", `"Fast updating node status as it just became ready"`))
	t["var/log/syslog"] = s.String()
	return scenario{name: "healthy-control-plane", tree: t}
}

// healthyRebootedAfterAYear: a worker that joined a year ago and has just
// rebooted. /run was wiped (no sentinel, no /run/kubeadm, as on every
// rebooted CAPI node), the kubelet rotated its client certificate, the old
// one expired next to it, and the kubelet's self-signed serving certificate
// expired (a warning: nothing renews it, nothing breaks).
func healthyRebootedAfterAYear() scenario {
	n := worker("ubuntu-24.04", "capz-prod-md-0-w7k3d", "v1.32.3")
	boot2 := time.Date(2025, 6, 5, 7, 30, 0, 0, time.UTC)
	ci := ciRun{Boot: boot2, FinalStart: boot2.Add(25 * time.Second), FinalEnd: boot2.Add(27 * time.Second)}
	t := n.Files().Add(ci.Files())
	delete(t, "run/kubeadm/kubeadm-join-config.yaml")
	delete(t, "run/cluster-api/")
	// runcmd (the bootstrap script) ran once, at the first boot.
	t["var/lib/cloud/instances/7d3c6a2e-5b1f-4c8e-9a4d-2f6b8e1c0a93/sem/config_scripts_user"] = fmt.Sprintf("1342: %d\n", boot.Add(30*time.Second).Unix())
	rotated := time.Date(2025, 3, 20, 4, 12, 9, 0, time.UTC)
	name := "kubelet-client-" + rotated.Format("2006-01-02-15-04-05") + ".pem"
	t["var/lib/kubelet/pki/"+name] = string(clientPEM("system:node:"+n.Hostname, rotated, rotated.AddDate(1, 0, 0)))
	t["var/lib/kubelet/pki/kubelet-client-current.pem"] = "->/var/lib/kubelet/pki/" + name
	t["var/log/cloud-init-output.log"] = outputLog(ci, ciVersion, "")
	s := &syslog{host: n.Hostname}
	at := boot2.Add(12 * time.Second)
	s.line(at, "systemd", 1, "Started kubelet.service - kubelet: The Kubernetes Node Agent.")
	for i := 0; i < 3; i++ {
		at := boot2.Add(time.Duration(13+4*i) * time.Second)
		s.line(at, "kubelet", 812, klog('E', at, 812, "kubelet.go:3008", `"Container runtime network not ready" networkReady="NetworkReady=false reason:NetworkPluginNotReady message:Network plugin returns error: cni plugin not initialized"`))
	}
	at = boot2.Add(40 * time.Second)
	s.line(at, "kubelet", 812, klog('I', at, 812, "kubelet_node_status.go:502", `"Fast updating node status as it just became ready"`))
	t["var/log/syslog"] = s.String()
	return scenario{name: "healthy-rebooted-after-a-year", tree: t}
}

// kubeadmWithoutCAPI: a worker joined by hand on a cloud image: cloud-init
// ran (and installed the packages) but no CAPI bootstrap, so no sentinel is
// expected.
func kubeadmWithoutCAPI() scenario {
	n := worker("ubuntu-22.04", "lab-worker-2", "v1.30.6")
	ci := ciRun{Boot: boot, FinalStart: boot.Add(28 * time.Second), FinalEnd: boot.Add(90 * time.Second)}
	t := n.Files().Add(ci.Files())
	delete(t, "run/kubeadm/kubeadm-join-config.yaml")
	delete(t, "run/cluster-api/")
	t["var/lib/cloud/instances/7d3c6a2e-5b1f-4c8e-9a4d-2f6b8e1c0a93/scripts/runcmd"] = "#!/bin/sh\napt-get install -y kubelet kubeadm kubectl\n"
	t["var/log/cloud-init-output.log"] = outputLog(ci, "23.3.3-0ubuntu0~22.04.1", `Reading package lists...
Setting up kubectl (1.30.6-1.1) ...
Setting up kubelet (1.30.6-1.1) ...
Setting up kubeadm (1.30.6-1.1) ...
`)
	return scenario{name: "kubeadm-node-without-capi", tree: t}
}

// airgapModuleError: an air-gapped node bootstrapped fine, but cloud-init's
// package upgrade module could not reach a mirror.
func airgapModuleError() scenario {
	n := worker("ubuntu-22.04", "dkp-airgap-md-0-9s2kx", "v1.30.6")
	ci := ciRun{Boot: boot, FinalStart: boot.Add(28 * time.Second), FinalEnd: boot.Add(75 * time.Second), Sentinel: true,
		Errors: []string{"('package_update_upgrade_install', ProcessExecutionError(\"Unexpected error while running command.\\nCommand: ['apt-get', '--option=Dpkg::Options::=--force-confold', 'update']\\nExit code: 100\"))"}}
	t := n.Files().Add(ci.Files())
	t["var/log/cloud-init-output.log"] = outputLog(ci, "23.3.3-0ubuntu0~22.04.1", `Err:1 http://archive.ubuntu.com/ubuntu jammy InRelease
  Temporary failure resolving 'archive.ubuntu.com'
W: Failed to fetch http://archive.ubuntu.com/ubuntu/dists/jammy/InRelease  Temporary failure resolving 'archive.ubuntu.com'
W: Some index files failed to download. They have been ignored, or old ones used instead.
2024-05-01 00:00:40,118 - cc_package_update_upgrade_install.py[WARNING]: Failed to update package using apt: Unexpected error while running command.
2024-05-01 00:00:40,120 - util.py[WARNING]: Running module package_update_upgrade_install (<module 'cloudinit.config.cc_package_update_upgrade_install' from '/usr/lib/python3/dist-packages/cloudinit/config/cc_package_update_upgrade_install.py'>) failed
`+joinOK)
	return scenario{name: "airgap-cloud-init-module-error", tree: t}
}

// rhelLocalTimeFlag: a RHEL 9 worker in a UTC+2 data centre. Its
// /var/log/messages is in local time; kubelet v1.29 refuses the
// dockershim-era --network-plugin left in /etc/sysconfig/kubelet.
func rhelLocalTimeFlag() scenario {
	n := worker("rhel-9", "dc1-k8s-worker-07", "v1.29.10")
	n.Joined = false
	n.Containerd = "v1.7.13"
	n.Crictl = "v1.29.0"
	ci := ciRun{Boot: boot, FinalStart: boot.Add(28 * time.Second), FinalEnd: boot.Add(5 * time.Minute), Errors: []string{runpartsError}}
	t := n.Files().Add(ci.Files())
	t["etc/sysconfig/kubelet"] = "KUBELET_EXTRA_ARGS=--network-plugin=cni --node-labels=dc=dc1\n"
	t["etc/localtime"] = "->../usr/share/zoneinfo/Etc/GMT-2"
	t["usr/share/zoneinfo/Etc/GMT-2"] = string(tzif("+02", 2*60*60))
	t["var/log/cloud-init-output.log"] = outputLog(ci, "23.4-7.el9", `[preflight] Running pre-flight checks
[kubelet-start] Starting the kubelet
[kubelet-check] Waiting for a healthy kubelet at http://127.0.0.1:10248/healthz. This can take up to 4m0s
[kubelet-check] The kubelet is not healthy after 4m0.000305186s
error execution phase kubelet-start: The HTTP call equal to 'curl -sSL http://127.0.0.1:10248/healthz' returned error: Get "http://127.0.0.1:10248/healthz": context deadline exceeded
`+strings.ReplaceAll(scriptsFailed("05:00"), "2024-05-01 00:05:00", "2024-05-01 02:05:00"))
	local := time.FixedZone("+02", 2*60*60)
	s := &syslog{host: n.Hostname, traditional: true}
	every(boot.Add(40*time.Second), boot.Add(5*time.Minute), 10*time.Second, func(at time.Time, i int) {
		lt := at.In(local)
		pid := 5100 + i*3
		fmt.Fprintf(&s.b, "%s %s kubelet[%d]: %s\n", lt.Format("Jan _2 15:04:05"), n.Hostname, pid,
			fmt.Sprintf("E%s %7d run.go:74] \"command failed\" err=\"failed to parse kubelet flag: unknown flag: --network-plugin\"", lt.Format("0102 15:04:05.000000"), pid))
	})
	t["var/log/messages"] = s.String()
	return scenario{name: "rhel-local-time-removed-flag", args: []string{"--now", "2024-05-01T00:06:00Z"}, tree: t}
}

// tzif is a TZif file (RFC 8536, version 2) for a zone at a fixed offset
// from UTC: what /usr/share/zoneinfo/Etc/GMT-2 holds.
func tzif(abbr string, offset int32) []byte {
	var b bytes.Buffer
	block := func() {
		b.WriteString("TZif2")
		b.Write(make([]byte, 15))
		for _, n := range []uint32{0, 0, 0, 0, 1, uint32(len(abbr) + 1)} {
			binary.Write(&b, binary.BigEndian, n)
		}
		binary.Write(&b, binary.BigEndian, offset)
		b.WriteByte(0) // not DST
		b.WriteByte(0) // abbreviation index
		b.WriteString(abbr + "\x00")
	}
	block() // version 1 data
	block() // version 2 data
	fmt.Fprintf(&b, "\n<%s>%d\n", abbr, -offset/3600)
	return b.Bytes()
}
