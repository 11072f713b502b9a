package logline

import (
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
	"is to be installed", "; however:",
	// Kernel (node-problem-detector's kernel monitor watches the same).
	"out of memory", "oom-kill", "oom_kill", "oom-killer", "killed process",
	"read-only", "journal has aborted", "aborting journal", "corruption detected",
	"shutting down filesystem", "i/o error", "blocked for more than", "hung_task",
	"table full", "dropping packet", "link is down", "link down", "lost carrier",
	"link status definitely down", "soft lockup", "unregister_netdevice",
	"netdev watchdog",
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
	// A lost link's return.
	"link is up", "link up", "gained carrier", "link status definitely up",
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
	if containsWord(text, &failureIndex) || containsWord(text, &keepIndex) {
		return true
	}
	switch Parse(text, time.Time{}).Level {
	case LevelWarning, LevelError, LevelFatal, LevelPanic:
		return true
	}
	return false
}

// Failure says whether a line holds a word of failure (error, fail,
// refused, not found, x509, no space left, ...): for logs whose lines state
// no level of their own (the kernel, a script's output), whether the line
// reports an error.
func Failure(text string) bool { return containsWord(text, &failureIndex) }

// The word lists indexed by their first byte, so that a line is scanned
// once per list (the agent runs Notable over every line of megabytes of
// logs).
var failureIndex, keepIndex = index(failureWords), index(keepWords)

func index(words []string) (idx [256][]string) {
	for _, w := range words {
		idx[w[0]] = append(idx[w[0]], w)
	}
	return idx
}

// containsWord says whether text contains one of the indexed words,
// ignoring ASCII case (the words are ASCII).
func containsWord(text string, idx *[256][]string) bool {
	for i := 0; i < len(text); i++ {
		for _, w := range idx[lowerASCII(text[i])] {
			if hasPrefixFold(text[i:], w) {
				return true
			}
		}
	}
	return false
}

func hasPrefixFold(s, lowerPrefix string) bool {
	if len(s) < len(lowerPrefix) {
		return false
	}
	for j := 0; j < len(lowerPrefix); j++ {
		if lowerASCII(s[j]) != lowerPrefix[j] {
			return false
		}
	}
	return true
}

func lowerASCII(c byte) byte {
	if c >= 'A' && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}
