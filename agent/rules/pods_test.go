package rules_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/nodediag/nodediag/agent/rules"
	nodediagv1 "github.com/nodediag/nodediag/proto/nodediag/v1"
)

// podsNow is when the pods' evidence was collected.
var podsNow = time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)

const etcdDir = "/var/log/pods/kube-system_etcd-node-1_6c2684cc7a64810709bc493a7a24a9c2/etcd"

// podRun is the excerpt of one run's log: its lines spread evenly from
// start over dur, numbered from 1.
func podRun(dir, file string, start time.Time, dur time.Duration, texts ...string) *nodediagv1.LogExcerpt {
	ex := &nodediagv1.LogExcerpt{Source: dir + "/" + file, Kind: "pod", TotalLines: int64(len(texts))}
	for i, text := range texts {
		at := start
		if len(texts) > 1 {
			at = start.Add(dur * time.Duration(i) / time.Duration(len(texts)-1))
		}
		ex.Lines = append(ex.Lines, &nodediagv1.LogLine{N: int32(i + 1), Text: text, Time: timestamppb.New(at), Program: dir[strings.LastIndexByte(dir, '/')+1:]})
	}
	if len(texts) > 0 {
		ex.FirstTime, ex.LastTime = timestamppb.New(start), timestamppb.New(start.Add(dur))
	}
	return ex
}

// podContainer builds a container of the pods probe.
func podContainer(ns, pod, container string, static bool, restarts uint32, files []string, latest, prev *nodediagv1.LogExcerpt) *nodediagv1.PodContainer {
	c := &nodediagv1.PodContainer{
		Namespace: ns, Pod: pod, Container: container, Static: static, Restarts: restarts, Files: files,
		Dir: fmt.Sprintf("/var/log/pods/%s_%s_0123456789abcdef0123456789abcdef/%s", ns, pod, container),
		Log: latest, PreviousLog: prev,
	}
	for _, ex := range []*nodediagv1.LogExcerpt{latest, prev} {
		if t := ex.GetLastTime(); t != nil && (c.LastTime == nil || t.AsTime().After(c.LastTime.AsTime())) {
			c.LastTime = t
		}
	}
	return c
}

func podsEvidence(cs ...*nodediagv1.PodContainer) *nodediagv1.Evidence {
	return &nodediagv1.Evidence{
		CollectedAt: timestamppb.New(podsNow),
		Probes: []*nodediagv1.ProbeEvidence{{
			Name: "pods", Status: "ok",
			Data: &nodediagv1.ProbeEvidence_Pods{Pods: &nodediagv1.Pods{Containers: cs}},
		}},
	}
}

// What crashing components write as they die, and what a healthy one does.
var (
	etcdNoSpace = []string{
		`{"level":"info","ts":"2024-05-01T11:58:00.000Z","caller":"etcdmain/etcd.go:73","msg":"Running: ","args":["etcd","--data-dir=/var/lib/etcd"]}`,
		`{"level":"panic","ts":"2024-05-01T11:58:01.000Z","caller":"backend/backend.go:189","msg":"failed to open database","path":"/var/lib/etcd/member/snap/db","error":"open /var/lib/etcd/member/snap/db: no space left on device"}`,
		`panic: failed to open database`,
		`goroutine 1 [running]:`,
	}
	apiserverNoCert = []string{
		`I0501 11:59:30.000000       1 server.go:148] Version: v1.30.0`,
		`Error: unable to load server certificate: open /etc/kubernetes/pki/apiserver.crt: no such file or directory`,
	}
	// A kube-apiserver that its startup probe kills: errors, no last words.
	apiserverNoEtcd = []string{
		`I0501 11:50:00.000000       1 server.go:148] Version: v1.30.0`,
		`W0501 11:50:01.000000       1 logging.go:59] [core] [Channel #1 SubChannel #2] grpc: addrConn.createTransport failed to connect to {Addr: "127.0.0.1:2379", ServerName: "127.0.0.1:2379", }. Err: connection error: desc = "transport: Error while dialing: dial tcp 127.0.0.1:2379: connect: connection refused"`,
		`I0501 11:50:02.000000       1 shared_informer.go:313] Waiting for caches to sync`,
	}
	etcdHealthy = []string{
		`{"level":"info","ts":"2024-05-01T09:00:00.000Z","caller":"etcdserver/server.go:2064","msg":"published local member to cluster through raft"}`,
		`{"level":"info","ts":"2024-05-01T11:55:00.000Z","caller":"mvcc/kvstore_compaction.go:66","msg":"finished scheduled compaction","compact-revision":1234}`,
	}
)

