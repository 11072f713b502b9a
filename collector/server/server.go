// Package server is the collector's gRPC side: the Collector service that
// agents stream their reports to (`nodediag-agent run`), and the Fleet
// service the operator's CLI asks (`nodediag sweep`, `nodes`, `node`).
// `nodediag serve` runs it. The protocol is written in the comments of
// proto/nodediag/v1/nodediag.proto; this package's own rules are:
//
//   - Acknowledgement: an Upload is acknowledged only after Store.Put
//     returned nil. When Put fails the stream ends with Unavailable and no
//     Ack, so that the agent reconnects (with its backoff) and sends the
//     report again; the store keeps a resent upload once.
//   - One stream per node name: a second Connect for a node replaces the
//     first, which ends with Aborted ("replaced by a newer connection"). The
//     newer one wins because the older is most often a connection that died
//     without the collector noticing yet (the agent reconnected first). Two
//     live agents claiming one name take turns; each replacement is logged
//     and counted (nodediag_collector_agent_replacements_total).
//   - Sends to an agent go through a bounded queue (Options.SendQueue)
//     drained by the stream's own goroutine: a sweep offers its
//     CheckRequest without waiting, so a slow agent never holds a sweep up.
//     A request that does not fit is dropped and counted; the node then
//     shows as missing in the sweep's result. Acks wait for room (they only
//     hold up their own agent).
//   - Authentication (TLS): every RPC needs a client certificate that
//     verifies against the client CA; without one the RPC ends with
//     Unauthenticated before any message is read (tlsconfig explains why
//     this is not done in the handshake). Roles: a certificate with the
//     agents' organization (O=nodediag:agents, see collector/certs) and not
//     the operators' is refused on Fleet with PermissionDenied (a node's
//     key must not read the fleet or start sweeps), and an operator's
//     certificate that is not also an agent's is refused on Collector.
//     A certificate with neither organization is refused with
//     PermissionDenied, unless Options.AllowUnlabelledClients (serve
//     --allow-unlabelled-clients: a client CA of another PKI whose
//     certificates carry no nodediag role) lets it call both.
//   - Identity binding: an agent certificate for one node (O=nodediag:agents
//     and a common name other than the shared "nodediag-agent", as `nodediag
//     certs --agent NAME` issues) may only say Hello for that node (its CN
//     or one of its DNS names): else PermissionDenied. A shared agent
//     certificate, or one from another PKI, may report any node name.
//   - Limits: messages up to Options.MaxMessageBytes (16 MiB); a larger one
//     ends its stream with ResourceExhausted and touches nothing else. A
//     message that is not valid protobuf ends its stream with
//     InvalidArgument. Keepalive: clients may ping every KeepaliveMinTime
//     (10 s) at most, also without an RPC in flight; the collector pings a
//     connection quiet for 30 s and closes it when the ping is not answered
//     in 10 s, so a vanished node shows as disconnected within ~40 s.
//   - Shutdown ends every stream with Unavailable ("collector shutting
//     down"), lets the Puts in flight finish (their reports are stored but
//     not acknowledged: the stream has ended, and the agents send them
//     again to the next collector, which keeps them once), and ends sweeps
//     with Unavailable after the answers streamed so far.
//
// The findings metric counts the latest report of each node received since
// the process started: after a restart it fills up again as agents
// reconnect (an agent uploads at connect).
package server

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"

	"github.com/nodediag/nodediag/collector/certs"
	"github.com/nodediag/nodediag/collector/store"
	"github.com/nodediag/nodediag/collector/workload"
	"github.com/nodediag/nodediag/internal/tlsconfig"
	nodediagv1 "github.com/nodediag/nodediag/proto/nodediag/v1"
)

// Defaults of Options.
const (
	DefaultMaxMessageBytes = 16 << 20
	DefaultSweepTimeout    = time.Minute
	DefaultMaxSweepTimeout = 30 * time.Minute
	DefaultSendQueue       = 16
	DefaultPutTimeout      = 30 * time.Second
	DefaultMaxAgents       = 50000
)

// Keepalive figures (see the package comment). Agents must set their
// keepalive.ClientParameters.Time to KeepaliveMinTime or more, else the
// collector closes their connection ("too_many_pings").
const (
	KeepaliveMinTime = 10 * time.Second
	keepaliveTime    = 30 * time.Second
	keepaliveTimeout = 10 * time.Second
	// A connection with no RPC for this long is closed (a CLI that forgot
	// to close; agents always have their stream open).
	maxConnectionIdle = 5 * time.Minute
	// Streams per connection: an agent needs one; a load generator that
	// multiplexes simulated agents up to this many per connection.
	maxStreamsPerConn = 1024
)

