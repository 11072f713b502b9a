package stream

import (
	"math"
	"time"
)

// Reconnection and scheduling defaults. They are chosen for a fleet of
// 10,000 agents against one collector: after a collector restart every agent
// notices at once, and the jitter spreads their reconnections; the cap keeps
// an agent of a long outage trying every two minutes at most.
const (
	// DefaultBackoffInitial is the delay before the first reconnection
	// (before jitter).
	DefaultBackoffInitial = time.Second
	// DefaultBackoffMax caps the delay between reconnections.
	DefaultBackoffMax = 2 * time.Minute
	// DefaultBackoffFactor multiplies the delay after each failed attempt.
	DefaultBackoffFactor = 2.0
	// DefaultIntervalJitter spreads interval checks over ±20% of the
	// interval, so that agents started together drift apart.
	DefaultIntervalJitter = 0.2
)

// Backoff is an exponential backoff with "equal jitter": the n-th delay
// (n from 0) is drawn uniformly from [b/2, b] where b = min(Initial·Factor^n,
// Max). The delay is never zero (no busy loop) and never above Max. A
// Backoff is not safe for concurrent use.
type Backoff struct {
	Initial time.Duration
	Max     time.Duration
	Factor  float64
	// Rand returns a number in [0, 1); rand.Float64 when nil.
	Rand func() float64

	attempt int
}

// Next returns the delay before the next attempt and counts the attempt.
func (b *Backoff) Next() time.Duration {
	r := randOr(b.Rand)()
	d := BackoffDelay(b.Initial, b.Max, b.Factor, b.attempt, r)
	if BackoffDelay(b.Initial, b.Max, b.Factor, b.attempt, 1) < b.Max {
		// Stop counting once at the cap: the attempt number then only
		// matters as "at the cap", and cannot overflow.
		b.attempt++
	}
	return d
}

// Reset starts again from Initial: called after a healthy connection.
func (b *Backoff) Reset() { b.attempt = 0 }

// BackoffDelay is the delay before attempt (from 0) with the random number
// r in [0, 1]: uniformly in [base/2, base], base = min(initial·factor^attempt,
// max). Zero or negative parameters take the defaults.
func BackoffDelay(initial, max time.Duration, factor float64, attempt int, r float64) time.Duration {
	if initial <= 0 {
		initial = DefaultBackoffInitial
	}
	if max <= 0 {
		max = DefaultBackoffMax
	}
	if max < initial {
		max = initial
	}
	if factor < 1 {
		factor = DefaultBackoffFactor
	}
	if attempt < 0 {
		attempt = 0
	}
	base := float64(initial) * math.Pow(factor, float64(attempt))
	if base > float64(max) || math.IsInf(base, 0) || math.IsNaN(base) {
		base = float64(max)
	}
	r = clamp01(r)
	return time.Duration(base/2 + r*base/2)
}

// Jitter spreads d uniformly over [d·(1-frac), d·(1+frac)] with the random
// number r in [0, 1]: d·(1 + frac·(2r-1)). frac is clamped to [0, 0.9] so
// that the result stays positive.
func Jitter(d time.Duration, frac, r float64) time.Duration {
	if d <= 0 {
		return 0
	}
	frac = math.Max(0, math.Min(frac, 0.9))
	return time.Duration(float64(d) * (1 + frac*(2*clamp01(r)-1)))
}

// Splay is the random delay before an agent's first check: uniformly in
// [0, max) with r in [0, 1), so that agents started together (a DaemonSet
// rollout, a cluster-wide reboot) do not all check and upload at once.
func Splay(max time.Duration, r float64) time.Duration {
	if max <= 0 {
		return 0
	}
	return time.Duration(float64(max) * clamp01(r))
}

func clamp01(r float64) float64 {
	if math.IsNaN(r) || r < 0 {
		return 0
	}
	if r > 1 {
		return 1
	}
	return r
}