func TestPodCrashLoops(t *testing.T) {
	at := func(d time.Duration) time.Time { return podsNow.Add(d) }
	type want struct {
		ID, Container, Severity, Confidence string
	}
	tests := []struct {
		name string
		cs   []*nodediagv1.PodContainer
		ctx  rules.Context
		want []want
	}{
		{
			name: "etcd crashes at start, two short runs back to back",
			cs: []*nodediagv1.PodContainer{podContainer("kube-system", "etcd-node-1", "etcd", true, 7, []string{"6.log", "7.log"},
				podRun(etcdDir, "7.log", at(-2*time.Minute), 2*time.Second, etcdNoSpace...),
				podRun(etcdDir, "6.log", at(-7*time.Minute), 2*time.Second, etcdNoSpace...))},
			want: []want{{"StaticPodCrashLoop", "etcd", "error", "high"}},
		},
		{
			name: "kube-apiserver: one run left by garbage collection, ended by its last words",
			cs: []*nodediagv1.PodContainer{podContainer("kube-system", "kube-apiserver-node-1", "kube-apiserver", true, 4, []string{"4.log"},
				podRun("/d/kube-apiserver", "4.log", at(-30*time.Second), time.Second, apiserverNoCert...), nil)},
			want: []want{{"StaticPodCrashLoop", "kube-apiserver", "error", "medium"}},
		},
		{
			name: "killed by its startup probe: short runs back to back without last words",
			cs: []*nodediagv1.PodContainer{podContainer("kube-system", "kube-apiserver-node-1", "kube-apiserver", true, 9, []string{"8.log", "9.log"},
				podRun("/d/kube-apiserver", "9.log", at(-3*time.Minute), 2*time.Minute, apiserverNoEtcd...),
				podRun("/d/kube-apiserver", "8.log", at(-9*time.Minute), 4*time.Minute, apiserverNoEtcd...))},
			want: []want{{"StaticPodCrashLoop", "kube-apiserver", "error", "high"}},
		},
		{
			name: "just restarted: the latest log has no line yet, the run before exited",
			cs: []*nodediagv1.PodContainer{podContainer("kube-system", "etcd-node-1", "etcd", true, 5, []string{"4.log", "5.log"},
				&nodediagv1.LogExcerpt{Source: etcdDir + "/5.log", Kind: "pod"},
				podRun(etcdDir, "4.log", at(-time.Minute), time.Second, etcdNoSpace...))},
			want: []want{{"StaticPodCrashLoop", "etcd", "error", "medium"}},
		},
		{
			name: "kube-scheduler and kube-controller-manager are controllers",
			cs: []*nodediagv1.PodContainer{
				podContainer("kube-system", "kube-scheduler-node-1", "kube-scheduler", true, 3, []string{"3.log"},
					podRun("/d/kube-scheduler", "3.log", at(-time.Minute), time.Second, `E0501 11:59:00.000000       1 run.go:74] "command failed" err="stat /etc/kubernetes/scheduler.conf: no such file or directory"`), nil),
				podContainer("kube-system", "kube-controller-manager-node-1", "kube-controller-manager", true, 3, []string{"3.log"},
					podRun("/d/kube-controller-manager", "3.log", at(-time.Minute), time.Second, `F0501 11:59:00.000000       1 controllermanager.go:339] leaderelection lost`), nil),
			},
			want: []want{{"ControllerCrashLoop", "kube-controller-manager", "error", "medium"}, {"ControllerCrashLoop", "kube-scheduler", "error", "medium"}},
		},
		{
			name: "another system pod is a warning",
			cs: []*nodediagv1.PodContainer{podContainer("kube-system", "kube-proxy-x7k2p", "kube-proxy", false, 12, []string{"12.log"},
				podRun("/d/kube-proxy", "12.log", at(-time.Minute), time.Second, `E0501 11:59:00.000000       1 run.go:74] "command failed" err="failed complete: unrecognized feature gate: Foo"`), nil)},
			want: []want{{"PodCrashLoop", "kube-proxy", "warning", "medium"}},
		},
		{
			name: "etcd and kube-apiserver both: etcd's comes first, the API server's is likely its consequence",
			cs: []*nodediagv1.PodContainer{
				podContainer("kube-system", "kube-apiserver-node-1", "kube-apiserver", true, 9, []string{"8.log", "9.log"},
					podRun("/d/kube-apiserver", "9.log", at(-3*time.Minute), 2*time.Minute, apiserverNoEtcd...),
					podRun("/d/kube-apiserver", "8.log", at(-9*time.Minute), 4*time.Minute, apiserverNoEtcd...)),
				podContainer("kube-system", "etcd-node-1", "etcd", true, 7, []string{"7.log"},
					podRun(etcdDir, "7.log", at(-2*time.Minute), 2*time.Second, etcdNoSpace...), nil),
			},
			want: []want{{"StaticPodCrashLoop", "etcd", "error", "medium"}, {"StaticPodCrashLoop", "kube-apiserver", "error", "low"}},
		},
		{
			name: "fewer than three restarts",
			cs: []*nodediagv1.PodContainer{podContainer("kube-system", "etcd-node-1", "etcd", true, 2, []string{"1.log", "2.log"},
				podRun(etcdDir, "2.log", at(-2*time.Minute), 2*time.Second, etcdNoSpace...),
				podRun(etcdDir, "1.log", at(-7*time.Minute), 2*time.Second, etcdNoSpace...))},
		},
		{
			name: "restarts counted over reboots: the latest run has lasted for hours",
			cs: []*nodediagv1.PodContainer{podContainer("kube-system", "etcd-node-1", "etcd", true, 4, []string{"3.log", "4.log"},
				podRun(etcdDir, "4.log", at(-3*time.Hour), 175*time.Minute, etcdHealthy...),
				podRun(etcdDir, "3.log", at(-30*24*time.Hour), 20*24*time.Hour, etcdHealthy...))},
		},
		{
			name: "rebooted a minute ago: a short latest run without last words, the run before lasted days",
			cs: []*nodediagv1.PodContainer{podContainer("kube-system", "kube-apiserver-node-1", "kube-apiserver", true, 4, []string{"3.log", "4.log"},
				podRun("/d/kube-apiserver", "4.log", at(-time.Minute), 50*time.Second, apiserverNoEtcd...),
				podRun("/d/kube-apiserver", "3.log", at(-30*24*time.Hour), 20*24*time.Hour, apiserverNoEtcd...))},
		},
		{
			name: "the latest run's log was rotated: it ran long enough to fill one",
			cs: []*nodediagv1.PodContainer{podContainer("kube-system", "kube-apiserver-node-1", "kube-apiserver", true, 4, []string{"3.log", "4.log.20240501-115800", "4.log"},
				podRun("/d/kube-apiserver", "4.log", at(-time.Minute), 50*time.Second, apiserverNoCert...),
				podRun("/d/kube-apiserver", "3.log", at(-6*time.Minute), time.Second, apiserverNoCert...))},
		},
		{
			name: "runs too far apart for a back-off, and no last words",
			cs: []*nodediagv1.PodContainer{podContainer("kube-system", "kube-apiserver-node-1", "kube-apiserver", true, 9, []string{"8.log", "9.log"},
				podRun("/d/kube-apiserver", "9.log", at(-3*time.Minute), 2*time.Minute, apiserverNoEtcd...),
				podRun("/d/kube-apiserver", "8.log", at(-time.Hour), 4*time.Minute, apiserverNoEtcd...))},
		},
		{
			name: "before the window",
			ctx:  rules.Context{Since: podsNow.Add(-time.Minute)},
			cs: []*nodediagv1.PodContainer{podContainer("kube-system", "etcd-node-1", "etcd", true, 7, []string{"6.log", "7.log"},
				podRun(etcdDir, "7.log", at(-5*time.Minute), 2*time.Second, etcdNoSpace...),
				podRun(etcdDir, "6.log", at(-10*time.Minute), 2*time.Second, etcdNoSpace...))},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []want
			for _, f := range analyze(t, podsEvidence(tt.cs...), tt.ctx) {
				switch f.Id {
				case "StaticPodCrashLoop", "ControllerCrashLoop", "PodCrashLoop":
				default:
					continue
				}
				container := strings.Fields(f.Title)[0]
				got = append(got, want{f.Id, container, f.Severity, f.Confidence})
				if strings.Contains(f.Title+f.Remediation+f.RefutedBy, "{") {
					t.Errorf("unfilled parameter: %q / %q", f.Title, f.Remediation)
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("findings (-want +got):\n%s", diff)
			}
		})
	}
}

