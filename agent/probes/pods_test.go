package probes

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
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

func TestParseCRILine(t *testing.T) {
	at := time.Date(2024, 5, 1, 0, 1, 40, 123456789, time.UTC)
	tests := []struct {
		name    string
		in      string
		want    criLine
		wantErr bool
	}{
		{name: "full stderr line", in: "2024-05-01T00:01:40.123456789Z stderr F Error: unable to load server certificate", want: criLine{time: at, stream: "stderr", msg: "Error: unable to load server certificate"}},
		{name: "partial stdout line", in: "2024-05-01T00:01:40.123456789Z stdout P the first 16 KiB of a long line", want: criLine{time: at, stream: "stdout", partial: true, msg: "the first 16 KiB of a long line"}},
		{name: "the message keeps its own spaces", in: "2024-05-01T00:01:40.123456789Z stdout F  two  spaces ", want: criLine{time: at, stream: "stdout", msg: " two  spaces "}},
		{name: "empty message", in: "2024-05-01T00:01:40.123456789Z stdout F ", want: criLine{time: at, stream: "stdout"}},
		{name: "nothing after the tag", in: "2024-05-01T00:01:40.123456789Z stdout F", want: criLine{time: at, stream: "stdout"}},
		{name: "more tags after the first", in: "2024-05-01T00:01:40.123456789Z stdout P:x msg", want: criLine{time: at, stream: "stdout", partial: true, msg: "msg"}},
		{name: "a zone offset (containerd writes its local time) becomes UTC", in: "2024-05-01T03:01:40.123456789+03:00 stdout F msg", want: criLine{time: at, stream: "stdout", msg: "msg"}},
		{name: "no fraction", in: "2024-05-01T00:01:40Z stdout F msg", want: criLine{time: at.Truncate(time.Second), stream: "stdout", msg: "msg"}},
		{name: "non-UTF-8 bytes are kept as they are", in: "2024-05-01T00:01:40.123456789Z stdout F caf\xe9", want: criLine{time: at, stream: "stdout", msg: "caf\xe9"}},
		{name: "empty line", in: "", wantErr: true},
		{name: "a klog line without the CRI prefix", in: "E0501 00:01:40.123456       1 run.go:72] \"command failed\"", wantErr: true},
		{name: "unknown stream", in: "2024-05-01T00:01:40.123456789Z stdin F msg", wantErr: true},
		{name: "unknown tag", in: "2024-05-01T00:01:40.123456789Z stdout X msg", wantErr: true},
		{name: "no tag", in: "2024-05-01T00:01:40.123456789Z stdout", wantErr: true},
		{name: "time only", in: "2024-05-01T00:01:40.123456789Z", wantErr: true},
		{name: "a date that does not exist", in: "2024-02-30T00:01:40Z stdout F msg", wantErr: true},
		{name: "docker json-file line", in: `{"log":"msg\n","stream":"stdout","time":"2024-05-01T00:01:40.123456789Z"}`, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseCRILine([]byte(tt.in))
			if tt.wantErr {
				if !errors.Is(err, errCRILine) {
					t.Fatalf("error = %v, want errCRILine", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(criLine{})); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func FuzzParseCRILine(f *testing.F) {
	for _, s := range []string{
		"2024-05-01T00:01:40.123456789Z stderr F Error: x",
		"2024-05-01T00:01:40.123456789Z stdout P part",
		"2024-05-01T00:01:40.123456789Z stdout F",
		"2024-05-01T03:01:40.123456789+03:00 stdout P:x msg",
		"E0501 00:01:40.123456       1 run.go:72] x",
		"",
		"2024-05-01T00:01:40Z stdout F caf\xe9",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		l, err := parseCRILine(b)
		if err != nil {
			if !errors.Is(err, errCRILine) {
				t.Fatalf("error %v does not wrap errCRILine", err)
			}
			if !utf8.ValidString(err.Error()) {
				t.Fatalf("error is not valid UTF-8: %q", err.Error())
			}
			return
		}
		if l.stream != "stdout" && l.stream != "stderr" {
			t.Fatalf("stream %q", l.stream)
		}
		if l.time.Location() != time.UTC {
			t.Fatalf("time %v is not UTC", l.time)
		}
	})
}

// cri renders CRI log lines, one a second from at, on stderr.
func cri(at time.Time, msgs ...string) string {
	var b strings.Builder
	for i, m := range msgs {
		fmt.Fprintf(&b, "%s stderr F %s\n", at.Add(time.Duration(i)*time.Second).UTC().Format(time.RFC3339Nano), m)
	}
	return b.String()
}

func TestExcerptCRI(t *testing.T) {
	t0 := time.Date(2024, 5, 1, 11, 0, 0, 0, time.UTC)
	ts := func(s int) string { return t0.Add(time.Duration(s) * time.Second).Format(time.RFC3339Nano) }
	type line struct {
		N        int32
		FromEnd  int32
		Text     string
		At       int // seconds after t0; -1 for none
		Inferred bool
	}
	tests := []struct {
		name      string
		in        string
		want      []line
		wantTotal int64
		first     int
		last      int
	}{
		{
			name: "partial lines are joined up to the full one, per stream, at the first line's number and time",
			in: ts(0) + " stdout P part one, \n" +
				ts(1) + " stderr F E0501 11:00:01.000000       1 x.go:1] an error in between\n" +
				ts(2) + " stdout P part two, \n" +
				ts(3) + " stdout F the end\n",
			want: []line{
				{N: 1, Text: "part one, part two, the end", At: 0},
				{N: 2, Text: "E0501 11:00:01.000000       1 x.go:1] an error in between", At: 1},
			},
			wantTotal: 4, first: 0, last: 3,
		},
		{
			name: "a partial line still open at the end of the file is kept",
			in:   ts(0) + " stdout F first\n" + ts(1) + " stdout P cut short by a crash",
			want: []line{
				{N: 1, Text: "first", At: 0},
				{N: 2, Text: "cut short by a crash", At: 1},
			},
			wantTotal: 2, first: 0, last: 1,
		},
		{
			name: "a line that is not CRI is kept verbatim with the time of the one before",
			in:   ts(0) + " stderr F before\n" + "garbage: failed\n" + ts(2) + " stderr F after\n",
			want: []line{
				{N: 1, Text: "before", At: 0},
				{N: 2, Text: "garbage: failed", At: 0, Inferred: true},
				{N: 3, Text: "after", At: 2},
			},
			wantTotal: 3, first: 0, last: 2,
		},
		{
			name: "a malformed first line has no time",
			in:   "\x00\x01garbage\n" + ts(5) + " stderr F ok\n",
			want: []line{
				{N: 1, Text: "\x00\x01garbage", At: -1},
				{N: 2, Text: "ok", At: 5},
			},
			wantTotal: 2, first: 5, last: 5,
		},
		{
			name: "invalid UTF-8 in a message becomes U+FFFD",
			in:   ts(0) + " stderr F caf\xe9 failed\n",
			want: []line{
				{N: 1, Text: "caf\uFFFD failed", At: 0},
			},
			wantTotal: 1, first: 0, last: 0,
		},
		{
			name:  "empty file",
			in:    "",
			first: -1, last: -1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ex := excerptCRI("/var/log/pods/ns_p_u/c/0.log", "c", []byte(tt.in), nil, int64(len(tt.in)), 0)
			var got []line
			for _, l := range ex.Lines {
				g := line{N: l.N, FromEnd: l.NFromEnd, Text: l.Text, At: -1, Inferred: l.TimeInferred}
				if l.Time != nil {
					g.At = int(l.Time.AsTime().Sub(t0) / time.Second)
				}
				if l.Program != "c" {
					t.Errorf("line %d: program %q, want the container", l.N, l.Program)
				}
				got = append(got, g)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("lines (-want +got):\n%s", diff)
			}
			if ex.TotalLines != tt.wantTotal || ex.Kind != "pod" || ex.Source != "/var/log/pods/ns_p_u/c/0.log" {
				t.Errorf("total %d kind %q source %q", ex.TotalLines, ex.Kind, ex.Source)
			}
			if tt.first < 0 {
				if ex.FirstTime != nil || ex.LastTime != nil {
					t.Errorf("times %v %v, want none", ex.FirstTime, ex.LastTime)
				}
				return
			}
			if ex.FirstTime.AsTime() != t0.Add(time.Duration(tt.first)*time.Second) || ex.LastTime.AsTime() != t0.Add(time.Duration(tt.last)*time.Second) {
				t.Errorf("first %v last %v", ex.FirstTime.AsTime(), ex.LastTime.AsTime())
			}
		})
	}
}

// A long log keeps its first and last notable messages and its last
// podsContext messages, and counts what it dropped.
func TestExcerptCRIBounds(t *testing.T) {
	t0 := time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC)
	var msgs []string
	for i := 0; i < 1000; i++ {
		if i%2 == 0 {
			msgs = append(msgs, fmt.Sprintf("E0501 00:00:00.000000       1 x.go:1] error %d", i))
		} else {
			msgs = append(msgs, fmt.Sprintf("I0501 00:00:00.000000       1 x.go:1] info %d", i))
		}
	}
	in := cri(t0, msgs...)
	ex := excerptCRI("/f", "c", []byte(in), nil, int64(len(in)), 0)
	notable, plain := 0, 0
	for _, l := range ex.Lines {
		if strings.Contains(l.Text, "error") {
			notable++
		} else {
			plain++
		}
	}
	if notable != podsKeepFirst+podsKeepLast || plain != podsContext/2 {
		t.Errorf("kept %d notable and %d other lines, want %d and %d", notable, plain, podsKeepFirst+podsKeepLast, podsContext/2)
	}
	if want := int64(500 - podsKeepFirst - podsKeepLast); ex.DroppedLines != want {
		t.Errorf("dropped %d, want %d", ex.DroppedLines, want)
	}
	if ex.Lines[0].N != 1 || ex.Lines[len(ex.Lines)-1].N != 1000 {
		t.Errorf("first kept line %d, last %d; want 1 and 1000", ex.Lines[0].N, ex.Lines[len(ex.Lines)-1].N)
	}
	for i := 1; i < len(ex.Lines); i++ {
		if ex.Lines[i].N <= ex.Lines[i-1].N {
			t.Fatalf("lines out of order at %d: %d after %d", i, ex.Lines[i].N, ex.Lines[i-1].N)
		}
	}
}

// A file larger than the read limit: the head's lines are numbered, the
// tail's counted from the end, and the line cut where the tail starts is
// dropped.
func TestExcerptCRITruncated(t *testing.T) {
	t0 := time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC)
	head := cri(t0, "start", "error: first")
	tail := "ial line\n" + cri(t0.Add(time.Hour), "error: last", "end")
	ex := excerptCRI("/f", "c", []byte(head), []byte(tail), 1<<30, 1<<29)
	type pos struct {
		N, FromEnd int32
		Text       string
	}
	var got []pos
	for _, l := range ex.Lines {
		got = append(got, pos{l.N, l.NFromEnd, l.Text})
	}
	want := []pos{{1, 0, "start"}, {2, 0, "error: first"}, {0, 2, "error: last"}, {0, 1, "end"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if !ex.Truncated || ex.SkippedBytes != 1<<29 || ex.LastTime.AsTime() != t0.Add(time.Hour+time.Second) {
		t.Errorf("truncated %v skipped %d last %v", ex.Truncated, ex.SkippedBytes, ex.LastTime.AsTime())
	}
}

func FuzzExcerptCRI(f *testing.F) {
	t0 := time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC)
	f.Add([]byte(cri(t0, "a", "error: b")), []byte(""), int64(0))
	f.Add([]byte("2024-05-01T00:00:00Z stdout P a\n2024-05-01T00:00:01Z stdout F b\n"), []byte("x\n2024-05-01T00:00:02Z stderr P c"), int64(10))
	f.Add([]byte("\xff\xfe garbage\n"), []byte("\n\n"), int64(3))
	f.Fuzz(func(t *testing.T, head, tail []byte, skipped int64) {
		if skipped < 0 {
			skipped = -skipped
		}
		ex := excerptCRI("/f", "c", head, tail, int64(len(head)+len(tail))+skipped, skipped)
		for _, l := range ex.Lines {
			if !utf8.ValidString(l.Text) {
				t.Fatalf("invalid UTF-8 in %q", l.Text)
			}
		}
	})
}

func TestParsePodDir(t *testing.T) {
	tests := []struct {
		in           string
		ns, pod, uid string
		ok           bool
	}{
		{"kube-system_etcd-node-1_0123456789abcdef0123456789abcdef", "kube-system", "etcd-node-1", "0123456789abcdef0123456789abcdef", true},
		{"kube-system_kube-proxy-x7k2p_9c1d2e3f-aaaa-bbbb-cccc-0123456789ab", "kube-system", "kube-proxy-x7k2p", "9c1d2e3f-aaaa-bbbb-cccc-0123456789ab", true},
		{"kube-system_etcd-node-1", "", "", "", false},
		{"a_b_c_d", "", "", "", false},
		{"_b_c", "", "", "", false},
		{"lost+found", "", "", "", false},
		{"kube-system_etcd-\xff_0123456789abcdef0123456789abcdef", "", "", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			ns, pod, uid, ok := parsePodDir(tt.in)
			if ns != tt.ns || pod != tt.pod || uid != tt.uid || ok != tt.ok {
				t.Errorf("got %q %q %q %v", ns, pod, uid, ok)
			}
		})
	}
}

func TestPodsFiles(t *testing.T) {
	tests := []struct {
		name      string
		files     []string
		wantOrder []string
		latest    string
		prev      string
	}{
		{
			name:      "a crash loop after garbage collection: the last two runs",
			files:     []string{"7.log", "6.log"},
			wantOrder: []string{"6.log", "7.log"},
			latest:    "7.log", prev: "6.log",
		},
		{
			name:      "numbers order numerically, rotations before the live file, gzipped ones unread",
			files:     []string{"10.log", "9.log", "10.log.20240501-110000", "10.log.20240501-100000.gz", "9.log.20240501-090000.gz"},
			wantOrder: []string{"9.log.20240501-090000.gz", "9.log", "10.log.20240501-100000.gz", "10.log.20240501-110000", "10.log"},
			latest:    "10.log", prev: "9.log",
		},
		{
			name:      "the live file gone: the newest uncompressed rotation stands for the run",
			files:     []string{"3.log.20240501-110000", "3.log.20240501-100000.gz", "2.log.20240501-090000.tmp"},
			wantOrder: []string{"2.log.20240501-090000.tmp", "3.log.20240501-100000.gz", "3.log.20240501-110000"},
			latest:    "3.log.20240501-110000",
		},
		{
			name:      "other files are not the kubelet's",
			files:     []string{"0.log", "x.log", "0.logs", "-1.log", "1.2.log", "99999999999.log", "0.log.\xff"},
			wantOrder: []string{"0.log"},
			latest:    "0.log",
		},
		{name: "empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			for _, f := range tt.files {
				if err := os.WriteFile(filepath.Join(root, f), nil, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			ents, err := os.ReadDir(root)
			if err != nil {
				t.Fatal(err)
			}
			files := podsFiles(ents)
			var order []string
			for _, f := range files {
				order = append(order, f.name)
			}
			if diff := cmp.Diff(tt.wantOrder, order); diff != "" {
				t.Errorf("order (-want +got):\n%s", diff)
			}
			latest, prev := podsLatest(files)
			name := func(f *podsFile) string {
				if f == nil {
					return ""
				}
				return f.name
			}
			if name(latest) != tt.latest || name(prev) != tt.prev {
				t.Errorf("latest %q prev %q, want %q %q", name(latest), name(prev), tt.latest, tt.prev)
			}
		})
	}
}

func TestPodsStatic(t *testing.T) {
	const md5 = "0123456789abcdef0123456789abcdef"
	const uuid = "9c1d2e3f-aaaa-bbbb-cccc-0123456789ab"
	all := map[string]bool{"etcd": true, "kube-apiserver": true}
	tests := []struct {
		name               string
		ns, pod, uid, node string
		manifests          map[string]bool
		want               bool
	}{
		{"named after the node", "kube-system", "etcd-node-1", md5, "node-1", nil, true},
		{"kubelet node name differs from the host name, manifest and hash UID", "kube-system", "kube-apiserver-node-1.example.com", md5, "node-1", all, true},
		{"a DaemonSet pod whose name starts like etcd", "kube-system", "etcd-backup-x7k2p", uuid, "node-1", all, false},
		{"no manifest and another node's name", "kube-system", "etcd-node-2", md5, "node-1", nil, false},
		{"another namespace", "default", "etcd-node-1", md5, "node-1", all, false},
		{"not a control plane component", "kube-system", "kube-proxy-node-1", md5, "node-1", all, false},
		{"the component's name alone", "kube-system", "etcd", md5, "", all, false},
		{"unknown node name, manifest, hash UID", "kube-system", "kube-scheduler-cp-0", md5, "", map[string]bool{"kube-scheduler": true}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := podsStatic(tt.ns, tt.pod, tt.uid, tt.node, tt.manifests); got != tt.want {
				t.Errorf("podsStatic = %v, want %v", got, tt.want)
			}
		})
	}
}

