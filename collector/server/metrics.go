package server

import (
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	nodediagv1 "github.com/nodediag/nodediag/proto/nodediag/v1"
)

// Outcomes of a sweep (label "outcome" of nodediag_collector_sweeps_completed_total).
const (
	sweepAllAnswered = "all_answered"
	sweepTimedOut    = "timed_out"
	sweepClientGone  = "client_gone"
	sweepShutdown    = "shutdown"
)

// metrics are the collector's Prometheus metrics (`nodediag serve
// --metrics-addr`). All names start with nodediag_collector_.
type metrics struct {
	// refused counts RPCs and streams ended with an error status caused
	// by the client, by gRPC code.
	refused *prometheus.CounterVec
	// acks counts Acks sent; received the Uploads read, failed those the
	// store refused, stored those it took (resends of a stored upload
	// included: the store keeps them once); redacted those that held a
	// secret or an oversized string the collector removed before storing.
	acks, received, failed, stored, redacted prometheus.Counter
	// replaced counts connections replaced by a newer one for the same
	// node; dropped the CheckRequests that did not fit an agent's send
	// queue (or whose stream had ended).
	replaced, dropped prometheus.Counter
	// connected is the number of agents with an open stream.
	connected prometheus.Gauge
	findings  *findingsGauge

	sweepsStarted   prometheus.Counter
	sweepsCompleted *prometheus.CounterVec
	sweepDuration   prometheus.Histogram
	sweepAnswers    prometheus.Histogram
	answerLatency   prometheus.Histogram
}

// newMetrics makes the metrics and registers them with reg; with a nil reg
// they work but are registered nowhere (tests, embedding).
func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	const ns, sub = "nodediag", "collector"
	counter := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: name, Help: help})
	}
	m := &metrics{
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "refused_total",
			Help: "RPCs and agent streams refused or ended because of the client, by gRPC status code (Unauthenticated, PermissionDenied, InvalidArgument, ResourceExhausted, FailedPrecondition...)."},
			[]string{"code"}),
		acks:     counter("acks_total", "Acks sent to agents: uploads stored and acknowledged."),
		received: counter("reports_received_total", "Uploads received from agents."),
		failed:   counter("reports_failed_total", "Uploads the store failed to keep; they were not acknowledged and the agents send them again."),
		stored:   counter("reports_stored_total", "Uploads stored (an upload resent after a reconnect is counted again but stored once)."),
		redacted: counter("reports_redacted_total", "Uploads that arrived holding a secret, invalid UTF-8 or a string over 16 KiB, which the collector redacted or clipped before storing (an agent of this version sends none)."),
		replaced: counter("agent_replacements_total", "Agent streams replaced by a newer connection for the same node name."),
		dropped:  counter("check_requests_dropped_total", "Check requests of sweeps that could not be queued to an agent (send queue full or stream ended)."),
		connected: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "agents_connected",
			Help: "Agents with an open stream."}),
		findings: &findingsGauge{
			vec: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "findings",
				Help: "Findings of the latest report of each node received since the collector started, by category and severity."},
				[]string{"category", "severity"}),
			byNode: map[string]map[findingKey]int{},
			total:  map[findingKey]int{},
		},
		sweepsStarted: counter("sweeps_started_total", "Sweeps started."),
		sweepsCompleted: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "sweeps_completed_total",
			Help: "Sweeps ended, by outcome: all_answered, timed_out, client_gone (the client went away), shutdown."},
			[]string{"outcome"}),
		sweepDuration: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Subsystem: sub, Name: "sweep_duration_seconds",
			Help:    "Time from the start of a sweep to its end (all answered or timed out).",
			Buckets: prometheus.ExponentialBuckets(0.05, 2, 16)}),
		sweepAnswers: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Subsystem: sub, Name: "sweep_answers",
			Help:    "Answers received per completed sweep.",
			Buckets: prometheus.ExponentialBuckets(1, 4, 9)}),
		answerLatency: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Subsystem: sub, Name: "sweep_answer_latency_seconds",
			Help:    "Time from the start of a sweep to each answer (the agent's check and upload, and the store's commit).",
			Buckets: prometheus.ExponentialBuckets(0.01, 2, 18)}),
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.refused, m.acks, m.received, m.failed, m.stored, m.redacted, m.replaced, m.dropped,
		m.connected, m.findings.vec, m.sweepsStarted, m.sweepsCompleted, m.sweepDuration, m.sweepAnswers, m.answerLatency} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("registering the collector's metrics: %w", err)
		}
	}
	return m, nil
}

func (m *metrics) sweepEnded(outcome string, elapsed time.Duration, answers int) {
	m.sweepsCompleted.WithLabelValues(outcome).Inc()
	if outcome == sweepAllAnswered || outcome == sweepTimedOut {
		m.sweepDuration.Observe(elapsed.Seconds())
		m.sweepAnswers.Observe(float64(answers))
	}
}

type findingKey struct{ category, severity string }

// findingsGauge is nodediag_collector_findings: the sum over nodes of the
// findings of each node's latest report. set replaces a node's previous
// contribution, so that a node reporting the same problem every interval
// counts once.
type findingsGauge struct {
	vec    *prometheus.GaugeVec
	mu     sync.Mutex
	byNode map[string]map[findingKey]int
	total  map[findingKey]int
}

// noCategory labels findings whose category is empty.
const noCategory = "none"

// set makes r the latest report of node.
func (g *findingsGauge) set(node string, r *nodediagv1.Report) {
	g.setCounts(node, findingCounts(r))
}

// findingCounts counts r's findings by category and severity.
func findingCounts(r *nodediagv1.Report) map[findingKey]int {
	counts := map[findingKey]int{}
	for _, f := range r.GetFindings() {
		k := findingKey{category: f.GetCategory(), severity: f.GetSeverity()}
		if k.category == "" {
			k.category = noCategory
		}
		counts[k]++
	}
	return counts
}

// setCounts makes counts (of findingCounts) those of node's latest report.
func (g *findingsGauge) setCounts(node string, counts map[findingKey]int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	changed := map[findingKey]bool{}
	for k, n := range g.byNode[node] {
		g.total[k] -= n
		changed[k] = true
	}
	for k, n := range counts {
		g.total[k] += n
		changed[k] = true
	}
	if len(counts) == 0 {
		delete(g.byNode, node)
	} else {
		g.byNode[node] = counts
	}
	for k := range changed {
		if n := g.total[k]; n > 0 {
			g.vec.WithLabelValues(k.category, k.severity).Set(float64(n))
		} else {
			delete(g.total, k)
			g.vec.DeleteLabelValues(k.category, k.severity)
		}
	}
}
