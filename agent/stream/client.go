// Package stream is the agent's side of the Collector conversation
// (proto/nodediag/v1, service Collector): `nodediag-agent run`, the DaemonSet
// mode. Run checks the host on a jittered interval and when the collector
// asks, and streams each report to the collector as an Upload that the
// Spool keeps until the collector acknowledges it.
//
// # The conversation
//
// Run dials the collector (one gRPC connection per attempt), opens Connect,
// sends a Hello and waits for the Welcome (bounded by ConnectTimeout). It
// then sends every upload the spool keeps (unacknowledged ones, from this
// process or from one that ended before their Ack), each once per stream,
// and every new upload as checks make them. Acks remove uploads from the
// spool; CheckRequests queue a check. Any error of the stream ends the
// connection: Run backs off (Backoff, with jitter) and connects again.
//
// # When the agent checks
//
//   - At start, at once, before the first connection ("connect"): the
//     Hello then carries what the check learnt (the kubelet's
//     --provider-id), and the first upload is ready when the Welcome comes.
//     A DaemonSet rollout is already paced by Kubernetes; no splay here.
//   - On the interval ("interval"): Interval (or the Welcome's suggestion,
//     at least MinInterval) jittered by ±IntervalJitter after the end of
//     the latest check, whatever triggered it, connected or not: during an
//     outage reports land in the spool, which keeps the newest.
//   - On each CheckRequest ("request", report.request_id set). A request
//     whose id is queued, being answered, or answered (its upload kept or
//     acknowledged) is coalesced: the collector asks again the sweeps under
//     way when an agent reconnects. Requests that wait together are served
//     by one check, one upload per request id.
//   - After each reconnection ("connect"), not at once but after a random
//     splay in [0, Splay): every agent notices a collector restart at the
//     same moment, and the splay spreads their fresh checks (the resends of
//     spooled uploads are not delayed).
//
// Checks never run concurrently: a request that arrives during a check is
// served after it. CPU is thus bounded by one check at a time.
//
// # Failures
//
// Backoff grows from BackoffInitial to BackoffMax with jitter, and starts
// again from BackoffInitial after a healthy connection (a Welcome, then an
// Ack or StableAfter of connection). An outage is logged when it starts
// and when the kind of error changes, not at each attempt; the end of an
// outage is logged with its length. Refusals (Unauthenticated,
// PermissionDenied, InvalidArgument: a certificate or a Hello the
// collector will not accept; AlreadyExists: another machine's agent holds
// the node name) do not fix themselves: they are logged as errors with a
// hint, and retried at BackoffMax. Aborted (this agent's own newer stream
// replaced this one, or the collector ended it) is retried with the usual
// backoff, so that no other client can keep an agent away from its node
// name by making it wait.
//
// Memory does not grow with the length of an outage: the spool is bounded
// (it drops the oldest uploads and says so), the request queue is bounded,
// and one connection at a time is kept.
package stream

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	nodediagv1 "github.com/nodediag/nodediag/proto/nodediag/v1"
)

// Defaults of Options.
const (
	// DefaultInterval is the time between two checks.
	DefaultInterval = 5 * time.Minute
	// DefaultMinInterval is the shortest interval a Welcome may ask for: a
	// misconfigured collector must not make every node check all the time.
	DefaultMinInterval = 30 * time.Second
	// DefaultSplay bounds the random delay of the check after a
	// reconnection.
	DefaultSplay = 30 * time.Second
	// DefaultConnectTimeout bounds a connection attempt: dial, TLS, Hello
	// and Welcome.
	DefaultConnectTimeout = 20 * time.Second
	// DefaultAckTimeout bounds, with Once, the wait for the Ack of the
	// report, reconnections included.
	DefaultAckTimeout = time.Minute
	// DefaultStableAfter is how long a welcomed connection must last for
	// the backoff to start again from its initial delay when no Ack came.
	DefaultStableAfter = time.Minute
	// DefaultMaxMessageBytes is the collector's default limit on a
	// received message; an upload is made to fit in it.
	DefaultMaxMessageBytes = 16 << 20
	// maxPendingRequests bounds the queue of CheckRequests waiting for a
	// check (distinct ids; the oldest is dropped beyond).
	maxPendingRequests = 16
	// answeredMemory is how many answered request ids are remembered for
	// coalescing.
	answeredMemory = 32
	// closeTimeout bounds the wait for the collector to end the stream
	// after the agent closed its side (Acks in flight arrive meanwhile).
	closeTimeout = 2 * time.Second
)

