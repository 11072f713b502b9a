package rules

import (
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// Categories of docs/CONTRACTS.md. A Problem carries exactly one.
const (
	CatCloudInitFailed   = "bootstrap.cloud-init-failed"
	CatSentinelMissing   = "bootstrap.sentinel-missing"
	CatDownloadFailed    = "bootstrap.download-failed"
	CatPreflightFailed   = "kubeadm.preflight-failed"
	CatFlagRemoved       = "kubelet.flag-removed"
	CatKubeletNotRunning = "kubelet.not-running"
	CatAPIUnreachable    = "kubelet.api-unreachable"
	CatCertExpired       = "cert.expired"
	CatVersionSkew       = "version.skew"
	CatVersionMismatch   = "version.mismatch"
	CatEndpointInvalid   = "registry.endpoint-invalid"
	CatRegUnreachable    = "registry.unreachable"
	CatImagePullFailed   = "image.pull-failed"
	CatRuntimeNotRunning = "runtime.not-running"
	CatCgroupMismatch    = "runtime.cgroup-driver-mismatch"
	CatCNINotReady       = "cni.not-ready"
	CatDiskPressure      = "disk.pressure"
	CatSwapEnabled       = "node.swap-enabled"
	CatTimeSkew          = "time.skew"
	CatStaticPodCrash    = "static-pod.crashloop"
	CatOOMKill           = "kernel.oom-kill"
	CatFilesystemError   = "kernel.filesystem-error"
	CatConntrackFull     = "kernel.conntrack-full"
	CatHungTask          = "kernel.hung-task"
	CatModuleMissing     = "kernel.module-missing"
	CatLinkDown          = "network.link-down"
	CatUnrecognised      = "node.unrecognised-error"
)

// Categories lists every category, for validation.
var Categories = []string{
	CatCloudInitFailed, CatSentinelMissing, CatDownloadFailed, CatPreflightFailed,
	CatFlagRemoved, CatKubeletNotRunning, CatAPIUnreachable, CatCertExpired,
	CatVersionSkew, CatVersionMismatch, CatEndpointInvalid, CatRegUnreachable,
	CatImagePullFailed, CatRuntimeNotRunning, CatCgroupMismatch, CatCNINotReady,
	CatDiskPressure, CatSwapEnabled, CatTimeSkew, CatStaticPodCrash,
	CatOOMKill, CatFilesystemError, CatConntrackFull, CatHungTask, CatModuleMissing, CatLinkDown,
	CatUnrecognised,
}

// A Problem is an entry of the catalog: what a finding means. Its ID never
// changes meaning once shipped.
type Problem struct {
	// ID is a CamelCase reason ("KubeletRemovedFlag").
	ID       string
	Category string
	// Severity of every finding of this problem.
	Severity string
	// Confidence of a finding unless the rule that raises it says otherwise.
	Confidence string
	// Title and Remediation are templates: {name} is replaced by the
	// finding's parameter of that name.
	Title       string
	Remediation string
	// Defaults fill template parameters a rule or a log line could not
	// provide (an x509 error that does not name its certificate).
	Defaults Params
	// RefutedBy names the observation that would prove this finding wrong.
	RefutedBy string
	// Symptom marks a consequence (a failed cloud-init, a missing sentinel,
	// an unhealthy kubelet): it ranks below any cause, and is never the
	// first finding while a cause is present.
	Symptom bool
	// Explains lists the IDs of problems this one causes when both are
	// present. Explanation is transitive.
	Explains []string

	// Scope is ScopeNode (the agent judges it from a node's evidence) or
	// ScopeCluster (nodediag diagnose judges it from Cluster API objects,
	// the workload cluster and the node reports joined).
	Scope string
	// Domain is a cluster problem's failure domain (DomainNode, ...).
	Domain string
	// ChainLink is the link of the workload dependency chain a cluster
	// problem breaks (LinkKubeProxy, ...), or "".
	ChainLink string

	order int
}

var (
	catalog   = map[string]*Problem{}
	nextOrder int
)

// register adds p to the catalog. The declaration order is the tie-breaker of
// ranking: declare the more decisive problems first.
func register(p Problem) *Problem {
	if _, dup := catalog[p.ID]; dup {
		panic("rules: duplicate problem ID " + p.ID)
	}
	if p.Confidence == "" {
		p.Confidence = High
	}
	if p.Scope == "" {
		p.Scope = ScopeNode
	}
	p.order = nextOrder
	nextOrder++
	catalog[p.ID] = &p
	return &p
}

// Lookup returns the problem with this ID.
func Lookup(id string) (*Problem, bool) {
	p, ok := catalog[id]
	return p, ok
}

// All returns the catalog in declaration order.
func All() []*Problem {
	out := make([]*Problem, 0, len(catalog))
	for _, p := range catalog {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].order < out[j].order })
	return out
}