// Static pod UIDs of the scenario (the kubelet's MD5 of the manifest) and
// an API pod's UUID.
const (
	etcdUID      = "6c2684cc7a64810709bc493a7a24a9c2"
	apiserverUID = "195c6eb0710264975dcc1fdb4bd52a20"
	proxyUID     = "9c1d2e3f-4a5b-4c6d-8e7f-0123456789ab"
)

// controlPlaneCrashTree is a control plane node "node-1" whose etcd crashes
// at start (no space left on device) after 7 restarts, whose kube-apiserver
// crash-loops on a missing certificate, and whose kube-proxy is healthy.
func controlPlaneCrashTree() map[string]string {
	etcdDir := "var/log/pods/kube-system_etcd-node-1_" + etcdUID + "/etcd/"
	apiDir := "var/log/pods/kube-system_kube-apiserver-node-1_" + apiserverUID + "/kube-apiserver/"
	proxyDir := "var/log/pods/kube-system_kube-proxy-x7k2p_" + proxyUID + "/kube-proxy/"
	etcdRun := func(at time.Time) string {
		return cri(at,
			`{"level":"info","ts":"2024-05-01T11:58:01.000Z","caller":"etcdmain/etcd.go:73","msg":"Running: ","args":["etcd","--data-dir=/var/lib/etcd"]}`,
			`{"level":"info","ts":"2024-05-01T11:58:02.000Z","caller":"embed/etcd.go:124","msg":"configuring peer listeners","listen-peer-urls":["https://10.0.0.4:2380"]}`,
			`{"level":"panic","ts":"2024-05-01T11:58:03.000Z","caller":"backend/backend.go:189","msg":"failed to open database","path":"/var/lib/etcd/member/snap/db","error":"open /var/lib/etcd/member/snap/db: no space left on device"}`,
			`panic: failed to open database`,
			``,
			`goroutine 1 [running]:`,
			`go.uber.org/zap/zapcore.CheckWriteAction.OnWrite(0x0?, 0x0?, {0x0?, 0x0?, 0xc0000a4000?})`,
		)
	}
	apiRun := func(at time.Time) string {
		return cri(at,
			`I0501 11:59:30.000000       1 options.go:221] external host was not specified, using 10.0.0.4`,
			`I0501 11:59:31.000000       1 server.go:148] Version: v1.30.0`,
			`Error: unable to load server certificate: open /etc/kubernetes/pki/apiserver.crt: no such file or directory`,
		)
	}
	long := strings.Repeat("x", 100)
	proxy := cri(hosttest.Now.Add(-3*time.Hour),
		`I0501 09:00:00.000000       1 server_linux.go:69] "Using iptables proxy"`,
		`I0501 09:00:01.000000       1 config.go:192] "Starting service config controller"`,
	) + hosttest.Now.Add(-2*time.Hour).Format(time.RFC3339Nano) + " stdout P I0501 10:00:00.000000       1 proxier.go:1] " + long + "\n" +
		hosttest.Now.Add(-2*time.Hour).Format(time.RFC3339Nano) + " stdout F  and the rest\n"
	return map[string]string{
		"etc/hostname":                                 "node-1\n",
		"etc/kubernetes/manifests/etcd.yaml":           "apiVersion: v1\nkind: Pod\n",
		"etc/kubernetes/manifests/kube-apiserver.yaml": "apiVersion: v1\nkind: Pod\n",
		etcdDir + "6.log":                              etcdRun(hosttest.Now.Add(-7 * time.Minute)),
		etcdDir + "7.log":                              etcdRun(hosttest.Now.Add(-2 * time.Minute)),
		apiDir + "3.log":                               apiRun(hosttest.Now.Add(-6 * time.Minute)),
		apiDir + "4.log":                               apiRun(hosttest.Now.Add(-30 * time.Second)),
		proxyDir + "0.log":                             proxy,
		proxyDir + "0.log.20240501-080000.gz":          "\x1f\x8b\x08\x00 not to be read: error",
		"var/log/pods/default_web-7d9f6c8b5-2xk4t_0a1b2c3d-0000-4000-8000-000000000001/web/5.log": cri(hosttest.Now, "error: an application's own problem"),
		"var/log/pods/README": "not a pod directory",
	}
}