// The etcd finding quotes the restarts, the runs and etcd's own reason,
// from the file and line it is in.
func TestStaticPodCrashLoopQuotes(t *testing.T) {
	latest := podRun(etcdDir, "7.log", podsNow.Add(-2*time.Minute), 3*time.Second, etcdNoSpace...)
	prev := podRun(etcdDir, "6.log", podsNow.Add(-7*time.Minute), 3*time.Second, etcdNoSpace...)
	ev := podsEvidence(podContainer("kube-system", "etcd-node-1", "etcd", true, 7, []string{"6.log", "7.log"}, latest, prev))
	f := findingByID(analyze(t, ev, rules.Context{}), "StaticPodCrashLoop")
	if f == nil {
		t.Fatal("no StaticPodCrashLoop")
	}
	if want := "etcd (etcd-node-1) is crash-looping: 7 restarts, and this node's API server is down with it"; f.Title != want {
		t.Errorf("title\n got %s\nwant %s", f.Title, want)
	}
	dir := "/var/log/pods/kube-system_etcd-node-1_0123456789abcdef0123456789abcdef/etcd"
	want := []*nodediagv1.Quote{
		{Source: dir, Excerpt: "7 restarts (0.log .. 7.log, one log per start; present: 6.log, 7.log)"},
		{Source: etcdDir + "/7.log", Excerpt: "7.log: the run lasted 3s (2024-05-01T11:58:00Z to 2024-05-01T11:58:03Z); 6.log: the run before lasted 3s (2024-05-01T11:53:00Z to 2024-05-01T11:53:03Z), and the next began 4m after it"},
		{Source: etcdDir + "/7.log", Line: 2, Time: latest.Lines[1].Time, Excerpt: etcdNoSpace[1]},
	}
	if diff := cmp.Diff(want, f.Evidence, protocmp.Transform()); diff != "" {
		t.Errorf("evidence (-want +got):\n%s", diff)
	}
}

