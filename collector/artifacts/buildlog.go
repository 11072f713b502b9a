package artifacts

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/nodediag/nodediag/agent/redact"
)

// The CAPZ triage order starts with the build log: what failed first, and
// whether it was a timeout. These are the lines that say so in the output
// of a Prow job running the Ginkgo e2e suite (Ginkgo v2 and v1, Gomega,
// go test, make, kubectl wait, klog), strongest first within a line.
var buildLogSignatures = []struct {
	id, kind string
	re       *regexp.Regexp
}{
	{"gomega-timeout", "timeout", regexp.MustCompile(`\bTimed out after [0-9.]+s\b`)},
	// Prow's entrypoint killing the job at its deadline.
	{"prow-timeout", "timeout", regexp.MustCompile(`Process did not finish before [0-9hms.]+ timeout`)},
	{"wait-timeout", "timeout", regexp.MustCompile(`(?i)\btimed out waiting for\b`)},
	{"deadline", "timeout", regexp.MustCompile(`\bcontext deadline exceeded\b`)},
	{"ginkgo-failed", "fatal", regexp.MustCompile(`^\s*(?:•\s*)?\[(?:FAILED|PANICKED|TIMEDOUT|INTERRUPTED)\]`)},
	{"ginkgo-v1-failure", "fatal", regexp.MustCompile(`^\s*•?\s*Failure \[[0-9.]+ seconds\]`)},
	{"go-panic", "fatal", regexp.MustCompile(`^(?:panic: |fatal error: )`)},
	{"klog-fatal", "fatal", regexp.MustCompile(`^F\d{4} \d\d:\d\d:\d\d`)},
	{"logrus-fatal", "fatal", regexp.MustCompile(`\blevel=fatal\b`)},
	{"go-test-fail", "fatal", regexp.MustCompile(`^(?:--- FAIL: |FAIL!? |FAIL\t)`)},
	{"make-error", "fatal", regexp.MustCompile(`^make(?:\[\d+\])?: \*\*\* .*Error \d+`)},
}

// ansiEscape matches the colour codes Ginkgo writes into Prow's logs.
var ansiEscape = regexp.MustCompile("\x1b\\[[0-9;]*[A-Za-z]")

// weakSignatures are signatures that, on a klog line (a client's warning or
// error while a spec still passes), are not a failure of the job.
var weakSignatures = map[string]bool{"wait-timeout": true, "deadline": true}

// klogLine is a klog header of the informational, warning and error levels.
var klogLine = regexp.MustCompile(`^\s*[IWE]\d{4} \d\d:\d\d:\d\d`)

// ginkgoSeparator ends a spec's block in Ginkgo's output.
var ginkgoSeparator = regexp.MustCompile(`^-{20,}$`)

// Ginkgo's location of a failure ("In [It] at: /home/prow/.../file.go:123")
// and a spec's name line ("[It] Creates a public management cluster ...").
// Ginkgo v2 also marks where a failure happened in the spec's timeline
// ("[FAILED] in [It] - /path/file.go:131 @ 05/01/24 00:26:40.240"), before
// the failure's message: a location, not the failure.
var (
	ginkgoAt       = regexp.MustCompile(`^\s*In \[(\w+)\] at: (\S+)`)
	ginkgoInMarker = regexp.MustCompile(`^\s*\[(?:FAILED|PANICKED|TIMEDOUT)\] in \[(\w+)\] - (\S+)`)
	// A spec's result header ("• [FAILED] [1630.812 seconds]"): its
	// failure's message follows.
	ginkgoHeader = regexp.MustCompile(`^\s*•?\s*\[(?:FAILED|PANICKED|TIMEDOUT|INTERRUPTED)\] \[[0-9.]+ seconds\]`)
	ginkgoSpec   = regexp.MustCompile(`^\s*\[It\] (.+)`)
)

// Limits of the build log reader.
const (
	buildLogMaxBytes   = 256 << 20
	buildLogMaxLine    = 64 << 10
	buildLogContext    = 6 // lines after the first failure
	buildLogBefore     = 2 // lines before it
	buildLogQuoteBytes = 400
)

// BuildFailure is the first fatal error or timeout of a build log.
type BuildFailure struct {
	Path string `json:"path"`
	// Line is the 1-based number of the first failing line; Text is it.
	Line int    `json:"line"`
	Text string `json:"text"`
	// Kind is "timeout" or "fatal"; Signature the pattern's id.
	Kind      string `json:"kind"`
	Signature string `json:"signature"`
	// Context are the lines around it, numbered ("1234: text").
	Context []string `json:"context,omitempty"`
	// Location is Ginkgo's "In [It] at: file:line" after it, Spec the
	// last "[It] ..." name above it, when the log has them.
	Location string `json:"location,omitempty"`
	Spec     string `json:"spec,omitempty"`
	// Failures counts every failing line of the log (the first included).
	Failures int `json:"failures"`
	// Truncated: the log was larger than what was read.
	Truncated bool `json:"truncated,omitempty"`
	// Last is the newest time the log states (Ginkgo's "@ 05/01/24
	// 00:26:40.240"): the job ran at least until then.
	Last time.Time `json:"last_time,omitempty"`
}

