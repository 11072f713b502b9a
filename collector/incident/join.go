package incident

import (
	"sort"
	"strings"

	"github.com/nodediag/nodediag/collector/capi"
	nodediagv1 "github.com/nodediag/nodediag/proto/nodediag/v1"
)

// NodeReport is one node's latest report as the collector holds it: the
// report itself and, when it came from the store, the record's NodeSummary
// (whose provider_id is the one the agent's Hello gave). A caller holding
// store.Record values passes {Report: rec.Report, Summary: rec.Summary}.
type NodeReport struct {
	Report  *nodediagv1.Report
	Summary *nodediagv1.NodeSummary
	// Machine is the name of the Machine the report is known to stand
	// for, when its source says so: a CI artifact tree keeps each
	// Machine's logs in machines/NAME/.
	Machine string
	// PoolInstance is the VMSS instance the report stands for, when its
	// source says so ("POOL/virtualMachines/ID": a CI artifact tree keeps
	// a machine pool instance's logs in machine-pools/POOL/COMPUTERNAME/,
	// and the computer name carries the instance ID). It joins the
	// pool's Machine whose provider ID names that instance.
	PoolInstance string
}

// Reports wraps bare reports (files, bundles) as NodeReports.
func Reports(rs ...*nodediagv1.Report) []NodeReport {
	out := make([]NodeReport, 0, len(rs))
	for _, r := range rs {
		out = append(out, NodeReport{Report: r})
	}
	return out
}

// NodeName is the node the report stands for: the summary's key, else the
// report's node name, else its host name.
func (n NodeReport) NodeName() string {
	if s := n.Summary.GetNodeName(); s != "" {
		return s
	}
	if s := n.Report.GetHost().GetNodeName(); s != "" {
		return s
	}
	return n.Report.GetHost().GetHostname()
}

// ProviderID is the node's cloud identity: the Hello's (summary), else the
// kubelet's --provider-id found in the report's evidence.
func (n NodeReport) ProviderID() string {
	if s := n.Summary.GetProviderId(); s != "" {
		return s
	}
	for _, pe := range n.Report.GetEvidence().GetProbes() {
		for _, f := range pe.GetKubeletConfig().GetFlags() {
			if f.GetName() == "provider-id" && f.GetActive() && f.GetValue() != "" {
				return f.GetValue()
			}
		}
	}
	return ""
}

// Match keys, strongest first.
const (
	MatchMachineDir   = "artifact-directory"
	MatchPoolInstance = "pool-instance"
	MatchProviderID   = "providerID"
	MatchNodeRef      = "nodeRef"
	MatchInfraName    = "infra-machine-name"
)

// MachineNode is a Machine with the node report joined to it. Machine is nil
// for a report that matched no Machine of the cluster; Node is nil for a
// Machine no report matched.
type MachineNode struct {
	Machine *capi.Machine
	Node    *NodeReport
	// MatchedBy is the key that joined them (MatchProviderID, MatchNodeRef,
	// MatchInfraName), empty when nothing matched; Key is the value.
	MatchedBy, Key string
}

// NormalizeProviderID makes the two spellings of one provider ID equal:
// lower case (Azure resource IDs are case-insensitive and the kubelet and
// CAPZ disagree on the case of resourceGroups), no trailing slash, and the
// scheme's slashes counted once ("azure:///subscriptions/..." and
// "azure://subscriptions/..." are the same VM).
func NormalizeProviderID(id string) string {
	id = strings.ToLower(strings.TrimSpace(id))
	id = strings.TrimRight(id, "/")
	if scheme, rest, ok := strings.Cut(id, "://"); ok {
		return scheme + ":///" + strings.TrimLeft(rest, "/")
	}
	return id
}

