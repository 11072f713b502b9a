package testenv

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// The child sees a procfs under the root; the parent's view of root/proc
// is unchanged (still an empty directory) once it ends.
func TestRunLive(t *testing.T) {
	root := t.TempDir()
	out, errb, code := RunLive(t, root, "/bin/sh", "-c", `stat -f -c %T "$0/proc"; cat "$0/proc/self/stat" >/dev/null && echo readable; exit 7`, root)
	if code != 7 {
		t.Fatalf("exit = %d, want 7 (stderr %s)", code, errb)
	}
	if got := string(out); !strings.Contains(got, "proc") || !strings.Contains(got, "readable") {
		t.Errorf("child output = %q, want a procfs under the root", got)
	}
	var sf unix.Statfs_t
	if err := unix.Statfs(filepath.Join(root, "proc"), &sf); err != nil {
		t.Fatal(err)
	}
	if sf.Type == unix.PROC_SUPER_MAGIC {
		t.Error("root/proc is still a procfs after the namespace ended")
	}
	if ents, _ := os.ReadDir(filepath.Join(root, "proc")); len(ents) != 0 {
		t.Errorf("root/proc has %d entries after the run", len(ents))
	}
}