// Keepalive of the agent's connection. The collector accepts pings every
// 10 s at most (also without a stream) and closes connections that ping
// more often ("too_many_pings"); 30 s is well above that and notices a dead
// collector (a VM gone, a network partition) within ~40 s.
const (
	keepaliveTime    = 30 * time.Second
	keepaliveTimeout = 10 * time.Second
)

// Reasons of uploads (Upload.reason).
const (
	ReasonConnect  = "connect"
	ReasonInterval = "interval"
	ReasonRequest  = "request"
)

// ErrNotAcknowledged is returned (wrapped) by Run with Once when the report
// was not acknowledged in time.
var ErrNotAcknowledged = errors.New("the report was not acknowledged")

// Options configure Run. Zero values take the defaults.
type Options struct {
	// Addr is the collector's HOST:PORT; required.
	Addr string
	// TLS is the client's mutual TLS configuration
	// (tlsconfig.NewClient); nil dials in plaintext (--insecure).
	TLS *tls.Config

	// The Hello's identity. NodeName is required; MachineID and
	// ProviderID, when empty, are taken from the latest report (its
	// host's machine id; the kubelet's --provider-id, see ProviderID).
	NodeName   string
	MachineID  string
	ProviderID string
	Agent      *nodediagv1.AgentInfo
	// AgentStart identifies this process's uploads (with their seq); the
	// time Run starts when zero.
	AgentStart time.Time

	// Check checks the host once; required. reason is the Upload's reason
	// and requestID the request it answers ("" but for requests). Run
	// never calls it concurrently; it must honour ctx.
	Check func(ctx context.Context, reason, requestID string) (*nodediagv1.Report, error)

	// Interval is the time between checks (DefaultInterval); the
	// Welcome's interval replaces it, but never below MinInterval
	// (DefaultMinInterval).
	Interval, MinInterval time.Duration
	// IntervalJitter spreads each interval over ±IntervalJitter of it
	// (DefaultIntervalJitter); negative: no jitter.
	IntervalJitter float64
	// Splay bounds the random delay of the check after a reconnection
	// (DefaultSplay).
	Splay time.Duration

	// Spool keeps the uploads until their Ack; nil: a memory-only spool
	// with the default bounds.
	Spool *Spool

	// Backoff between connection attempts (DefaultBackoffInitial,
	// DefaultBackoffMax, DefaultBackoffFactor).
	BackoffInitial, BackoffMax time.Duration
	BackoffFactor              float64
	// StableAfter is how long a welcomed connection without Acks must last
	// for the backoff to start again (DefaultStableAfter).
	StableAfter time.Duration

	// ConnectTimeout bounds an attempt up to the Welcome
	// (DefaultConnectTimeout).
	ConnectTimeout time.Duration
	// Once: check once, upload, wait for the Ack and return (nil when
	// acknowledged). AckTimeout bounds the wait after the check
	// (DefaultAckTimeout). CheckRequests are ignored.
	Once       bool
	AckTimeout time.Duration

	// MaxMessageBytes is the collector's limit on a message
	// (DefaultMaxMessageBytes): a larger report is uploaded without its
	// evidence, and says so in its gaps.
	MaxMessageBytes int

	// Logger receives the log (slog.Default when nil).
	Logger *slog.Logger
	// DialOptions are added to the dial options of each connection
	// (a context dialer, interceptors).
	DialOptions []grpc.DialOption
	// Rand returns numbers in [0, 1) for jitter, splay and backoff
	// (math/rand/v2 when nil).
	Rand func() float64
}