func TestPodsControlPlaneCrashLoops(t *testing.T) {
	h := hosttest.Tree(t, controlPlaneCrashTree())
	pe, err := pods{}.Run(context.Background(), h)
	if err != nil {
		t.Fatal(err)
	}
	if len(pe.Unreadable) != 0 {
		t.Errorf("unreadable: %v", pe.Unreadable)
	}
	cs := pe.GetPods().GetContainers()
	type summary struct {
		Namespace, Pod, Container, Dir string
		Files                          []string
		Restarts                       uint32
		Static                         bool
		Log, Previous                  string
		LastTime                       time.Time
	}
	var got []summary
	for _, c := range cs {
		got = append(got, summary{c.Namespace, c.Pod, c.Container, c.Dir, c.Files, c.Restarts, c.Static, c.GetLog().GetSource(), c.GetPreviousLog().GetSource(), c.GetLastTime().AsTime()})
	}
	etcdDir := "/var/log/pods/kube-system_etcd-node-1_" + etcdUID + "/etcd"
	apiDir := "/var/log/pods/kube-system_kube-apiserver-node-1_" + apiserverUID + "/kube-apiserver"
	proxyDir := "/var/log/pods/kube-system_kube-proxy-x7k2p_" + proxyUID + "/kube-proxy"
	want := []summary{
		{"kube-system", "etcd-node-1", "etcd", etcdDir, []string{"6.log", "7.log"}, 7, true, etcdDir + "/7.log", etcdDir + "/6.log", hosttest.Now.Add(-2*time.Minute + 6*time.Second)},
		{"kube-system", "kube-apiserver-node-1", "kube-apiserver", apiDir, []string{"3.log", "4.log"}, 4, true, apiDir + "/4.log", apiDir + "/3.log", hosttest.Now.Add(-30*time.Second + 2*time.Second)},
		{"kube-system", "kube-proxy-x7k2p", "kube-proxy", proxyDir, []string{"0.log.20240501-080000.gz", "0.log"}, 0, false, proxyDir + "/0.log", "", hosttest.Now.Add(-2 * time.Hour)},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("containers (-want +got):\n%s", diff)
	}

	// The lines of etcd's latest run: the cause, the panic, and the
	// context of the end; text is the message without the CRI prefix.
	etcd := cs[0].Log
	var texts []string
	for _, l := range etcd.Lines {
		texts = append(texts, fmt.Sprintf("%d %s", l.N, l.Text))
	}
	wantTexts := []string{
		`1 {"level":"info","ts":"2024-05-01T11:58:01.000Z","caller":"etcdmain/etcd.go:73","msg":"Running: ","args":["etcd","--data-dir=/var/lib/etcd"]}`,
		`2 {"level":"info","ts":"2024-05-01T11:58:02.000Z","caller":"embed/etcd.go:124","msg":"configuring peer listeners","listen-peer-urls":["https://10.0.0.4:2380"]}`,
		`3 {"level":"panic","ts":"2024-05-01T11:58:03.000Z","caller":"backend/backend.go:189","msg":"failed to open database","path":"/var/lib/etcd/member/snap/db","error":"open /var/lib/etcd/member/snap/db: no space left on device"}`,
		`4 panic: failed to open database`,
		`5 `,
		`6 goroutine 1 [running]:`,
		`7 go.uber.org/zap/zapcore.CheckWriteAction.OnWrite(0x0?, 0x0?, {0x0?, 0x0?, 0xc0000a4000?})`,
	}
	if diff := cmp.Diff(wantTexts, texts); diff != "" {
		t.Errorf("etcd lines (-want +got):\n%s", diff)
	}
	wantLine := &nodediagv1.LogLine{N: 3, Text: wantTexts[2][2:], Time: timestamppb.New(hosttest.Now.Add(-2*time.Minute + 2*time.Second)), Program: "etcd"}
	if diff := cmp.Diff(wantLine, etcd.Lines[2], protocmp.Transform()); diff != "" {
		t.Errorf("etcd cause line (-want +got):\n%s", diff)
	}
	if etcd.Kind != "pod" || etcd.TotalLines != 7 || etcd.FirstTime.AsTime() != hosttest.Now.Add(-2*time.Minute) {
		t.Errorf("etcd excerpt: kind %q total %d first %v", etcd.Kind, etcd.TotalLines, etcd.FirstTime.AsTime())
	}

	// kube-proxy's partial line is joined, the gzipped rotation listed and
	// not read.
	proxy := cs[2].Log
	last := proxy.Lines[len(proxy.Lines)-1]
	if last.N != 3 || !strings.HasSuffix(last.Text, strings.Repeat("x", 100)+" and the rest") || proxy.TotalLines != 4 {
		t.Errorf("kube-proxy: last line %d %q, total %d", last.N, last.Text, proxy.TotalLines)
	}
	for _, c := range cs {
		if c.Namespace == "default" {
			t.Errorf("a workload's pod was read: %s", c.Dir)
		}
	}
}

