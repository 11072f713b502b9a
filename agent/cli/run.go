package cli

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/nodediag/nodediag/agent/host"
	"github.com/nodediag/nodediag/agent/stream"
	"github.com/nodediag/nodediag/internal/tlsconfig"
	"github.com/nodediag/nodediag/internal/version"
	nodediagv1 "github.com/nodediag/nodediag/proto/nodediag/v1"
)

// DefaultSpoolDir keeps the unacknowledged reports of `run` across
// restarts of the agent (a hostPath volume in the DaemonSet).
const DefaultSpoolDir = "/var/lib/nodediag-agent/spool"

// defaultMemoryLimit is the Go runtime's soft memory limit of `run`
// (--memory-limit): a check holds its evidence in memory once, and the
// spool bounds what waits for the collector.
const defaultMemoryLimit = "256MiB"

const runUsage = `Usage: nodediag-agent run --collector HOST:PORT (--insecure | --tls-cert F --tls-key F --ca F) [flags]

DaemonSet mode: check the host at start, on a jittered interval and when the
collector asks (a sweep), and stream each report to the collector, which
acknowledges it once stored. Reports not yet acknowledged are kept in
--spool-dir (bounded: the newest %d reports, %d MiB) and sent again after a
reconnection; reconnections back off up to %v.

Mutual TLS is the default: give the agent's certificate and key (--tls-cert,
--tls-key; 'nodediag certs' or cert-manager's tls.crt/tls.key) and the CA of the
collector's certificate (--ca, ca.crt). The files are re-read when they change.
--insecure (plaintext) is for loopback demos and tests.

Resources: checks run one at a time, never concurrently (a request that
arrives during a check is served after it); GOMAXPROCS is left to the Go
runtime, which follows the container's CPU limit. --memory-limit sets the
runtime's soft memory limit (GOMEMLIMIT, when set, wins over the default).

Exit codes: 0 stopped by SIGTERM/SIGINT, or with --once the report
acknowledged; 1 with --once the report not acknowledged within --ack-timeout,
or refused by the collector; 2 the agent could not run (usage).

Flags:
`

type runOptions struct {
	check                                      checkOptions
	collector, tlsCert, tlsKey, ca, serverName string
	spoolDir, memoryLimit, logLevel            string
	insecure, once                             bool
	interval, ackTimeout                       time.Duration
	memoryLimitSet                             bool
}

