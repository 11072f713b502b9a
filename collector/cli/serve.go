package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"
	"k8s.io/client-go/rest"

	"github.com/nodediag/nodediag/collector/capi"
	"github.com/nodediag/nodediag/collector/server"
	"github.com/nodediag/nodediag/collector/store"
	"github.com/nodediag/nodediag/collector/workload"
	"github.com/nodediag/nodediag/internal/tlsconfig"
)

const serveLong = `Run the collector: agents (` + "`nodediag-agent run`" + `) stream their reports to it,
and operators ask it for sweeps and reports (` + "`nodediag sweep`, `nodes`, `node`" + `), all on
--listen. Reports are kept in an embedded SQLite database in --data-dir: the
latest of every node and a bounded history (--history, --max-age). An agent's
upload is acknowledged only once it is stored.

Security: mutual TLS is the default and the only mode outside loopback demos.
Pass --tls-cert and --tls-key (the collector's certificate) and --client-ca (the
CA that signs agents' and operators' certificates); ` + "`nodediag certs`" + ` issues
them all, or see ` + "`nodediag certs --cert-manager`" + `. --insecure serves plaintext,
with no authentication at all: anyone who reaches the port can report any node,
read every report and start sweeps. It is meant for 127.0.0.1 (the collector
warns loudly when the address is not a loopback one).

Lines for scripts, on stderr, once the ports are open:
  nodediag: serving on HOST:PORT
  nodediag: metrics on HOST:PORT        (with --metrics-listen)
With --listen 127.0.0.1:0 the system picks a free port and the line tells it.
The log (--log-level, --log-format) also goes to stderr.

--metrics-listen serves plain HTTP (no TLS): /metrics (Prometheus: the
collector's own metrics, nodediag_collector_*, with the Go runtime's and the
process's), /healthz (200 while the process runs) and /readyz (200 while the
collector serves and its store answers; 503 once shutting down). It is off by
default; in a cluster pass --metrics-listen :9090 for Prometheus to scrape.

Cluster API (--kubeconfig, --context, --cluster-api): the collector keeps its
own informers (list and watch, read-only) on the management cluster's Cluster
API objects and answers ` + "`nodediag diagnose cluster` and `describe cluster`" + `
given only --collector: it joins the cluster with the stored reports of its
nodes, re-judged with each Machine's version and role (kept between calls).
Its identity needs get, list and watch on the Cluster API kinds (what it may
not read is a gap in the report, with the role it lacks).

SIGTERM or SIGINT: the collector stops accepting connections, ends agents'
streams and sweeps with Unavailable (agents reconnect to the next collector),
waits up to --shutdown-grace for the uploads being stored, closes the store
and exits 0. A second signal kills it at once.

Exit codes: 0 stopped by a signal; 2 the collector could not start (usage, a
data directory that cannot be used, a port in use, a certificate that does not
load) or failed while serving.`

// Defaults of serve's flags.
const (
	// DefaultListen is every interface, port 7443: agents on other nodes
	// must reach the collector; mutual TLS guards it.
	DefaultListen = ":7443"
	// DefaultDataDir is where a collector on a host (or a StatefulSet's
	// volume) keeps its database.
	DefaultDataDir       = "/var/lib/nodediag"
	DefaultShutdownGrace = 10 * time.Second
)

type serveOptions struct {
	listen        string
	dataDir       string
	history       int
	maxAge        time.Duration
	durability    string
	tlsCert       string
	tlsKey        string
	clientCA      string
	insecure      bool
	metricsListen string
	agentInterval time.Duration
	sweepTimeout  time.Duration
	maxSweep      time.Duration
	maxMessage    int
	allowAnyRole  bool
	maxAgents     int
	logLevel      string
	logFormat     string
	shutdownGrace time.Duration
	clusterAPI    bool
	kubeconfig    string
	kubeCtx       string
	watchNS       string
	wlAccess      string
}