// handshakeTimeout bounds a connection's establishment, the TLS handshake
// and the HTTP/2 preface: a client silent or slow past it is closed. A
// variable for the tests.
var handshakeTimeout = 10 * time.Second

// Options configure a Server.
type Options struct {
	// Store keeps the reports; required. The Server does not close it.
	Store store.Store
	// TLS is the mutual TLS of the collector; nil serves plaintext
	// (`--insecure`).
	TLS *tlsconfig.Server
	// Logger receives the collector's log (slog.Default when nil).
	Logger *slog.Logger
	// Registerer is where the metrics are registered (nowhere when nil).
	Registerer prometheus.Registerer
	// AgentInterval is suggested to agents in the Welcome; zero leaves
	// theirs.
	AgentInterval time.Duration
	// SweepTimeout is the wait of a sweep that does not give one
	// (DefaultSweepTimeout); MaxSweepTimeout bounds what a sweep may ask
	// (DefaultMaxSweepTimeout).
	SweepTimeout, MaxSweepTimeout time.Duration
	// MaxMessageBytes bounds a received message (DefaultMaxMessageBytes).
	MaxMessageBytes int
	// SendQueue is the length of each agent's send queue (DefaultSendQueue).
	SendQueue int
	// PutTimeout bounds one Store.Put (DefaultPutTimeout).
	PutTimeout time.Duration
	// AllowUnlabelledClients accepts client certificates that carry
	// neither nodediag role (see the package comment) on both services.
	AllowUnlabelledClients bool
	// MaxAgents bounds the agent streams open at once (DefaultMaxAgents):
	// one more is refused with ResourceExhausted, so that a client with a
	// valid certificate cannot grow the collector without bound by saying
	// Hello under ever new node names.
	MaxAgents int
	// ForgetAfter is how long a node whose stream ended is remembered
	// (its last-seen time, its findings in the metrics): as long as the
	// store keeps reports (serve --max-age). Zero or negative: forever.
	ForgetAfter time.Duration
	// Clusters is the management cluster's Cluster API state (serve
	// --kubeconfig) that DiagnoseCluster joins with the stored reports;
	// nil: DiagnoseCluster answers FailedPrecondition.
	Clusters Clusters
	// Workload reads a Cluster's workload cluster for DiagnoseCluster
	// (workload.ReadCluster through its kubeconfig Secret); nil, or a nil
	// State, leaves the chain to the management side.
	Workload func(ctx context.Context, namespace, name string) *workload.State
}

// Server is the collector: the Collector and Fleet services on one gRPC
// server.
type Server struct {
	o       Options
	log     *slog.Logger
	grpc    *grpc.Server
	metrics *metrics

	mu       sync.RWMutex
	closing  bool
	closed   chan struct{} // closed when Shutdown starts
	agents   map[string]*session
	lastSeen map[string]time.Time // nodes whose stream ended
	sweeps   map[string]*sweep
	puts     sync.WaitGroup // Store.Puts in flight
	// decoding bounds the reports decoded at once (see upload).
	decoding chan struct{}
	connSeq  uint64
	// malformed holds the agent messages that did not decode (agentCodec).
	malformed sync.Map
	diag      diagnoser
}

// New makes a Server; Serve starts it.
func New(o Options) (*Server, error) {
	if o.Store == nil {
		return nil, errors.New("server: a store is required")
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.SweepTimeout <= 0 {
		o.SweepTimeout = DefaultSweepTimeout
	}
	if o.MaxSweepTimeout <= 0 {
		o.MaxSweepTimeout = DefaultMaxSweepTimeout
	}
	if o.MaxMessageBytes <= 0 {
		o.MaxMessageBytes = DefaultMaxMessageBytes
	}
	if o.SendQueue <= 0 {
		o.SendQueue = DefaultSendQueue
	}
	if o.PutTimeout <= 0 {
		o.PutTimeout = DefaultPutTimeout
	}
	if o.MaxAgents <= 0 {
		o.MaxAgents = DefaultMaxAgents
	}
	m, err := newMetrics(o.Registerer)
	if err != nil {
		return nil, err
	}
	s := &Server{
		o:        o,
		log:      o.Logger,
		metrics:  m,
		closed:   make(chan struct{}),
		agents:   map[string]*session{},
		lastSeen: map[string]time.Time{},
		sweeps:   map[string]*sweep{},
		decoding: make(chan struct{}, 2*runtime.GOMAXPROCS(0)),
	}
	codec, err := newAgentCodec(&s.malformed)
	if err != nil {
		return nil, err
	}
	if o.ForgetAfter > 0 {
		go s.forgetLoop(min(o.ForgetAfter/4, time.Hour))
	}
	opts := []grpc.ServerOption{
		grpc.ForceServerCodecV2(codec),
		grpc.MaxRecvMsgSize(o.MaxMessageBytes),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: KeepaliveMinTime, PermitWithoutStream: true}),
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: keepaliveTime, Timeout: keepaliveTimeout, MaxConnectionIdle: maxConnectionIdle}),
		grpc.ConnectionTimeout(handshakeTimeout),
		grpc.MaxConcurrentStreams(maxStreamsPerConn),
		// Thousands of mostly idle connections: share write buffers
		// instead of keeping 32 KiB per connection.
		grpc.SharedWriteBuffer(true),
	}
	if o.TLS != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(o.TLS.Config())), grpc.InTapHandle(s.authenticate))
	}
	s.grpc = grpc.NewServer(opts...)
	nodediagv1.RegisterCollectorServer(s.grpc, &collectorService{s: s})
	nodediagv1.RegisterFleetServer(s.grpc, &fleetService{s: s})
	return s, nil
}