func (o *Options) defaults() error {
	if o.Addr == "" {
		return errors.New("no collector address")
	}
	if o.Check == nil {
		return errors.New("no Check function")
	}
	if o.NodeName == "" {
		return errors.New("no node name")
	}
	if o.AgentStart.IsZero() {
		o.AgentStart = time.Now()
	}
	if o.Interval <= 0 {
		o.Interval = DefaultInterval
	}
	if o.MinInterval <= 0 {
		o.MinInterval = DefaultMinInterval
	}
	switch {
	case o.IntervalJitter == 0:
		o.IntervalJitter = DefaultIntervalJitter
	case o.IntervalJitter < 0:
		o.IntervalJitter = 0
	}
	if o.Splay <= 0 {
		o.Splay = DefaultSplay
	}
	if o.BackoffInitial <= 0 {
		o.BackoffInitial = DefaultBackoffInitial
	}
	if o.BackoffMax <= 0 {
		o.BackoffMax = DefaultBackoffMax
	}
	if o.BackoffMax < o.BackoffInitial {
		o.BackoffMax = o.BackoffInitial
	}
	if o.BackoffFactor < 1 {
		o.BackoffFactor = DefaultBackoffFactor
	}
	if o.StableAfter <= 0 {
		o.StableAfter = DefaultStableAfter
	}
	if o.ConnectTimeout <= 0 {
		o.ConnectTimeout = DefaultConnectTimeout
	}
	if o.AckTimeout <= 0 {
		o.AckTimeout = DefaultAckTimeout
	}
	if o.MaxMessageBytes <= 0 {
		o.MaxMessageBytes = DefaultMaxMessageBytes
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	o.Rand = randOr(o.Rand)
	if o.Spool == nil {
		o.Spool = OpenSpool("", 0, 0, func(format string, args ...any) {
			o.Logger.Warn(fmt.Sprintf(format, args...))
		})
	}
	return nil
}

// runner is the state of one Run.
type runner struct {
	o     Options
	log   *slog.Logger
	spool *Spool

	seq atomic.Uint64 // the last seq given
	// collectorMax is the limit of the collector's latest Welcome when it
	// is below Options.MaxMessageBytes, else 0.
	collectorMax atomic.Int64

	// spoolChanged tells the connection that the spool has new uploads.
	spoolChanged chan struct{}
	// wake tells the check loop that its schedule or queue changed.
	wake chan struct{}

	// onceSeq is the upload Once waits for; onceAcked is closed on its Ack.
	onceSeq   uint64
	onceAcked chan struct{}
	onceDone  sync.Once

	mu         sync.Mutex
	machineID  string
	providerID string
	interval   time.Duration
	lastCheck  time.Time // end of the latest check
	nextAt     time.Time // when the next scheduled check is due
	nextReason string
	pending    []string // request ids waiting for a check
	running    []string // request ids the running check answers
	answered   []answer // the latest answered requests, oldest first
	welcomes   int

	// out is the current outage; used by the connection's goroutine only.
	out outage
}

type answer struct {
	id    string
	seq   uint64
	acked bool
}

// Run streams the agent's reports to the collector until ctx ends (then it
// closes the stream cleanly and returns nil), or with Once until the
// report is acknowledged (nil) or not in time (an error wrapping
// ErrNotAcknowledged, or the collector's refusal). It returns an error at
// once for invalid Options. See the package comment for the schedule.
func Run(ctx context.Context, o Options) error {
	if err := o.defaults(); err != nil {
		return fmt.Errorf("stream: %w", err)
	}
	r := &runner{
		o:            o,
		log:          o.Logger.With("collector", o.Addr, "node", o.NodeName),
		spool:        o.Spool,
		spoolChanged: make(chan struct{}, 1),
		wake:         make(chan struct{}, 1),
		onceAcked:    make(chan struct{}),
		machineID:    o.MachineID,
		providerID:   o.ProviderID,
		interval:     o.Interval,
	}
	// A new process is a new seq space (Hello.agent_start): uploads a
	// previous process left in the spool are numbered again from 1.
	if n := r.spool.Len(); n > 0 {
		r.log.Info("resending reports left unacknowledged by a previous run", "count", n, "spool", r.spool.Dir())
	}
	r.seq.Store(r.spool.Renumber(1) - 1)

	// The first check, before the first connection.
	seqs := r.check(ctx, ReasonConnect, nil)
	if ctx.Err() != nil {
		if o.Once {
			return fmt.Errorf("%w: stopped before the check ended", ErrNotAcknowledged)
		}
		return nil
	}
	if o.Once {
		if len(seqs) == 0 {
			return fmt.Errorf("%w: the check failed", ErrNotAcknowledged)
		}
		r.onceSeq = seqs[0]
		actx, cancel := context.WithTimeout(ctx, o.AckTimeout)
		defer cancel()
		return r.connectLoop(actx)
	}

	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		r.checkLoop(ctx)
	}()
	err := r.connectLoop(ctx)
	wg.Wait()
	return err
}

