package probes

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/nodediag/nodediag/agent/host/hosttest"
	"github.com/nodediag/nodediag/agent/probe"
	"github.com/nodediag/nodediag/agent/rules"
	nodediagv1 "github.com/nodediag/nodediag/proto/nodediag/v1"
)

func logsTS(s string) *timestamppb.Timestamp {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		panic(err)
	}
	return timestamppb.New(t)
}

// capiJoinFailed is the cloud-init-output.log of a CAPI worker whose kubeadm
// join failed because its bootstrap token had expired: cloud-init's stage
// headers, package noise from preKubeadmCommands, kubeadm's output, the
// failed scripts_user module and the footer.
func capiJoinFailed() string {
	var b strings.Builder
	b.WriteString("Cloud-init v. 24.1.3-0ubuntu1~22.04.1 running 'init' at Wed, 01 May 2024 00:00:50 +0000. Up 8.12 seconds.\n")            // 1
	b.WriteString("ci-info: ++++++++++++++++++++++++++++++++++++++Net device info+++++++++++++++++++++++++++++++++++++++\n")                // 2
	b.WriteString("Cloud-init v. 24.1.3-0ubuntu1~22.04.1 running 'modules:config' at Wed, 01 May 2024 00:00:55 +0000. Up 13.40 seconds.\n") // 3
	b.WriteString("Cloud-init v. 24.1.3-0ubuntu1~22.04.1 running 'modules:final' at Wed, 01 May 2024 00:01:00 +0000. Up 18.02 seconds.\n")  // 4
	for i := 0; i < 100; i++ {                                                                                                              // 5..104
		fmt.Fprintf(&b, "Get:%d http://azure.archive.ubuntu.com/ubuntu jammy/main amd64 pkg%d amd64 1.0 [1000 B]\n", i+1, i)
	}
	b.WriteString("W: Failed to fetch https://pkgs.k8s.io/core:/stable:/v1.30/deb/InRelease  Temporary failure resolving 'prod-cdn.packages.k8s.io'\n") // 105
	for i := 0; i < 100; i++ {                                                                                                                          // 106..205
		fmt.Fprintf(&b, "Setting up pkg%d (1.0) ...\n", i)
	}
	b.WriteString("[preflight] Running pre-flight checks\n")                                                                                                                                                                  // 206
	b.WriteString("\t[WARNING SystemVerification]: cgroups v1 support is in maintenance mode, please migrate to cgroups v2\n")                                                                                                // 207
	b.WriteString("error execution phase preflight: couldn't validate the identity of the API Server: could not find a JWS signature in the cluster-info ConfigMap for token ID \"5xf60f\"\n")                                // 208
	b.WriteString("To see the stack trace of this error execute with --v=5 or higher\n")                                                                                                                                      // 209
	b.WriteString("2024-05-01 00:06:01,624 - cc_scripts_user.py[WARNING]: Failed to run module scripts_user (scripts in /var/lib/cloud/instance/scripts)\n")                                                                  // 210
	b.WriteString("2024-05-01 00:06:01,625 - util.py[WARNING]: Running module scripts_user (<module 'cloudinit.config.cc_scripts_user' from '/usr/lib/python3/dist-packages/cloudinit/config/cc_scripts_user.py'>) failed\n") // 211
	b.WriteString("Cloud-init v. 24.1.3-0ubuntu1~22.04.1 finished at Wed, 01 May 2024 00:06:01 +0000. Datasource DataSourceAzure [seed=/dev/sr0].  Up 319.53 seconds\n")                                                      // 212
	return b.String()
}

