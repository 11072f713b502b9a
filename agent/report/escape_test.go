package report

import (
	"bytes"
	"strings"
	"testing"
	"unicode/utf8"

	nodediagv1 "github.com/nodediag/nodediag/proto/nodediag/v1"
)

func TestTerminalSafe(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"plain text", "kubelet.service: Main process exited, code=exited, status=1/FAILURE", "kubelet.service: Main process exited, code=exited, status=1/FAILURE"},
		{"tab stays", "Filename\tType\tSize", "Filename\tType\tSize"},
		{"utf-8 stays", "café ✓ 日本", "café ✓ 日本"},
		{"ANSI colour", "\x1b[31mERROR\x1b[0m", `\x1b[31mERROR\x1b[0m`},
		{"OSC title", "\x1b]0;pwned\x07rest", `\x1b]0;pwned\x07rest`},
		{"carriage return overwrites", "password ok\rall good   ", `password ok\rall good   `},
		{"newline", "a\nb", `a\nb`},
		{"backspace and NUL", "ab\b\x00c", `ab\x08\x00c`},
		{"DEL", "a\x7fb", `a\x7fb`},
		{"C1 CSI", "a\u009b31mb", `a\u009b31mb`},
		{"C1 NEL", "a\u0085b", `a\u0085b`},
		{"bidi override", "file\u202eexe.txt", `file\u202eexe.txt`},
		{"bidi isolate", "a\u2066b\u2069", `a\u2066b\u2069`},
		{"invalid UTF-8", "node-\xff\xfe", `node-\xff\xfe`},
		{"raw C1 byte", "a\x9bb", `a\x9bb`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := terminalSafe(tt.in)
			if got != tt.want {
				t.Errorf("terminalSafe(%q) = %q, want %q", tt.in, got, tt.want)
			}
			if again := terminalSafe(got); again != got {
				t.Errorf("escaping twice changed %q to %q", got, again)
			}
		})
	}
}

// hostile is text from a node that tries to drive the operator's terminal.
const hostile = "\x1b]0;owned\x07\x1b[2J\x1b[31mfake\rover\u009b1m\u202ex\x00"

// checkTerminalSafe fails when out holds a byte or rune a terminal acts on,
// other than the renderer's own newlines and tabs.
func checkTerminalSafe(t *testing.T, name, out string) {
	t.Helper()
	if !utf8.ValidString(out) {
		t.Errorf("%s output is not valid UTF-8", name)
	}
	for i, r := range out {
		if r != '\n' && needsEscape(r, utf8.RuneLen(r)) {
			t.Errorf("%s output holds %U at byte %d: %q", name, r, i, out[max(0, i-20):min(len(out), i+20)])
			return
		}
	}
}

func hostileReport() *nodediagv1.Report {
	f := finding("KubeletRemovedFlag", "error", "kubelet rejects "+hostile, "line one "+hostile+"\nline two\tend", hostile)
	f.Evidence[0].Source = "/var/log/" + hostile
	f.Explains = []string{hostile}
	f.Remediation = "remove " + hostile
	f.RefutedBy = hostile
	return &nodediagv1.Report{
		Agent:    &nodediagv1.AgentInfo{Version: "dev"},
		Host:     &nodediagv1.HostInfo{NodeName: "node-" + hostile, Os: hostile, Kernel: hostile, Root: "/" + hostile},
		Findings: []*nodediagv1.Finding{f, finding("SwapEnabled", "warning", hostile)},
		Gaps:     []string{"cannot read " + hostile},
		Probes:   []*nodediagv1.ProbeStatus{{Name: hostile, Status: "ok"}},
	}
}

func TestTextIsTerminalSafe(t *testing.T) {
	var b bytes.Buffer
	if err := WriteText(&b, hostileReport()); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	checkTerminalSafe(t, "text", out)
	// The escapes are visible, and a multi-line excerpt is still printed
	// as lines, each under the quote's head.
	for _, want := range []string{
		`kubelet rejects \x1b]0;owned\x07\x1b[2J\x1b[31mfake\rover\u009b1m\u202ex\x00`,
		"       line one \\x1b]0;owned",
		"\n       line two\tend\n",
		`/var/log/\x1b]0;owned`,
		`node node-\x1b]0;owned`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("text output lacks %q:\n%s", want, out)
		}
	}
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if last := lines[len(lines)-1]; !strings.HasPrefix(last, "SUMMARY error node-\\x1b") {
		t.Errorf("last line %q, want the escaped SUMMARY", last)
	}
}

func TestCompactIsTerminalSafe(t *testing.T) {
	out := Compact(hostileReport())
	checkTerminalSafe(t, "compact", out)
	if !strings.Contains(out, `evidence: /var/log/\x1b]0;owned\x07`) {
		t.Errorf("compact output lacks the escaped evidence:\n%s", out)
	}
	if len(out) > MaxCompact {
		t.Errorf("compact output is %d bytes", len(out))
	}
}

func FuzzTerminalSafe(f *testing.F) {
	f.Add(hostile)
	f.Add("plain")
	f.Add("a\xffb\u009b")
	f.Fuzz(func(t *testing.T, s string) {
		checkTerminalSafe(t, "terminalSafe", strings.ReplaceAll(terminalSafe(s), "\n", ""))
	})
}