// ---- checks ----------------------------------------------------------------

// checkLoop runs the scheduled and requested checks, one at a time, until
// ctx ends.
func (r *runner) checkLoop(ctx context.Context) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for ctx.Err() == nil {
		r.mu.Lock()
		reqs := r.pending
		r.pending = nil
		r.running = reqs
		due, reason := r.nextAt, r.nextReason
		r.mu.Unlock()
		now := time.Now()
		switch {
		case len(reqs) > 0:
			r.check(ctx, ReasonRequest, reqs)
			continue
		case !now.Before(due):
			r.check(ctx, reason, nil)
			continue
		}
		timer.Reset(due.Sub(now))
		select {
		case <-ctx.Done():
			return
		case <-r.wake:
		case <-timer.C:
		}
	}
}

// check runs one check and spools its upload(s): one per request id of
// reqs, or one. It returns their seqs (none when the check failed).
func (r *runner) check(ctx context.Context, reason string, reqs []string) []uint64 {
	if ctx.Err() != nil {
		return nil
	}
	first := ""
	if len(reqs) > 0 {
		first = reqs[0]
	}
	start := time.Now()
	rep, err := r.o.Check(ctx, reason, first)
	end := time.Now()
	r.mu.Lock()
	r.running = nil
	r.lastCheck = end
	r.nextAt = end.Add(Jitter(r.interval, r.o.IntervalJitter, r.o.Rand()))
	r.nextReason = ReasonInterval
	r.mu.Unlock()
	if ctx.Err() != nil {
		return nil // cut short: a partial report is not worth keeping
	}
	if err != nil || rep == nil {
		if err == nil {
			err = errors.New("no report")
		}
		r.log.Warn("check failed", "reason", reason, "err", err)
		return nil
	}
	r.learn(rep)
	if len(reqs) == 0 {
		reqs = []string{""}
	}
	var seqs []uint64
	for i, id := range reqs {
		rp := rep
		if i > 0 {
			rp = proto.Clone(rep).(*nodediagv1.Report)
		}
		rp.RequestId = id
		seq := r.seq.Add(1)
		u := r.fit(&nodediagv1.Upload{Seq: seq, Report: rp, Reason: reason,
			OriginAgentStart: timestamppb.New(r.o.AgentStart), OriginSeq: seq})
		if u == nil {
			continue
		}
		r.spool.Add(u)
		seqs = append(seqs, u.Seq)
		if id != "" {
			r.mu.Lock()
			r.answered = append(r.answered, answer{id: id, seq: u.Seq})
			if len(r.answered) > answeredMemory {
				r.answered = slices.Delete(r.answered, 0, len(r.answered)-answeredMemory)
			}
			r.mu.Unlock()
		}
	}
	r.log.Debug("checked", "reason", reason, "requests", len(reqs), "took", end.Sub(start).Round(time.Millisecond),
		"findings", len(rep.GetFindings()), "spooled", r.spool.Len())
	signal(r.spoolChanged)
	return seqs
}

// maxMessage is the largest message the collector accepts: its Welcome's
// limit when it said a smaller one than Options.MaxMessageBytes.
func (r *runner) maxMessage() int {
	if n := r.collectorMax.Load(); n > 0 {
		return int(n)
	}
	return r.o.MaxMessageBytes
}