func TestLogsCloudInitOutputJoinFailed(t *testing.T) {
	h := hosttest.Tree(t, map[string]string{"var/log/cloud-init-output.log": capiJoinFailed()})
	pe, err := logs{}.Run(context.Background(), h)
	if err != nil {
		t.Fatal(err)
	}
	srcs := pe.GetLogs().GetSources()
	if len(srcs) != 1 {
		t.Fatalf("got %d sources, want 1", len(srcs))
	}
	ex := srcs[0]
	if ex.Source != "/var/log/cloud-init-output.log" || ex.Kind != "cloud-init-output" || ex.TotalLines != 212 || ex.Truncated || ex.DroppedLines != 0 {
		t.Errorf("header: source %q kind %q total %d truncated %v dropped %d", ex.Source, ex.Kind, ex.TotalLines, ex.Truncated, ex.DroppedLines)
	}
	var ns []int32
	for _, l := range ex.Lines {
		ns = append(ns, l.N)
	}
	// Stage headers (1, 3, 4) with the line before the third (2), the
	// failed fetch (105) with the two lines before it (103, 104), the last
	// 60 lines (153..212), among which the kubeadm error and cloud-init's
	// warnings.
	want := []int32{1, 2, 3, 4, 103, 104, 105}
	for n := int32(153); n <= 212; n++ {
		want = append(want, n)
	}
	if diff := cmp.Diff(want, ns); diff != "" {
		t.Errorf("kept line numbers (-want +got):\n%s", diff)
	}
	byN := map[int32]*nodediagv1.LogLine{}
	for _, l := range ex.Lines {
		byN[l.N] = l
	}
	wantLines := []*nodediagv1.LogLine{
		{N: 1, Text: "Cloud-init v. 24.1.3-0ubuntu1~22.04.1 running 'init' at Wed, 01 May 2024 00:00:50 +0000. Up 8.12 seconds.", Time: logsTS("2024-05-01T00:00:50Z")},
		{N: 105, Text: "W: Failed to fetch https://pkgs.k8s.io/core:/stable:/v1.30/deb/InRelease  Temporary failure resolving 'prod-cdn.packages.k8s.io'", Time: logsTS("2024-05-01T00:01:00Z"), TimeInferred: true},
		{N: 208, Text: `error execution phase preflight: couldn't validate the identity of the API Server: could not find a JWS signature in the cluster-info ConfigMap for token ID "5xf60f"`, Time: logsTS("2024-05-01T00:01:00Z"), TimeInferred: true},
		{N: 210, Text: "2024-05-01 00:06:01,624 - cc_scripts_user.py[WARNING]: Failed to run module scripts_user (scripts in /var/lib/cloud/instance/scripts)", Time: logsTS("2024-05-01T00:06:01.624Z")},
		{N: 212, Text: "Cloud-init v. 24.1.3-0ubuntu1~22.04.1 finished at Wed, 01 May 2024 00:06:01 +0000. Datasource DataSourceAzure [seed=/dev/sr0].  Up 319.53 seconds", Time: logsTS("2024-05-01T00:06:01Z")},
	}
	for _, w := range wantLines {
		if diff := cmp.Diff(w, byN[w.N], protocmp.Transform()); diff != "" {
			t.Errorf("line %d (-want +got):\n%s", w.N, diff)
		}
	}
	if diff := cmp.Diff(logsTS("2024-05-01T00:00:50Z"), ex.FirstTime, protocmp.Transform()); diff != "" {
		t.Errorf("first_time (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(logsTS("2024-05-01T00:06:01Z"), ex.LastTime, protocmp.Transform()); diff != "" {
		t.Errorf("last_time (-want +got):\n%s", diff)
	}
}

func TestLogsSyslogKeepsComponents(t *testing.T) {
	syslog := strings.Join([]string{
		`May  1 00:01:00 node-1 systemd[1]: Started Session 1 of User azureuser.`,
		`May  1 00:01:01 node-1 sshd[900]: error: kex_exchange_identification: Connection closed by remote host`,
		`May  1 00:01:02 node-1 kubelet[1234]: E0501 00:01:02.123456    1234 run.go:72] "command failed" err="failed to parse kubelet flag: unknown flag: --network-plugin"`,
		`May  1 00:01:02 node-1 systemd[1]: kubelet.service: Main process exited, code=exited, status=1/FAILURE`,
		`May  1 00:01:03 node-1 systemd[1]: Starting Daily apt download activities...`,
		`May  1 00:01:04 node-1 containerd[800]: time="2024-05-01T00:01:04.000000000Z" level=info msg="loading plugin"`,
		`May  1 00:01:05 node-1 CRON[1000]: (root) CMD (command -v debian-sa1 > /dev/null && debian-sa1 1 1)`,
		`May  1 00:01:06 node-1 kernel: [  123.456789] Out of memory: Killed process 4242 (kube-apiserver)`,
		`May  1 00:01:07 node-1 kernel: [  124.000000] eth0: Link is Up - 10Gbps/Full - flow control off`,
		`May  1 00:01:08 node-1 cloud-init[1047]: Cloud-init v. 24.1.3 finished at Wed, 01 May 2024 00:01:08 +0000. Datasource DataSourceAzure.  Up 39.10 seconds`,
	}, "\n") + "\n"
	h := hosttest.Tree(t, map[string]string{"var/log/syslog": syslog})
	pe, err := logs{}.Run(context.Background(), h)
	if err != nil {
		t.Fatal(err)
	}
	want := &nodediagv1.LogExcerpt{
		Source: "/var/log/syslog", Kind: "syslog", TotalLines: 10, SizeBytes: int64(len(syslog)),
		FirstTime: logsTS("2024-05-01T00:01:00Z"), LastTime: logsTS("2024-05-01T00:01:08Z"),
		Lines: []*nodediagv1.LogLine{
			{N: 3, Program: "kubelet", Time: logsTS("2024-05-01T00:01:02Z"), Text: `May  1 00:01:02 node-1 kubelet[1234]: E0501 00:01:02.123456    1234 run.go:72] "command failed" err="failed to parse kubelet flag: unknown flag: --network-plugin"`},
			{N: 4, Program: "systemd", Time: logsTS("2024-05-01T00:01:02Z"), Text: `May  1 00:01:02 node-1 systemd[1]: kubelet.service: Main process exited, code=exited, status=1/FAILURE`},
			{N: 6, Program: "containerd", Time: logsTS("2024-05-01T00:01:04Z"), Text: `May  1 00:01:04 node-1 containerd[800]: time="2024-05-01T00:01:04.000000000Z" level=info msg="loading plugin"`},
			{N: 8, Program: "kernel", Time: logsTS("2024-05-01T00:01:06Z"), Text: `May  1 00:01:06 node-1 kernel: [  123.456789] Out of memory: Killed process 4242 (kube-apiserver)`},
			// Every kernel line counts (a link coming back up is the other
			// half of a lost link); this one is kept as the tail's.
			{N: 9, Program: "kernel", Time: logsTS("2024-05-01T00:01:07Z"), Text: `May  1 00:01:07 node-1 kernel: [  124.000000] eth0: Link is Up - 10Gbps/Full - flow control off`},
			{N: 10, Program: "cloud-init", Time: logsTS("2024-05-01T00:01:08Z"), Text: `May  1 00:01:08 node-1 cloud-init[1047]: Cloud-init v. 24.1.3 finished at Wed, 01 May 2024 00:01:08 +0000. Datasource DataSourceAzure.  Up 39.10 seconds`},
		},
	}
	got := pe.GetLogs().GetSources()
	if len(got) != 1 {
		t.Fatalf("got %d sources, want 1", len(got))
	}
	if diff := cmp.Diff(want, got[0], protocmp.Transform()); diff != "" {
		t.Errorf("syslog excerpt (-want +got):\n%s", diff)
	}
}

// TestLogsHugeFile reads a log larger than head+tail: only its head and tail
// are read, the tail's lines are numbered from the end, and what is kept is
// bounded whatever the file's size.
func TestLogsHugeFile(t *testing.T) {
	var b strings.Builder
	// Every line is notable, so that the cap is reached too.
	n := 0
	for b.Len() < 12<<20 {
		n++
		fmt.Fprintf(&b, "E0501 00:%02d:%02d.000000    1234 kubelet_node_status.go:108] \"Unable to register node with API server\" err=\"dial tcp 10.0.0.4:6443: connect: connection refused\" seq=%07d\n", (n/60)%60, n%60, n)
	}
	content := b.String()
	h := hosttest.Tree(t, map[string]string{"var/log/kubelet.log": content})
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	pe, err := logs{}.Run(context.Background(), h)
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	// What is read is head+tail (8 MiB) and its string copy, whatever the
	// file's size; the lines kept are capped. (This test is not parallel:
	// nothing else allocates meanwhile.) The race detector's instrumentation
	// allocates far more than the code does: there the bound is not checked,
	// and the bounds on what is kept below still are.
	if alloc := after.TotalAlloc - before.TotalAlloc; !raceEnabled && alloc > 40<<20 {
		t.Errorf("reading a %d MiB log allocated %d MiB", len(content)>>20, alloc>>20)
	}
	ex := pe.GetLogs().GetSources()[0]
	if !ex.Truncated || ex.SizeBytes != int64(len(content)) || ex.SkippedBytes != int64(len(content))-logsHead-logsTail {
		t.Errorf("truncated %v size %d skipped %d; want true, %d, %d", ex.Truncated, ex.SizeBytes, ex.SkippedBytes, len(content), len(content)-logsHead-logsTail)
	}
	if len(ex.Lines) != logsMaxLines {
		t.Errorf("kept %d lines, want the cap %d", len(ex.Lines), logsMaxLines)
	}
	// Every line read was kept or dropped, except at most the head's cut
	// last line (not notable when cut before the klog header ends).
	if unaccounted := ex.TotalLines - ex.DroppedLines - int64(len(ex.Lines)); ex.TotalLines >= int64(n) || unaccounted < 0 || unaccounted > 1 {
		t.Errorf("total %d (file has %d) dropped %d kept %d", ex.TotalLines, n, ex.DroppedLines, len(ex.Lines))
	}
	// The first logsKeepFirst lines are the file's first lines.
	for i := 0; i < logsKeepFirst; i++ {
		if l := ex.Lines[i]; l.N != int32(i+1) || l.NFromEnd != 0 || !strings.HasSuffix(l.Text, fmt.Sprintf("seq=%07d", i+1)) {
			t.Fatalf("line %d: n %d from end %d text %q", i, l.N, l.NFromEnd, l.Text)
		}
	}
	// The rest are the file's last lines, numbered from its end.
	rest := ex.Lines[logsKeepFirst:]
	for i, l := range rest {
		fromEnd := int32(len(rest) - i)
		if l.N != 0 || l.NFromEnd != fromEnd || !strings.HasSuffix(l.Text, fmt.Sprintf("seq=%07d", n-int(fromEnd)+1)) {
			t.Fatalf("tail line %d: n %d from end %d (want %d) text %q", i, l.N, l.NFromEnd, fromEnd, l.Text)
		}
	}
}

func TestLogsHeadCutLine(t *testing.T) {
	// A file just over head+tail whose head ends in the middle of a line.
	line := strings.Repeat("x", 99) + "\n"
	content := strings.Repeat(line, (logsHead+logsTail)/len(line)+10)
	h := hosttest.Tree(t, map[string]string{"var/log/containerd.log": content})
	pe, err := logs{}.Run(context.Background(), h)
	if err != nil {
		t.Fatal(err)
	}
	ex := pe.GetLogs().GetSources()[0]
	if !ex.Truncated {
		t.Fatal("not truncated")
	}
	// Nothing is notable: only the last logsContext lines are kept, all
	// from the tail.
	if len(ex.Lines) != logsContext || ex.Lines[0].N != 0 || ex.Lines[0].NFromEnd != logsContext || ex.Lines[logsContext-1].NFromEnd != 1 {
		t.Errorf("kept %d lines, first n %d from end %d", len(ex.Lines), ex.Lines[0].N, ex.Lines[0].NFromEnd)
	}
	wantTotal := int64(logsHead/len(line) + 1 + logsTail/len(line)) // full head lines, the cut one, full tail lines (the partial first is dropped)
	if ex.TotalLines != wantTotal {
		t.Errorf("total lines %d, want %d", ex.TotalLines, wantTotal)
	}
}

func TestExcerptLog(t *testing.T) {
	ref := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	// An odd-length prefix puts byte 4096 in the middle of a 2-byte "é":
	// the clip must step back to 4095.
	prefix := "E0501 00:00:01.000000        1 x.go:1] "
	if len(prefix)%2 != 1 {
		t.Fatalf("prefix has %d bytes, want an odd number", len(prefix))
	}
	long := prefix + strings.Repeat("é", 3000)
	tests := []struct {
		name string
		kind string
		in   string
		want []*nodediagv1.LogLine
	}{
		{
			name: "empty file",
			kind: "kubelet",
		},
		{
			name: "CRLF and a last line without newline",
			kind: "kubeadm",
			in:   "[init] Using Kubernetes version: v1.30.0\r\n[preflight] Running pre-flight checks\r\n\t[ERROR Port-6443]: Port 6443 is in use",
			want: []*nodediagv1.LogLine{
				{N: 1, Text: "[init] Using Kubernetes version: v1.30.0"},
				{N: 2, Text: "[preflight] Running pre-flight checks"},
				{N: 3, Text: "\t[ERROR Port-6443]: Port 6443 is in use"},
			},
		},
		{
			name: "invalid UTF-8 becomes replacement characters",
			kind: "containerd",
			in:   "time=\"2024-05-01T00:00:01Z\" level=error msg=\"bad \xff\xfe bytes\"\n",
			want: []*nodediagv1.LogLine{
				{N: 1, Time: logsTS("2024-05-01T00:00:01Z"), Text: "time=\"2024-05-01T00:00:01Z\" level=error msg=\"bad \uFFFD bytes\""},
			},
		},
		{
			name: "a long line is clipped on a rune boundary",
			kind: "kubelet",
			in:   long + "\n",
			want: []*nodediagv1.LogLine{
				{N: 1, Time: logsTS("2024-05-01T00:00:01Z"), Text: long[:4095] + fmt.Sprintf(" …[%d more bytes]", len(long)-4095)},
			},
		},
		{
			name: "times are inferred from the nearest earlier timestamp",
			kind: "cloud-init-output",
			in: "Cloud-init v. 24.1.3 running 'modules:final' at Wed, 01 May 2024 00:01:00 +0000. Up 18.02 seconds.\n" +
				"curl: (22) The requested URL returned error: 404\n" +
				"2024-05-01 00:02:00,000 - util.py[WARNING]: Failed running /var/lib/cloud/instance/scripts/runcmd [1]\n" +
				"tar: This does not look like a tar archive\n",
			want: []*nodediagv1.LogLine{
				{N: 1, Time: logsTS("2024-05-01T00:01:00Z"), Text: "Cloud-init v. 24.1.3 running 'modules:final' at Wed, 01 May 2024 00:01:00 +0000. Up 18.02 seconds."},
				{N: 2, Time: logsTS("2024-05-01T00:01:00Z"), TimeInferred: true, Text: "curl: (22) The requested URL returned error: 404"},
				{N: 3, Time: logsTS("2024-05-01T00:02:00Z"), Text: "2024-05-01 00:02:00,000 - util.py[WARNING]: Failed running /var/lib/cloud/instance/scripts/runcmd [1]"},
				{N: 4, Time: logsTS("2024-05-01T00:02:00Z"), TimeInferred: true, Text: "tar: This does not look like a tar archive"},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ex := excerptLog("/var/log/x.log", tt.kind, []byte(tt.in), nil, int64(len(tt.in)), 0, ref, time.UTC)
			if diff := cmp.Diff(tt.want, ex.Lines, protocmp.Transform()); diff != "" {
				t.Errorf("lines (-want +got):\n%s", diff)
			}
			for _, l := range ex.Lines {
				if !utf8.ValidString(l.Text) || len(l.Text) > logsMaxLineBytes+64 {
					t.Errorf("line %d: valid UTF-8 %v, %d bytes", l.N, utf8.ValidString(l.Text), len(l.Text))
				}
			}
		})
	}
}

func TestLogsCap(t *testing.T) {
	mk := func(spec string) []logsCandidate {
		var out []logsCandidate
		for i, c := range spec {
			out = append(out, logsCandidate{seq: i, important: c == 'I'})
		}
		return out
	}
	seqs := func(cs []logsCandidate) []int {
		var out []int
		for _, c := range cs {
			out = append(out, c.seq)
		}
		return out
	}
	tests := []struct {
		name        string
		spec        string
		max, first  int
		want        []int
		wantDropped int64
	}{
		{name: "under the cap", spec: "IcIc", max: 4, first: 1, want: []int{0, 1, 2, 3}},
		{name: "the oldest unimportant go first", spec: "cIcIcc", max: 4, first: 1, want: []int{1, 3, 4, 5}, wantDropped: 2},
		{name: "then the important after the first ones", spec: "IIIIIc", max: 3, first: 1, want: []int{0, 3, 4}, wantDropped: 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, dropped := logsCap(mk(tt.spec), tt.max, tt.first)
			if diff := cmp.Diff(tt.want, seqs(got)); diff != "" || dropped != tt.wantDropped {
				t.Errorf("kept (-want +got):\n%s dropped %d, want %d", diff, dropped, tt.wantDropped)
			}
		})
	}
}

