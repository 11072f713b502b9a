package host

import (
	"context"
	"fmt"
	"strings"
)

// Recorded answers commands with output recorded elsewhere, never running
// anything: a CI artifact tree keeps `kubelet --version` as
// kubelet-version.txt. A command not recorded fails like one that cannot be
// run here (ErrExecDisabled), so that probes fall back as they do offline.
type Recorded map[string]Output

// RecordedKey is the key of a command in Recorded: its host path and
// arguments, separated by spaces.
func RecordedKey(path string, args ...string) string {
	return strings.Join(append([]string{path}, args...), " ")
}

// Run returns the recorded output of c.
func (r Recorded) Run(_ context.Context, c Cmd) (Output, error) {
	if out, ok := r[RecordedKey(c.Path, c.Args...)]; ok {
		return out, nil
	}
	return Output{}, fmt.Errorf("%s: %w (not recorded)", c, ErrExecDisabled)
}
