package redact

import (
	"os"
	"strings"
	"testing"
)

// BenchmarkString redacts the lines of a log, the cost every kept line and
// every bundled line pays: a bootstrap log thick with secrets (the planted
// secrets example host's cloud-init output) and an ordinary syslog.
func BenchmarkString(b *testing.B) {
	b.Run("secrets", func(b *testing.B) {
		benchLines(b, "../testdata/hosts/planted-secrets/root/var/log/cloud-init-output.log")
	})
	// An ordinary kubelet and containerd syslog: no secret at all.
	b.Run("syslog", func(b *testing.B) {
		benchLines(b, "../testdata/hosts/kubelet-1.27-container-runtime-flag/root/var/log/syslog")
	})
}

func benchLines(b *testing.B, path string) {
	data, err := os.ReadFile(path)
	if err != nil {
		b.Skip(err)
	}
	lines := strings.Split(string(data), "\n")
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		for _, l := range lines {
			String(l)
		}
	}
}
