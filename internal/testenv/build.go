package testenv

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Build builds the command pkg (an import path, e.g.
// "github.com/nodediag/nodediag/cmd/nodediag") as `make build` does
// (CGO_ENABLED=0, -trimpath) into a directory of the test and returns the
// binary's path. The Go build cache makes a second build of the same code a
// link step.
func Build(t testing.TB, pkg string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), filepath.Base(pkg))
	cmd := exec.Command("go", "build", "-trimpath", "-o", bin, pkg)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, strings.TrimSpace(string(out)))
	}
	return bin
}
