package incident

import (
	"strings"
	"testing"
	"time"

	"github.com/nodediag/nodediag/collector/capi"
)

// poolCluster is capz-e2e with a control plane and MachinePool capz-mp-0
// of two instances, neither ready, made 65 minutes ago.
func poolCluster() *capi.Cluster {
	inst := func(name, id string) *capi.Machine {
		m := machine(name, name, "Provisioned", "v1.32.3", false)
		delete(m.Labels, labelDeployment)
		m.Labels[labelPool] = "capz-mp-0"
		pid := "azure:///subscriptions/S/resourceGroups/RG/providers/Microsoft.Compute/virtualMachineScaleSets/capz-mp-0/virtualMachines/" + id
		m.ProviderID, m.Infra.ProviderID = pid, pid
		m.InfraRef = capi.Ref{Kind: "AzureMachinePoolMachine", Namespace: "default", Name: name}
		m.Infra.Kind = "AzureMachinePoolMachine"
		return m
	}
	c := cluster(machine("capz-e2e-cp-0", "capz-e2e-cp-0", "Running", "v1.32.3", true), inst("capz-mp-0-1", "1"), inst("capz-mp-0-2", "2"))
	c.MachineDeployments = nil
	mp := &capi.MachinePool{Object: obj("MachinePool", "capz-mp-0", t0), ClusterName: "capz-e2e", Version: "v1.32.3",
		Replicas: capi.Replicas{Desired: 2, Current: 2}, InfraRef: capi.Ref{Kind: "AzureMachinePool", Namespace: "default", Name: "capz-mp-0"}}
	mp.Conditions = []capi.Condition{{Type: "Ready", Status: "False", Reason: "WaitingForReplicasReady", LastTransitionTime: t0.Add(5 * time.Minute)}}
	c.MachinePools = []*capi.MachinePool{mp}
	return c
}

func TestMachinePoolNotReady(t *testing.T) {
	c := poolCluster()
	inc := diagnose(t, c)
	f := find(inc, IDMachinePoolDown+"/MachinePool/capz-mp-0")
	if f == nil {
		t.Fatalf("no MachinePoolNotReady: %v", keys(inc))
	}
	if f.Title != "MachinePool capz-mp-0 has 0 of 2 replicas ready (not ready since 1h00m ago)" {
		t.Errorf("title %q", f.Title)
	}
	// Its instances' Machines (no node report) explain it.
	if len(f.ExplainedBy) != 2 || !f.Consequence {
		t.Errorf("explained by %v, consequence %t; want both instances' MachineNotRunning", f.ExplainedBy, f.Consequence)
	}
	if !strings.Contains(strings.Join(inc.Symptoms, "\n"), "MachinePool capz-mp-0: 0/2 ready") {
		t.Errorf("symptoms %q", inc.Symptoms)
	}
	if !strings.Contains(inc.Impact, "capz-mp-0") {
		t.Errorf("impact %q", inc.Impact)
	}

	// Within the grace period: nothing yet.
	c = poolCluster()
	c.MachinePools[0].Conditions[0].LastTransitionTime = now.Add(-5 * time.Minute)
	if f := find(diagnose(t, c), IDMachinePoolDown+"/MachinePool/capz-mp-0"); f != nil {
		t.Errorf("a pool not ready for 5 minutes is a finding: %s", f.Title)
	}
	// All ready: nothing.
	c = poolCluster()
	c.MachinePools[0].Replicas.Ready = 2
	if f := find(diagnose(t, c), IDMachinePoolDown+"/MachinePool/capz-mp-0"); f != nil {
		t.Errorf("a ready pool is a finding: %s", f.Title)
	}
}