var (
	idShape    = regexp.MustCompile(`^[A-Z][A-Za-z0-9]+$`)
	paramShape = regexp.MustCompile(`\{([a-z_]+)\}`)
)

// Validate checks the catalog: ID shape, known category and severity,
// required texts, and that every Explains entry exists.
func Validate() error {
	var errs []string
	cats := map[string]map[string]bool{ScopeNode: {}, ScopeCluster: {}}
	for _, c := range Categories {
		cats[ScopeNode][c] = true
	}
	for _, c := range ClusterCategories {
		cats[ScopeCluster][c] = true
	}
	domains := map[string]bool{}
	for _, d := range Domains {
		domains[d] = true
	}
	links := map[string]bool{"": true}
	for _, l := range ChainLinks {
		links[l] = true
	}
	for _, p := range All() {
		if !idShape.MatchString(p.ID) {
			errs = append(errs, p.ID+": ID is not CamelCase")
		}
		if cats[p.Scope] == nil {
			errs = append(errs, p.ID+": unknown scope "+p.Scope)
		} else if !cats[p.Scope][p.Category] {
			errs = append(errs, p.ID+": unknown "+p.Scope+" category "+p.Category)
		}
		if p.Scope == ScopeCluster && !domains[p.Domain] {
			errs = append(errs, p.ID+": a cluster problem needs a known failure domain, not "+strconv.Quote(p.Domain))
		}
		if !links[p.ChainLink] {
			errs = append(errs, p.ID+": unknown chain link "+p.ChainLink)
		}
		if !Severity(p.Severity).Valid() {
			errs = append(errs, p.ID+": unknown severity "+p.Severity)
		}
		if Confidence(p.Confidence).Rank() == 0 {
			errs = append(errs, p.ID+": unknown confidence "+p.Confidence)
		}
		if p.Title == "" || p.Remediation == "" || p.RefutedBy == "" {
			errs = append(errs, p.ID+": title, remediation and refuted-by are required")
		}
		for _, e := range p.Explains {
			if _, ok := catalog[e]; !ok {
				errs = append(errs, p.ID+": explains unknown problem "+e)
			}
			if e == p.ID {
				errs = append(errs, p.ID+": explains itself")
			}
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("catalog: %s", strings.Join(errs, "; "))
	}
	return nil
}

// Params are the values of a finding's template parameters.
type Params map[string]string

// expand fills {name} placeholders; an unknown one is left visible so that a
// test can catch it.
func expand(tmpl string, p Params) string {
	return paramShape.ReplaceAllStringFunc(tmpl, func(m string) string {
		if v, ok := p[m[1:len(m)-1]]; ok {
			return v
		}
		return m
	})
}

// TemplateParams returns the parameter names used by p's templates.
func (p *Problem) TemplateParams() []string {
	seen := map[string]bool{}
	var out []string
	for _, t := range []string{p.Title, p.Remediation} {
		for _, m := range paramShape.FindAllStringSubmatch(t, -1) {
			if !seen[m[1]] {
				seen[m[1]] = true
				out = append(out, m[1])
			}
		}
	}
	return out
}
