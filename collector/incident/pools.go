package incident

import (
	"fmt"
	"strings"
	"time"

	"github.com/nodediag/nodediag/agent/rules"
	"github.com/nodediag/nodediag/collector/capi"
)

// labelPool is the label Cluster API sets on a MachinePool's Machines.
const labelPool = "cluster.x-k8s.io/pool-name"

// ruleMachinePools: a MachinePool with fewer ready replicas than it wants,
// past the grace period. Its instances' causes (their Machines' findings,
// the first control plane, the add-ons) explain it; an instance report no
// Machine matched is named, so that a pool without Machines of its own
// still points at its evidence.
func (d *diag) ruleMachinePools() {
	for _, mp := range d.c.MachinePools {
		r := mp.Replicas
		if r.Desired == 0 || r.Ready >= r.Desired || mp.DeletionTimestamp != nil {
			continue
		}
		since := poolSince(mp)
		if !since.IsZero() && d.o.Now.Sub(since) < d.o.Grace {
			continue
		}
		f := newFinding(rules.MachinePoolNotReady, objName(&mp.Object), rules.Params{
			"pool": mp.Name, "ready": fmt.Sprint(r.Ready), "desired": fmt.Sprint(r.Desired), "since": poolSinceText(d, mp)})
		f.Evidence = append([]Evidence{replicasEvidence(&mp.Object, r)}, badConditions(&mp.Object, 2)...)
		if im := mp.Infra; im != nil {
			f.Evidence = append(f.Evidence, badConditions(&im.Object, 2)...)
			if im.FailureReason != "" || im.FailureMessage != "" {
				f.Evidence = append(f.Evidence, Evidence{Source: objName(&im.Object) + " status.failureReason/failureMessage", Excerpt: strings.TrimSpace(im.FailureReason + ": " + im.FailureMessage)})
			}
		}
		f.ConfidenceReason = "the replica counts are Cluster API's own"
		f = d.add(f)
		if cp := d.byKey[IDControlPlaneNotInit+"/"+objName(&d.c.Object)]; cp != nil {
			d.explain(cp, f)
		}
		instances := 0
		for _, s := range d.machines {
			if s.m.Labels[labelPool] != mp.Name {
				continue
			}
			instances++
			if s.finding != nil && s.finding.ID != rules.MachineProvisioning.ID {
				d.explain(s.finding, f)
				if f.Domain == DomainUnknown {
					f.Domain = s.finding.Domain
				}
			}
		}
		for _, kind := range []string{"cni", "cloud-provider"} {
			if a := d.addons[kind]; a != nil {
				d.explain(a, f)
			}
		}
		if len(f.ExplainedBy) == 0 {
			switch {
			case instances == 0 && len(mp.ProviderIDs) == 0:
				f.MissingEvidence = fmt.Sprintf("no instance of the pool exists yet: the scale set's provisioning (%s's conditions, the provider's controller log and the resource group's activity log)", infraName(mp))
			default:
				f.MissingEvidence = fmt.Sprintf("why its instances are not ready: their node reports (`scripts/run-command/nodediag-az.sh` on the scale set of %s, or the agent as a DaemonSet)", infraName(mp))
			}
		}
	}
}

func infraName(mp *capi.MachinePool) string {
	if mp.Infra != nil {
		return objName(&mp.Infra.Object)
	}
	if mp.InfraRef.Name != "" {
		return mp.InfraRef.Kind + "/" + mp.InfraRef.Name
	}
	return "its infrastructure pool"
}

// poolSince is since when the pool has not been ready: its Ready (or v1beta1
// ReplicasReady) condition's last transition to False, else its creation.
func poolSince(mp *capi.MachinePool) time.Time {
	for _, t := range []string{"Ready", "ReplicasReady", "Available"} {
		if c, ok := mp.Condition(t); ok && c.Status != "True" && !c.LastTransitionTime.IsZero() {
			return c.LastTransitionTime
		}
	}
	return mp.CreationTimestamp
}

func poolSinceText(d *diag, mp *capi.MachinePool) string {
	t := poolSince(mp)
	how := "not ready since"
	if t.Equal(mp.CreationTimestamp) {
		how = "created"
	}
	switch a := age(d.o.Now, t); {
	case t.IsZero():
		return "age unknown"
	case a == "":
		return how + " " + t.UTC().Format(time.RFC3339)
	default:
		return how + " " + a + " ago"
	}
}
