package cli

import (
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/nodediag/nodediag/collector/capi"
	"github.com/nodediag/nodediag/collector/incident"
)

// treeRow is one line of `nodediag describe cluster`: an object at a depth
// of the tree, with its readiness and, for a Machine, its node's verdict.
type treeRow struct {
	prefix, name, ready, phase, node string
}

// clusterTree lays out c as clusterctl describe does (the Cluster, its
// infrastructure, the control plane with its Machines, the workers by
// MachineDeployment and MachineSet, then Machines owned by nothing known),
// with each Machine's node finding from joined.
func clusterTree(c *capi.Cluster, inc *incident.Incident) []treeRow {
	rowOf := map[string]incident.MachineRow{}
	for _, r := range inc.Machines {
		rowOf[r.Machine] = r
	}
	type item struct {
		row      treeRow
		children []*item
	}
	obj := func(o *capi.Object) treeRow {
		return treeRow{name: o.Kind + "/" + o.Name, ready: readiness(o), phase: o.Phase}
	}
	machine := func(m *capi.Machine) *item {
		r := obj(&m.Object)
		r.node = nodeVerdict(rowOf[m.Name])
		it := &item{row: r}
		if m.Infra != nil {
			it.children = append(it.children, &item{row: obj(&m.Infra.Object)})
		}
		return it
	}
	root := &item{row: obj(&c.Object)}
	if c.Infra != nil {
		r := obj(c.Infra)
		r.name = "ClusterInfrastructure - " + r.name
		root.children = append(root.children, &item{row: r})
	}
	placed := map[*capi.Machine]bool{}
	if c.ControlPlane != nil {
		r := obj(&c.ControlPlane.Object)
		r.name = "ControlPlane - " + r.name
		cp := &item{row: r}
		for _, m := range c.Machines {
			if m.ControlPlane {
				cp.children = append(cp.children, machine(m))
				placed[m] = true
			}
		}
		root.children = append(root.children, cp)
	}
	ownedBy := func(o *capi.Object, kind, name string) bool {
		for _, ref := range o.Owners {
			if ref.Kind == kind && ref.Name == name {
				return true
			}
		}
		return false
	}
	workers := &item{row: treeRow{name: "Workers"}}
	setPlaced := map[*capi.MachineSet]bool{}
	machinesOfSet := func(ms *capi.MachineSet) *item {
		it := &item{row: obj(&ms.Object)}
		for _, m := range c.Machines {
			if !placed[m] && ownedBy(&m.Object, "MachineSet", ms.Name) {
				it.children = append(it.children, machine(m))
				placed[m] = true
			}
		}
		setPlaced[ms] = true
		return it
	}
	for _, md := range c.MachineDeployments {
		it := &item{row: obj(&md.Object)}
		it.row.phase = fmt.Sprintf("%d/%d ready", md.Replicas.Ready, md.Replicas.Desired)
		for _, ms := range c.MachineSets {
			if ownedBy(&ms.Object, "MachineDeployment", md.Name) {
				it.children = append(it.children, machinesOfSet(ms))
			}
		}
		workers.children = append(workers.children, it)
	}
	for _, ms := range c.MachineSets {
		if !setPlaced[ms] {
			workers.children = append(workers.children, machinesOfSet(ms))
		}
	}
	for _, mp := range c.MachinePools {
		it := &item{row: obj(&mp.Object)}
		it.row.phase = fmt.Sprintf("%d/%d ready", mp.Replicas.Ready, mp.Replicas.Desired)
		workers.children = append(workers.children, it)
	}
	var rest []*capi.Machine
	for _, m := range c.Machines {
		if !placed[m] {
			rest = append(rest, m)
		}
	}
	sort.Slice(rest, func(i, j int) bool { return rest[i].Name < rest[j].Name })
	for _, m := range rest {
		workers.children = append(workers.children, machine(m))
	}
	if len(workers.children) > 0 {
		root.children = append(root.children, workers)
	}

	var rows []treeRow
	var walk func(it *item, lead string, last, top bool)
	walk = func(it *item, lead string, last, top bool) {
		r := it.row
		childLead := lead
		switch {
		case top:
		case last:
			r.prefix = lead + "└─"
			childLead = lead + "  "
		default:
			r.prefix = lead + "├─"
			childLead = lead + "│ "
		}
		rows = append(rows, r)
		for i, ch := range it.children {
			walk(ch, childLead, i == len(it.children)-1, false)
		}
	}
	walk(root, "", true, true)
	return rows
}

// readiness is the object's Ready (v1beta2: also Available) condition as
// True/False/Unknown, or "" when it has none.
func readiness(o *capi.Object) string {
	for _, t := range []string{"Ready", "Available"} {
		if c, ok := o.Condition(t); ok {
			return c.Status
		}
	}
	return ""
}

// nodeVerdict is a Machine's node column: the top finding of its node,
// judged with what the Machine expects (as diagnose does), or why there is
// none.
func nodeVerdict(r incident.MachineRow) string {
	switch {
	case r.Node == "":
		return "no node report"
	case r.TopFinding == "" || r.TopFinding == "none":
		return "no finding (node " + r.Node + ")"
	}
	return fmt.Sprintf("%s %s (node %s)", strings.ToUpper(r.Severity), oneLine(r.TopFinding), r.Node)
}

// writeTree prints rows as a table; with width > 0 (a terminal) the last
// column is cut to fit it, else (a pipe, a file) nothing is cut.
func writeTree(w io.Writer, rows []treeRow, width int) error {
	nameW, readyW, phaseW := len("NAME"), len("READY"), len("PHASE")
	for _, r := range rows {
		nameW = max(nameW, len([]rune(r.prefix+safe(r.name))))
		readyW = max(readyW, len(r.ready))
		phaseW = max(phaseW, len(r.phase))
	}
	line := func(name, ready, phase, node string) string {
		s := pad(name, nameW) + "  " + pad(ready, readyW) + "  " + pad(phase, phaseW) + "  "
		if width > 0 {
			node = clip(node, max(width-len([]rune(s)), 20))
		}
		return strings.TrimRight(s+node, " ")
	}
	var b strings.Builder
	b.WriteString(line("NAME", "READY", "PHASE", "NODE") + "\n")
	for _, r := range rows {
		b.WriteString(line(r.prefix+safe(r.name), safe(r.ready), safe(r.phase), safe(r.node)) + "\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}
