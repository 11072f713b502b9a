// Package cli is the command line of nodediag-agent: flag parsing, the
// pipeline of a check (host → probes → rules → report), output and exit codes.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/nodediag/nodediag/agent/check"
	"github.com/nodediag/nodediag/agent/host"
	"github.com/nodediag/nodediag/agent/probe"
	"github.com/nodediag/nodediag/agent/probes"
	"github.com/nodediag/nodediag/agent/report"
	"github.com/nodediag/nodediag/agent/rules"
	"github.com/nodediag/nodediag/internal/version"
	nodediagv1 "github.com/nodediag/nodediag/proto/nodediag/v1"
)

// Exit codes of docs/CONTRACTS.md.
const (
	ExitOK       = 0 // no finding at error or above
	ExitFindings = 1 // at least one finding at error or above
	ExitUsage    = 2 // the agent itself could not run
)

const usage = `nodediag-agent: names the most likely root cause of a broken Kubernetes node, with the evidence.

Usage:
  nodediag-agent check [flags]     read the host (read-only), print findings
  nodediag-agent run --collector HOST:PORT [flags]
                                   DaemonSet mode: check on an interval and on request,
                                   stream the reports to a collector
  nodediag-agent collect --bundle FILE.tar.gz [flags]
                                   air-gapped: check, then write the redacted evidence,
                                   the findings and the files behind them to one file
  nodediag-agent version           print the version

Run "nodediag-agent check -h" (or "run -h") for the flags of a command.
Exit codes of check and collect: 0 no finding at error or above, 1 findings at error or above, 2 the agent could not run.
Exit codes of run: 0 stopped by a signal, or with --once the report acknowledged; 1 with --once the
report not acknowledged in time (or refused); 2 the agent could not run.
`

// Run runs the agent with args (without the program name) and returns the
// process exit code.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return ExitUsage
	}
	switch args[0] {
	case "check":
		return runCheck(ctx, args[1:], stdout, stderr)
	case "run":
		return runRun(ctx, args[1:], stdout, stderr)
	case "collect":
		return runCollect(ctx, args[1:], stdout, stderr)
	case "version", "--version", "-version":
		v := version.Get()
		fmt.Fprintf(stdout, "nodediag-agent %s\n", v)
		return ExitOK
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return ExitOK
	default:
		fmt.Fprintf(stderr, "nodediag-agent: unknown command %q\n\n%s", args[0], usage)
		return ExitUsage
	}
}

// listFlag is a repeatable, comma-separable string flag.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }
func (l *listFlag) Set(s string) error {
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			*l = append(*l, p)
		}
	}
	return nil
}

type checkOptions struct {
	root, output, since, now, expect, role, exec, nodeName, rulesDir string
	timeout                                                          time.Duration
	only, skip                                                       listFlag
	offline                                                          bool
	// warn receives what the operator must know but is no result (--exec
	// local on a copy); nil discards it.
	warn io.Writer
}

// How the check asks the root's binaries their version (--exec).
const (
	// execAuto runs them only when the root is the live system this
	// process runs on (its /proc is procfs): a copy's binaries are never
	// run, whoever made the copy.
	execAuto = "auto"
	// execLocal runs them under any root: on a copy this runs the copy's
	// code as this user, so it is said on stderr.
	execLocal = "local"
	// execNone never runs anything: versions from the binaries' Go build
	// info, the journal and the static pods.
	execNone = "none"
)

// execFlagHelp is the --exec flag's help, shared by check, collect and run.
const execFlagHelp = "how the root's binaries are asked their version: auto (run them only when --root is the live system: its /proc is procfs), local (run them under any root; on a copy that runs the copy's code, which is warned about) or none (never run anything: Go build info, the journal, static pod images)"