func runRun(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var o runOptions
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), runUsage, stream.DefaultSpoolReports, stream.DefaultSpoolBytes>>20, stream.DefaultBackoffMax)
		fs.PrintDefaults()
	}
	c := &o.check
	c.warn = stderr
	// The flags of check that make sense for a long-running agent; not
	// --output (reports go to the collector) nor --now (each check judges
	// as of its own time).
	fs.StringVar(&c.root, "root", "/", "the host's root as this process sees it (/ on a VM, /host in the DaemonSet, a directory)")
	fs.DurationVar(&c.timeout, "timeout", 60*time.Second, "bound on each check")
	fs.StringVar(&c.since, "since", "", "judge log lines from this DURATION before each check (2h); default: the last boot")
	fs.StringVar(&c.expect, "expect-version", "", "the Kubernetes version the Machine expects (v1.32.0)")
	fs.StringVar(&c.role, "role", "", "what the node is meant to be: control-plane or worker (default: inferred from what kubeadm left on the node)")
	fs.StringVar(&c.exec, "exec", execAuto, execFlagHelp)
	fs.StringVar(&c.nodeName, "node-name", "", "the node's name in reports (default: NODE_NAME, else the host's name under --root)")
	fs.StringVar(&c.rulesDir, "rules-dir", "", "load log signatures from this directory instead of the embedded ones")
	fs.BoolVar(&c.offline, "offline", false, "never touch the network but the collector: skip registry reachability")
	fs.Var(&c.only, "probe", "run only these probes (repeatable, comma-separated)")
	fs.Var(&c.skip, "skip", "skip these probes (repeatable, comma-separated)")

	fs.StringVar(&o.collector, "collector", "", "the collector's HOST:PORT (required)")
	fs.BoolVar(&o.insecure, "insecure", false, "plaintext, no TLS: loopback demos and tests only")
	fs.StringVar(&o.tlsCert, "tls-cert", "", "the agent's client certificate (PEM) for mutual TLS")
	fs.StringVar(&o.tlsKey, "tls-key", "", "the key of --tls-cert (PEM)")
	fs.StringVar(&o.ca, "ca", "", "the CA the collector's certificate must chain to (PEM)")
	fs.StringVar(&o.serverName, "tls-server-name", "", "the name the collector's certificate must carry (default: the host of --collector)")
	fs.DurationVar(&o.interval, "interval", stream.DefaultInterval, "time between checks (jittered ±20%); the collector may suggest another, not below 30s")
	fs.StringVar(&o.spoolDir, "spool-dir", DefaultSpoolDir, "where unacknowledged reports are kept across restarts; empty: in memory only (an unwritable directory is warned about, then memory is used)")
	fs.BoolVar(&o.once, "once", false, "check once, send the report, wait for its acknowledgement and exit")
	fs.DurationVar(&o.ackTimeout, "ack-timeout", stream.DefaultAckTimeout, "with --once: how long to wait for the acknowledgement, reconnections included")
	fs.StringVar(&o.memoryLimit, "memory-limit", defaultMemoryLimit, "the Go runtime's soft memory limit (bytes, or with KiB, MiB, GiB); 0: none")
	fs.StringVar(&o.logLevel, "log-level", "info", "debug, info, warn or error (logs are slog text on stderr)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return ExitOK
		}
		return ExitUsage
	}
	fs.Visit(func(f *flag.Flag) { o.memoryLimitSet = o.memoryLimitSet || f.Name == "memory-limit" })
	usageErr := func(format string, args ...any) int {
		fmt.Fprintf(stderr, "nodediag-agent run: "+format+"\n", args...)
		return ExitUsage
	}
	if fs.NArg() > 0 {
		return usageErr("unexpected arguments %q", fs.Args())
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(o.logLevel)); err != nil {
		return usageErr("--log-level %q: want debug, info, warn or error", o.logLevel)
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))

	if o.collector == "" {
		return usageErr("--collector HOST:PORT is required")
	}
	tlsConf, err := o.tlsConfig()
	if err != nil {
		return usageErr("%v", err)
	}
	if o.interval <= 0 {
		return usageErr("--interval %v: want a positive duration", o.interval)
	}
	if o.once && o.ackTimeout <= 0 {
		return usageErr("--ack-timeout %v: want a positive duration", o.ackTimeout)
	}
	restore, err := o.setMemoryLimit(log)
	if err != nil {
		return usageErr("%v", err)
	}
	defer restore()

	h, err := host.New(c.root, host.NoExec{})
	if err != nil {
		return usageErr("--root %s: %v", c.root, err)
	}
	id := readIdentity(h, c.nodeName)
	if id.nodeName == "" {
		return usageErr("cannot tell the node's name (no %s under --root %s): set --node-name or NODE_NAME", id.hostnameFile, c.root)
	}
	// The reports carry the name the Hello gives.
	c.nodeName = id.nodeName
	chk, err := newChecker(*c)
	if err != nil {
		return usageErr("%v", err)
	}

	spoolLog := func(format string, args ...any) { log.Warn(fmt.Sprintf(format, args...)) }
	spool := stream.OpenSpool(o.spoolDir, 0, 0, spoolLog)
	v := version.Get()
	opts := stream.Options{
		Addr:       o.collector,
		TLS:        tlsConf,
		NodeName:   id.nodeName,
		MachineID:  id.machineID,
		Agent:      &nodediagv1.AgentInfo{Version: v.Version, Revision: v.Revision},
		AgentStart: time.Now(),
		Check: func(ctx context.Context, reason, requestID string) (*nodediagv1.Report, error) {
			return chk.run(ctx)
		},
		Interval:   o.interval,
		Spool:      spool,
		Once:       o.once,
		AckTimeout: o.ackTimeout,
		Logger:     log,
	}
	log.Info("nodediag-agent run", "version", v.Version, "collector", o.collector, "node", id.nodeName,
		"tls", tlsConf != nil, "interval", o.interval, "spool", spool.Dir(), "once", o.once)
	err = stream.Run(ctx, opts)
	switch {
	case err == nil:
		if o.once {
			log.Info("report acknowledged by the collector")
		}
		return ExitOK
	case o.once:
		log.Error("report not delivered", "err", err)
		return ExitFindings
	default:
		fmt.Fprintf(stderr, "nodediag-agent run: %v\n", err)
		return ExitUsage
	}
}

