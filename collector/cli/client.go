package cli

// The operator's side of the collector: flags and connection shared by
// sweep, nodes and node, their exit codes, and what they share in printing.

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	nodediagv1 "github.com/nodediag/nodediag/proto/nodediag/v1"
)

// Exit codes of the operator's commands (sweep, nodes, node). They extend
// the agent's: 0 and 1 mean the same thing (no finding at error or above /
// at least one), 2 that the command could not do its job.
const (
	ExitOK = 0
	// ExitFindings: a node has a finding at error or above.
	ExitFindings = 1
	// ExitUsage: bad flags, an unknown node, or the collector could not be
	// reached, refused this client, or went away.
	ExitUsage = 2
	// ExitIncomplete: a sweep ended without an answer from every node
	// asked (or no agent was connected to ask).
	ExitIncomplete = 3
)

// ExitError is an error with the process exit code it stands for. Its
// message is one line meant for the operator ("nodediag: " + message).
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string { return e.Err.Error() }
func (e *ExitError) Unwrap() error { return e.Err }

// ExitCode is the process exit code for err as returned by the root
// command: 0 for nil, the code of an *ExitError in its chain, else
// ExitUsage (cobra's own flag and argument errors, and every error of
// commands that do not set a code).
func ExitCode(err error) int {
	if err == nil {
		return ExitOK
	}
	var ee *ExitError
	if errors.As(err, &ee) {
		return ee.Code
	}
	return ExitUsage
}

func exitf(code int, format string, args ...any) error {
	return &ExitError{Code: code, Err: fmt.Errorf(format, args...)}
}

// maxRecvMsgSize bounds what the CLI accepts in one message: a node's full
// report (GetNode) carries its evidence, which can pass gRPC's default 4 MiB.
const maxRecvMsgSize = 64 << 20

// defaultRPCTimeout bounds nodes and node: an answer from the store is
// quick, and an operator must not wait on a collector that hangs.
const defaultRPCTimeout = 30 * time.Second

// clientFlags are the flags every operator command takes to reach the
// collector.
type clientFlags struct {
	collector      string
	tlsCert        string
	tlsKey         string
	ca             string
	tlsServerName  string
	insecure       bool
	requestTimeout time.Duration
}

func (f *clientFlags) add(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.StringVar(&f.collector, "collector", "", "the collector's address, `HOST:PORT` (required)")
	fs.StringVar(&f.tlsCert, "tls-cert", "", "this client's certificate `FILE` (PEM), e.g. operator.crt of nodediag certs")
	fs.StringVar(&f.tlsKey, "tls-key", "", "the key `FILE` of --tls-cert (PEM)")
	fs.StringVar(&f.ca, "ca", "", "the CA `FILE` that signed the collector's certificate (PEM), e.g. ca.crt")
	fs.StringVar(&f.tlsServerName, "tls-server-name", "", "the name to verify the collector's certificate against (default: the host of --collector)")
	fs.BoolVar(&f.insecure, "insecure", false, "no TLS at all: for a collector serving --insecure on loopback (demos, tests)")
	if cmd.Name() != "sweep" {
		fs.DurationVar(&f.requestTimeout, "request-timeout", defaultRPCTimeout, "how long to wait for the collector's answer")
	}
}

// conn is a connection to the collector that remembers why the transport
// failed, so that a refused handshake or an unreachable address becomes one
// clear line instead of gRPC's nested status text.
type conn struct {
	addr     string
	insecure bool
	noCert   bool // TLS without a client certificate
	cc       *grpc.ClientConn
	fleet    nodediagv1.FleetClient

	mu      sync.Mutex
	lastErr error // the last dial or handshake failure
}

func (c *conn) record(err error) {
	c.mu.Lock()
	c.lastErr = err
	c.mu.Unlock()
}

func (c *conn) transportErr() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lastErr
}

func (c *conn) Close() error { return c.cc.Close() }