func newServeCommand() *cobra.Command {
	o := &serveOptions{}
	cmd := &cobra.Command{
		Use:   "serve [--listen ADDR] [--data-dir DIR] [--kubeconfig FILE] (--tls-cert F --tls-key F --client-ca F | --insecure)",
		Short: "Run the collector: receive agents' reports, answer sweeps and queries",
		Long:  serveLong,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			if ctx == nil {
				ctx = context.Background()
			}
			return runServe(ctx, o, cmd.ErrOrStderr())
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&o.listen, "listen", DefaultListen, "address of the gRPC service (agents and operators), `HOST:PORT`; port 0 picks a free one")
	fs.StringVar(&o.dataDir, "data-dir", DefaultDataDir, "`DIR` of the report database (created 0700; "+store.FileName+" and its -wal and -shm files)")
	fs.IntVar(&o.history, "history", store.DefaultHistory, "reports kept per node, the latest included")
	fs.DurationVar(&o.maxAge, "max-age", store.DefaultMaxAge, "reports older than this are deleted, even a node's latest (forgets nodes gone from the fleet); negative keeps them whatever their age")
	fs.StringVar(&o.durability, "durability", "power-loss", "what a stored (acknowledged) report survives: power-loss (fsync at each commit) or process-crash (faster; a machine crash may lose the last commits)")
	fs.StringVar(&o.tlsCert, "tls-cert", "", "the collector's certificate `FILE` (PEM), e.g. server.crt of nodediag certs; re-read when it changes")
	fs.StringVar(&o.tlsKey, "tls-key", "", "the key `FILE` of --tls-cert (PEM)")
	fs.StringVar(&o.clientCA, "client-ca", "", "the CA `FILE` that signs agents' and operators' certificates (PEM), e.g. ca.crt")
	fs.BoolVar(&o.insecure, "insecure", false, "serve without TLS or authentication: loopback demos and tests only")
	fs.StringVar(&o.metricsListen, "metrics-listen", "", "address of the HTTP endpoint /metrics, /healthz, /readyz, `HOST:PORT` (default: off)")
	fs.DurationVar(&o.agentInterval, "agent-interval", 0, "check interval suggested to agents when they connect (0: each agent keeps its own)")
	fs.DurationVar(&o.sweepTimeout, "sweep-timeout", server.DefaultSweepTimeout, "how long a sweep waits for answers when the operator gives no --timeout")
	fs.DurationVar(&o.maxSweep, "max-sweep-timeout", server.DefaultMaxSweepTimeout, "the longest --timeout a sweep may ask for")
	fs.BoolVar(&o.allowAnyRole, "allow-unlabelled-clients", false, "accept client certificates of --client-ca that carry no nodediag role (O=nodediag:agents or O=nodediag:operators) on both services: for a CA of another PKI")
	fs.IntVar(&o.maxAgents, "max-agents", server.DefaultMaxAgents, "the most agent streams served at once; one more is refused with ResourceExhausted")
	fs.IntVar(&o.maxMessage, "max-message-bytes", server.DefaultMaxMessageBytes, "largest message accepted from a client; a larger one ends its stream with ResourceExhausted")
	fs.BoolVar(&o.clusterAPI, "cluster-api", false, "read the management cluster's Cluster API state (get, list, watch) with the kubeconfig resolved as kubectl does, or the pod's ServiceAccount in a cluster, so that nodediag diagnose/describe --collector are answered here")
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "read the Cluster API state of the management cluster of this kubeconfig `FILE` (implies --cluster-api)")
	fs.StringVar(&o.kubeCtx, "context", "", "the kubeconfig context (implies --cluster-api; default: its current context)")
	fs.StringVar(&o.wlAccess, "workload-access", "reader", "how Fleet.DiagnoseCluster reads a workload cluster: reader (Secret CLUSTER-nodediag-kubeconfig), capi (Secret CLUSTER-kubeconfig, Cluster API's admin), none")
	fs.StringVar(&o.watchNS, "watch-namespace", "", "watch the Cluster API objects of this `NAMESPACE` only (default: all; with a Role instead of a ClusterRole)")
	fs.StringVar(&o.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	fs.StringVar(&o.logFormat, "log-format", "text", "log format on stderr: text or json (slog)")
	fs.DurationVar(&o.shutdownGrace, "shutdown-grace", DefaultShutdownGrace, "on SIGTERM/SIGINT, how long to let streams end and uploads be stored before closing connections")
	return cmd
}

