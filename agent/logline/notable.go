package logline

import (
	"strings"
	"time"
)

// failureWords are the lower-case fragments that say something went wrong.
// The list is deliberately broad: the logs probe keeps a notable line from
// anywhere in a file, while the rest only survives in the tail, so every line
// a log signature (agent/rules/signatures) can claim must contain one of
// these or of keepWords (a test checks every signature example against
// Notable).
var failureWords = []string{
	// Failure words of every component.
	"error", "fail", "fatal", "panic", "refused", "timed out", "timeout",
	"deadline exceeded", "unable", "cannot", "can't", "couldn't", "could not",
	"not found", "denied", "unauthorized", "forbidden", "expired", "invalid",
	"no such", "missing", "no space left", "x509", "exception",
	"traceback", "exit status", "exit code", "exiting with status",
	// Health and restarts.
	"unhealthy", "not healthy", "isn't running", "not running", "back-off",
	"backoff", "crashloop", "evict", "unfortunately", "not ready",
	"not initialized", "no cni configuration", "misconfiguration",
	"not supported", "unsupported", "must be specified",
	// Network and TLS.
	"no route to host", "reset by peer", "server gave http response",
	"no host in request", "are pinned", "unexpected status", "not valid",
	"temporary failure", "clock difference", "clock drift",
	// Disks.
	"over the high threshold",
	// Downloads and packages (curl, wget, tar, gzip, apt, dnf, yum).
	"curl: (", "does not look like", "not in gzip format", "no match",
	"no package", "no installation candidate", "not signed", "no_pubkey",
	"is to be installed", "; however:", "release file", "status code: 4", "status code: 5",
	// Kernel (node-problem-detector's kernel monitor watches the same).
	"out of memory", "oom-kill", "oom_kill", "oom-killer", "killed process",
	"read-only", "journal has aborted", "aborting journal", "corruption detected",
	"shutting down filesystem", "i/o error", "blocked for more than", "hung_task",
	"table full", "dropping packet", "link is down", "link down", "lost carrier",
	"link status definitely down", "soft lockup", "unregister_netdevice",
	"netdev watchdog", "unit hang",
	"unable to handle kernel", "call trace",
}

// keepWords make a line worth keeping without saying that anything failed:
// warnings, and the facts the rules read.
var keepWords = []string{
	"unknown", "[warning",
	// Facts the rules read when no binary can be asked: the version the
	// kubelet states at start-up ("Kubelet version" kubeletVersion="v1.35.0";
	// before 1.20 "Version: v1.15.4" after its klog header) and the one
	// kubeadm init uses ("[init] Using Kubernetes version").
	"kubeletversion=", "] version: v", "using kubernetes version",
	// Cluster API's bootstrap script names its sentinel file; cloud-init's
	// final message names its datasource.
	"bootstrap-success.complete", "datasource",
	// CAPA's boothook that fetches the encrypted bootstrap data.
	"cluster.x-k8s.io encrypted cloud-init script",
	// A lost link's return.
	"link is up", "link up", "gained carrier", "link status definitely up",
	// A pull that succeeded, which refutes an earlier failed one.
	"returns image reference", "successfully pulled image",
}

// Notable says whether a log line is worth keeping as evidence wherever it
// is in its file: a klog line at warning or above (W, E, F), a logrus line at
// warning, error, fatal or panic, a cloud-init [WARNING]/[ERROR] line, or a
// line containing a failure word (case-insensitive: error, fail, refused,
// timed out, not found, denied, x509, no space left, back-off, ...).
//
// It is a broad pre-filter, not a judgement: most notable lines are noise,
// and the rules decide what they mean.
func Notable(text string) bool {
	if wordsIn(text, failureWord|keepWord) != 0 {
		return true
	}
	switch quickLevel(text) {
	case LevelWarning, LevelError, LevelFatal, LevelPanic:
		return true
	}
	return false
}

// Failure says whether a line holds a word of failure (error, fail,
// refused, not found, x509, no space left, ...): for logs whose lines state
// no level of their own (the kernel, a script's output), whether the line
// reports an error.
func Failure(text string) bool { return wordsIn(text, failureWord) != 0 }

