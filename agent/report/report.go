// Package report assembles the agent's Report from Evidence and the rules'
// Result, redacts it, and renders it as text, JSON or compact text.
//
// Rendering contracts (docs/CONTRACTS.md):
//   - text: details first, one "SUMMARY ..." line last, because
//     `az vm run-command` keeps only the tail of the output;
//   - json: the Report rendered with protojson (proto field names), without
//     the raw evidence;
//   - compact: at most MaxCompact bytes whatever the node, with the top cause,
//     its key evidence, its remediation and where to look.
package report

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/nodediag/nodediag/agent/redact"
	"github.com/nodediag/nodediag/agent/rules"
	"github.com/nodediag/nodediag/internal/version"
	nodediagv1 "github.com/nodediag/nodediag/proto/nodediag/v1"
)

// Build assembles the report of one check and redacts it: nothing that
// leaves this function carries a secret. Its inputs are not changed: the
// report holds redacted copies of the evidence and the findings.
func Build(ev *nodediagv1.Evidence, res rules.Result, nodeName string) *nodediagv1.Report {
	v := version.Get()
	ev = proto.Clone(ev).(*nodediagv1.Evidence)
	res.Findings = cloneFindings(res.Findings)
	r := &nodediagv1.Report{
		Agent:         &nodediagv1.AgentInfo{Version: v.Version, Revision: v.Revision},
		Host:          hostInfo(ev, nodeName),
		Window:        res.Window,
		Findings:      res.Findings,
		Gaps:          res.Gaps,
		Evidence:      ev,
		Verdict:       res.Verdict,
		VerdictReason: res.VerdictReason,
	}
	for _, pe := range ev.GetProbes() {
		r.Probes = append(r.Probes, &nodediagv1.ProbeStatus{
			Name: pe.GetName(), Status: pe.GetStatus(), Error: pe.GetError(), DurationMs: pe.GetDurationMs(),
		})
	}
	redact.Message(r)
	return r
}

func cloneFindings(fs []*nodediagv1.Finding) []*nodediagv1.Finding {
	out := make([]*nodediagv1.Finding, len(fs))
	for i, f := range fs {
		out[i] = proto.Clone(f).(*nodediagv1.Finding)
	}
	return out
}

func hostInfo(ev *nodediagv1.Evidence, nodeName string) *nodediagv1.HostInfo {
	h := &nodediagv1.HostInfo{Root: ev.GetHost().GetRoot()}
	for _, pe := range ev.GetProbes() {
		if os := pe.GetOs(); os != nil {
			h.Hostname = os.GetHostname()
			h.Os = os.GetPrettyName()
			h.Kernel = os.GetKernel()
			h.MachineId = os.GetMachineId()
			h.BootTime = os.GetBootTime()
		}
	}
	h.NodeName = nodeName
	if h.NodeName == "" {
		h.NodeName = h.Hostname
	}
	ev.Host = proto.Clone(h).(*nodediagv1.HostInfo)
	return h
}

// ExitCode is 1 when a finding is at error or above, else 0; 2 when the
// check could not judge the node (no evidence, permission denied, probes
// that did not finish without an error found), 0 for a root that is no
// Kubernetes node (docs/CONTRACTS.md).
func ExitCode(r *nodediagv1.Report) int {
	hasError := false
	for _, f := range r.GetFindings() {
		if rules.SeverityAtLeast(f.GetSeverity(), rules.Error) {
			hasError = true
		}
	}
	return rules.VerdictExit(r.GetVerdict(), hasError)
}

// WriteJSON writes the report as the JSON contract: proto field names,
// indented, without the raw evidence.
func WriteJSON(w io.Writer, r *nodediagv1.Report) error {
	c := proto.Clone(r).(*nodediagv1.Report)
	c.Evidence = nil
	b, err := MarshalJSON(c)
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}

// MarshalJSON renders any message of the API with stable formatting
// (protojson's own whitespace is deliberately unstable).
func MarshalJSON(m proto.Message) ([]byte, error) {
	raw, err := protojson.MarshalOptions{UseProtoNames: true}.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("rendering JSON: %w", err)
	}
	var out bytes.Buffer
	if err := json.Indent(&out, raw, "", "  "); err != nil {
		return nil, fmt.Errorf("rendering JSON: %w", err)
	}
	out.WriteByte('\n')
	return out.Bytes(), nil
}