// Serve accepts connections on lis until Shutdown; it returns nil after a
// Shutdown.
func (s *Server) Serve(lis net.Listener) error {
	err := s.grpc.Serve(lis)
	if errors.Is(err, grpc.ErrServerStopped) {
		return nil
	}
	return err
}

// Shutdown stops the server: no new connection or RPC, every agent stream
// and sweep ended with Unavailable, the Puts in flight finished. When ctx
// ends first, the connections are closed at once (the Puts in flight are
// still waited for: the store must not be closed under them). It does not
// close the store.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	if !s.closing {
		s.closing = true
		close(s.closed)
	}
	sessions := make([]*session, 0, len(s.agents))
	for _, ss := range s.agents {
		sessions = append(sessions, ss)
	}
	s.mu.Unlock()

	stopped := make(chan struct{})
	go func() {
		s.grpc.GracefulStop()
		close(stopped)
	}()
	for _, ss := range sessions {
		ss.end(status.Error(codes.Unavailable, "collector shutting down"))
	}
	var err error
	select {
	case <-stopped:
	case <-ctx.Done():
		err = fmt.Errorf("graceful shutdown: %w", ctx.Err())
		s.grpc.Stop()
		<-stopped
	}
	s.puts.Wait()
	return err
}

// beginPut registers a Put about to start, unless the server is shutting
// down (then Shutdown may already be waiting for the Puts in flight).
func (s *Server) beginPut() bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closing {
		return false
	}
	s.puts.Add(1)
	return true
}

// identity is the verified client certificate of an RPC (TLS only).
type identity struct {
	cert            *x509.Certificate
	agent, operator bool
}

type identityKey struct{}

func identityOf(c *x509.Certificate) *identity {
	id := &identity{cert: c}
	id.agent = slices.Contains(c.Subject.Organization, certs.AgentOrganization)
	id.operator = slices.Contains(c.Subject.Organization, certs.OperatorOrganization)
	return id
}

// boundNode is the node an agent certificate is for, when it is for one
// node (see the package comment).
func (id *identity) boundNode() (string, bool) {
	if !id.agent || id.cert.Subject.CommonName == certs.SharedAgentName {
		return "", false
	}
	return id.cert.Subject.CommonName, true
}

// mayReport says whether the certificate may say Hello for node.
func (id *identity) mayReport(node string) error {
	bound, ok := id.boundNode()
	if !ok || node == bound || slices.Contains(id.cert.DNSNames, node) {
		return nil
	}
	return status.Errorf(codes.PermissionDenied, "%s is for node %q: it may not report for node %q", tlsconfig.Describe(id.cert), bound, node)
}

var (
	collectorPrefix = "/" + nodediagv1.Collector_ServiceDesc.ServiceName + "/"
	fleetPrefix     = "/" + nodediagv1.Fleet_ServiceDesc.ServiceName + "/"
)