// fit returns u, or u without its report's evidence when u is larger than
// the collector accepts (the gaps say so), or nil when even that is too
// large.
func (r *runner) fit(u *nodediagv1.Upload) *nodediagv1.Upload {
	// Room for the AgentMessage envelope around the Upload.
	max := r.maxMessage()
	limit := max - 64
	size := proto.Size(u)
	if size <= limit {
		return u
	}
	rp := proto.Clone(u.Report).(*nodediagv1.Report)
	rp.Evidence = nil
	rp.Gaps = append(rp.Gaps, fmt.Sprintf(
		"the evidence was left out of the report sent to the collector: the report is %d bytes, the collector accepts %d", size, max))
	small := &nodediagv1.Upload{Seq: u.Seq, Report: rp, Reason: u.Reason, OriginAgentStart: u.OriginAgentStart, OriginSeq: u.OriginSeq}
	if s := proto.Size(small); s > limit {
		r.log.Error("report too large for the collector even without its evidence; not sent",
			"seq", u.Seq, "bytes", s, "limit", max)
		return nil
	}
	r.log.Warn("report too large for the collector; sending it without its evidence",
		"seq", u.Seq, "bytes", size, "limit", max)
	return small
}

// learn takes the identity the Hello lacks from a report.
func (r *runner) learn(rep *nodediagv1.Report) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.o.MachineID == "" {
		if id := rep.GetHost().GetMachineId(); id != "" {
			r.machineID = id
		}
	}
	if r.o.ProviderID == "" {
		if id := ProviderID(rep); id != "" {
			r.providerID = id
		}
	}
}

// request queues a check for a CheckRequest, unless it is coalesced.
func (r *runner) request(id string) {
	if r.o.Once {
		r.log.Debug("check request ignored (--once)", "request", id)
		return
	}
	r.mu.Lock()
	if why := r.coalesceLocked(id); why != "" {
		r.mu.Unlock()
		r.log.Debug("check request coalesced", "request", id, "because", why)
		return
	}
	r.pending = append(r.pending, id)
	if len(r.pending) > maxPendingRequests {
		r.log.Warn("too many check requests waiting; dropping the oldest", "request", r.pending[0], "limit", maxPendingRequests)
		r.pending = r.pending[1:]
	}
	r.mu.Unlock()
	signal(r.wake)
}

func (r *runner) coalesceLocked(id string) string {
	if id == "" {
		return ""
	}
	switch {
	case slices.Contains(r.pending, id):
		return "already queued"
	case slices.Contains(r.running, id):
		return "being checked"
	}
	for _, a := range r.answered {
		if a.id != id {
			continue
		}
		if a.acked {
			return "already answered and acknowledged"
		}
		if r.spool.Has(a.seq) {
			return "already answered; the answer is kept until acknowledged"
		}
	}
	return ""
}

// ack forgets an acknowledged upload.
func (r *runner) ack(seq uint64) {
	r.spool.Remove(seq)
	r.mu.Lock()
	for i := range r.answered {
		if r.answered[i].seq == seq {
			r.answered[i].acked = true
		}
	}
	r.mu.Unlock()
	if r.o.Once && seq == r.onceSeq {
		r.onceDone.Do(func() { close(r.onceAcked) })
	}
}

// welcomed applies a Welcome: its interval, and after a reconnection a
// splayed check.
func (r *runner) welcomed(w *nodediagv1.Welcome) {
	if n := w.GetMaxMessageBytes(); n > 0 && n < int64(r.o.MaxMessageBytes) {
		if int64(r.maxMessage()) != n {
			r.log.Info("the collector accepts smaller messages; larger reports are sent without their evidence", "max_message_bytes", n)
		}
		r.collectorMax.Store(n)
	} else {
		r.collectorMax.Store(0)
	}
	r.mu.Lock()
	r.welcomes++
	now := time.Now()
	if d := w.GetInterval().AsDuration(); w.GetInterval() != nil && d > 0 {
		d = max(d, r.o.MinInterval)
		if d != r.interval {
			r.log.Info("check interval set by the collector", "interval", d)
			r.interval = d
			base := r.lastCheck
			if base.IsZero() {
				base = now
			}
			if r.nextReason == ReasonInterval {
				r.nextAt = base.Add(Jitter(d, r.o.IntervalJitter, r.o.Rand()))
			}
		}
	}
	if r.welcomes > 1 && !r.o.Once {
		at := now.Add(Splay(r.o.Splay, r.o.Rand()))
		if at.Before(r.nextAt) {
			r.nextAt, r.nextReason = at, ReasonConnect
		}
	}
	r.mu.Unlock()
	signal(r.wake)
}

