//go:build race

package probes

// raceEnabled says the tests run under the race detector, whose
// instrumentation multiplies what the code allocates (458 MiB instead of
// 20 MiB for TestLogsHugeFile): bounds on allocated bytes do not hold there.
const raceEnabled = true