func TestPodsNotApplicable(t *testing.T) {
	h := hosttest.Tree(t, map[string]string{"var/log/syslog": "x\n"})
	_, err := pods{}.Run(context.Background(), h)
	if !errors.Is(err, probe.ErrNotApplicable) {
		t.Fatalf("error = %v, want ErrNotApplicable", err)
	}
}

// A log that cannot be read (here a FIFO, which the agent never opens) is
// recorded; the container is still listed, and the others read.
func TestPodsUnreadableLog(t *testing.T) {
	tree := controlPlaneCrashTree()
	delete(tree, "var/log/pods/kube-system_kube-apiserver-node-1_"+apiserverUID+"/kube-apiserver/4.log")
	h := hosttest.Tree(t, tree)
	fifo := filepath.Join(h.Root, "var/log/pods/kube-system_kube-apiserver-node-1_"+apiserverUID+"/kube-apiserver/4.log")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	pe, err := pods{}.Run(context.Background(), h)
	if err != nil {
		t.Fatal(err)
	}
	src := "/var/log/pods/kube-system_kube-apiserver-node-1_" + apiserverUID + "/kube-apiserver/4.log"
	if len(pe.Unreadable) != 1 || pe.Unreadable[0].Source != src {
		t.Fatalf("unreadable = %v, want %s", pe.Unreadable, src)
	}
	var api *nodediagv1.PodContainer
	for _, c := range pe.GetPods().GetContainers() {
		if c.Container == "kube-apiserver" {
			api = c
		}
	}
	if api == nil || api.Restarts != 4 || api.Log != nil || api.PreviousLog == nil {
		t.Errorf("kube-apiserver: %v", api)
	}
	if n := len(pe.GetPods().GetContainers()); n != 3 {
		t.Errorf("%d containers, want 3", n)
	}
}

