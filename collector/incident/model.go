// Package incident correlates a workload cluster's Cluster API objects with
// its nodes' agent reports and writes the incident report.
//
// It is pure: Join pairs Machines with node reports, Diagnose re-judges each
// node's stored Evidence with its Machine's expectations (the agent's own
// rules, with the Machine's spec.version as the expected version), applies
// the cluster rules (rules.go) and ranks causes before consequences;
// RenderMarkdown, RenderJSON and RenderHTML write the result. No I/O besides
// the io.Writer of the renderers.
//
// The report follows the evidence-first shape of an incident report: symptom
// and impact, evidence (quoted, bounded), failure domain, root cause with its
// evidence, confidence with its reason, remediation made concrete with object
// names, escalation, and a table of Machines. What could not be read is a
// gap, never a negative result. Every string passes through agent/redact.
package incident

import (
	"time"

	"github.com/nodediag/nodediag/agent/rules"
)

// Failure domains (the catalog's).
const (
	DomainNode         = rules.DomainNode
	DomainControlPlane = rules.DomainControlPlane
	DomainNetwork      = rules.DomainNetwork
	DomainRegistry     = rules.DomainRegistry
	DomainCloud        = rules.DomainCloud
	DomainAddon        = rules.DomainAddon
	DomainUnknown      = rules.DomainUnknown
)

// Incident is the incident report of one workload cluster. JSON field names
// are part of the output contract (`nodediag diagnose -o json`): add, never
// rename.
type Incident struct {
	Title       string    `json:"title"`
	Cluster     string    `json:"cluster"` // NAMESPACE/NAME
	GeneratedAt time.Time `json:"generated_at"`
	// Healthy: no finding at error or above, no gap.
	Healthy bool `json:"healthy"`
	// Symptoms are what the operator sees, one sentence each ("Machine X is
	// Provisioned, not Running, created 42m ago", "KubeadmControlPlane Y:
	// 1/3 ready"); Impact says what that means for the cluster.
	Symptoms []string `json:"symptoms"`
	Impact   string   `json:"impact"`
	// RootCause is the first cause of the ranked findings (nil when there is
	// none): its failure domain, confidence, remediation and escalation are
	// the report's.
	RootCause     *RootCause `json:"root_cause,omitempty"`
	FailureDomain string     `json:"failure_domain"`
	Confidence    string     `json:"confidence,omitempty"`
	// ConfidenceReason says why the confidence is what it is.
	ConfidenceReason string   `json:"confidence_reason,omitempty"`
	Remediation      []string `json:"remediation,omitempty"`
	Escalation       []string `json:"escalation,omitempty"`
	// Findings are ranked: causes first (most likely first), each followed
	// by the consequences it explains.
	Findings []Finding `json:"findings"`
	// Chain is the add-on dependency chain kube-proxy → CNI → CoreDNS →
	// cloud-node-manager → cloud-controller-manager → providerID → Machine
	// Running, with the first broken link named.
	Chain            []ChainLink  `json:"chain"`
	FirstBrokenLink  string       `json:"first_broken_link,omitempty"`
	Machines         []MachineRow `json:"machines"`
	UnmatchedReports []string     `json:"unmatched_reports,omitempty"`
	// Rejudged lists the nodes whose verdict changed when judged with their
	// Machine's expectations.
	Rejudged []Rejudgement `json:"rejudged,omitempty"`
	// Gaps are what could not be read, as sentences: not negative results.
	Gaps []Gap `json:"gaps,omitempty"`
}

// RootCause is the cause the report leads with.
type RootCause struct {
	// Finding is the Key of the cause in Findings.
	Finding string `json:"finding"`
	Summary string `json:"summary"`
	// Node names the node finding the cause comes from, when it comes from
	// a node ("capz-md-0-abc: KubeletRemovedFlag").
	Node     string     `json:"node,omitempty"`
	Evidence []Evidence `json:"evidence"`
}

