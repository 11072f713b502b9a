package testenv

import (
	"os"
	"testing"
	"time"
)

func TestUsageOfThisProcess(t *testing.T) {
	before, err := Usage(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	// Burn some CPU and touch 64 MiB so that both counters move.
	buf := make([]byte, 64<<20)
	for i := range buf {
		buf[i] = byte(i)
	}
	deadline := time.Now().Add(300 * time.Millisecond)
	x := 0
	for time.Now().Before(deadline) {
		x++
	}
	after, err := Usage(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if after.PeakRSS < before.PeakRSS+32<<20 || after.RSS > after.PeakRSS {
		t.Errorf("RSS %d peak %d before peak %d: want the peak up by the 64 MiB touched", after.RSS, after.PeakRSS, before.PeakRSS)
	}
	if d := after.CPU - before.CPU; d < 100*time.Millisecond || d > 10*time.Second {
		t.Errorf("CPU grew by %v over a 300 ms busy loop", d)
	}
	_ = buf[x%len(buf)]
	if _, err := Usage(1 << 30); err == nil {
		t.Error("Usage of a PID that does not exist: no error")
	}
}