func (r *runner) hello() *nodediagv1.Hello {
	r.mu.Lock()
	defer r.mu.Unlock()
	return &nodediagv1.Hello{
		NodeName:   r.o.NodeName,
		Agent:      r.o.Agent,
		MachineId:  r.machineID,
		ProviderId: r.providerID,
		AgentStart: timestamppb.New(r.o.AgentStart),
	}
}

// signal wakes the reader of c without ever blocking.
func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// ---- connection ------------------------------------------------------------

// outage tracks the failures since the last healthy connection, for its
// logs.
type outage struct {
	start    time.Time
	attempts int
	lastCode codes.Code
	logged   bool
}

// connectLoop connects, and connects again after each failure, until ctx
// ends (nil) or, with Once, the report is acknowledged.
func (r *runner) connectLoop(ctx context.Context) error {
	bo := Backoff{Initial: r.o.BackoffInitial, Max: r.o.BackoffMax, Factor: r.o.BackoffFactor, Rand: r.o.Rand}
	var lastErr error
	for {
		res := sessionResult{err: ctx.Err()}
		if ctx.Err() == nil {
			res = r.session(ctx)
		}
		if r.o.Once && r.isOnceAcked() {
			return nil
		}
		if ctx.Err() != nil {
			if r.o.Once {
				if lastErr == nil {
					lastErr = res.err
				}
				if lastErr == nil {
					return fmt.Errorf("%w within %v", ErrNotAcknowledged, r.o.AckTimeout)
				}
				return fmt.Errorf("%w within %v: %w", ErrNotAcknowledged, r.o.AckTimeout, lastErr)
			}
			return nil
		}
		if res.err != nil {
			lastErr = res.err
		}
		code := status.Code(res.err)
		refused := isRefusal(code)
		if r.o.Once && refused {
			return fmt.Errorf("the collector refused the agent: %w", res.err)
		}
		if res.healthy(r.o.StableAfter) {
			bo.Reset()
		}
		delay := bo.Next()
		if refused {
			delay = BackoffDelay(r.o.BackoffInitial, r.o.BackoffMax, r.o.BackoffFactor, 1<<20, r.o.Rand())
		}
		r.logFailure(res, delay)
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
		case <-t.C:
		}
	}
}

func (r *runner) isOnceAcked() bool {
	select {
	case <-r.onceAcked:
		return true
	default:
		return false
	}
}

// isRefusal tells the statuses that retrying will not fix.
func isRefusal(c codes.Code) bool {
	switch c {
	case codes.Unauthenticated, codes.PermissionDenied, codes.InvalidArgument, codes.AlreadyExists:
		return true
	}
	return false
}

// refusalHint says what an operator can do about a refusal.
func refusalHint(c codes.Code) string {
	switch c {
	case codes.Unauthenticated:
		return "the collector does not accept the agent's client certificate (or none was presented): check --tls-cert, --tls-key and that the collector's --client-ca signed them"
	case codes.PermissionDenied:
		return "the agent's certificate may not report this node: issue a certificate for this node name, or a shared agent certificate"
	case codes.InvalidArgument:
		return "the collector rejects the agent's Hello: check --node-name"
	case codes.AlreadyExists:
		return "another machine's agent holds this node name at the collector: give each agent its own --node-name (NODE_NAME), and each node its own certificate (nodediag certs --agent NAME)"
	}
	return ""
}

