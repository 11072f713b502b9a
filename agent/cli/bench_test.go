package cli

import (
	"context"
	"path/filepath"
	"testing"
)

// BenchmarkCheckExampleHost is a full check in process (probes, rules,
// report) of an example host: where the time goes, without process start-up.
func BenchmarkCheckExampleHost(b *testing.B) {
	o := checkOptions{root: filepath.Join(scenarioDir, "azl3-stale-sysconfig-flag", "root"), output: "json", exec: "local", timeout: timeoutForTests}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := checkOnce(context.Background(), o); err != nil {
			b.Fatal(err)
		}
	}
}