func TestLogsNoneIsNotApplicable(t *testing.T) {
	h := hosttest.Tree(t, map[string]string{"var/log/auth.log": "x\n", "var/log/kubeadm/": ""})
	_, err := logs{}.Run(context.Background(), h)
	if !errors.Is(err, probe.ErrNotApplicable) {
		t.Fatalf("err = %v, want ErrNotApplicable", err)
	}
	h = hosttest.Tree(t, map[string]string{"etc/hostname": "node-1\n"})
	if _, err := (logs{}).Run(context.Background(), h); !errors.Is(err, probe.ErrNotApplicable) {
		t.Fatalf("without /var/log: err = %v, want ErrNotApplicable", err)
	}
}

// TestLogsFIFOUnreadable: a FIFO at /var/log/syslog is recorded as
// unreadable (and does not block); the other logs are still read.
func TestLogsFIFOUnreadable(t *testing.T) {
	h := hosttest.Tree(t, map[string]string{
		"var/log/cloud-init.log":    "2024-05-01 00:01:40,123 - util.py[WARNING]: Failed to run module scripts_user\n",
		"var/log/kubeadm-init.log":  "\t[ERROR Swap]: running with swap on is not supported. Please disable swap\n",
		"var/log/kubeadm-join.log":  "[preflight] Running pre-flight checks\n",
		"var/log/containerd.log":    "->/nonexistent/containerd.log",
		"var/log/kubelet.log/":      "",
		"var/log/kubeadm-notes.txt": "not a log\n",
	})
	if err := syscall.Mkfifo(filepath.Join(h.Root, "var/log/syslog"), 0o644); err != nil {
		t.Fatal(err)
	}
	pe, err := logs{}.Run(context.Background(), h)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range pe.GetLogs().GetSources() {
		got = append(got, s.Kind+" "+s.Source)
	}
	want := []string{"cloud-init /var/log/cloud-init.log", "kubeadm /var/log/kubeadm-init.log", "kubeadm /var/log/kubeadm-join.log"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("sources (-want +got):\n%s", diff)
	}
	var unread []string
	for _, u := range pe.Unreadable {
		unread = append(unread, u.Source)
	}
	// The dangling symlink is absent, not unreadable; the directory and the
	// FIFO are unreadable.
	if diff := cmp.Diff([]string{"/var/log/syslog", "/var/log/kubelet.log"}, unread); diff != "" {
		t.Errorf("unreadable (-want +got):\n%s", diff)
	}
}

