package incident

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/nodediag/nodediag/agent/rules"
	"github.com/nodediag/nodediag/collector/capi"
)

// ObjectLog is a line of the management cluster's own record, a
// controller's log or a Warning event, that names Cluster API objects: the
// evidence for the Machine those objects belong to when its node cannot
// speak (no report, a VM that never booted).
type ObjectLog struct {
	// Source is where the line is ("clusters/bootstrap/logs/capz-system/
	// capz-controller-manager/POD/manager.log"); Line its line number.
	Source string
	Line   int
	// Time is the line's time, zero when it has none.
	Time time.Time
	// Controller names who wrote it, for the title: "capz-controller-
	// manager's log", "a Warning event FailedCreate", "the Azure activity
	// log, OPERATION".
	Controller string
	// Text is the line as written; Error the error it carries (a
	// structured err="..." value, else the message), for the title.
	Text, Error string
	// Objects are the objects it names.
	Objects []ObjectRef
}

// ObjectRef names an object of the management cluster.
type ObjectRef struct{ Kind, Namespace, Name string }

func (r ObjectRef) String() string { return r.Kind + "/" + r.Name }

// transient are the errors every controller logs now and then and that
// name no cause: optimistic-concurrency conflicts and requeues.
var transient = regexp.MustCompile(`(?i)the object has been modified|Operation cannot be fulfilled|apply your changes to the latest version|requeue|is being deleted|context canceled`)

// maxObjectQuotes bounds the lines quoted per object.
const maxObjectQuotes = 3

// logsFor returns the error lines naming ref (newest first, one per
// distinct error, at most maxObjectQuotes) and how many lines named it in
// all.
func (d *diag) logsFor(ref ObjectRef) (quoted []ObjectLog, total int) {
	seen := map[string]bool{}
	var all []ObjectLog
	for _, l := range d.o.ObjectLogs {
		if !names(l, ref) || transient.MatchString(l.Text) {
			continue
		}
		total++
		all = append(all, l)
	}
	sort.SliceStable(all, func(i, j int) bool { return all[i].Time.After(all[j].Time) })
	for _, l := range all {
		key := l.Controller + "\x00" + errorShape(l.Error)
		if seen[key] || len(quoted) == maxObjectQuotes {
			continue
		}
		seen[key] = true
		quoted = append(quoted, l)
	}
	return quoted, total
}

func names(l ObjectLog, ref ObjectRef) bool {
	for _, o := range l.Objects {
		if o.Name == ref.Name && strings.EqualFold(o.Kind, ref.Kind) && (o.Namespace == "" || ref.Namespace == "" || o.Namespace == ref.Namespace) {
			return true
		}
	}
	return false
}

var digits = regexp.MustCompile(`[0-9a-f]{8,}|\d+`)

// errorShape is an error with its ids and numbers blanked, so that the
// same error retried is quoted once.
func errorShape(s string) string { return digits.ReplaceAllString(s, "#") }

// objectDomain is the failure domain of an object's controller: an
// infrastructure provider's is the cloud's, a bootstrap config's the node's
// bootstrap data, a control plane's the control plane.
func objectDomain(kind string) string {
	switch {
	case kind == "KubeadmControlPlane":
		return DomainControlPlane
	case kind == "KubeadmConfig":
		return DomainNode
	case strings.HasPrefix(kind, "Azure"), strings.HasPrefix(kind, "Docker"), strings.HasPrefix(kind, "AWS"), strings.HasPrefix(kind, "GCP"), strings.HasPrefix(kind, "VSphere"):
		return DomainCloud
	}
	return DomainUnknown
}

// reconcileError is the finding of the first of refs whose controllers
// log errors, nil when none does.
func (d *diag) reconcileError(refs []ObjectRef) *Finding {
	for _, ref := range refs {
		if ref.Name == "" {
			continue
		}
		quoted, total := d.logsFor(ref)
		if len(quoted) == 0 {
			continue
		}
		top := quoted[0]
		msg := top.Error
		if msg == "" {
			msg = top.Text
		}
		f := newFinding(rules.ControllerReconcileError, ref.Kind+"/"+ref.Name, rules.Params{
			"controller": top.Controller, "kind": ref.Kind, "name": ref.Name, "error": clipRunes(msg, 240)})
		for _, l := range quoted {
			ev := Evidence{Source: l.Source, Line: int32(l.Line), Excerpt: l.Text}
			if !l.Time.IsZero() {
				t := l.Time
				ev.Time = &t
			}
			f.Evidence = append(f.Evidence, ev)
		}
		if total > len(quoted) {
			f.Evidence[len(f.Evidence)-1].More = fmt.Sprintf("%d line(s) naming %s in all", total, ref)
		}
		f.Domain = objectDomain(ref.Kind)
		f.ConfidenceReason = fmt.Sprintf("the controller's own log names %s with this error; no node evidence says more", ref)
		if f.Domain == DomainCloud {
			f.Escalation = "Quota, capacity, credential and platform errors of the cloud's API belong to the provider: open a case with the error, the VM name and the time."
		}
		return d.add(f)
	}
	return nil
}

// ruleObjectLogs: a Machine that is not running and whose node gave no
// cause is explained by the errors its controllers log about it (its
// infrastructure machine, its bootstrap config, the Machine itself).
func (d *diag) ruleObjectLogs() {
	if len(d.o.ObjectLogs) == 0 {
		return
	}
	for _, s := range d.machines {
		m := s.m
		if s.finding == nil || s.finding.NodeCause != nil || s.finding.ID == rules.MachineProvisioning.ID || m.DeletionTimestamp != nil {
			continue
		}
		if f := d.reconcileError(machineObjects(m)); f != nil {
			d.explain(f, s.finding)
		}
	}
	for _, mp := range d.c.MachinePools {
		pf := d.byKey[IDMachinePoolDown+"/"+objName(&mp.Object)]
		if pf == nil || len(pf.ExplainedBy) > 0 {
			continue
		}
		refs := []ObjectRef{{Kind: mp.InfraRef.Kind, Namespace: mp.Namespace, Name: mp.InfraRef.Name}, {Kind: "MachinePool", Namespace: mp.Namespace, Name: mp.Name}}
		if f := d.reconcileError(refs); f != nil {
			d.explain(f, pf)
			pf.MissingEvidence = ""
		}
	}
}

// machineObjects are the objects of m whose controllers' errors are its
// evidence, in the order they are looked for.
func machineObjects(m *capi.Machine) []ObjectRef {
	return []ObjectRef{
		{Kind: m.InfraRef.Kind, Namespace: m.Namespace, Name: m.InfraRef.Name},
		{Kind: m.BootstrapRef.Kind, Namespace: m.Namespace, Name: m.BootstrapRef.Name},
		{Kind: "Machine", Namespace: m.Namespace, Name: m.Name},
	}
}

// clipRunes cuts s at n runes, saying so.
func clipRunes(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "…"
}