// validate checks the flags that need no file or port, so that a usage
// error comes before anything is opened.
func (o *serveOptions) validate() (storeOpts store.Options, level slog.Level, err error) {
	anyTLS := o.tlsCert != "" || o.tlsKey != "" || o.clientCA != ""
	switch {
	case o.insecure && anyTLS:
		return storeOpts, level, exitf(ExitUsage, "--insecure and --tls-cert/--tls-key/--client-ca exclude each other")
	case !o.insecure && !anyTLS:
		return storeOpts, level, exitf(ExitUsage, "mutual TLS is the default: pass --tls-cert, --tls-key and --client-ca (`nodediag certs --dir DIR` issues them), or --insecure for a loopback demo")
	case !o.insecure:
		var missing []string
		for _, f := range []struct{ name, val string }{{"--tls-cert", o.tlsCert}, {"--tls-key", o.tlsKey}, {"--client-ca", o.clientCA}} {
			if f.val == "" {
				missing = append(missing, f.name)
			}
		}
		if len(missing) > 0 {
			return storeOpts, level, exitf(ExitUsage, "mutual TLS needs --tls-cert, --tls-key and --client-ca: %s missing", strings.Join(missing, " and "))
		}
	}
	if _, _, err := net.SplitHostPort(o.listen); err != nil {
		return storeOpts, level, exitf(ExitUsage, "--listen %q: want HOST:PORT: %v", o.listen, err)
	}
	if o.metricsListen != "" {
		if _, _, err := net.SplitHostPort(o.metricsListen); err != nil {
			return storeOpts, level, exitf(ExitUsage, "--metrics-listen %q: want HOST:PORT: %v", o.metricsListen, err)
		}
	}
	if o.dataDir == "" {
		return storeOpts, level, exitf(ExitUsage, "--data-dir must not be empty")
	}
	if o.history <= 0 {
		return storeOpts, level, exitf(ExitUsage, "--history %d: want at least 1", o.history)
	}
	if o.maxAge == 0 {
		return storeOpts, level, exitf(ExitUsage, "--max-age 0: want a positive duration, or a negative one to keep reports whatever their age")
	}
	switch {
	case o.agentInterval < 0:
		return storeOpts, level, exitf(ExitUsage, "--agent-interval must not be negative")
	case o.sweepTimeout <= 0:
		return storeOpts, level, exitf(ExitUsage, "--sweep-timeout must be positive")
	case o.maxSweep <= 0:
		return storeOpts, level, exitf(ExitUsage, "--max-sweep-timeout must be positive")
	case o.sweepTimeout > o.maxSweep:
		return storeOpts, level, exitf(ExitUsage, "--sweep-timeout %s is longer than --max-sweep-timeout %s", o.sweepTimeout, o.maxSweep)
	case o.maxMessage <= 0:
		return storeOpts, level, exitf(ExitUsage, "--max-message-bytes must be positive")
	case o.shutdownGrace < 0:
		return storeOpts, level, exitf(ExitUsage, "--shutdown-grace must not be negative")
	}
	storeOpts = store.Options{History: o.history, MaxAge: o.maxAge}
	switch o.durability {
	case "power-loss":
		storeOpts.Durability = store.PowerLoss
	case "process-crash":
		storeOpts.Durability = store.ProcessCrash
	default:
		return storeOpts, level, exitf(ExitUsage, "--durability %q: want power-loss or process-crash", o.durability)
	}
	if err := level.UnmarshalText([]byte(o.logLevel)); err != nil {
		return storeOpts, level, exitf(ExitUsage, "--log-level %q: want debug, info, warn or error", o.logLevel)
	}
	if o.logFormat != "text" && o.logFormat != "json" {
		return storeOpts, level, exitf(ExitUsage, "--log-format %q: want text or json", o.logFormat)
	}
	return storeOpts, level, nil
}

// lockedWriter serializes the writes of the log and of the "nodediag: ..."
// lines on stderr.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func (l *lockedWriter) printf(format string, args ...any) {
	fmt.Fprintf(l, format, args...)
}