func TestLogsCancelled(t *testing.T) {
	h := hosttest.Tree(t, map[string]string{"var/log/cloud-init-output.log": "x\n"})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := (logs{}).Run(ctx, h); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
}

// TestLogsThroughRules runs the probe's evidence through the rules engine:
// the failed join's cause is found and quoted with its file and line.
func TestLogsThroughRules(t *testing.T) {
	h := hosttest.Tree(t, map[string]string{"var/log/cloud-init-output.log": capiJoinFailed()})
	ev := probe.RunAll(context.Background(), h, []probe.Probe{logs{}})
	e, err := rules.NewEngine()
	if err != nil {
		t.Fatal(err)
	}
	res := e.Analyze(ev, rules.Context{})
	var got []string
	for _, f := range res.Findings {
		for _, q := range f.Evidence {
			got = append(got, fmt.Sprintf("%s %s:%d", f.Id, q.Source, q.Line))
		}
	}
	for _, want := range []string{
		"JoinTokenInvalid /var/log/cloud-init-output.log:208",
		"BootstrapCommandFailed /var/log/cloud-init-output.log:210",
		"BootstrapCommandFailed /var/log/cloud-init-output.log:211",
	} {
		if !slices.Contains(got, want) {
			t.Errorf("findings quote %q; want %s", got, want)
		}
	}
}