func runCheck(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var o checkOptions
	fs := flag.NewFlagSet("check", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.output, "output", "text", "text, json or compact (at most 4096 bytes, for az vm run-command)")
	checkFlags(fs, &o)
	o.warn = stderr
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return ExitOK
		}
		return ExitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "nodediag-agent check: unexpected arguments %q\n", fs.Args())
		return ExitUsage
	}
	r, err := checkOnce(ctx, o)
	if err != nil {
		fmt.Fprintf(stderr, "nodediag-agent check: %v\n", err)
		return ExitUsage
	}
	switch o.output {
	case "json":
		err = report.WriteJSON(stdout, r)
	case "compact":
		err = report.WriteCompact(stdout, r)
	default:
		err = report.WriteText(stdout, r)
	}
	if err != nil {
		fmt.Fprintf(stderr, "nodediag-agent check: %v\n", err)
		return ExitUsage
	}
	return report.ExitCode(r)
}

// checkFlags are the flags of a check, shared by check and collect.
func checkFlags(fs *flag.FlagSet, o *checkOptions) {
	fs.StringVar(&o.root, "root", "/", "the host's root as this process sees it (/ on a VM, /host in the DaemonSet, a directory)")
	fs.StringVar(&o.since, "since", "", "judge log lines from this DURATION before the evidence's clock (2h) or this TIME (RFC3339); default: the last boot")
	fs.DurationVar(&o.timeout, "timeout", 60*time.Second, "bound on the whole check")
	fs.StringVar(&o.expect, "expect-version", "", "the Kubernetes version the Machine expects (v1.32.0)")
	fs.StringVar(&o.role, "role", "", "what the node is meant to be: control-plane or worker (default: inferred from what kubeadm left on the node)")
	fs.StringVar(&o.exec, "exec", execAuto, execFlagHelp)
	fs.StringVar(&o.now, "now", "", "judge as of this TIME (RFC3339) instead of the evidence's clock")
	fs.StringVar(&o.nodeName, "node-name", "", "the node's name in reports (default: NODE_NAME, else the host's name)")
	fs.StringVar(&o.rulesDir, "rules-dir", "", "load log signatures from this directory instead of the embedded ones")
	fs.BoolVar(&o.offline, "offline", false, "never touch the network: skip registry reachability")
	fs.Var(&o.only, "probe", "run only these probes (repeatable, comma-separated)")
	fs.Var(&o.skip, "skip", "skip these probes (repeatable, comma-separated)")
}

// checkOnce runs the pipeline and returns the redacted report.
func checkOnce(ctx context.Context, o checkOptions) (*nodediagv1.Report, error) {
	switch o.output {
	case "text", "json", "compact":
	default:
		return nil, fmt.Errorf("--output %q: want text, json or compact", o.output)
	}
	c, err := newChecker(o)
	if err != nil {
		return nil, err
	}
	return c.run(ctx)
}

// execFor is the runner of the root's binaries under --exec: the live
// system's for auto, anyone's for local (said once when the root is a
// copy), nobody's for none.
func (c *checker) execFor(h *host.Host) host.Runner {
	switch c.o.exec {
	case execLocal:
		if !h.Live() && c.o.warn != nil {
			c.warned.Do(func() {
				fmt.Fprintf(c.o.warn, "nodediag-agent: warning: --exec local runs the binaries of %s, which is not the live system (its /proc is no procfs): a copied or hostile root runs its code as this user; --exec auto or none never does\n", h.Root)
			})
		}
		return host.Local{}
	case execAuto:
		if h.Live() {
			return host.Local{}
		}
	}
	return host.NoExec{}
}

// checker is the pipeline of a check with its options validated once: run
// calls it again and again.
type checker struct {
	o      checkOptions
	warned *sync.Once // --exec local on a copy said, once for all runs
	rctx   rules.Context
	probes []probe.Probe
	engine *rules.Engine
}

