package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/nodediag/nodediag/agent/rules"
	nodediagv1 "github.com/nodediag/nodediag/proto/nodediag/v1"
)

const sweepLong = `Ask every agent connected to the collector to check its node now, and print
the answers as they arrive: one line per node (node, severity, top finding),
then a summary line (answered/expected, elapsed, the nodes that did not answer).

Progress goes to stderr: on a terminal, one line redrawn in place (nodes
answered/expected, elapsed); otherwise (CI logs, a pipe) a line when the sweep
starts and a plain line every 5 seconds. The table and the summary go to stdout.

Answers are stored by the collector as any report: a sweep interrupted here
loses nothing there (see ` + "`nodediag nodes`" + `).

Exit codes:
  0  every node asked answered, and none has a finding at error or above
  1  some node has a finding at error or above (even if others did not answer)
  2  usage error, or the collector could not be reached, refused this client,
     or went away before the sweep ended
  3  not every node asked answered in time, or no agent was connected`

// sweepPlainInterval is how often progress is printed when stderr is not a
// terminal: often enough to show life in a CI log, rarely enough not to
// flood it.
const sweepPlainInterval = 5 * time.Second

// sweepGrace is how long past --timeout the CLI waits for the collector's
// summary before giving up on it.
const sweepGrace = 30 * time.Second

type sweepOptions struct {
	client  clientFlags
	timeout time.Duration
	// What tests replace: the clock and how often plain progress prints.
	now           func() time.Time
	plainInterval time.Duration
}

func newSweepCommand() *cobra.Command {
	return newSweepCmd(&sweepOptions{now: time.Now, plainInterval: sweepPlainInterval})
}

func newSweepCmd(o *sweepOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "sweep --collector ADDR [--timeout DURATION]",
		Short: "Ask every connected agent to check now; show the answers as they come",
		Long:  sweepLong,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runSweep(cmd.Context(), cmd, o)
		},
	}
	o.client.add(cmd)
	cmd.Flags().DurationVar(&o.timeout, "timeout", 0, "how long the collector waits for answers (0: the collector's default)")
	return cmd
}

