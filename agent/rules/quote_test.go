package rules

import (
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	nodediagv1 "github.com/nodediag/nodediag/proto/nodediag/v1"
)

// TestClipRedactsBeforeCutting: a bootstrap token that straddles the
// MaxExcerpt cut must not leak the first characters of its secret. Cut first,
// "abcdef.01" no longer looks like a token and would pass every later
// redaction.
func TestClipRedactsBeforeCutting(t *testing.T) {
	const token, secret = "abcdef.0123456789abcdef", "0123456789abcdef"
	prefix := "+ kubeadm join 10.0.0.4:6443 " + strings.Repeat("x", MaxExcerpt-len("+ kubeadm join 10.0.0.4:6443 ")-len("--token abcdef.01")) + "--token "
	line := prefix + token + " " + strings.Repeat("y", 2000-len(prefix)-len(token)-1)
	if len(line) != 2000 || !strings.Contains(line[:MaxExcerpt], "abcdef.01") || strings.Contains(line[:MaxExcerpt], token) {
		t.Fatalf("the test line does not straddle the cut: %q", line[MaxExcerpt-20:MaxExcerpt+20])
	}
	quotes := map[string]*nodediagv1.Quote{
		"QuoteLine": QuoteLine(&nodediagv1.SourceLine{Path: "/var/log/cloud-init-output.log", Line: 7, Text: line}),
		"QuoteLog":  QuoteLog(&nodediagv1.LogExcerpt{Source: "/var/log/cloud-init-output.log"}, &nodediagv1.LogLine{N: 7, Text: line}),
		"QuoteText": QuoteText("/var/log/cloud-init-output.log", line),
		"QuoteExec": QuoteExec(&nodediagv1.Binary{Command: "/usr/bin/kubeadm version", Output: line}),
	}
	for name, q := range quotes {
		ex := q.GetExcerpt()
		for _, leak := range []string{"abcdef.0", secret[:2]} {
			if strings.Contains(ex, leak) {
				t.Errorf("%s: excerpt leaks %q: ...%s", name, leak, ex[max(0, len(ex)-40):])
			}
		}
		if !strings.HasPrefix(ex, "+ kubeadm join 10.0.0.4:6443 xxx") {
			t.Errorf("%s: excerpt lost the start of the line: %.40q", name, ex)
		}
		if !strings.Contains(ex, "--token [RED") {
			t.Errorf("%s: excerpt does not show the redaction: ...%s", name, ex[max(0, len(ex)-40):])
		}
		if len(ex) > MaxExcerpt+len("…") || !strings.HasSuffix(ex, "…") || !utf8.ValidString(ex) {
			t.Errorf("%s: excerpt of %d bytes, want a clip to %d bytes marked …", name, len(ex), MaxExcerpt)
		}
	}
}

// TestQuoteExecNamesTheMethod: a version learnt without running anything is
// never quoted as a command that ran.
func TestQuoteExecNamesTheMethod(t *testing.T) {
	for method, want := range map[string]string{
		"exec":      "exec:/usr/bin/kubelet --version",
		"buildinfo": "buildinfo:/usr/bin/kubelet",
		"dpkg":      "dpkg:/usr/bin/kubelet",
	} {
		b := &nodediagv1.Binary{Name: "kubelet", Path: "/usr/bin/kubelet", Command: "/usr/bin/kubelet --version", Method: method, Version: "v1.32.3", Output: "Version: 1.32.3-1.1"}
		if got := QuoteExec(b).GetSource(); got != want {
			t.Errorf("method %s: source %q, want %q", method, got, want)
		}
	}
}

// TestClipAroundKeepsTheMatch: a long line is quoted around what proves
// it, not from its start.
func TestClipAroundKeepsTheMatch(t *testing.T) {
	re := regexp.MustCompile(`failed to resolve reference "[^"]*": [^"]*not found`)
	line := `E0501 10:00:00.000000 1 remote_image.go:180] "PullImage from image service failed" err="` + strings.Repeat("x", 1500) + ` failed to resolve reference "registry.example/app:v1": registry.example/app:v1: not found" image="registry.example/app:v1"`
	got := clipAround(line, re)
	if !strings.Contains(got, "v1: not found") || !strings.HasPrefix(got, "…") {
		t.Errorf("excerpt %q: want the match kept, the start cut", got)
	}
	if len(got) > MaxExcerpt+2*len("…") {
		t.Errorf("excerpt of %d bytes, want at most %d", len(got), MaxExcerpt)
	}
	if short := "E0501 failed to resolve reference \"a\": not found"; clipAround(short, re) != short {
		t.Errorf("a short line is quoted whole")
	}
	if nomatch := strings.Repeat("y", 2000); clipAround(nomatch, re) != clip(nomatch) {
		t.Errorf("without a match: clip")
	}
}