// Beyond podsMaxRead containers, the rest are listed without their logs,
// and the cap is a recorded gap; the static pods are read first.
func TestPodsReadCap(t *testing.T) {
	tree := controlPlaneCrashTree()
	for i := 0; i < podsMaxRead; i++ {
		dir := fmt.Sprintf("var/log/pods/kube-system_csi-node-%02d_0a1b2c3d-0000-4000-8000-%012d/driver/", i, i)
		tree[dir+"0.log"] = cri(hosttest.Now, "ok")
	}
	h := hosttest.Tree(t, tree)
	pe, err := pods{}.Run(context.Background(), h)
	if err != nil {
		t.Fatal(err)
	}
	cs := pe.GetPods().GetContainers()
	read := 0
	for _, c := range cs {
		if c.Log != nil {
			read++
		}
		if c.Static && c.Log == nil {
			t.Errorf("static %s not read", c.Pod)
		}
	}
	if len(cs) != podsMaxRead+3 || read != podsMaxRead {
		t.Errorf("%d containers, %d read; want %d, %d", len(cs), read, podsMaxRead+3, podsMaxRead)
	}
	if len(pe.Unreadable) != 1 || !strings.Contains(pe.Unreadable[0].Error, "the logs of 3 containers were not read") {
		t.Errorf("unreadable = %v", pe.Unreadable)
	}
}