// Finding is a cluster finding: a cluster rule's conclusion, or a node's
// finding brought up to its Machine.
type Finding struct {
	// Key is unique in the report: ID/Kind/Name.
	Key      string `json:"key"`
	ID       string `json:"id"`
	Category string `json:"category"`
	Severity string `json:"severity"`
	Title    string `json:"title"`
	// Subject is the object the finding is about ("Machine/capz-md-0-abc").
	Subject          string `json:"subject"`
	Domain           string `json:"failure_domain"`
	Confidence       string `json:"confidence"`
	ConfidenceReason string `json:"confidence_reason"`
	// Evidence is quoted from objects (conditions, phases, replica counts)
	// and nodes (the node's top finding's quotes), bounded.
	Evidence []Evidence `json:"evidence"`
	// NodeCause is the node's top finding when the finding is a Machine's
	// and its node reported one.
	NodeCause   *NodeFinding `json:"node_cause,omitempty"`
	Remediation string       `json:"remediation,omitempty"`
	Escalation  string       `json:"escalation,omitempty"`
	RefutedBy   string       `json:"refuted_by"`
	// MissingEvidence says which evidence would settle the finding and how
	// to get it.
	MissingEvidence string `json:"missing_evidence,omitempty"`
	// Explains and ExplainedBy are Keys of other findings.
	Explains    []string `json:"explains,omitempty"`
	ExplainedBy []string `json:"explained_by,omitempty"`
	Consequence bool     `json:"consequence"`
	// ChainLink is the dependency-chain link the finding breaks, if any.
	ChainLink string `json:"chain_link,omitempty"`
}

// NodeFinding is a node report's finding as it appears at the Machine.
type NodeFinding struct {
	Node     string `json:"node"`
	ID       string `json:"id"`
	Category string `json:"category"`
	Severity string `json:"severity"`
	Title    string `json:"title"`
	// Consequences are the IDs of the node's findings this one explains.
	Consequences []string `json:"consequences,omitempty"`
}

// Evidence is one quoted item: a few lines at most; More says where the
// rest is.
type Evidence struct {
	Source  string     `json:"source"`
	Line    int32      `json:"line,omitempty"`
	Time    *time.Time `json:"time,omitempty"`
	Excerpt string     `json:"excerpt"`
	More    string     `json:"more,omitempty"`
}

// ChainLink is one link of the dependency chain.
type ChainLink struct {
	Name string `json:"name"`
	// State is "broken", "ok" or "unknown" (no evidence either way).
	State    string   `json:"state"`
	Findings []string `json:"findings,omitempty"`
}

// MachineRow is a line of the per-Machine table.
type MachineRow struct {
	Machine   string `json:"machine"`
	Role      string `json:"role"` // control-plane, worker
	Phase     string `json:"phase"`
	Version   string `json:"version,omitempty"`
	Node      string `json:"node,omitempty"`
	MatchedBy string `json:"matched_by,omitempty"`
	// TopFinding is the node's top finding (ID: title), "none" for a node
	// without finding, empty without a report.
	TopFinding string `json:"top_finding,omitempty"`
	Severity   string `json:"severity,omitempty"`
}

// Rejudgement is a node whose verdict changed with cluster context.
type Rejudgement struct {
	Node          string   `json:"node"`
	Machine       string   `json:"machine"`
	ExpectVersion string   `json:"expect_version"`
	Role          string   `json:"role,omitempty"` // control-plane or worker, from the Machine
	Before        string   `json:"before"`         // top finding ID or "none"
	After         string   `json:"after"`
	Added         []string `json:"added,omitempty"`
	Removed       []string `json:"removed,omitempty"`
}

// Gap is evidence that could not be read.
type Gap struct {
	Resource  string `json:"resource"`
	Verb      string `json:"verb,omitempty"`
	Forbidden bool   `json:"forbidden,omitempty"`
	Identity  string `json:"identity,omitempty"`
	Role      string `json:"role,omitempty"`
	// Sentence says it all, including what the report cannot conclude
	// because of it.
	Sentence string `json:"sentence"`
}