func newChecker(o checkOptions) (*checker, error) {
	if o.timeout <= 0 {
		return nil, fmt.Errorf("--timeout %v: want a positive duration", o.timeout)
	}
	c := &checker{o: o, warned: &sync.Once{}}
	switch o.exec {
	case execAuto, execLocal, execNone:
	default:
		return nil, fmt.Errorf("--exec %q: want auto, local or none", o.exec)
	}
	var err error
	if c.rctx, err = ruleContext(o); err != nil {
		return nil, err
	}
	if c.probes, err = selectProbes(probes.All(), o.only, o.skip); err != nil {
		return nil, err
	}
	if c.engine, err = newEngine(o.rulesDir); err != nil {
		return nil, err
	}
	return c, nil
}

// run checks the host once, bounded by --timeout.
func (c *checker) run(ctx context.Context) (*nodediagv1.Report, error) {
	r, _, err := c.runHost(ctx)
	return r, err
}

// runHost is run, also returning the host it read (collect copies files of
// it).
func (c *checker) runHost(ctx context.Context) (*nodediagv1.Report, *host.Host, error) {
	o, rctx := c.o, c.rctx
	h, err := host.New(o.root, host.NoExec{})
	if err != nil {
		return nil, nil, err
	}
	h.Exec = c.execFor(h)
	if o.offline {
		h.Net = host.NoNetwork{}
	}
	name := o.nodeName
	if name == "" {
		name = os.Getenv("NODE_NAME")
	}
	r, err := check.Host(ctx, h, check.Options{
		Probes: c.probes, Engine: c.engine, Context: rctx, Timeout: o.timeout, NodeName: name, Root: o.root,
	})
	return r, h, err
}

func newEngine(dir string) (*rules.Engine, error) {
	if dir == "" {
		return rules.NewEngine()
	}
	sigs, err := rules.LoadSignatures(os.DirFS(dir))
	if err != nil {
		return nil, fmt.Errorf("--rules-dir %s: %w", dir, err)
	}
	return &rules.Engine{Signatures: sigs}, nil
}

func ruleContext(o checkOptions) (rules.Context, error) {
	var c rules.Context
	if o.expect != "" {
		v := o.expect
		if !strings.HasPrefix(v, "v") {
			v = "v" + v
		}
		c.ExpectVersion = v
	}
	switch o.role {
	case "", rules.RoleControlPlane, rules.RoleWorker:
		c.Role = o.role
	default:
		return c, fmt.Errorf("--role %q: want control-plane or worker", o.role)
	}
	if o.since != "" {
		if d, err := time.ParseDuration(o.since); err == nil {
			if d <= 0 {
				return c, fmt.Errorf("--since %q: want a positive duration", o.since)
			}
			c.SinceAgo = d
		} else if t, err := parseTime(o.since); err == nil {
			c.Since = t
		} else {
			return c, fmt.Errorf("--since %q: want a duration (2h) or a time (2024-05-01T00:00:00Z)", o.since)
		}
	}
	if o.now != "" {
		t, err := parseTime(o.now)
		if err != nil {
			return c, fmt.Errorf("--now %q: want a time (2024-05-01T00:00:00Z)", o.now)
		}
		c.Now = t
	}
	return c, nil
}

func parseTime(s string) (time.Time, error) {
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05", "2006-01-02 15:04:05", "2006-01-02"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, fmt.Errorf("unparsable time %q", s)
}

func selectProbes(all []probe.Probe, only, skip []string) ([]probe.Probe, error) {
	known := map[string]bool{}
	var names []string
	for _, p := range all {
		known[p.Name()] = true
		names = append(names, p.Name())
	}
	sort.Strings(names)
	for _, n := range append(append([]string{}, only...), skip...) {
		if !known[n] {
			return nil, fmt.Errorf("unknown probe %q (probes: %s)", n, strings.Join(names, ", "))
		}
	}
	var out []probe.Probe
	for _, p := range all {
		if (len(only) == 0 || slices.Contains(only, p.Name())) && !slices.Contains(skip, p.Name()) {
			out = append(out, p)
		}
	}
	return out, nil
}
