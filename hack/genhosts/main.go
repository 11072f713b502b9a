// Command genhosts writes the example hosts of agent/testdata/hosts: root
// trees shaped like CAPZ/CAPI nodes in known failure states, with fake
// binaries that answer --version like the real ones, deterministic
// certificates, and the logs those failures write. `make hosts` runs it; the
// test of this package fails when the committed trees drift from it.
//
// A host added by hand (a field incident) is not touched: genhosts owns only
// the scenarios it lists.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/nodediag/nodediag/internal/hostgen"
)

func main() {
	out := flag.String("out", "agent/testdata/hosts", "directory of the example hosts")
	flag.Parse()
	for _, s := range scenarios() {
		if err := write(*out, s); err != nil {
			fmt.Fprintln(os.Stderr, "genhosts:", err)
			os.Exit(1)
		}
	}
}

// write replaces <out>/<name>/root and args; goldens are left alone.
func write(out string, s scenario) error {
	dir := filepath.Join(out, s.name)
	if err := os.RemoveAll(filepath.Join(dir, "root")); err != nil {
		return err
	}
	if err := hostgen.WriteTree(filepath.Join(dir, "root"), s.tree); err != nil {
		return err
	}
	args := filepath.Join(dir, "args")
	if len(s.args) == 0 {
		if err := os.Remove(args); err != nil && !os.IsNotExist(err) {
			return err
		}
		return nil
	}
	return os.WriteFile(args, []byte(strings.Join(s.args, "\n")+"\n"), 0o644)
}