// The scenario, judged: etcd's crash loop first (its reason quoted from its
// log), kube-apiserver's after it, and nothing about the healthy kube-proxy.
func TestPodsScenarioFindings(t *testing.T) {
	h := hosttest.Tree(t, controlPlaneCrashTree())
	ev := probe.RunAll(context.Background(), h, []probe.Probe{pods{}})
	e, err := rules.NewEngine()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range e.Analyze(ev, rules.Context{}).Findings {
		got = append(got, f.Id+" "+f.Confidence+" "+f.Title)
		if f.Id == "StaticPodCrashLoop" && strings.HasPrefix(f.Title, "etcd ") {
			cause := f.Evidence[len(f.Evidence)-1]
			if cause.Line != 3 || !strings.Contains(cause.Excerpt, "no space left on device") || !strings.HasSuffix(cause.Source, "/etcd/7.log") {
				t.Errorf("etcd's reason: %v", cause)
			}
		}
	}
	want := []string{
		"StaticPodCrashLoop high etcd (etcd-node-1) is crash-looping: 7 restarts, and this node's API server is down with it",
		"StaticPodCrashLoop low kube-apiserver (kube-apiserver-node-1) is crash-looping: 4 restarts, and this node's API server is down with it",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("findings (-want +got):\n%s", diff)
	}
}
