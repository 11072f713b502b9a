package probes

import (
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	nodediagv1 "github.com/nodediag/nodediag/proto/nodediag/v1"
)

// logsCandidate is a line that may be kept.
type logsCandidate struct {
	seq        int // position among the lines added (set by lineKeeper)
	n, fromEnd int32
	raw        string
	time       time.Time
	inferred   bool
	program    string
	important  bool // notable, or a line the caller wants whatever it says
	cut        bool // the head's last line, cut where the unread middle starts
}

// lineKeeper decides which lines of one log are evidence, the same way for a
// text file and for a unit's journal: every important line with the
// logsBefore lines above it (the command echoed before a failure), and the
// last logsContext lines whatever they say (the context of the end, or the
// sign that the log stopped in the middle of something); at most
// logsMaxLines, dropping the oldest unimportant ones first, then the
// important ones after the first logsKeepFirst. Memory stays bounded
// whatever the log's length.
type lineKeeper struct {
	important []logsCandidate
	ring      [logsContext]logsCandidate // the last lines
	ringN     int
	before    [logsBefore]logsCandidate // the last lines, for context
	beforeN   int
	promoted  map[int]bool // seqs of context lines kept with an important one
	included  int          // seq of the last line added to important
	seq       int
	dropped   int64 // important lines dropped while reading
	first     time.Time
	last      time.Time
}

func newLineKeeper() *lineKeeper {
	return &lineKeeper{promoted: map[int]bool{}, included: -1}
}

// seeTime records the own time of a line of the log, kept or not: the
// excerpt's first and last times are the log's, not only its kept lines'.
func (k *lineKeeper) seeTime(t time.Time) {
	if k.first.IsZero() {
		k.first = t
	}
	k.last = t
}

// add offers a line, in log order.
func (k *lineKeeper) add(c logsCandidate) {
	c.seq = k.seq
	k.seq++
	if c.important {
		for i := max(0, k.beforeN-logsBefore); i < k.beforeN; i++ {
			if b := k.before[i%logsBefore]; b.seq > k.included {
				b.important = true
				k.important = append(k.important, b)
				k.promoted[b.seq] = true
			}
		}
		if len(k.promoted) > 4*logsContext {
			// Only seqs still in the tail ring matter.
			for s := range k.promoted {
				if s < k.seq-logsContext-1 {
					delete(k.promoted, s)
				}
			}
		}
		k.important = append(k.important, c)
		k.included = c.seq
		if len(k.important) == 2*logsMaxLines {
			// Bound memory: logsCap would keep only the first
			// logsKeepFirst and the newest of these anyway.
			n := copy(k.important[logsKeepFirst:], k.important[len(k.important)-(logsMaxLines-logsKeepFirst):])
			k.important = k.important[:logsKeepFirst+n]
			k.dropped += logsMaxLines
		}
	}
	k.ring[k.ringN%logsContext] = c
	k.ringN++
	k.before[k.beforeN%logsBefore] = c
	k.beforeN++
}

// finish writes the kept lines, in log order, into ex.
func (k *lineKeeper) finish(ex *nodediagv1.LogExcerpt) {
	var context []logsCandidate
	for i := max(0, k.ringN-logsContext); i < k.ringN; i++ {
		if c := k.ring[i%logsContext]; !c.important && !k.promoted[c.seq] {
			context = append(context, c)
		}
	}
	important := k.important
	kept := make([]logsCandidate, 0, len(important)+len(context))
	for len(important) > 0 || len(context) > 0 {
		if len(context) == 0 || (len(important) > 0 && important[0].seq < context[0].seq) {
			kept, important = append(kept, important[0]), important[1:]
		} else {
			kept, context = append(kept, context[0]), context[1:]
		}
	}
	kept, ex.DroppedLines = logsCap(kept, logsMaxLines, logsKeepFirst)
	ex.DroppedLines += k.dropped
	for _, c := range kept {
		l := &nodediagv1.LogLine{N: c.n, NFromEnd: c.fromEnd, Text: logsText(c.raw, c.cut), Program: c.program, TimeInferred: c.inferred}
		if !c.time.IsZero() {
			l.Time = timestamppb.New(c.time)
		}
		ex.Lines = append(ex.Lines, l)
	}
	if !k.first.IsZero() {
		ex.FirstTime, ex.LastTime = timestamppb.New(k.first), timestamppb.New(k.last)
	}
}

// logsCap keeps at most max lines: it drops the oldest unimportant lines
// first, then, if the important lines alone are too many, those after the
// first keepFirst up to the newest ones that fit.
func logsCap(cands []logsCandidate, max, keepFirst int) ([]logsCandidate, int64) {
	excess := len(cands) - max
	if excess <= 0 {
		return cands, 0
	}
	dropped := int64(excess)
	out := cands[:0]
	for _, c := range cands {
		if excess > 0 && !c.important {
			excess--
			continue
		}
		out = append(out, c)
	}
	if excess > 0 {
		// out holds only important lines from here on, plus possibly
		// unimportant ones after them; drop the excess after keepFirst.
		out = append(out[:keepFirst], out[keepFirst+excess:]...)
	}
	return out, dropped
}
