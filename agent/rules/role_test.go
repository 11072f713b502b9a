package rules

import (
	"strings"
	"testing"

	nodediagv1 "github.com/nodediag/nodediag/proto/nodediag/v1"
)

func TestRole(t *testing.T) {
	cpPod := bsKubeadm(&nodediagv1.Kubeadm{StaticPods: []*nodediagv1.StaticPod{
		{Path: "/etc/kubernetes/manifests/etcd.yaml", Name: "etcd"},
		{Path: "/etc/kubernetes/manifests/kube-apiserver.yaml", Name: "kube-apiserver"},
	}})
	initCfg := bsKubeadm(&nodediagv1.Kubeadm{ConfigFiles: []*nodediagv1.KubeadmConfigFile{
		{Path: "/run/kubeadm/kubeadm.yaml", Kinds: []string{"ClusterConfiguration", "InitConfiguration"}},
	}})
	joinCP := bsKubeadm(&nodediagv1.Kubeadm{ConfigFiles: []*nodediagv1.KubeadmConfigFile{
		{Path: "/run/kubeadm/kubeadm-join-config.yaml", Kinds: []string{"JoinConfiguration"}, JoinControlPlane: true},
	}})
	for _, tc := range []struct {
		name       string
		ctx        Context
		ev         []*nodediagv1.ProbeEvidence
		role, from string
	}{
		{"nothing tells", Context{}, nil, "", ""},
		{"kube-apiserver manifest", Context{}, []*nodediagv1.ProbeEvidence{cpPod}, RoleControlPlane, "/etc/kubernetes/manifests/kube-apiserver.yaml"},
		{"init configuration", Context{}, []*nodediagv1.ProbeEvidence{initCfg}, RoleControlPlane, "/run/kubeadm/kubeadm.yaml"},
		{"control plane join", Context{}, []*nodediagv1.ProbeEvidence{joinCP}, RoleControlPlane, "/run/kubeadm/kubeadm-join-config.yaml"},
		{"worker join", Context{}, []*nodediagv1.ProbeEvidence{bsKubeadmJoin}, RoleWorker, "/run/kubeadm/kubeadm-join-config.yaml"},
		// The Machine's word wins over what the node shows: a worker
		// Machine with a control plane's files is a mix-up the report
		// must judge as the Machine says.
		{"context wins", Context{Role: RoleWorker, RoleSource: "Machine/md-0-x metadata.labels"}, []*nodediagv1.ProbeEvidence{cpPod}, RoleWorker, "Machine/md-0-x metadata.labels"},
		{"flag without source", Context{Role: RoleControlPlane}, nil, RoleControlPlane, "--role"},
		{"unknown context role ignored", Context{Role: "etcd"}, []*nodediagv1.ProbeEvidence{bsKubeadmJoin}, RoleWorker, "/run/kubeadm/kubeadm-join-config.yaml"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			role, q := bsInput(nil, tc.ctx, tc.ev...).Role()
			if role != tc.role {
				t.Fatalf("role = %q, want %q", role, tc.role)
			}
			if q.GetSource() != tc.from {
				t.Errorf("quoted from %q, want %q (%v)", q.GetSource(), tc.from, q)
			}
		})
	}
}

func TestRoleAdjust(t *testing.T) {
	unreachable := func() []*nodediagv1.Finding {
		return []*nodediagv1.Finding{
			APIServerUnreachable.Finding(Params{"endpoint": "cp.example:6443"}, QuoteText("journal:kubelet.service", "dial tcp 10.0.0.4:6443: connect: connection refused")),
			KubeletNotHealthy.Finding(nil, QuoteText("journal:kubelet.service", "kubelet exited")),
		}
	}
	generic := unreachable()[0].GetRemediation()
	notHealthy := unreachable()[1].GetRemediation()
	for _, tc := range []struct {
		name string
		ctx  Context
		ev   []*nodediagv1.ProbeEvidence
		want string // in the remediation
	}{
		{"unknown role keeps the generic fix", Context{}, nil, generic},
		{"control plane from the Machine", Context{Role: RoleControlPlane, RoleSource: "Machine/cp-0 metadata.labels"}, nil, "crictl ps -a --name kube-apiserver"},
		{"worker from the node's join configuration", Context{}, []*nodediagv1.ProbeEvidence{bsKubeadmJoin}, "look first at the control plane Machines"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := unreachable()
			roleAdjust(bsInput(nil, tc.ctx, tc.ev...), fs)
			if !strings.Contains(fs[0].GetRemediation(), tc.want) {
				t.Errorf("remediation = %q, want it to contain %q", fs[0].GetRemediation(), tc.want)
			}
			role, why := bsInput(nil, tc.ctx, tc.ev...).Role()
			last := fs[0].GetEvidence()[len(fs[0].GetEvidence())-1]
			switch {
			case role == "" && len(fs[0].GetEvidence()) != 1:
				t.Errorf("evidence = %v, want only the log line when the role is unknown", fs[0].GetEvidence())
			case role != "" && last.GetSource() != why.GetSource():
				t.Errorf("last evidence = %v, want the role's quote %v", last, why)
			}
			// Findings whose fix does not depend on the role stay as they were.
			if fs[1].GetRemediation() != notHealthy || len(fs[1].GetEvidence()) != 1 {
				t.Errorf("KubeletNotHealthy changed: %v", fs[1])
			}
		})
	}
}

// Every finding a note is written for exists in the catalog, and every note
// is a full remediation (it replaces the generic one).
func TestRoleNotesKnown(t *testing.T) {
	for id, notes := range roleNotes {
		if _, ok := Lookup(id); !ok {
			t.Errorf("roleNotes: %s is not in the catalog", id)
		}
		for role, n := range notes {
			if role != RoleControlPlane && role != RoleWorker {
				t.Errorf("roleNotes[%s]: unknown role %q", id, role)
			}
			if len(n) < 100 {
				t.Errorf("roleNotes[%s][%s] = %q: too short to replace the remediation", id, role, n)
			}
		}
	}
}