// runServe runs the collector until ctx ends (the signal context of main).
func runServe(ctx context.Context, o *serveOptions, stderr io.Writer) (err error) {
	storeOpts, level, err := o.validate()
	if err != nil {
		return err
	}
	errOut := &lockedWriter{w: stderr}
	hopts := &slog.HandlerOptions{Level: level}
	var h slog.Handler = slog.NewTextHandler(errOut, hopts)
	if o.logFormat == "json" {
		h = slog.NewJSONHandler(errOut, hopts)
	}
	log := slog.New(h)

	var tlsServer *tlsconfig.Server
	if !o.insecure {
		if tlsServer, err = tlsconfig.NewServer(o.tlsCert, o.tlsKey, o.clientCA); err != nil {
			return exitf(ExitUsage, "loading the collector's TLS files: %v", err)
		}
	}
	st, err := store.Open(o.dataDir, storeOpts)
	if err != nil {
		return exitf(ExitUsage, "opening the report store in --data-dir %s: %v", o.dataDir, err)
	}
	defer func() {
		if cerr := st.Close(); cerr != nil && err == nil {
			err = exitf(ExitUsage, "closing the report store: %v", cerr)
		}
	}()

	var reg *prometheus.Registry
	if o.metricsListen != "" {
		reg = prometheus.NewRegistry()
		reg.MustRegister(
			collectors.NewGoCollector(),
			collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		)
	}
	access, err := workload.ParseAccess(o.wlAccess)
	if err != nil {
		return exitf(ExitUsage, "%v", err)
	}
	var clusters *capi.Cache
	var mgmt *rest.Config
	if o.clusterAPI || o.kubeconfig != "" || o.kubeCtx != "" {
		cfg, err := capi.RESTConfig(o.kubeconfig, o.kubeCtx)
		if err != nil {
			return exitf(ExitUsage, "reading Cluster API state: %v", err)
		}
		mgmt = cfg
		if clusters, err = capi.NewCache(cfg, o.watchNS); err != nil {
			return exitf(ExitUsage, "reading Cluster API state from %s: %v", cfg.Host, err)
		}
		defer clusters.Stop()
		go func() {
			start := time.Now()
			if err := clusters.WaitForSync(ctx); err != nil {
				log.Warn("Cluster API informers not synced", "err", err)
				return
			}
			log.Info("Cluster API informers synced", "api_server", cfg.Host, "namespace", o.watchNS, "took", time.Since(start).Round(time.Millisecond))
		}()
	}
	opts := server.Options{
		Store:                  st,
		TLS:                    tlsServer,
		Logger:                 log,
		AgentInterval:          o.agentInterval,
		SweepTimeout:           o.sweepTimeout,
		MaxSweepTimeout:        o.maxSweep,
		MaxMessageBytes:        o.maxMessage,
		AllowUnlabelledClients: o.allowAnyRole,
		MaxAgents:              o.maxAgents,
		ForgetAfter:            storeOpts.MaxAge,
	}
	if clusters != nil {
		opts.Clusters = clusters
		opts.Workload = func(ctx context.Context, ns, name string) *workload.State {
			st, err := workload.ReadCluster(ctx, mgmt, ns, name, access)
			if err != nil {
				log.Info("workload cluster not read", "cluster", ns+"/"+name, "reason", err)
			}
			return st
		}
	}
	if reg != nil {
		opts.Registerer = reg
	}
	srv, err := server.New(opts)
	if err != nil {
		return exitf(ExitUsage, "starting the collector: %v", err)
	}

	var lc net.ListenConfig
	lis, err := lc.Listen(ctx, "tcp", o.listen)
	if err != nil {
		return exitf(ExitUsage, "--listen %s: %v", o.listen, listenErr(err))
	}
	var metricsLis net.Listener
	if o.metricsListen != "" {
		if metricsLis, err = lc.Listen(ctx, "tcp", o.metricsListen); err != nil {
			lis.Close()
			return exitf(ExitUsage, "--metrics-listen %s: %v", o.metricsListen, listenErr(err))
		}
	}

	if o.insecure && !isLoopback(lis.Addr()) {
		errOut.printf("nodediag: WARNING: serving WITHOUT TLS (--insecure) on %s, which is not a loopback address: anyone who can reach it can report as any node, read every report and start sweeps. Use mutual TLS (`nodediag certs`) outside loopback demos.\n", lis.Addr())
		log.Warn("serving without TLS or authentication on a non-loopback address", "addr", lis.Addr().String())
	}

	var shuttingDown sync.Once
	closing := make(chan struct{})
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(lis) }()

	var metricsSrv *http.Server
	metricsErr := make(chan error, 1)
	if metricsLis != nil {
		metricsSrv = &http.Server{
			Handler:           metricsHandler(reg, st, closing),
			ReadHeaderTimeout: 10 * time.Second,
			ErrorLog:          slog.NewLogLogger(h, slog.LevelWarn),
		}
		go func() { metricsErr <- metricsSrv.Serve(metricsLis) }()
	}

	errOut.printf("nodediag: serving on %s\n", lis.Addr())
	if metricsLis != nil {
		errOut.printf("nodediag: metrics on %s\n", metricsLis.Addr())
	}
	log.Info("collector started", "listen", lis.Addr().String(), "tls", !o.insecure, "data_dir", o.dataDir,
		"history", storeOpts.History, "max_age", storeOpts.MaxAge, "durability", storeOpts.Durability.String())

	// stop ends the servers; the deferred Close of the store comes after.
	stop := func() {
		shuttingDown.Do(func() { close(closing) })
		gctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), o.shutdownGrace)
		defer cancel()
		if err := srv.Shutdown(gctx); err != nil {
			log.Warn("shutdown grace period over: connections closed", "grace", o.shutdownGrace, "err", err)
		}
		if metricsSrv != nil {
			// Scrapes are short; the grace period of the collector
			// bounds them too.
			if err := metricsSrv.Shutdown(gctx); err != nil {
				metricsSrv.Close()
			}
		}
	}

	select {
	case <-ctx.Done():
		log.Info("shutting down", "cause", context.Cause(ctx), "grace", o.shutdownGrace)
		stop()
		log.Info("collector stopped")
		return nil
	case err := <-serveErr:
		stop()
		if err == nil {
			return nil
		}
		return exitf(ExitUsage, "serving on %s: %v", lis.Addr(), err)
	case err := <-metricsErr:
		stop()
		return exitf(ExitUsage, "serving metrics on %s: %v", metricsLis.Addr(), err)
	}
}