// tlsConfig is the client's mutual TLS, nil with --insecure.
func (o *runOptions) tlsConfig() (*tls.Config, error) {
	anyTLS := o.tlsCert != "" || o.tlsKey != "" || o.ca != ""
	switch {
	case o.insecure && (anyTLS || o.serverName != ""):
		return nil, errors.New("--insecure and --tls-cert/--tls-key/--ca/--tls-server-name are mutually exclusive")
	case o.insecure:
		return nil, nil
	case !anyTLS:
		return nil, errors.New("mutual TLS is the default: give --tls-cert, --tls-key and --ca (or --insecure for a loopback demo)")
	case o.tlsCert == "" || o.tlsKey == "" || o.ca == "":
		return nil, errors.New("mutual TLS needs all of --tls-cert, --tls-key and --ca")
	}
	conf, err := tlsconfig.NewClient(o.tlsCert, o.tlsKey, o.ca)
	if err != nil {
		return nil, err
	}
	conf.ServerName = o.serverName
	return conf, nil
}

// setMemoryLimit applies --memory-limit (unless GOMEMLIMIT is set and the
// flag was not) and returns what restores the previous limit.
func (o *runOptions) setMemoryLimit(log *slog.Logger) (func(), error) {
	if os.Getenv("GOMEMLIMIT") != "" && !o.memoryLimitSet {
		return func() {}, nil
	}
	n, err := parseBytes(o.memoryLimit)
	if err != nil {
		return nil, fmt.Errorf("--memory-limit: %w", err)
	}
	if n == 0 {
		return func() {}, nil
	}
	old := debug.SetMemoryLimit(n)
	log.Debug("memory limit set", "bytes", n)
	return func() { debug.SetMemoryLimit(old) }, nil
}

// parseBytes parses a size: a number of bytes, or with a unit KiB, MiB,
// GiB (also K, M, G, Ki, Mi, Gi: powers of 1024; KB, MB, GB: of 1000).
func parseBytes(s string) (int64, error) {
	s = strings.TrimSpace(s)
	i := strings.IndexFunc(s, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
	num, unit := s, ""
	if i >= 0 {
		num, unit = s[:i], strings.TrimSpace(s[i:])
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil || f < 0 {
		return 0, fmt.Errorf("%q: want a size such as 256MiB", s)
	}
	mult := map[string]float64{
		"": 1, "B": 1,
		"K": 1 << 10, "Ki": 1 << 10, "KiB": 1 << 10, "KB": 1e3,
		"M": 1 << 20, "Mi": 1 << 20, "MiB": 1 << 20, "MB": 1e6,
		"G": 1 << 30, "Gi": 1 << 30, "GiB": 1 << 30, "GB": 1e9,
	}[unit]
	if mult == 0 {
		return 0, fmt.Errorf("%q: unknown unit %q (want KiB, MiB or GiB)", s, unit)
	}
	v := f * mult
	if v > float64(1<<62) {
		return 0, fmt.Errorf("%q: too large", s)
	}
	return int64(v), nil
}

// identity is what the Hello says about the node before the first check.
type identity struct {
	nodeName, machineID string
	// hostnameFile is where the host's name was looked for.
	hostnameFile string
}

// Host files of the node's identity, as the os probe reads them.
const (
	// The kernel's host name: on a live root only (a copied /proc is stale).
	kernelHostname = "/proc/sys/kernel/hostname"
	// Written by the image or at first boot (hostnamed, cloud-init).
	etcHostname = "/etc/hostname"
	// Written by systemd at first boot.
	etcMachineID = "/etc/machine-id"
)

// readIdentity names the node as check does: nodeName (--node-name), else
// NODE_NAME (the DaemonSet's downward API), else the host's name under the
// root; and reads its machine id.
func readIdentity(h *host.Host, nodeName string) identity {
	read := func(name string) string {
		b, _, err := h.ReadFileLimit(name, 4096)
		if err != nil {
			return ""
		}
		return strings.TrimSpace(string(b))
	}
	id := identity{nodeName: nodeName, machineID: read(etcMachineID), hostnameFile: etcHostname}
	if id.nodeName == "" {
		id.nodeName = os.Getenv("NODE_NAME")
	}
	if id.nodeName == "" && h.Live() {
		id.nodeName, id.hostnameFile = read(kernelHostname), kernelHostname
	}
	if id.nodeName == "" {
		id.nodeName = read(etcHostname)
	}
	return id
}
