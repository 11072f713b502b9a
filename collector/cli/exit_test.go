package cli

import (
	"errors"
	"fmt"
	"testing"
)

func TestExitCode(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want int
	}{
		{"nil", nil, ExitOK},
		{"findings", exitf(ExitFindings, "1 of 2 nodes"), ExitFindings},
		{"incomplete, wrapped", fmt.Errorf("sweep: %w", exitf(ExitIncomplete, "1 of 2 did not answer")), ExitIncomplete},
		{"any other error", errors.New(`unknown flag: --nope`), ExitUsage},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ExitCode(tc.err); got != tc.want {
				t.Errorf("ExitCode(%v) = %d, want %d", tc.err, got, tc.want)
			}
		})
	}
	// cobra's own errors (unknown flag) are usage errors.
	if r := run(t, "nodes", "--nope"); r.code() != ExitUsage {
		t.Errorf("%s", r)
	}
}
