// Package probe is the vocabulary of evidence collection: what a probe is, and
// RunAll, which runs a list of probes against a host into one Evidence.
//
// A probe reads; it never decides what a problem means (that is agent/rules),
// and it never touches the node except through agent/host.
package probe

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime/debug"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/nodediag/nodediag/agent/host"
	nodediagv1 "github.com/nodediag/nodediag/proto/nodediag/v1"
)

// ErrNotApplicable is returned (wrapped) by a probe when what it inspects does
// not exist on this host (no kubelet unit, no cloud-init). It is reported as
// "skipped", not as a failure.
var ErrNotApplicable = errors.New("not applicable")

// Statuses of ProbeEvidence.Status.
const (
	StatusOK      = "ok"
	StatusSkipped = "skipped"
	StatusError   = "error"
)

// A Probe inspects one aspect of a node and returns what it saw.
//
// Probes only read. A probe makes as much progress as it can: what it could
// not read goes into ProbeEvidence.Unreadable and the rest is still returned.
// Run returns an error wrapping ErrNotApplicable when the thing it inspects is
// absent, and any other error only when the probe as a whole could not do its
// job; problems of the node are for the rules to find, never errors.
type Probe interface {
	// Name is unique, stable and lower-kebab-case ("kubelet-config").
	Name() string
	// Run returns the probe's evidence with its Data set. Name, Status,
	// Error and DurationMs are filled in by RunAll.
	Run(ctx context.Context, h *host.Host) (*nodediagv1.ProbeEvidence, error)
}

// ErrorUnfinished is the Error of a probe that was still running when RunAll's
// context ended.
const ErrorUnfinished = "did not finish within the time limit"

// RunAll runs the probes in parallel against h and returns their evidence in
// the order of probes. A probe that panics or fails is reported with status
// "error"; it never takes the others down.
//
// RunAll returns when every probe has finished or when ctx ends, whichever
// comes first: the agent's --timeout bounds the whole check even when a
// probe is stuck where ctx cannot reach it (a read or statfs on a hung NFS,
// CIFS or FUSE mount blocks in the kernel). A probe still running then is
// reported with status "error" and ErrorUnfinished, and its goroutine is
// abandoned (its result, should it ever come, is dropped); the probes that
// finished keep their results.
func RunAll(ctx context.Context, h *host.Host, probes []Probe) *nodediagv1.Evidence {
	start := time.Now()
	ev := &nodediagv1.Evidence{
		CollectedAt: timestamppb.New(h.Now().UTC()),
		Snapshot:    !h.Live(),
		Host:        &nodediagv1.HostInfo{Root: h.Root},
		Probes:      make([]*nodediagv1.ProbeEvidence, len(probes)),
	}
	type result struct {
		i  int
		pe *nodediagv1.ProbeEvidence
	}
	// Buffered: an abandoned probe that finishes late never blocks on it.
	results := make(chan result, len(probes))
	for i, p := range probes {
		go func() { results <- result{i, runOne(ctx, h, p)} }()
	}
	for pending := len(probes); pending > 0; pending-- {
		select {
		case r := <-results:
			ev.Probes[r.i] = r.pe
		case <-ctx.Done():
			// Keep the results that arrived together with the end of ctx.
			for drained := false; !drained; {
				select {
				case r := <-results:
					ev.Probes[r.i] = r.pe
				default:
					drained = true
				}
			}
			ms := int32(min(time.Since(start).Milliseconds(), math.MaxInt32))
			for i, p := range probes {
				if ev.Probes[i] == nil {
					ev.Probes[i] = &nodediagv1.ProbeEvidence{Name: p.Name(), Status: StatusError, Error: ErrorUnfinished, DurationMs: ms}
				}
			}
			return ev
		}
	}
	return ev
}

func runOne(ctx context.Context, h *host.Host, p Probe) (pe *nodediagv1.ProbeEvidence) {
	start := time.Now()
	defer func() {
		if r := recover(); r != nil {
			pe = &nodediagv1.ProbeEvidence{Status: StatusError, Error: fmt.Sprintf("panic: %v\n%s", r, firstFrames(debug.Stack()))}
		}
		pe.Name = p.Name()
		pe.DurationMs = int32(min(time.Since(start).Milliseconds(), math.MaxInt32))
	}()
	pe, err := p.Run(ctx, h)
	if pe == nil {
		pe = &nodediagv1.ProbeEvidence{}
	}
	switch {
	case err == nil:
		pe.Status = StatusOK
	case errors.Is(err, ErrNotApplicable):
		pe.Status = StatusSkipped
		pe.Error = err.Error()
	default:
		pe.Status = StatusError
		pe.Error = err.Error()
	}
	return pe
}

// firstFrames keeps the panic's first frames: enough to find it, short enough to report.
func firstFrames(stack []byte) []byte {
	const max = 2048
	if len(stack) > max {
		return stack[:max]
	}
	return stack
}

// Unreadable records in pe that source could not be read, and why.
func Unreadable(pe *nodediagv1.ProbeEvidence, source string, err error) {
	pe.Unreadable = append(pe.Unreadable, &nodediagv1.Unreadable{Source: source, Error: err.Error()})
}

// Find returns the evidence of the named probe, or nil.
func Find(ev *nodediagv1.Evidence, name string) *nodediagv1.ProbeEvidence {
	for _, pe := range ev.GetProbes() {
		if pe.GetName() == name {
			return pe
		}
	}
	return nil
}