// Without an exit line, the last notable line is the reason quoted; when
// the latest run has no line yet, the run before's.
func TestCrashLoopCauseWithoutExitLine(t *testing.T) {
	latest := podRun("/d/kube-apiserver", "9.log", podsNow.Add(-3*time.Minute), 2*time.Minute, apiserverNoEtcd...)
	prev := podRun("/d/kube-apiserver", "8.log", podsNow.Add(-9*time.Minute), 4*time.Minute, apiserverNoEtcd...)
	ev := podsEvidence(podContainer("kube-system", "kube-apiserver-node-1", "kube-apiserver", true, 9, []string{"8.log", "9.log"}, latest, prev))
	f := findingByID(analyze(t, ev, rules.Context{}), "StaticPodCrashLoop")
	if f == nil {
		t.Fatal("no StaticPodCrashLoop")
	}
	last := f.Evidence[len(f.Evidence)-1]
	if last.Source != "/d/kube-apiserver/9.log" || last.Line != 2 || last.Excerpt != apiserverNoEtcd[1] {
		t.Errorf("cause quote %v, want line 2 of 9.log", last)
	}
}

// A crash-looping API server explains what its absence causes: the
// kubelet's unreachable API server, kubeadm's failed wait for the control
// plane, and the controllers' crash loops.
func TestStaticPodCrashLoopRanksFirst(t *testing.T) {
	ev := podsEvidence(
		podContainer("kube-system", "kube-apiserver-node-1", "kube-apiserver", true, 4, []string{"3.log", "4.log"},
			podRun("/d/kube-apiserver", "4.log", podsNow.Add(-30*time.Second), time.Second, apiserverNoCert...),
			podRun("/d/kube-apiserver", "3.log", podsNow.Add(-5*time.Minute), time.Second, apiserverNoCert...)),
		podContainer("kube-system", "kube-scheduler-node-1", "kube-scheduler", true, 5, []string{"5.log"},
			podRun("/d/kube-scheduler", "5.log", podsNow.Add(-time.Minute), time.Second, `E0501 11:59:00.000000       1 leaderelection.go:340] error retrieving resource lock kube-system/kube-scheduler: Get "https://10.0.0.4:6443/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/kube-scheduler": dial tcp 10.0.0.4:6443: connect: connection refused`, `F0501 11:59:01.000000       1 server.go:248] leaderelection lost`), nil),
	)
	var kubelet []*nodediagv1.LogLine
	for i := 0; i < 15; i++ {
		at := podsNow.Add(-15*time.Minute + time.Duration(i)*time.Minute)
		kubelet = append(kubelet, &nodediagv1.LogLine{N: int32(i + 1), Time: timestamppb.New(at),
			Text: `E0501 11:45:00.000000    1234 kubelet_node_status.go:108] "Unable to register node with API server" err="Post \"https://10.0.0.4:6443/api/v1/nodes\": dial tcp 10.0.0.4:6443: connect: connection refused" node="node-1"`})
	}
	ev.Probes = append(ev.Probes, &nodediagv1.ProbeEvidence{Name: "logs", Status: "ok", Data: &nodediagv1.ProbeEvidence_Logs{Logs: &nodediagv1.Logs{Sources: []*nodediagv1.LogExcerpt{
		{Source: "/var/log/kubelet.log", Kind: "kubelet", Lines: kubelet},
		{Source: "/var/log/cloud-init-output.log", Kind: "cloud-init-output", Lines: []*nodediagv1.LogLine{
			{N: 80, Time: timestamppb.New(podsNow.Add(-time.Minute)), Text: "error execution phase wait-control-plane: couldn't initialize a Kubernetes cluster"},
		}},
	}}}})
	fs := analyze(t, ev, rules.Context{})
	if len(fs) == 0 || fs[0].Id != "StaticPodCrashLoop" {
		t.Fatalf("first finding %v, want StaticPodCrashLoop", ids(fs))
	}
	for _, id := range []string{"APIServerUnreachable", "KubeadmInitFailed", "ControllerCrashLoop"} {
		f := findingByID(fs, id)
		if f == nil {
			t.Errorf("no %s finding (%v)", id, ids(fs))
			continue
		}
		if !f.Consequence {
			t.Errorf("%s is not marked a consequence", id)
		}
	}
	if diff := cmp.Diff([]string{"APIServerUnreachable", "ControllerCrashLoop", "KubeadmInitFailed"}, fs[0].Explains); diff != "" {
		t.Errorf("explains (-want +got):\n%s", diff)
	}
}