// listenErr is the cause of a failed listen without the address the
// message names already ("bind: address already in use").
func listenErr(err error) error {
	var op *net.OpError
	if errors.As(err, &op) && op.Err != nil {
		return op.Err
	}
	return err
}

// isLoopback says whether a listener's address is a loopback one (an
// unspecified address, every interface, is not).
func isLoopback(a net.Addr) bool {
	tcp, ok := a.(*net.TCPAddr)
	return ok && tcp.IP.IsLoopback()
}

// readyTimeout bounds the store's answer to /readyz.
const readyTimeout = 2 * time.Second

// readyProbeNode is a name no node has (node names have no space): looking
// it up exercises the store's read path without reading reports.
const readyProbeNode = "nodediag readyz"

// metricsHandler serves /metrics from reg (with promhttp's own scrape
// metrics), /healthz and /readyz.
func metricsHandler(reg *prometheus.Registry, st store.Store, closing <-chan struct{}) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.InstrumentMetricHandler(reg, promhttp.HandlerFor(reg, promhttp.HandlerOpts{})))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		io.WriteString(w, "ok\n")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-closing:
			http.Error(w, "shutting down", http.StatusServiceUnavailable)
			return
		default:
		}
		ctx, cancel := context.WithTimeout(r.Context(), readyTimeout)
		defer cancel()
		if _, err := st.Latest(ctx, readyProbeNode); err != nil && !errors.Is(err, store.ErrNotFound) {
			http.Error(w, "store: "+oneLine(err.Error()), http.StatusServiceUnavailable)
			return
		}
		io.WriteString(w, "ok\n")
	})
	return mux
}
