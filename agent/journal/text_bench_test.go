package journal

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nodediag/nodediag/agent/host"
)

// BenchmarkTextJournal reads a 50 MB whole-journal export (journalctl
// --output=short-precise, 300,000 lines of a noisy node: kubelet,
// containerd, sshd, systemd) as the journal probe does: open (the scan),
// then the queries of the six units it reads (their entries kept by the
// open's read, TextOptions.Units).
func BenchmarkTextJournal(b *testing.B) {
	root := b.TempDir()
	f, err := os.Create(filepath.Join(root, "journal.log"))
	if err != nil {
		b.Fatal(err)
	}
	w := bufio.NewWriter(f)
	t := time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC)
	idents := []string{"kubelet[812]", "containerd[640]", "sshd[99]", "systemd[1]"}
	for i := 0; i < 300_000; i++ {
		t = t.Add(37 * time.Millisecond)
		msg := fmt.Sprintf(`E0501 %s     812 kubelet.go:3008] "Container runtime network not ready" networkReady="NetworkReady=false reason:NetworkPluginNotReady message:Network plugin returns error: cni plugin not initialized" seq=%d`, t.Format("15:04:05.000000"), i)
		if i%4 == 3 {
			msg = "kubelet.service: Scheduled restart job, restart counter is at 3."
		}
		fmt.Fprintf(w, "%s node-0 %s: %s\n", t.Format("Jan 02 15:04:05.000000"), idents[i%4], msg)
	}
	w.Flush()
	f.Close()
	fi, _ := os.Stat(filepath.Join(root, "journal.log"))
	h, err := host.New(root, nil)
	if err != nil {
		b.Fatal(err)
	}
	units := []string{"kubelet.service", "containerd.service", "cloud-final.service", "cloud-config.service", "cloud-init.service", "cloud-init-local.service"}
	b.SetBytes(fi.Size())
	b.ResetTimer()
	for n := 0; n < b.N; n++ {
		tj, err := OpenText(h, TextOptions{Reference: t, Units: units}, TextExport{Path: "/journal.log"})
		if err != nil {
			b.Fatal(err)
		}
		boots, _ := tj.Boots()
		for _, u := range units {
			q := Query{Any: [][]Term{{{"_SYSTEMD_UNIT", u}}, {{"UNIT", u}, {"_PID", "1"}}}, BootID: boots[len(boots)-1].ID}
			if err := tj.Query(q, func(*Entry) bool { return true }); err != nil {
				b.Fatal(err)
			}
		}
	}
}
