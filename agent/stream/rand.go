package stream

import "math/rand/v2"

// randOr returns f, or math/rand/v2's Float64 when f is nil: the random
// numbers of backoff, jitter and splay, replaceable in tests.
func randOr(f func() float64) func() float64 {
	if f == nil {
		return rand.Float64
	}
	return f
}