// dial validates the flags and prepares the connection; nothing is sent
// until the first call.
func (f *clientFlags) dial() (*conn, error) {
	if f.collector == "" {
		return nil, exitf(ExitUsage, "--collector HOST:PORT is required")
	}
	if _, _, err := net.SplitHostPort(f.collector); err != nil {
		return nil, exitf(ExitUsage, "--collector %q: want HOST:PORT: %v", f.collector, err)
	}
	c := &conn{addr: f.collector, insecure: f.insecure, noCert: !f.insecure && f.tlsCert == ""}
	var creds credentials.TransportCredentials
	switch {
	case f.insecure && (f.tlsCert != "" || f.tlsKey != "" || f.ca != ""):
		return nil, exitf(ExitUsage, "--insecure and --tls-cert/--tls-key/--ca exclude each other")
	case f.insecure:
		creds = insecure.NewCredentials()
	case f.tlsCert == "" && f.tlsKey == "" && f.ca == "":
		return nil, exitf(ExitUsage, "the collector requires mutual TLS: pass --tls-cert, --tls-key and --ca (see `nodediag certs`), or --insecure for a collector serving --insecure")
	case (f.tlsCert == "") != (f.tlsKey == ""):
		return nil, exitf(ExitUsage, "--tls-cert and --tls-key go together")
	case f.ca == "":
		return nil, exitf(ExitUsage, "--ca is required with --tls-cert: the CA that signed the collector's certificate (ca.crt of `nodediag certs`)")
	default:
		// --ca without --tls-cert connects without a client certificate:
		// the collector then says why it refuses (Unauthenticated).
		cfg, err := f.tlsConfig()
		if err != nil {
			return nil, &ExitError{Code: ExitUsage, Err: err}
		}
		creds = recordingCreds{credentials.NewTLS(cfg), c}
	}
	cc, err := grpc.NewClient(f.collector,
		grpc.WithTransportCredentials(creds),
		grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
			var d net.Dialer
			nc, err := d.DialContext(ctx, "tcp", addr)
			if err != nil {
				c.record(err)
			}
			return nc, err
		}),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxRecvMsgSize)),
	)
	if err != nil {
		return nil, exitf(ExitUsage, "--collector %q: %v", f.collector, err)
	}
	c.cc, c.fleet = cc, nodediagv1.NewFleetClient(cc)
	return c, nil
}