func runSweep(ctx context.Context, cmd *cobra.Command, o *sweepOptions) error {
	if ctx == nil {
		ctx = context.Background()
	}
	if o.timeout < 0 {
		return exitf(ExitUsage, "--timeout must not be negative")
	}
	c, err := o.client.dial()
	if err != nil {
		return err
	}
	defer c.Close()
	if o.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.timeout+sweepGrace)
		defer cancel()
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	start := o.now()
	out, errOut := cmd.OutOrStdout(), cmd.ErrOrStderr()
	_, tty := terminalWidth(errOut)
	p := &progress{w: errOut, tty: tty, start: start, interval: o.plainInterval}
	t := &sweepTable{w: out, width: tableWidth(out), nodeWidth: nodeColumnWidth(ctx, c)}

	req := &nodediagv1.SweepRequest{}
	if o.timeout > 0 {
		req.Timeout = durationpb.New(o.timeout)
	}
	stream, err := c.fleet.Sweep(ctx, req)
	if err != nil {
		return c.explain(err)
	}
	type recv struct {
		ev  *nodediagv1.SweepEvent
		err error
	}
	events := make(chan recv)
	go func() {
		for {
			ev, err := stream.Recv()
			select {
			case events <- recv{ev, err}:
			case <-ctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()
	ticker := time.NewTicker(progressTick(tty, o.plainInterval))
	defer ticker.Stop()

	var s sweepState
	for {
		select {
		case <-ticker.C:
			p.tick(o.now())
			continue
		case r := <-events:
			if r.err != nil {
				p.clear()
				s.writeSummary(out, o.now().Sub(start))
				if errors.Is(r.err, io.EOF) {
					return exitf(ExitUsage, "the collector at %s ended the sweep without its summary", c.addr)
				}
				return c.explain(r.err)
			}
			switch e := r.ev.GetEvent().(type) {
			case *nodediagv1.SweepEvent_Started:
				s.started = e.Started
				p.begin(int(e.Started.GetExpected()), e.Started.GetRequestId())
				t.header()
			case *nodediagv1.SweepEvent_Answer:
				if !t.headed {
					t.header()
				}
				s.answer(e.Answer)
				p.clear()
				t.row(e.Answer)
				p.answered(len(s.answered), o.now())
			case *nodediagv1.SweepEvent_Done:
				p.clear()
				s.done = e.Done
				s.writeSummary(out, o.now().Sub(start))
				return s.result()
			}
		}
	}
}

// nodeColumnWidth sizes the NODE column from the names of the nodes the
// collector knows, since rows are printed as they come and cannot be
// aligned afterwards. Best effort: a failure here shows up on the sweep.
func nodeColumnWidth(ctx context.Context, c *conn) int {
	const minWidth, maxWidth, fallback = 4, 48, 24
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := c.fleet.ListNodes(ctx, &nodediagv1.ListNodesRequest{})
	if err != nil {
		return fallback
	}
	w := minWidth
	for _, n := range resp.GetNodes() {
		if l := len([]rune(safe(n.GetNodeName()))); l > w {
			w = l
		}
	}
	return min(w, maxWidth)
}

// sweepState is what the answers of a sweep add up to.
type sweepState struct {
	started  *nodediagv1.SweepStarted
	done     *nodediagv1.SweepDone
	answered map[string]*nodediagv1.NodeSummary
}

func (s *sweepState) answer(n *nodediagv1.NodeSummary) {
	if s.answered == nil {
		s.answered = map[string]*nodediagv1.NodeSummary{}
	}
	s.answered[n.GetNodeName()] = n
}

func (s *sweepState) counts() (errs, warns int) {
	for _, n := range s.answered {
		switch sev := nodeSeverity(n); {
		case rules.SeverityAtLeast(sev, rules.Error):
			errs++
		case sev == "warning":
			warns++
		}
	}
	return errs, warns
}

// result is the sweep's exit: findings at error first (a broken node is
// news whatever else happened), then an incomplete sweep.
func (s *sweepState) result() error {
	errs, _ := s.counts()
	expected, answered := s.done.GetExpected(), s.done.GetAnswered()
	switch {
	case errs > 0:
		return exitf(ExitFindings, "%d of %d nodes answered with a finding at error or above", errs, answered)
	case expected == 0:
		return exitf(ExitIncomplete, "no agent is connected to the collector: nobody was asked")
	case len(s.done.GetMissing()) > 0 || answered < expected:
		return exitf(ExitIncomplete, "%d of %d nodes did not answer", max(int(expected-answered), len(s.done.GetMissing())), expected)
	}
	return nil
}

// writeSummary writes the sweep's last line: from the collector's SweepDone
// when the sweep ended, else from what arrived before it broke off.
func (s *sweepState) writeSummary(w io.Writer, localElapsed time.Duration) {
	fmt.Fprintln(w, s.summary(localElapsed))
}

func (s *sweepState) summary(localElapsed time.Duration) string {
	errs, warns := s.counts()
	var b strings.Builder
	if s.done == nil {
		expected := "?"
		if s.started != nil {
			expected = fmt.Sprint(s.started.GetExpected())
		}
		fmt.Fprintf(&b, "sweep incomplete: %d/%s nodes answered in %s before the sweep broke off", len(s.answered), expected, roundDuration(localElapsed))
	} else {
		elapsed := localElapsed
		if s.done.GetElapsed() != nil {
			elapsed = s.done.GetElapsed().AsDuration()
		}
		fmt.Fprintf(&b, "sweep: %d/%d nodes answered in %s", s.done.GetAnswered(), s.done.GetExpected(), roundDuration(elapsed))
		if s.done.GetTimedOut() {
			b.WriteString(" (timed out)")
		}
	}
	fmt.Fprintf(&b, "; %d with errors, %d with warnings", errs, warns)
	if missing := s.done.GetMissing(); len(missing) > 0 {
		names := make([]string, len(missing))
		for i, m := range missing {
			names[i] = safe(m)
		}
		sort.Strings(names)
		fmt.Fprintf(&b, "; missing %d: %s", len(names), strings.Join(names, ", "))
	}
	return b.String()
}

// sweepTable prints the answers as rows, as they come: NODE, SEVERITY,
// TOP FINDING ("ID: title", cut to the table's width).
type sweepTable struct {
	w         io.Writer
	width     int
	nodeWidth int
	headed    bool
}

const severityWidth = len("critical")

// minFindingWidth keeps the finding readable on a narrow terminal: the line
// wraps rather than showing nothing.
const minFindingWidth = 20

func (t *sweepTable) header() {
	t.headed = true
	fmt.Fprintln(t.w, strings.TrimRight(t.line("NODE", "SEVERITY", "TOP FINDING"), " "))
}

func (t *sweepTable) row(n *nodediagv1.NodeSummary) {
	sev := nodeSeverity(n)
	if sev == "-" {
		sev = "ok" // an answer is a report
	}
	top := safe(topFinding(n))
	if top == "" {
		top = "-"
	}
	fmt.Fprintln(t.w, t.line(safe(n.GetNodeName()), sev, top))
}

func (t *sweepTable) line(node, sev, finding string) string {
	node = pad(node, t.nodeWidth)
	room := max(t.width-len([]rune(node))-2-severityWidth-2, minFindingWidth)
	return node + "  " + pad(sev, severityWidth) + "  " + clip(finding, room)
}

// progress shows a sweep's progress on w (stderr). On a terminal it is one
// line redrawn in place with \r, cleared before each row of the table (the
// table goes to stdout, often the same terminal); elsewhere it is a line
// when the sweep starts and a plain line every interval, never control
// characters.
type progress struct {
	w        io.Writer
	tty      bool
	start    time.Time
	interval time.Duration

	expected, answeredN int
	began               bool
	drawn               bool
	lastPlain           time.Time
	lastDraw            time.Time
}

// progressTick is how often the progress is looked at: the terminal line's
// elapsed time moves every half second.
func progressTick(tty bool, plainInterval time.Duration) time.Duration {
	if tty || plainInterval <= 0 {
		return 500 * time.Millisecond
	}
	return min(plainInterval, time.Second)
}

const progressBarWidth = 20

func (p *progress) begin(expected int, requestID string) {
	p.began, p.expected = true, expected
	p.lastPlain = p.start
	if !p.tty {
		id := ""
		if requestID != "" {
			id = " (request " + safe(requestID) + ")"
		}
		fmt.Fprintf(p.w, "sweep: asked %d nodes%s\n", expected, id)
	}
}

func (p *progress) line(now time.Time) string {
	elapsed := roundDuration(now.Sub(p.start))
	if !p.tty {
		return fmt.Sprintf("sweep: %d/%d nodes answered, %s elapsed", p.answeredN, p.expected, elapsed)
	}
	filled := 0
	if p.expected > 0 {
		filled = min(p.answeredN*progressBarWidth/p.expected, progressBarWidth)
	}
	return fmt.Sprintf("[%s%s] %d/%d nodes answered, %s elapsed",
		strings.Repeat("#", filled), strings.Repeat(".", progressBarWidth-filled), p.answeredN, p.expected, elapsed)
}

func (p *progress) draw(now time.Time) {
	fmt.Fprintf(p.w, "\r%s\x1b[K", p.line(now))
	p.drawn, p.lastDraw = true, now
}

// clear removes the terminal line before something else is printed.
func (p *progress) clear() {
	if p.tty && p.drawn {
		fmt.Fprint(p.w, "\r\x1b[K")
		p.drawn = false
	}
}

func (p *progress) answered(n int, now time.Time) {
	p.answeredN = n
	// Redraw at most every 50ms: thousands of answers a second would
	// otherwise spend the terminal's time on the progress line.
	if p.tty && (n == p.expected || now.Sub(p.lastDraw) >= 50*time.Millisecond) {
		p.draw(now)
	}
}

func (p *progress) tick(now time.Time) {
	switch {
	case !p.began:
	case p.tty:
		p.draw(now)
	case p.interval > 0 && now.Sub(p.lastPlain) >= p.interval:
		fmt.Fprintln(p.w, p.line(now))
		p.lastPlain = now
	}
}