// The kubelet's CrashLoopBackOff lines prove a crash loop when they last;
// a single back-off is the kubelet doing its job. With the pods' logs, the
// kubelet's lines join the finding the logs raised.
func TestCrashLoopBackOffSignature(t *testing.T) {
	line := func(n int32, at time.Duration) *nodediagv1.LogLine {
		return &nodediagv1.LogLine{N: n, Time: timestamppb.New(podsNow.Add(at)), Program: "kubelet",
			Text: `E0501 11:45:00.000000    1234 pod_workers.go:1301] "Error syncing pod, skipping" err="failed to \"StartContainer\" for \"etcd\" with CrashLoopBackOff: \"back-off 5m0s restarting failed container=etcd pod=etcd-node-1_kube-system(6c2684cc7a64810709bc493a7a24a9c2)\"" pod="kube-system/etcd-node-1" podUID="6c2684cc7a64810709bc493a7a24a9c2"`}
	}
	journal := func(lines ...*nodediagv1.LogLine) *nodediagv1.ProbeEvidence {
		return &nodediagv1.ProbeEvidence{Name: "logs", Status: "ok", Data: &nodediagv1.ProbeEvidence_Logs{Logs: &nodediagv1.Logs{Sources: []*nodediagv1.LogExcerpt{
			{Source: "/var/log/syslog", Kind: "syslog", Lines: lines},
		}}}}
	}
	t.Run("once", func(t *testing.T) {
		ev := podsEvidence()
		ev.Probes = append(ev.Probes, journal(line(1, -time.Minute)))
		if f := findingByID(analyze(t, ev, rules.Context{}), "StaticPodCrashLoop"); f != nil {
			t.Errorf("a single back-off raised %v", f)
		}
	})
	t.Run("for fifteen minutes", func(t *testing.T) {
		ev := podsEvidence()
		ev.Probes = append(ev.Probes, journal(line(1, -15*time.Minute), line(2, -10*time.Minute), line(3, -5*time.Minute), line(4, -time.Minute)))
		f := findingByID(analyze(t, ev, rules.Context{}), "StaticPodCrashLoop")
		if f == nil {
			t.Fatal("no StaticPodCrashLoop")
		}
		if want := "etcd (etcd-node-1) is crash-looping: repeated restarts, and this node's API server is down with it"; f.Title != want {
			t.Errorf("title\n got %s\nwant %s", f.Title, want)
		}
	})
	t.Run("with the pod's logs", func(t *testing.T) {
		ev := podsEvidence(podContainer("kube-system", "etcd-node-1", "etcd", true, 7, []string{"6.log", "7.log"},
			podRun(etcdDir, "7.log", podsNow.Add(-2*time.Minute), 2*time.Second, etcdNoSpace...),
			podRun(etcdDir, "6.log", podsNow.Add(-7*time.Minute), 2*time.Second, etcdNoSpace...)))
		ev.Probes = append(ev.Probes, journal(line(1, -15*time.Minute), line(2, -10*time.Minute), line(3, -5*time.Minute), line(4, -time.Minute)))
		var crash []*nodediagv1.Finding
		for _, f := range analyze(t, ev, rules.Context{}) {
			if f.Id == "StaticPodCrashLoop" {
				crash = append(crash, f)
			}
		}
		if len(crash) != 1 {
			t.Fatalf("%d StaticPodCrashLoop findings, want one", len(crash))
		}
		sources := map[string]bool{}
		for _, q := range crash[0].Evidence {
			sources[q.Source] = true
		}
		if !sources["/var/log/syslog"] || !sources[etcdDir+"/7.log"] || !strings.Contains(crash[0].Title, "7 restarts") {
			t.Errorf("title %q, quotes from %v: want the pod's log and the kubelet's lines", crash[0].Title, sources)
		}
	})
}