// tlsConfig is the client's TLS: TLS 1.3 as the collector demands, its
// certificate when given, the collector's CA.
func (f *clientFlags) tlsConfig() (*tls.Config, error) {
	var certs []tls.Certificate
	if f.tlsCert != "" {
		pair, err := tls.LoadX509KeyPair(f.tlsCert, f.tlsKey)
		if err != nil {
			return nil, fmt.Errorf("loading --tls-cert %s and --tls-key %s: %w", f.tlsCert, f.tlsKey, err)
		}
		certs = []tls.Certificate{pair}
	}
	pem, err := os.ReadFile(f.ca)
	if err != nil {
		return nil, fmt.Errorf("reading --ca: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("--ca %s holds no PEM certificate", f.ca)
	}
	return &tls.Config{
		Certificates: certs,
		RootCAs:      pool,
		ServerName:   f.tlsServerName,
		MinVersion:   tls.VersionTLS13,
	}, nil
}

// recordingCreds are TLS credentials that record a failed handshake on the
// connection before gRPC folds it into a status.
type recordingCreds struct {
	credentials.TransportCredentials
	c *conn
}

func (r recordingCreds) ClientHandshake(ctx context.Context, authority string, raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	nc, info, err := r.TransportCredentials.ClientHandshake(ctx, authority, raw)
	if err != nil {
		r.c.record(fmt.Errorf("TLS handshake failed: %w", err))
	}
	return nc, info, err
}

func (r recordingCreds) Clone() credentials.TransportCredentials {
	return recordingCreds{r.TransportCredentials.Clone(), r.c}
}

// explain turns the error of a call into one line for the operator, with
// its exit code: what failed, where, and the cause without gRPC's framing.
func (c *conn) explain(err error) error {
	if err == nil {
		return nil
	}
	var ee *ExitError
	if errors.As(err, &ee) {
		return err
	}
	st, ok := status.FromError(err)
	if !ok {
		return exitf(ExitUsage, "collector %s: %v", c.addr, err)
	}
	msg := plainStatus(st.Message())
	switch st.Code() {
	case codes.Unavailable:
		if terr := c.transportErr(); terr != nil {
			var hint string
			if strings.Contains(terr.Error(), "first record does not look like a TLS handshake") {
				hint = " (is the collector serving --insecure?)"
			}
			return exitf(ExitUsage, "cannot reach the collector at %s: %v%s", c.addr, oneLine(terr.Error()), hint)
		}
		hint := ""
		switch {
		case c.insecure:
			hint = " (does the collector require TLS? pass --tls-cert, --tls-key and --ca)"
		case strings.Contains(msg, "tls:"):
			hint = " (is --tls-cert signed by the CA the collector trusts, its --client-ca?)"
		}
		return exitf(ExitUsage, "the collector at %s closed the connection: %s%s", c.addr, msg, hint)
	case codes.DeadlineExceeded:
		return exitf(ExitUsage, "no answer from the collector at %s in time: %s", c.addr, msg)
	case codes.Unauthenticated, codes.PermissionDenied:
		hint := ""
		if c.noCert && st.Code() == codes.Unauthenticated && !strings.Contains(msg, "--tls-cert") {
			hint = " (pass --tls-cert and --tls-key: an operator's certificate, such as operator.crt of `nodediag certs`)"
		}
		return exitf(ExitUsage, "the collector at %s refused this client (%s): %s%s", c.addr, st.Code(), msg, hint)
	case codes.Unimplemented:
		return exitf(ExitUsage, "%s does not serve nodediag's Fleet API (not a nodediag collector, or an older one): %s", c.addr, msg)
	case codes.Canceled:
		return exitf(ExitUsage, "interrupted")
	default:
		return exitf(ExitUsage, "the collector at %s answered %s: %s", c.addr, st.Code(), msg)
	}
}

// plainStatus strips gRPC's transport framing from a status message:
// `connection error: desc = "transport: Error while dialing: ..."` becomes
// the innermost, unquoted description, on one line.
func plainStatus(msg string) string {
	for {
		i := strings.LastIndex(msg, "desc = ")
		if i < 0 {
			break
		}
		inner := msg[i+len("desc = "):]
		if u, err := strconv.Unquote(inner); err == nil {
			inner = u
		}
		msg = inner
	}
	msg = strings.TrimPrefix(msg, "transport: ")
	msg = strings.TrimPrefix(msg, "authentication handshake failed: ")
	return oneLine(msg)
}

// contextFor bounds a unary call by --request-timeout.
func (f *clientFlags) contextFor(ctx context.Context) (context.Context, context.CancelFunc) {
	if f.requestTimeout > 0 {
		return context.WithTimeout(ctx, f.requestTimeout)
	}
	return context.WithCancel(ctx)
}

// Printing.

// safe makes a string from the collector (node names, titles: the nodes
// wrote them) harmless on the operator's terminal: control characters,
// bidirectional overrides and invalid UTF-8 become visible escapes, as the
// agent's text renderer does.
func safe(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size <= 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\t':
			b.WriteByte(' ')
		case unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r):
			if r < 0x80 {
				fmt.Fprintf(&b, `\x%02x`, r)
			} else {
				fmt.Fprintf(&b, `\u%04x`, r)
			}
		default:
			b.WriteRune(r)
		}
		i += size
	}
	return b.String()
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// clip cuts s to at most width runes, marking a cut with "...".
func clip(s string, width int) string {
	if width <= 0 {
		return ""
	}
	if utf8.RuneCountInString(s) <= width {
		return s
	}
	if width <= 3 {
		return string([]rune(s)[:width])
	}
	return string([]rune(s)[:width-3]) + "..."
}

