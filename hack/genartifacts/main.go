// Command genartifacts writes the example CI artifact tree of nodediag
// analyze into collector/artifacts/testdata/capz-e2e (see
// internal/artifacttree). Run from the repository's root: go run
// ./hack/genartifacts. It needs systemd-journal-remote and journalctl.
package main

import (
	"fmt"
	"os"

	"github.com/nodediag/nodediag/internal/artifacttree"
)

const out = "collector/artifacts/testdata/capz-e2e"

func main() {
	if err := os.RemoveAll(out); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if err := artifacttree.Write(".", out); err != nil {
		fmt.Fprintln(os.Stderr, "genartifacts:", err)
		os.Exit(1)
	}
	fmt.Println("wrote", out)
}
