package main

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The benchmarks of a full check run the real binary, built as `make build`
// builds it, on a copy of an example host with a large syslog (64 MiB: the
// agent reads at most its first 2 and last 6 MiB), and report wall time,
// peak RSS and the binary's size. BenchmarkManualScript runs, on the same
// host, the shell commands an operator pushes with `az vm run-command` to
// read the same evidence by hand (capz-cluster-debugging, steps 4b-4f): the
// side-by-side reference. It only prints; reading and concluding are left to
// a person.

var benchBin, benchRoot string

func setupBench(b *testing.B) {
	b.Helper()
	if benchBin != "" {
		return
	}
	dir, err := os.MkdirTemp("", "nodediag-bench")
	if err != nil {
		b.Fatal(err)
	}
	benchBin = filepath.Join(dir, "nodediag-agent")
	build := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w", "-o", benchBin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		b.Fatalf("build: %v\n%s", err, out)
	}
	benchRoot = filepath.Join(dir, "root")
	if out, err := exec.Command("cp", "-a", "../../agent/testdata/hosts/azl3-stale-sysconfig-flag/root", benchRoot).CombinedOutput(); err != nil {
		b.Fatalf("copy host: %v\n%s", err, out)
	}
	f, err := os.Create(filepath.Join(benchRoot, "var/log/syslog"))
	if err != nil {
		b.Fatal(err)
	}
	w := bufio.NewWriter(f)
	t0 := time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC)
	for i, written := 0, 0; written < 64<<20; i++ {
		at := t0.Add(time.Duration(i) * 100 * time.Millisecond)
		ts := at.Format("2006-01-02T15:04:05.000000-07:00")
		sev, msg := "I", `"Syncing pod" pod="kube-system/kube-proxy-x7k2m"`
		if i%97 == 0 {
			sev, msg = "E", `"Error syncing pod, skipping" err="failed to \"StartContainer\" for \"kube-proxy\" with CrashLoopBackOff"`
		}
		n, _ := fmt.Fprintf(w, "%s node-1 kubelet[1876]: %s%s    1876 pod_workers.go:1301] %s\n", ts, sev, at.Format("0102 15:04:05.000000"), msg)
		written += n
		if i%23 == 0 {
			n, _ = fmt.Fprintf(w, "%s node-1 systemd[1]: Started session-%d.scope - Session of user azureuser.\n", ts, i)
			written += n
		}
	}
	if err := w.Flush(); err != nil {
		b.Fatal(err)
	}
	f.Close()
}

// measure runs argv under GNU time, when present, and keeps the command's
// peak RSS. (A child of a Go program reports in its own rusage a peak that
// starts at the parent's size, since it is forked from it: the measurement
// goes through a small intermediate process instead.)
func measure(b *testing.B, argv []string, maxRSS *int64) {
	b.Helper()
	var cmd *exec.Cmd
	if timeBin, err := exec.LookPath("/usr/bin/time"); err == nil {
		cmd = exec.Command(timeBin, append([]string{"-f", "maxrss=%M"}, argv...)...)
	} else {
		cmd = exec.Command(argv[0], argv[1:]...)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); err != nil && !(ok && ee.ExitCode() == 1) {
		b.Fatalf("%v: %v\n%s", argv, err, stderr.String())
	}
	for _, l := range strings.Split(stderr.String(), "\n") {
		var kib int64
		if _, err := fmt.Sscanf(l, "maxrss=%d", &kib); err == nil && kib > *maxRSS {
			*maxRSS = kib
		}
	}
}

// BenchmarkFullCheck: nodediag-agent check on the host, as a process.
func BenchmarkFullCheck(b *testing.B) {
	setupBench(b)
	var maxRSS int64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		measure(b, []string{benchBin, "check", "--root", benchRoot, "--exec", "local", "--output", "json"}, &maxRSS)
	}
	b.StopTimer()
	fi, err := os.Stat(benchBin)
	if err != nil {
		b.Fatal(err)
	}
	if maxRSS > 0 {
		b.ReportMetric(float64(maxRSS), "maxRSS-KiB")
	}
	b.ReportMetric(float64(fi.Size())/(1<<20), "binary-MiB")
}

// BenchmarkManualScript: the run-command an operator uses today, on the same host.
func BenchmarkManualScript(b *testing.B) {
	setupBench(b)
	r := benchRoot
	script := strings.Join([]string{
		"cat " + r + "/etc/default/kubelet 2>/dev/null; cat " + r + "/etc/sysconfig/kubelet 2>/dev/null",
		r + "/usr/bin/kubelet --version; " + r + "/usr/bin/kubeadm version -o short; " + r + "/usr/bin/kubectl version --client -o json",
		"tail -300 " + r + "/var/log/cloud-init-output.log",
		"grep -A5 -i 'error\\|fail\\|fatal' " + r + "/var/log/cloud-init-output.log",
		"ls -la " + r + "/run/cluster-api/ 2>/dev/null || echo 'sentinel dir does not exist'",
		"ls -la " + r + "/etc/kubernetes/manifests/; head -5 " + r + "/etc/kubernetes/kubelet.conf 2>/dev/null",
		"grep -i 'kubelet' " + r + "/var/log/syslog | tail -100",
		"df -h " + r + "/ " + r + "/var",
	}, "\n")
	var maxRSS int64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		measure(b, []string{"/bin/sh", "-c", script}, &maxRSS)
	}
	b.StopTimer()
	if maxRSS > 0 {
		b.ReportMetric(float64(maxRSS), "maxRSS-KiB")
	}
}

func TestMain(m *testing.M) {
	code := m.Run()
	for _, bin := range []string{benchBin, e2eBin} {
		if bin != "" {
			os.RemoveAll(filepath.Dir(bin))
		}
	}
	os.Exit(code)
}
