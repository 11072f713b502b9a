package testenv

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// RunLive runs bin with args as if root were a running host: in a private
// mount namespace (unshare, util-linux) where root/proc is a fresh procfs.
// The agent then takes root for a live node (host.Live) and dials the
// sockets under it, while the machine's own mounts stay as they were: the
// procfs goes away with the namespace, even if the test dies.
//
// It returns the standard output and error and the exit status; a failure
// to run at all fails the test.
func RunLive(t testing.TB, root, bin string, args ...string) (stdout, stderr []byte, exit int) {
	t.Helper()
	RequireRoot(t, "mounting a procfs under a test root")
	unshare := RequireBinary(t, "unshare", "util-linux")
	if err := os.MkdirAll(filepath.Join(root, "proc"), 0o755); err != nil {
		t.Fatal(err)
	}
	// "$1" is the root, "$2" the binary, the rest its arguments.
	script := `mount -t proc proc "$1/proc" && shift && exec "$@"`
	argv := append([]string{"--mount", "--propagation", "private", "sh", "-c", script, "sh", root, bin}, args...)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, unshare, argv...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee) && ctx.Err() == nil:
		exit = ee.ExitCode()
	default:
		t.Fatalf("running %s under %s: %v\n%s", bin, root, err, errb.String())
	}
	return out.Bytes(), errb.Bytes(), exit
}