func FuzzExcerptLog(f *testing.F) {
	f.Add([]byte(capiJoinFailed()), []byte(nil), int64(0), "cloud-init-output")
	f.Add([]byte("May  1 00:01:40 node-1 kubelet[1]: E0501 x\r\nbad \xff\n"), []byte("tail\npart\nlast"), int64(100), "syslog")
	f.Add([]byte("E0501 00:00:01.000000 1 x.go:1] error\n"), []byte("\n\n"), int64(1), "kubelet")
	f.Fuzz(func(t *testing.T, head, tail []byte, skipped int64, kind string) {
		if skipped < 0 {
			skipped = -skipped
		}
		if skipped == 0 {
			tail = nil
		}
		ex := excerptLog("/var/log/x.log", kind, head, tail, int64(len(head)+len(tail))+skipped, skipped, time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC), time.UTC)
		if len(ex.Lines) > logsMaxLines || int64(len(ex.Lines))+ex.DroppedLines > ex.TotalLines {
			t.Fatalf("%d lines kept, %d dropped, %d read", len(ex.Lines), ex.DroppedLines, ex.TotalLines)
		}
		prevN, prevFromEnd := int32(0), int32(1<<30)
		for _, l := range ex.Lines {
			if !utf8.ValidString(l.Text) || strings.Contains(l.Text, "\n") {
				t.Fatalf("bad text %q", l.Text)
			}
			switch {
			case l.N > 0 && l.NFromEnd == 0:
				if l.N <= prevN || prevFromEnd != 1<<30 {
					t.Fatalf("head line %d after %d (from end %d)", l.N, prevN, prevFromEnd)
				}
				prevN = l.N
			case l.N == 0 && l.NFromEnd > 0 && skipped > 0:
				if l.NFromEnd >= prevFromEnd {
					t.Fatalf("tail line %d from end after %d", l.NFromEnd, prevFromEnd)
				}
				prevFromEnd = l.NFromEnd
			default:
				t.Fatalf("line numbered n=%d from end=%d (skipped %d)", l.N, l.NFromEnd, skipped)
			}
		}
	})
}