// ginkgoStamp is the time Ginkgo v2 writes after a step or a failure.
var ginkgoStamp = regexp.MustCompile(`@ (\d\d/\d\d/\d\d \d\d:\d\d:\d\d)(?:\.\d+)?`)

// ErrNoFailure is returned when a build log has no fatal error or timeout.
var ErrNoFailure = errors.New("no fatal error or timeout in the build log")

// FirstFailure reads the build log at path (a regular file, never a
// symlink) and returns its first fatal error or timeout. Quoted lines are
// redacted (a SAS token in a URL, a password on a command line).
func FirstFailure(path string) (*BuildFailure, error) {
	f, fi, err := openRegular(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	bf, err := firstFailure(io.LimitReader(f, buildLogMaxBytes))
	if bf != nil {
		bf.Path = path
		bf.Truncated = fi.Size() > buildLogMaxBytes
	}
	return bf, err
}

func firstFailure(r io.Reader) (*BuildFailure, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	var bf *BuildFailure
	var before []string
	spec, marker := "", ""
	after := 0
	inBlock := true
	var last time.Time
	for no := 1; ; no++ {
		line, err := readLine(br)
		if err == io.EOF && line == "" {
			break
		}
		if err != nil && err != io.EOF {
			return bf, err
		}
		line = ansiEscape.ReplaceAllString(strings.TrimRight(line, "\r"), "")
		if m := ginkgoStamp.FindStringSubmatch(line); m != nil {
			if t, err := time.Parse("01/02/06 15:04:05", m[1]); err == nil && t.After(last) {
				last = t
			}
		}
		if bf == nil && ginkgoSeparator.MatchString(strings.TrimSpace(line)) {
			// A new spec: what the last one said is not the next one's.
			spec, marker = "", ""
		}
		if m := ginkgoSpec.FindStringSubmatch(line); m != nil && bf == nil {
			spec = strings.TrimSpace(m[1])
		}
		if m := ginkgoInMarker.FindStringSubmatch(line); m != nil {
			if bf == nil && marker == "" {
				marker = "[" + m[1] + "] " + m[2]
			}
			continue
		}
		if bf == nil && ginkgoHeader.MatchString(line) {
			before = append(before, line)
			if len(before) > buildLogBefore {
				before = before[1:]
			}
			continue
		}
		if bf != nil {
			if after < buildLogContext && strings.TrimSpace(line) != "" {
				bf.Context = append(bf.Context, numbered(no, line))
				after++
			}
			if ginkgoSeparator.MatchString(strings.TrimSpace(line)) {
				inBlock = false // the failing spec's block ended
			}
			if m := ginkgoAt.FindStringSubmatch(line); m != nil && bf.Location == "" && inBlock {
				bf.Location = "[" + m[1] + "] " + m[2]
			}
		}
		klog := klogLine.MatchString(line)
		for _, sig := range buildLogSignatures {
			if !sig.re.MatchString(line) || klog && weakSignatures[sig.id] {
				continue
			}
			if bf == nil {
				bf = &BuildFailure{Line: no, Text: quote(line), Kind: sig.kind, Signature: sig.id, Spec: spec}
				for i, b := range before {
					bf.Context = append(bf.Context, numbered(no-len(before)+i, b))
				}
				bf.Context = append(bf.Context, numbered(no, line))
			}
			bf.Failures++
			break
		}
		if bf == nil {
			before = append(before, line)
			if len(before) > buildLogBefore {
				before = before[1:]
			}
		}
		if err == io.EOF {
			break
		}
	}
	if bf == nil {
		return nil, ErrNoFailure
	}
	if bf.Location == "" {
		bf.Location = marker
	}
	bf.Last = last
	return bf, nil
}

// readLine reads one line, without its newline, cut at buildLogMaxLine.
func readLine(br *bufio.Reader) (string, error) {
	var b []byte
	for {
		chunk, err := br.ReadSlice('\n')
		if len(b) < buildLogMaxLine {
			b = append(b, chunk[:min(len(chunk), buildLogMaxLine-len(b))]...)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		return strings.TrimSuffix(string(b), "\n"), err
	}
}

func numbered(no int, line string) string { return fmt.Sprintf("%d: %s", no, quote(line)) }

// quote redacts a line and bounds it; bytes that are not UTF-8 are shown
// as such.
func quote(line string) string {
	if !utf8.ValidString(line) {
		line = strings.ToValidUTF8(line, "\uFFFD")
	}
	line = redact.String(line)
	if len(line) > buildLogQuoteBytes {
		line = line[:buildLogQuoteBytes] + "..."
	}
	return line
}