// authenticate runs before any stream is created (grpc.InTapHandle), on the
// connection's goroutine: it verifies the client certificate and the role
// of the service called, and puts the identity in the RPC's context.
func (s *Server) authenticate(ctx context.Context, info *tap.Info) (context.Context, error) {
	p, _ := peer.FromContext(ctx)
	var ti credentials.TLSInfo
	ok := false
	if p != nil {
		ti, ok = p.AuthInfo.(credentials.TLSInfo)
	}
	if !ok {
		s.metrics.refused.WithLabelValues(codes.Unauthenticated.String()).Inc()
		return nil, status.Error(codes.Unauthenticated, "not a TLS connection")
	}
	leaf, err := s.o.TLS.VerifyClient(ti.State)
	if err != nil {
		s.metrics.refused.WithLabelValues(codes.Unauthenticated.String()).Inc()
		if errors.Is(err, tlsconfig.ErrNoClientCertificate) {
			return nil, status.Error(codes.Unauthenticated, "no client certificate: the collector requires mutual TLS (a certificate and key signed by its client CA: --tls-cert, --tls-key)")
		}
		return nil, status.Error(codes.Unauthenticated, err.Error())
	}
	id := identityOf(leaf)
	switch {
	case !id.agent && !id.operator && !s.o.AllowUnlabelledClients:
		s.metrics.refused.WithLabelValues(codes.PermissionDenied.String()).Inc()
		return nil, status.Errorf(codes.PermissionDenied, "%s has no nodediag role: agents need O=%s, operators O=%s in their certificate's subject (nodediag certs issues both; serve --allow-unlabelled-clients accepts any certificate of --client-ca)", tlsconfig.Describe(leaf), certs.AgentOrganization, certs.OperatorOrganization)
	case strings.HasPrefix(info.FullMethodName, fleetPrefix) && id.agent && !id.operator:
		s.metrics.refused.WithLabelValues(codes.PermissionDenied.String()).Inc()
		return nil, status.Errorf(codes.PermissionDenied, "%s is an agent's (O=%s): the fleet service needs an operator's certificate (O=%s)", tlsconfig.Describe(leaf), certs.AgentOrganization, certs.OperatorOrganization)
	case strings.HasPrefix(info.FullMethodName, collectorPrefix) && id.operator && !id.agent:
		s.metrics.refused.WithLabelValues(codes.PermissionDenied.String()).Inc()
		return nil, status.Errorf(codes.PermissionDenied, "%s is an operator's (O=%s): agents connect with an agent's certificate (O=%s)", tlsconfig.Describe(leaf), certs.OperatorOrganization, certs.AgentOrganization)
	}
	return context.WithValue(ctx, identityKey{}, id), nil
}

// recvStatus is the status a stream ends with after Recv failed: nil when
// the agent closed its side, InvalidArgument for a message that could not be
// decoded (recvAgent reports it so; gRPC's own decoding errors are Internal,
// but the fault is the sender's), else Recv's own status (ResourceExhausted
// for an oversize message, Canceled when the client went away).
func recvStatus(err error) error {
	if errors.Is(err, io.EOF) {
		return nil
	}
	st, ok := status.FromError(err)
	if !ok {
		return status.Error(codes.Unknown, err.Error())
	}
	if st.Code() == codes.Internal {
		return status.Errorf(codes.InvalidArgument, "malformed message: %s", st.Message())
	}
	return st.Err()
}

// storeStatus converts a store error at the boundary. The store's own
// message (it names the database file) goes to the collector's log, not to
// the client.
func (s *Server) storeStatus(what string, err error) error {
	switch {
	case errors.Is(err, store.ErrNotFound):
		return status.Errorf(codes.NotFound, "%s: not found", what)
	case errors.Is(err, store.ErrClosed):
		return status.Errorf(codes.Unavailable, "%s: the collector is shutting down", what)
	case errors.Is(err, context.Canceled):
		return status.Errorf(codes.Canceled, "%s: canceled", what)
	case errors.Is(err, context.DeadlineExceeded):
		return status.Errorf(codes.DeadlineExceeded, "%s: the store did not answer in time", what)
	}
	s.log.Error("store error", "op", what, "err", err)
	return status.Errorf(codes.Internal, "%s: the collector's store failed (its log says why)", what)
}

// forgetLoop forgets, every period until Shutdown, the nodes whose stream
// ended more than ForgetAfter ago: the store has deleted their reports by
// then, and the collector's own memory must not grow with every node name
// ever seen.
func (s *Server) forgetLoop(period time.Duration) {
	t := time.NewTicker(max(period, time.Second))
	defer t.Stop()
	for {
		select {
		case <-s.closed:
			return
		case now := <-t.C:
			s.forget(now.Add(-s.o.ForgetAfter))
		}
	}
}

// forget drops the disconnected nodes last seen before cutoff.
func (s *Server) forget(cutoff time.Time) {
	var gone []string
	s.mu.Lock()
	for node, seen := range s.lastSeen {
		if seen.Before(cutoff) && s.agents[node] == nil {
			delete(s.lastSeen, node)
			gone = append(gone, node)
		}
	}
	s.mu.Unlock()
	for _, node := range gone {
		s.metrics.findings.setCounts(node, nil)
	}
	if len(gone) > 0 {
		s.log.Info("forgot nodes not seen for a while", "nodes", len(gone), "not_seen_since", cutoff)
	}
}