// logFailure logs the end of a connection: at the start of an outage and
// when the kind of error changes, not at every attempt.
func (r *runner) logFailure(res sessionResult, delay time.Duration) {
	out := &r.out
	code := status.Code(res.err)
	if out.start.IsZero() {
		out.start = time.Now()
	}
	out.attempts++
	attrs := []any{"err", res.err, "code", code.String(), "retry_in", delay.Round(time.Millisecond),
		"unacknowledged", r.spool.Len()}
	if out.logged && code == out.lastCode {
		r.log.Debug("collector still unreachable", append(attrs, "attempt", out.attempts)...)
		return
	}
	out.logged, out.lastCode = true, code
	switch {
	case isRefusal(code):
		r.log.Error("the collector refused the agent; retrying at the longest backoff", append(attrs, "hint", refusalHint(code))...)
	case res.welcomed:
		r.log.Warn("connection to the collector lost; reconnecting with backoff (reports are kept until acknowledged)", attrs...)
	default:
		r.log.Warn("cannot reach the collector; retrying with backoff (reports are kept until acknowledged)", attrs...)
	}
}

// sessionResult says how a connection went.
type sessionResult struct {
	welcomed bool
	acked    bool
	lasted   time.Duration
	err      error
}

// healthy: a welcomed connection that got an Ack or lasted; such a
// connection starts the backoff again from its initial delay.
func (s sessionResult) healthy(stableAfter time.Duration) bool {
	return s.welcomed && (s.acked || s.lasted >= stableAfter)
}

func (r *runner) dialOptions() []grpc.DialOption {
	creds := insecure.NewCredentials()
	if r.o.TLS != nil {
		creds = credentials.NewTLS(r.o.TLS)
	}
	opts := []grpc.DialOption{
		grpc.WithTransportCredentials(creds),
		grpc.WithKeepaliveParams(keepalive.ClientParameters{
			Time: keepaliveTime, Timeout: keepaliveTimeout, PermitWithoutStream: true,
		}),
		// Run retries with its own backoff, one dial per attempt: gRPC's
		// own reconnection is not used (the connection is closed after
		// each attempt).
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: r.o.BackoffInitial, Multiplier: r.o.BackoffFactor, Jitter: 0.2, MaxDelay: r.o.BackoffMax},
			MinConnectTimeout: r.o.ConnectTimeout,
		}),
		grpc.WithDefaultCallOptions(grpc.MaxCallSendMsgSize(r.o.MaxMessageBytes)),
	}
	return append(opts, r.o.DialOptions...)
}

