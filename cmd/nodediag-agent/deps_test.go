package main

import (
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// forbidden are packages the agent must never link: Kubernetes client
// libraries (the agent runs on broken nodes, often without an API server, and
// must stay small) and cgo journal bindings (they break the static build).
var forbidden = []string{
	"k8s.io/client-go",
	"sigs.k8s.io/controller-runtime",
	"sigs.k8s.io/cluster-api",
	"k8s.io/api/",
	"github.com/coreos/go-systemd/v22/sdjournal",
	"github.com/coreos/go-systemd/sdjournal",
	"github.com/nodediag/nodediag/collector",
}

func goList(t *testing.T, cgo string, args ...string) []string {
	t.Helper()
	cmd := exec.Command("go", append([]string{"list"}, args...)...)
	cmd.Env = append(os.Environ(), "CGO_ENABLED="+cgo)
	out, err := cmd.Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("go list %v: %v\n%s", args, err, stderr)
	}
	return strings.Fields(string(out))
}

func TestAgentDependencies(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command")
	}
	for _, dep := range goList(t, "0", "-deps", ".") {
		for _, bad := range forbidden {
			if strings.HasPrefix(dep, bad) {
				t.Errorf("nodediag-agent imports %s (forbidden: %s)", dep, bad)
			}
		}
	}
	// A package with cgo files behaves differently in the static build;
	// only the standard library's optional cgo is tolerated.
	allowedCgo := map[string]bool{"runtime/cgo": true, "net": true, "os/user": true, "plugin": true}
	for _, p := range goList(t, "1", "-deps", "-f", "{{if .CgoFiles}}{{.ImportPath}}{{end}}", ".") {
		if !allowedCgo[p] {
			t.Errorf("nodediag-agent depends on cgo package %s", p)
		}
	}
}

// TestAgentIsStatic builds the agent as the Makefile does and checks that the
// binary has no program interpreter (no dynamic linking).
func TestAgentIsStatic(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command")
	}
	bin := filepath.Join(t.TempDir(), "nodediag-agent")
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w", "-o", bin, ".")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("static build failed: %v\n%s", err, out)
	}
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Fatal("nodediag-agent is dynamically linked (has PT_INTERP)")
		}
	}
}