// pad right-pads s with spaces to width runes.
func pad(s string, width int) string {
	if n := utf8.RuneCountInString(s); n < width {
		return s + strings.Repeat(" ", width-n)
	}
	return s
}

// defaultWidth is the width of tables that do not go to a terminal.
const defaultWidth = 80

// terminalWidth is w's width in columns when w is a terminal; ok is false
// otherwise.
func terminalWidth(w io.Writer) (width int, ok bool) {
	f, isFile := w.(*os.File)
	if !isFile {
		return 0, false
	}
	ws, err := unix.IoctlGetWinsize(int(f.Fd()), unix.TIOCGWINSZ)
	if err != nil {
		return 0, false
	}
	if ws.Col == 0 {
		return defaultWidth, true
	}
	return int(ws.Col), true
}

// tableWidth is how wide a table written to w may be.
func tableWidth(w io.Writer) int {
	if width, ok := terminalWidth(w); ok {
		return width
	}
	return defaultWidth
}

// Severities of NodeSummary, strongest first. "ok" is a report without
// findings, "-" a node without a stored report.
var severityOrder = map[string]int{"critical": 0, "error": 1, "warning": 2, "info": 4, "ok": 5, "-": 6}

// severityRank orders severities; one this CLI does not know goes between
// warning and info.
func severityRank(sev string) int {
	if r, ok := severityOrder[sev]; ok {
		return r
	}
	return 3
}

// nodeSeverity is the severity shown for a node: the worst the summary
// tells of. The top finding is the most likely root cause, not always the
// worst, so the counts weigh in (errors counts findings at error or above).
func nodeSeverity(s *nodediagv1.NodeSummary) string {
	top := s.GetTopSeverity()
	switch {
	case s.GetReportedAt() == nil && top == "" && s.GetErrors() == 0 && s.GetWarnings() == 0:
		return "-"
	case top == "critical":
		return top
	case top == "error" || s.GetErrors() > 0:
		return "error"
	case top == "warning" || s.GetWarnings() > 0:
		return "warning"
	case top == "":
		return "ok"
	default:
		// info, or a severity this CLI does not know: as it came.
		return top
	}
}

// hasErrors says whether the node's latest report has a finding at error
// or above.
func hasErrors(s *nodediagv1.NodeSummary) bool {
	sev := nodeSeverity(s)
	return sev == "error" || sev == "critical"
}

// topFinding is "ID: title" of the node's top finding, or "" without one.
func topFinding(s *nodediagv1.NodeSummary) string {
	switch {
	case s.GetTopId() == "":
		return ""
	case s.GetTopTitle() == "":
		return s.GetTopId()
	default:
		return s.GetTopId() + ": " + oneLine(s.GetTopTitle())
	}
}

// ago renders how long before now t was: "just now", "45s ago", "3m ago",
// "5h ago", "2d ago"; "-" when t is unset, "in 2m" when t is ahead of now.
func ago(now, t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	d := now.Sub(t)
	suffix := " ago"
	if d < 0 {
		d = -d
		if d < time.Second {
			return "just now"
		}
		return "in " + shortDuration(d)
	}
	if d < time.Second {
		return "just now"
	}
	return shortDuration(d) + suffix
}

func shortDuration(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d/time.Second))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d/time.Minute))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d/time.Hour))
	default:
		return fmt.Sprintf("%dd", int(d/(24*time.Hour)))
	}
}

// roundDuration prints an elapsed time to a tenth of a second (to the
// second past a minute).
func roundDuration(d time.Duration) string {
	if d >= time.Minute {
		return d.Round(time.Second).String()
	}
	return d.Round(100 * time.Millisecond).String()
}

// tsTime is t as a time.Time, zero when unset.
func tsTime(t *timestamppb.Timestamp) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.AsTime()
}