// Zone-less times are the host's local time: on a UTC+2 host (its
// /etc/localtime says so) "May  1 02:02:00" is 00:02 UTC.
func TestLogsLocalTimeZone(t *testing.T) {
	berlin, err := os.ReadFile("/usr/share/zoneinfo/Europe/Berlin")
	if err != nil {
		t.Skip("no zoneinfo on this machine to build the host's /etc/localtime from")
	}
	h := hosttest.Tree(t, map[string]string{
		"usr/share/zoneinfo/Europe/Berlin": string(berlin),
		"etc/localtime":                    "->/usr/share/zoneinfo/Europe/Berlin",
		"var/log/messages":                 "May  1 02:02:00 node-1 kubelet[12]: E0501 02:02:00.000000      12 run.go:74] \"command failed\" err=\"failed to parse kubelet flag: unknown flag: --x\"\n",
	})
	pe, err := logs{}.Run(context.Background(), h)
	if err != nil {
		t.Fatal(err)
	}
	l := pe.GetLogs().GetSources()[0].GetLines()[0]
	if got, want := l.GetTime().AsTime(), time.Date(2024, 5, 1, 0, 2, 0, 0, time.UTC); !got.Equal(want) {
		t.Errorf("time %v, want %v (02:02 in Berlin in May)", got, want)
	}
}