// session is one connection: dial, Hello, Welcome, then the uploads, until
// the stream fails or ctx ends (then the stream is closed cleanly), or with
// Once the report is acknowledged.
func (r *runner) session(ctx context.Context) (res sessionResult) {
	cc, err := grpc.NewClient(r.o.Addr, r.dialOptions()...)
	if err != nil {
		res.err = fmt.Errorf("dialling %s: %w", r.o.Addr, err)
		return res
	}
	defer cc.Close()

	// The stream's context is not ctx: when ctx ends the stream is closed
	// from the agent's side first (CloseSend), then cancelled.
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	var timedOut atomic.Bool
	connectTimer := time.AfterFunc(r.o.ConnectTimeout, func() {
		timedOut.Store(true)
		cancel()
	})
	defer connectTimer.Stop()
	stopBeforeWelcome := context.AfterFunc(ctx, cancel)
	// Every return before the Welcome must unregister it, else each failed
	// attempt of an outage leaves a registration on ctx (for the life of
	// the process).
	defer stopBeforeWelcome()

	connectErr := func(err error) error {
		if timedOut.Load() {
			return status.Errorf(codes.DeadlineExceeded, "no Welcome from the collector within %v: %v", r.o.ConnectTimeout, err)
		}
		return err
	}

	stream, err := nodediagv1.NewCollectorClient(cc).Connect(sctx)
	if err != nil {
		res.err = connectErr(err)
		return res
	}
	if err := stream.Send(&nodediagv1.AgentMessage{Msg: &nodediagv1.AgentMessage_Hello{Hello: r.hello()}}); err != nil {
		// The reason is the stream's status, which Recv returns.
		_, rerr := stream.Recv()
		if rerr == nil || rerr == io.EOF {
			rerr = err
		}
		res.err = connectErr(rerr)
		return res
	}

	welcome := make(chan *nodediagv1.Welcome, 1)
	recvErr := make(chan error, 1)
	var acked atomic.Bool
	recvDone := make(chan struct{})
	go func() {
		defer close(recvDone)
		first := true
		for {
			m, err := stream.Recv()
			if err != nil {
				if err == io.EOF {
					err = status.Error(codes.Unavailable, "the collector ended the stream")
				}
				recvErr <- err
				return
			}
			switch msg := m.Msg.(type) {
			case *nodediagv1.CollectorMessage_Welcome:
				if first {
					first = false
					welcome <- msg.Welcome
				}
			case *nodediagv1.CollectorMessage_Ack:
				acked.Store(true)
				r.ack(msg.Ack.GetSeq())
			case *nodediagv1.CollectorMessage_Check:
				r.request(msg.Check.GetRequestId())
			}
		}
	}()
	// Whatever happens, the receiver ends before session returns: cancel
	// ends its Recv.
	defer func() {
		cancel()
		<-recvDone
	}()
	var w *nodediagv1.Welcome
	select {
	case w = <-welcome:
	case err := <-recvErr:
		res.err = connectErr(err)
		return res
	}
	// From now on, ctx's end closes the stream cleanly.
	connectTimer.Stop()
	if !stopBeforeWelcome() || ctx.Err() != nil {
		res.err = ctx.Err()
		return res
	}
	if timedOut.Load() {
		res.err = connectErr(errors.New("timed out"))
		return res
	}
	start := time.Now()
	res.welcomed = true
	defer func() {
		res.lasted = time.Since(start)
		res.acked = acked.Load()
	}()
	if w.GetNodeName() != "" && w.GetNodeName() != r.o.NodeName {
		r.log.Info("the collector knows this agent under another name", "as", w.GetNodeName())
	}
	r.logConnected()
	r.welcomed(w)

	sent := map[uint64]bool{}
	for {
		entries := r.spool.Entries()
		for _, e := range entries {
			if sent[e.Upload.GetSeq()] {
				continue
			}
			// Spooled before this collector said its limit: fitted now.
			u := r.fit(e.Upload)
			if u == nil {
				r.spool.Remove(e.Upload.GetSeq())
				continue
			}
			if err := stream.Send(&nodediagv1.AgentMessage{Msg: &nodediagv1.AgentMessage_Upload{Upload: u}}); err != nil {
				select {
				case res.err = <-recvErr:
				case <-time.After(closeTimeout):
					res.err = err
				}
				return res
			}
			sent[e.Upload.GetSeq()] = true
		}
		// Forget the seqs that left the spool: the map stays as small as
		// the spool.
		for seq := range sent {
			if !slices.ContainsFunc(entries, func(e *Entry) bool { return e.Upload.GetSeq() == seq }) {
				delete(sent, seq)
			}
		}
		select {
		case <-r.spoolChanged:
		case res.err = <-recvErr:
			return res
		case <-r.onceAcked:
			r.closeStream(stream, recvErr)
			return res
		case <-ctx.Done():
			r.closeStream(stream, recvErr)
			return res
		}
	}
}

// closeStream ends the agent's side of the stream and waits a little for
// the collector to end its side (Acks in flight arrive meanwhile).
func (r *runner) closeStream(stream grpc.BidiStreamingClient[nodediagv1.AgentMessage, nodediagv1.CollectorMessage], recvErr chan error) {
	if err := stream.CloseSend(); err != nil {
		return
	}
	t := time.NewTimer(closeTimeout)
	defer t.Stop()
	select {
	case <-recvErr:
	case <-t.C:
	}
}

// logConnected logs a Welcome, with the length of the outage it ends.
func (r *runner) logConnected() {
	r.mu.Lock()
	n := r.welcomes
	r.mu.Unlock()
	attrs := []any{"unacknowledged", r.spool.Len()}
	if !r.out.start.IsZero() {
		attrs = append(attrs, "outage", time.Since(r.out.start).Round(time.Millisecond), "attempts", r.out.attempts)
	}
	if n == 0 {
		r.log.Info("connected to the collector", attrs...)
	} else {
		r.log.Info("reconnected to the collector", attrs...)
	}
	r.out = outage{}
}