// A control plane component that exits on a flag it does not know: the
// finding quotes the manifest line that passes the flag, the line to change.
func TestCrashLoopQuotesTheManifestFlag(t *testing.T) {
	dir := "/var/log/pods/kube-system_kube-scheduler-node-1_0123/kube-scheduler"
	lines := []string{`I0501 11:58:00.000000       1 flags.go:64] FLAG: --v="2"`, `Error: unknown flag: --address`}
	latest := podRun(dir, "8.log", podsNow.Add(-2*time.Minute), time.Second, lines...)
	prev := podRun(dir, "7.log", podsNow.Add(-7*time.Minute), time.Second, lines...)
	ev := podsEvidence(podContainer("kube-system", "kube-scheduler-node-1", "kube-scheduler", true, 8, []string{"7.log", "8.log"}, latest, prev))
	const manifest = "/etc/kubernetes/manifests/kube-scheduler.yaml"
	flagLine := &nodediagv1.SourceLine{Path: manifest, Line: 14, Text: "    - --address=0.0.0.0"}
	ev.Probes = append(ev.Probes, &nodediagv1.ProbeEvidence{Name: "kubeadm", Status: "ok", Data: &nodediagv1.ProbeEvidence_Kubeadm{Kubeadm: &nodediagv1.Kubeadm{
		StaticPods: []*nodediagv1.StaticPod{{Path: manifest, Name: "kube-scheduler", FlagLines: []*nodediagv1.SourceLine{
			{Path: manifest, Line: 13, Text: "    - --authorization-kubeconfig=/etc/kubernetes/scheduler.conf"},
			flagLine,
			{Path: manifest, Line: 15, Text: "    - --address-family=ipv4"},
		}}},
	}}})
	f := findingByID(analyze(t, ev, rules.Context{}), "ControllerCrashLoop")
	if f == nil {
		t.Fatal("no ControllerCrashLoop")
	}
	var got []string
	for _, q := range f.Evidence {
		if q.Source == manifest {
			got = append(got, fmt.Sprintf("%d %s", q.Line, q.Excerpt))
		}
	}
	if want := []string{"14     - --address=0.0.0.0"}; !cmp.Equal(got, want) {
		t.Errorf("manifest quotes %q, want %q", got, want)
	}
}
