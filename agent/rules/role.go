package rules

import (
	"strings"

	nodediagv1 "github.com/nodediag/nodediag/proto/nodediag/v1"
)

// Node roles (Context.Role).
const (
	RoleControlPlane = "control-plane"
	RoleWorker       = "worker"
)

// Role says what the node is and quotes why: the caller's word first (the
// Machine's cluster.x-k8s.io/control-plane label in the collector,
// --role on the command line), else what kubeadm left on the node (a
// kube-apiserver static pod manifest, an InitConfiguration or a
// JoinConfiguration with a controlPlane section: a control plane node; a
// JoinConfiguration without one: a worker). "" when neither tells.
func (in *Input) Role() (string, *nodediagv1.Quote) {
	switch in.Ctx.Role {
	case RoleControlPlane, RoleWorker:
		src := in.Ctx.RoleSource
		if src == "" {
			src = "--role"
		}
		text := "role: " + in.Ctx.Role
		if in.Ctx.RoleReason != "" {
			text += " (" + in.Ctx.RoleReason + ")"
		}
		return in.Ctx.Role, QuoteText(src, text)
	}
	k := in.Kubeadm()
	for _, sp := range k.GetStaticPods() {
		if sp.GetName() == "kube-apiserver" || strings.HasSuffix(sp.GetPath(), "/kube-apiserver.yaml") {
			return RoleControlPlane, QuoteText(sp.GetPath(), "static pod manifest of kube-apiserver")
		}
	}
	joins := ""
	for _, cf := range k.GetConfigFiles() {
		for _, kind := range cf.GetKinds() {
			switch {
			case kind == "InitConfiguration":
				return RoleControlPlane, QuoteText(cf.GetPath(), "kind: InitConfiguration")
			case kind == "JoinConfiguration" && cf.GetJoinControlPlane():
				return RoleControlPlane, QuoteText(cf.GetPath(), "kind: JoinConfiguration with controlPlane")
			case kind == "JoinConfiguration" && joins == "":
				joins = cf.GetPath()
			}
		}
	}
	if joins != "" {
		return RoleWorker, QuoteText(joins, "kind: JoinConfiguration without controlPlane")
	}
	return "", nil
}

// roleNotes replace a finding's remediation with one that says where to
// look first on this kind of node. Only findings whose fix depends on the
// role are listed; each note says all the generic remediation says.
var roleNotes = map[string]map[string]string{
	"APIServerUnreachable": {
		RoleControlPlane: "This is a control plane node: the endpoint's load balancer forwards to the control plane nodes' kube-apiservers, this one's included, and on the first control plane nothing answers until its own kube-apiserver runs. Look at this node's kube-apiserver and etcd static pods first (crictl ps -a --name kube-apiserver; /var/log/pods/kube-system_kube-apiserver-*/, /var/log/pods/kube-system_etcd-*/), then the load balancer and its health probe on 6443, DNS of the endpoint and NSG rules.",
		RoleWorker:       "This is a worker node: it reaches the control plane only through the endpoint, so look first at the control plane Machines (a worker cannot join before the first control plane has initialised and its kube-apiserver passes the load balancer's health probe), then DNS of the endpoint, the load balancer and its health probe on 6443, and NSG rules on the way.",
	},
	"APIServerCertificateUntrusted": {
		RoleControlPlane: "This is a control plane node: its own /etc/kubernetes/pki/ca.crt signed the API server certificate it serves, so an untrusted certificate here means another cluster's CA was written (a reused bootstrap secret) or something intercepts TLS on the way to the load balancer (a proxy): check that the cluster CA secret (NAME-ca in the management cluster) and this node's /etc/kubernetes/pki/ca.crt agree.",
		RoleWorker:       "This is a worker node: compare the caCertHashes of its JoinConfiguration with the cluster's CA secret (NAME-ca in the management cluster); they must belong to this cluster, and nothing may intercept TLS on the way (a proxy).",
	},
}

// roleAdjust gives the findings whose remediation depends on the role the
// role's remediation and the evidence of the role.
func roleAdjust(in *Input, fs []*nodediagv1.Finding) {
	var role string
	var why *nodediagv1.Quote
	known := false
	for _, f := range fs {
		notes, ok := roleNotes[f.GetId()]
		if !ok {
			continue
		}
		if !known {
			role, why = in.Role()
			known = true
		}
		note := notes[role]
		if note == "" {
			continue
		}
		f.Remediation = note
		f.Evidence = append(f.Evidence, why)
	}
}
