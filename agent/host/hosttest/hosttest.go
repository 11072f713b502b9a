// Package hosttest builds host trees for tests: a scenario is a fake node.
package hosttest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nodediag/nodediag/agent/host"
)

// Now is the clock of test hosts.
var Now = time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)

// Tree writes files under a new root and returns a Host for it with the Local
// runner and the clock fixed at Now. Keys are host paths without the leading
// slash ("etc/sysconfig/kubelet"). A value:
//   - "->target" makes a symlink to target (absolute targets resolve inside the root);
//   - starting with "#!" makes an executable script (a fake binary: it runs for real);
//   - ending in "/" with an empty name part ("etc/cni/net.d/") makes an empty directory;
//   - anything else is the file's content.
func Tree(t testing.TB, files map[string]string) *host.Host {
	t.Helper()
	root := t.TempDir()
	Write(t, root, files)
	h, err := host.New(root, host.Local{})
	if err != nil {
		t.Fatal(err)
	}
	h.Now = func() time.Time { return Now }
	return h
}

// Write adds files to an existing root, with the conventions of Tree.
func Write(t testing.TB, root string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(root, name)
		if strings.HasSuffix(name, "/") {
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if target, ok := strings.CutPrefix(content, "->"); ok {
			// A YAML block scalar ends in a newline, which no link target
			// of a node holds.
			target = strings.TrimRight(target, "\n")
			if err := os.Symlink(target, p); err != nil {
				t.Fatal(err)
			}
			continue
		}
		mode := os.FileMode(0o644)
		if strings.HasPrefix(content, "#!") {
			mode = 0o755
		}
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
	}
}