// quickLevel is Parse(text).Level without the cost of reading times: a line
// that starts with a klog header ("I0501 10:00:00.000000 ...", most of a
// kubelet's journal) has its letter's level, a logrus line (time="..."
// level=..., containerd's) the level it states; any other goes through
// Parse.
func quickLevel(text string) string {
	if _, ok := klogHeaderLen(text); ok {
		switch text[0] {
		case 'I':
			return LevelInfo
		case 'W':
			return LevelWarning
		case 'E':
			return LevelError
		case 'F':
			return LevelFatal
		}
	}
	if strings.HasPrefix(text, `time="`) {
		// A logrus line (containerd's): its level follows the quoted time,
		// which is not read.
		lv, _ := logrusLevel(text)
		return lv
	}
	return Parse(text, time.Time{}).Level
}

// The word lists as one Aho-Corasick automaton over ASCII-lowered bytes
// (Aho and Corasick, "Efficient string matching", CACM 1975): a line is
// read once, whatever the number of words (the agent runs Notable over
// every line of megabytes of logs).
const (
	failureWord = 1 << iota
	keepWord
)

type automaton struct {
	class  [256]uint8 // byte → character class (0: no word has it)
	nclass int
	next   []uint16 // state<<classBits | class → state
	out    []uint8  // state → the lists of the words that end here
}

// classBits is how many bits a character class takes in a transition's
// index: 64 classes at most (the words use fewer than 50 characters).
const classBits = 6

var words = buildAutomaton(map[uint8][]string{failureWord: failureWords, keepWord: keepWords})

func buildAutomaton(lists map[uint8][]string) *automaton {
	a := &automaton{nclass: 1}
	for _, ws := range lists {
		for _, w := range ws {
			for i := 0; i < len(w); i++ {
				if c := w[i]; a.class[c] == 0 {
					a.class[c] = uint8(a.nclass)
					if c >= 'a' && c <= 'z' {
						a.class[c-'a'+'A'] = uint8(a.nclass)
					}
					a.nclass++
				}
			}
		}
	}
	if a.nclass > 1<<classBits {
		panic("logline: too many characters in the notable words")
	}
	nc := 1 << classBits
	// The trie.
	a.next = make([]uint16, nc)
	a.out = []uint8{0}
	for mask, ws := range lists {
		for _, w := range ws {
			s := 0
			for i := 0; i < len(w); i++ {
				c := int(a.class[w[i]])
				if a.next[s*nc+c] == 0 {
					a.next = append(a.next, make([]uint16, nc)...)
					a.out = append(a.out, 0)
					a.next[s*nc+c] = uint16(len(a.out) - 1)
				}
				s = int(a.next[s*nc+c])
			}
			a.out[s] |= mask
		}
	}
	// Failure links, breadth first, folded into the transitions.
	fail := make([]uint16, len(a.out))
	var queue []uint16
	for c := 1; c < a.nclass; c++ {
		if t := a.next[c]; t != 0 {
			queue = append(queue, t)
		}
	}
	for len(queue) > 0 {
		s := int(queue[0])
		queue = queue[1:]
		a.out[s] |= a.out[fail[s]]
		for c := 1; c < a.nclass; c++ {
			t := a.next[s*nc+c]
			if t == 0 {
				a.next[s*nc+c] = a.next[int(fail[s])*nc+c]
				continue
			}
			fail[t] = a.next[int(fail[s])*nc+c]
			queue = append(queue, t)
		}
	}
	return a
}

// wordsIn returns the lists (of want) whose words text contains, ignoring
// ASCII case; it stops at the first word of a wanted list.
func wordsIn(text string, want uint8) uint8 {
	a := words
	next, out := a.next, a.out
	s := 0
	for i := 0; i < len(text); i++ {
		s = int(next[s<<classBits|int(a.class[text[i]])])
		if o := out[s] & want; o != 0 {
			return o
		}
	}
	return 0
}

func lowerASCII(c byte) byte {
	if c >= 'A' && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}