// Join pairs every Machine of c with its node report. Keys, in order of
// trust: the Machine's name ↔ the directory the report was read from (CI
// artifact trees); a VMSS instance's provider ID ↔ the pool instance a CI
// tree's machine-pools/ directory names; the provider ID (the Machine's spec.providerID or its infra
// machine's ↔ the Hello's, or the kubelet's --provider-id); status.nodeRef's
// name ↔ the node name; the infra machine's name (an AzureMachine's name is
// the VM's, hence the host's name) ↔ the host or node name. Each report
// joins at most one Machine. The result lists the Machines in the cluster's
// order, then the reports that matched none (Machine nil).
func Join(c *capi.Cluster, reports []NodeReport) []MachineNode {
	out := make([]MachineNode, len(c.Machines))
	used := make([]bool, len(reports))
	for i, m := range c.Machines {
		out[i].Machine = m
	}
	type keyFn struct {
		name    string
		machine func(m *capi.Machine) []string
		node    func(n NodeReport) []string
	}
	keys := []keyFn{
		{MatchMachineDir, func(m *capi.Machine) []string {
			return []string{m.Name}
		}, func(n NodeReport) []string {
			if n.Machine == "" {
				return nil
			}
			return []string{n.Machine}
		}},
		{MatchPoolInstance, func(m *capi.Machine) []string {
			var out []string
			for _, id := range []string{m.ProviderID, infraProviderID(m)} {
				// .../virtualMachineScaleSets/POOL/virtualMachines/ID
				id = NormalizeProviderID(id)
				if _, inst, ok := strings.Cut(id, "/virtualmachinescalesets/"); ok {
					out = append(out, inst)
				}
			}
			return out
		}, func(n NodeReport) []string { return normAll([]string{n.PoolInstance}, strings.ToLower) }},
		{MatchProviderID, func(m *capi.Machine) []string {
			ids := []string{m.ProviderID}
			if m.Infra != nil {
				ids = append(ids, m.Infra.ProviderID)
			}
			return normAll(ids, NormalizeProviderID)
		}, func(n NodeReport) []string { return normAll([]string{n.ProviderID()}, NormalizeProviderID) }},
		{MatchNodeRef, func(m *capi.Machine) []string {
			return normAll([]string{m.NodeRef.Name}, strings.ToLower)
		}, func(n NodeReport) []string {
			return normAll([]string{n.NodeName(), n.Report.GetHost().GetNodeName()}, strings.ToLower)
		}},
		{MatchInfraName, func(m *capi.Machine) []string {
			if m.Infra == nil && m.InfraRef.Name == "" {
				return nil
			}
			name := m.InfraRef.Name
			if m.Infra != nil {
				name = m.Infra.Name
			}
			return normAll([]string{name}, strings.ToLower)
		}, func(n NodeReport) []string {
			return normAll([]string{n.Report.GetHost().GetHostname(), n.NodeName()}, strings.ToLower)
		}},
	}
	for _, k := range keys {
		index := map[string]int{}
		for j, n := range reports {
			if used[j] || n.Report == nil {
				continue
			}
			for _, v := range k.node(n) {
				if _, dup := index[v]; !dup {
					index[v] = j
				}
			}
		}
		for i := range out {
			if out[i].Node != nil {
				continue
			}
			for _, v := range k.machine(out[i].Machine) {
				j, ok := index[v]
				if !ok || used[j] {
					continue
				}
				used[j] = true
				n := reports[j]
				out[i].Node, out[i].MatchedBy, out[i].Key = &n, k.name, v
				break
			}
		}
	}
	var rest []MachineNode
	for j, n := range reports {
		if !used[j] && n.Report != nil {
			n := n
			rest = append(rest, MachineNode{Node: &n})
		}
	}
	sort.SliceStable(rest, func(a, b int) bool { return rest[a].Node.NodeName() < rest[b].Node.NodeName() })
	return append(out, rest...)
}

func infraProviderID(m *capi.Machine) string {
	if m.Infra == nil {
		return ""
	}
	return m.Infra.ProviderID
}

func normAll(vs []string, f func(string) string) []string {
	var out []string
	for _, v := range vs {
		if v = f(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}

// Candidates keeps the node summaries that may join a Machine of c: by the
// summary's provider ID (the agent's Hello) or its node name against every
// Machine's provider IDs, nodeRef and infra machine name. A collector
// holding a whole fleet decodes only these reports for one cluster; a
// report whose only key is in its evidence (the kubelet's --provider-id,
// a host name unlike the node name) is missed, as its Hello did not say.
func Candidates(c *capi.Cluster, sums []*nodediagv1.NodeSummary) []*nodediagv1.NodeSummary {
	ids, names := map[string]bool{}, map[string]bool{}
	for _, m := range c.Machines {
		ids[NormalizeProviderID(m.ProviderID)] = true
		names[strings.ToLower(m.NodeRef.Name)] = true
		names[strings.ToLower(m.InfraRef.Name)] = true
		if m.Infra != nil {
			ids[NormalizeProviderID(m.Infra.ProviderID)] = true
			names[strings.ToLower(m.Infra.Name)] = true
		}
	}
	delete(ids, "")
	delete(names, "")
	var out []*nodediagv1.NodeSummary
	for _, s := range sums {
		if ids[NormalizeProviderID(s.GetProviderId())] || names[strings.ToLower(s.GetNodeName())] {
			out = append(out, s)
		}
	}
	return out
}