func TestLogsYearRef(t *testing.T) {
	wall := time.Date(2026, 11, 29, 16, 0, 0, 0, time.UTC)
	anchor := time.Date(2024, 5, 1, 0, 5, 0, 0, time.UTC)
	kept := time.Date(2024, 5, 1, 0, 6, 0, 0, time.UTC)
	fixed := time.Date(2025, 6, 12, 9, 0, 0, 0, time.UTC)
	tests := []struct {
		name                         string
		live                         bool
		hostNow, mtime, anchor, want time.Time
	}{
		{"live host: the mtime", true, wall, kept, anchor, kept},
		{"live host, mtime in the future: the clock", true, wall, wall.Add(time.Hour), anchor, wall},
		{"copy judged at a fixed time (--now)", false, fixed, wall, anchor, fixed},
		{"copy with its file times kept", false, wall, kept, anchor, kept},
		{"fresh copy (a checkout): cloud-init's newest dated line, plus eleven months", false, wall, wall.Add(-time.Minute), anchor, anchor.Add(logsAnchorSpan)},
		{"fresh copy without any dated line: the clock", false, wall, wall.Add(-time.Minute), time.Time{}, wall},
	}
	for _, tt := range tests {
		if got := logsYearRef(tt.live, tt.hostNow, wall, tt.mtime, tt.anchor); !got.Equal(tt.want) {
			t.Errorf("%s: %v, want %v", tt.name, got, tt.want)
		}
	}
}
