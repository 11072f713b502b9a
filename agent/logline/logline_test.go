package logline

import (
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// ref is the reference time of the tests: when the logs were last written.
var ref = time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)

func utc(s string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		panic(err)
	}
	return t.UTC()
}

func TestParse(t *testing.T) {
	tests := []struct {
		name string
		text string
		ref  time.Time
		want Line
	}{
		{
			name: "klog kubelet fatal wrapper",
			text: `E0823 13:53:14.926448    8691 run.go:72] "command failed" err="failed to parse kubelet flag: unknown flag: --improve-speed"`,
			ref:  time.Date(2024, 9, 1, 0, 0, 0, 0, time.UTC),
			want: Line{Time: utc("2024-08-23T13:53:14.926448Z"), HasTime: true, Format: FormatKlog, Level: LevelError,
				Message: `"command failed" err="failed to parse kubelet flag: unknown flag: --improve-speed"`},
		},
		{
			name: "klog more than a day after ref is last year",
			text: `E0908 20:18:11.950953  108352 run.go:74] "command failed" err="failed to parse kubelet flag: unknown flag: --network-plugin"`,
			want: Line{Time: utc("2023-09-08T20:18:11.950953Z"), HasTime: true, Format: FormatKlog, Level: LevelError,
				Message: `"command failed" err="failed to parse kubelet flag: unknown flag: --network-plugin"`},
		},
		{
			name: "klog within a day after ref keeps ref's year",
			text: `I0502 08:00:00.000001       1 server.go:1] "Kubelet version" kubeletVersion="v1.30.0"`,
			want: Line{Time: utc("2024-05-02T08:00:00.000001Z"), HasTime: true, Format: FormatKlog, Level: LevelInfo,
				Message: `"Kubelet version" kubeletVersion="v1.30.0"`},
		},
		{
			name: "kubeadm klog warning with --v",
			text: `W0719 00:31:45.855362  618460 checks.go:1065] [preflight] WARNING: Couldn't create the interface used for talking to the container runtime: failed to create new CRI runtime service`,
			ref:  time.Date(2024, 7, 19, 1, 0, 0, 0, time.UTC),
			want: Line{Time: utc("2024-07-19T00:31:45.855362Z"), HasTime: true, Format: FormatKlog, Level: LevelWarning,
				Message: `[preflight] WARNING: Couldn't create the interface used for talking to the container runtime: failed to create new CRI runtime service`},
		},
		{
			name: "old kubelet F level",
			text: `F0526 05:33:01.977085  886002 server.go:274] failed to run Kubelet: running with swap on is not supported, please disable swap! or set --fail-swap-on flag to false. /proc/swaps contained: [Filename`,
			want: Line{Time: utc("2024-05-26T05:33:01.977085Z").AddDate(-1, 0, 0), HasTime: true, Format: FormatKlog, Level: LevelFatal,
				Message: `failed to run Kubelet: running with swap on is not supported, please disable swap! or set --fail-swap-on flag to false. /proc/swaps contained: [Filename`},
		},
		{
			name: "logrus containerd",
			text: `time="2023-05-13T03:52:00.921119344+08:00" level=error msg="PullImage \"registry.k8s.io/pause:3.9\" failed" error="failed to pull and unpack image"`,
			want: Line{Time: utc("2023-05-12T19:52:00.921119344Z"), HasTime: true, Format: FormatLogrus, Level: LevelError,
				Message: `level=error msg="PullImage \"registry.k8s.io/pause:3.9\" failed" error="failed to pull and unpack image"`},
		},
		{
			name: "logrus hosts.toml decode",
			text: `time="2024-04-29T09:40:50.644139847Z" level=error msg="failed to decode hosts.toml" error="invalid ` + "`host`" + ` tree"`,
			want: Line{Time: utc("2024-04-29T09:40:50.644139847Z"), HasTime: true, Format: FormatLogrus, Level: LevelError,
				Message: `level=error msg="failed to decode hosts.toml" error="invalid ` + "`host`" + ` tree"`},
		},
		{
			name: "rsyslog high precision wrapping klog",
			text: `2024-05-01T00:01:40.123456+00:00 node-1 kubelet[1234]: E0501 00:01:40.123400    1234 run.go:72] "command failed" err="failed to run Kubelet"`,
			want: Line{Time: utc("2024-05-01T00:01:40.123456Z"), HasTime: true, Format: FormatRFC3339, Program: "kubelet", PID: "1234", Level: LevelError,
				Message: `"command failed" err="failed to run Kubelet"`},
		},
		{
			name: "journalctl short-iso zone without colon",
			text: `2024-05-01T02:01:40+0200 node-1 containerd[6666]: containerd: failed to load TOML: /etc/containerd/config.toml: (294, 3): duplicated tables`,
			want: Line{Time: utc("2024-05-01T00:01:40Z"), HasTime: true, Format: FormatRFC3339, Program: "containerd", PID: "6666",
				Message: `containerd: failed to load TOML: /etc/containerd/config.toml: (294, 3): duplicated tables`},
		},
		{
			name: "rfc3339 without zone is UTC",
			text: `2024-05-01T00:01:40 plain message`,
			want: Line{Time: utc("2024-05-01T00:01:40Z"), HasTime: true, Format: FormatRFC3339, Message: `plain message`},
		},
		{
			name: "traditional syslog space padded day",
			text: `Jan 18 17:33:58 aura kubelet[1457370]: E0118 17:33:58.888700 1457370 bootstrap.go:265] part of the existing bootstrap client certificate is expired: 2020-12-06 18:55:55 +0000 UTC`,
			ref:  time.Date(2021, 1, 19, 0, 0, 0, 0, time.UTC),
			want: Line{Time: utc("2021-01-18T17:33:58Z"), HasTime: true, Format: FormatSyslog, Program: "kubelet", PID: "1457370", Level: LevelError,
				Message: `part of the existing bootstrap client certificate is expired: 2020-12-06 18:55:55 +0000 UTC`},
		},
		{
			name: "journalctl short with zero padded day, systemd",
			text: `Jan 18 17:33:58 aura systemd[1]: kubelet.service: Main process exited, code=exited, status=255/EXCEPTION`,
			ref:  time.Date(2021, 1, 19, 0, 0, 0, 0, time.UTC),
			want: Line{Time: utc("2021-01-18T17:33:58Z"), HasTime: true, Format: FormatSyslog, Program: "systemd", PID: "1",
				Message: `kubelet.service: Main process exited, code=exited, status=255/EXCEPTION`},
		},
		{
			name: "syslog day 1 with two spaces, program without pid",
			text: `May  1 00:01:40 node-1 kernel: [  123.456789] Out of memory: Killed process 4242 (kube-apiserver)`,
			want: Line{Time: utc("2024-05-01T00:01:40Z"), HasTime: true, Format: FormatSyslog, Program: "kernel",
				Message: `Out of memory: Killed process 4242 (kube-apiserver)`},
		},
		{
			name: "syslog December read in January is last year",
			text: `Dec 31 23:59:59 node-1 containerd[10]: time="2023-12-31T23:59:59.5Z" level=warning msg="x"`,
			ref:  time.Date(2024, 1, 1, 0, 10, 0, 0, time.UTC),
			want: Line{Time: utc("2023-12-31T23:59:59Z"), HasTime: true, Format: FormatSyslog, Program: "containerd", PID: "10", Level: LevelWarning,
				Message: `level=warning msg="x"`},
		},
		{
			name: "journalctl short-precise",
			text: `May 01 00:01:40.250000 node-1 cloud-init[1047]: Cloud-init v. 24.1.3 running 'modules:final' at Wed, 01 May 2024 00:01:38 +0000. Up 35.00 seconds.`,
			want: Line{Time: utc("2024-05-01T00:01:40.25Z"), HasTime: true, Format: FormatSyslog, Program: "cloud-init", PID: "1047",
				Message: `Cloud-init v. 24.1.3 running 'modules:final' at Wed, 01 May 2024 00:01:38 +0000. Up 35.00 seconds.`},
		},
		{
			name: "cloud-init.log warning",
			text: `2024-10-29 14:39:35,624 - cc_scripts_user.py[WARNING]: Failed to run module scripts_user (scripts in /var/lib/cloud/instance/scripts)`,
			want: Line{Time: utc("2024-10-29T14:39:35.624Z"), HasTime: true, Format: FormatCloudInit, Level: LevelWarning,
				Message: `Failed to run module scripts_user (scripts in /var/lib/cloud/instance/scripts)`},
		},
		{
			name: "cloud-init's syslog handler, with its log file's prefix",
			text: `[CLOUDINIT]2026-01-28 10:40:10,299 - user_data.py[WARNING]: [Errno 2] No such file or directory: '/etc/secret-userdata.txt' for url: file:///etc/secret-userdata.txt`,
			want: Line{Time: utc("2026-01-28T10:40:10.299Z"), HasTime: true, Format: FormatCloudInit, Level: LevelWarning,
				Message: `[Errno 2] No such file or directory: '/etc/secret-userdata.txt' for url: file:///etc/secret-userdata.txt`},
		},
		{
			name: "cloud-init's syslog handler",
			text: `[CLOUDINIT] util.py[WARNING]: Failed running /var/lib/cloud/instance/scripts/runcmd [1]`,
			want: Line{Level: LevelWarning, Message: `Failed running /var/lib/cloud/instance/scripts/runcmd [1]`},
		},
		{
			name: "cloud-init.log debug",
			text: `2024-05-01 00:01:40,123 - subp.py[DEBUG]: Running command ['/var/lib/cloud/instance/scripts/runcmd'] with allowed return codes [0] (shell=False, capture=False)`,
			want: Line{Time: utc("2024-05-01T00:01:40.123Z"), HasTime: true, Format: FormatCloudInit, Level: LevelDebug,
				Message: `Running command ['/var/lib/cloud/instance/scripts/runcmd'] with allowed return codes [0] (shell=False, capture=False)`},
		},
		{
			name: "cloud-init stage header",
			text: `Cloud-init v. 23.4-7.el8_10.alma.1 running 'modules:final' at Wed, 12 Jun 2024 10:15:53 +0000. Up 11.84 seconds.`,
			want: Line{Time: utc("2024-06-12T10:15:53Z"), HasTime: true, Format: FormatCloudInitStage,
				Message: `Cloud-init v. 23.4-7.el8_10.alma.1 running 'modules:final' at Wed, 12 Jun 2024 10:15:53 +0000. Up 11.84 seconds.`},
		},
		{
			name: "cloud-init finished footer",
			text: `Cloud-init v. 24.2-0ubuntu1~20.04.1 finished at Mon, 30 Sep 2024 04:34:00 +0000. Datasource DataSourceAzure [seed=/var/lib/waagent].  Up 31.94 seconds`,
			want: Line{Time: utc("2024-09-30T04:34:00Z"), HasTime: true, Format: FormatCloudInitStage,
				Message: `Cloud-init v. 24.2-0ubuntu1~20.04.1 finished at Mon, 30 Sep 2024 04:34:00 +0000. Datasource DataSourceAzure [seed=/var/lib/waagent].  Up 31.94 seconds`},
		},
		{
			name: "wget error",
			text: `2024-03-18 10:00:00 ERROR 404: Not Found.`,
			want: Line{Time: utc("2024-03-18T10:00:00Z"), HasTime: true, Format: FormatDateTime, Message: `ERROR 404: Not Found.`},
		},
		{
			name: "CAPI bootstrap script failure",
			text: `!!! [2024-05-01T00:05:00+00:00] kubeadm reported failed action(s) for 'kubeadm join --config /run/kubeadm/kubeadm-join-config.yaml'`,
			want: Line{Time: utc("2024-05-01T00:05:00Z"), HasTime: true, Format: FormatCAPIScript, Level: LevelError,
				Message: `kubeadm reported failed action(s) for 'kubeadm join --config /run/kubeadm/kubeadm-join-config.yaml'`},
		},
		{
			name: "kernel console prefix with program",
			text: `[   27.43] cloud-init[1047]: Cloud-init v. 24.1.3 finished at Wed, 01 May 2024 00:01:42 +0000. Datasource DataSourceAzure.  Up 39.10 seconds`,
			want: Line{Program: "cloud-init", PID: "1047",
				Message: `Cloud-init v. 24.1.3 finished at Wed, 01 May 2024 00:01:42 +0000. Datasource DataSourceAzure.  Up 39.10 seconds`},
		},
		{
			name: "crictl logrus terminal format",
			text: `FATA[0000] validate service connection: validate CRI v1 runtime API for endpoint "unix:///run/containerd/containerd.sock": rpc error: code = Unimplemented desc = unknown service runtime.v1.RuntimeService`,
			want: Line{Level: LevelFatal,
				Message: `FATA[0000] validate service connection: validate CRI v1 runtime API for endpoint "unix:///run/containerd/containerd.sock": rpc error: code = Unimplemented desc = unknown service runtime.v1.RuntimeService`},
		},
		{
			name: "kubeadm plain output",
			text: "\t[ERROR Swap]: running with swap on is not supported. Please disable swap",
			want: Line{Message: "\t[ERROR Swap]: running with swap on is not supported. Please disable swap"},
		},
		{
			name: "curl error",
			text: `curl: (22) The requested URL returned error: 404`,
			want: Line{Message: `curl: (22) The requested URL returned error: 404`},
		},
		{
			name: "empty",
			text: ``,
			want: Line{},
		},
		{
			name: "month-like word is not syslog",
			text: `Mar is a month 10:00:00`,
			want: Line{Message: `Mar is a month 10:00:00`},
		},
		{
			name: "February 29 read in a non-leap year takes the leap year before",
			text: `Feb 29 10:00:00 node-1 kubelet[1]: x`,
			ref:  time.Date(2025, 3, 1, 0, 0, 0, 0, time.UTC),
			want: Line{Time: utc("2024-02-29T10:00:00Z"), HasTime: true, Format: FormatSyslog, Program: "kubelet", PID: "1", Message: "x"},
		},
		{
			name: "impossible date has no time",
			text: `Apr 31 10:00:00 node-1 kubelet[1]: x`,
			want: Line{Message: `Apr 31 10:00:00 node-1 kubelet[1]: x`},
		},
		{
			name: "date time without space after is no timestamp",
			text: `2024-05-01 00:01:40xyz`,
			want: Line{Message: `2024-05-01 00:01:40xyz`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := tt.ref
			if r.IsZero() {
				r = ref
			}
			got := Parse(tt.text, r)
			if diff := cmp.Diff(tt.want, got, cmpopts.IgnoreUnexported(Line{})); diff != "" {
				t.Errorf("Parse(%q) mismatch (-want +got):\n%s", tt.text, diff)
			}
			if got.HasTime {
				checkRerender(t, tt.text, got, r)
			}
		})
	}
}

func TestNotable(t *testing.T) {
	tests := []struct {
		name string
		text string
		want bool
	}{
		{"klog error", `E0306 09:50:33.106476   45471 kubelet.go:1343] "Image garbage collection failed once. Stats initialization may not have completed yet"`, true},
		{"klog warning without a word", `W0513 21:18:32.812024    6481 checks.go:835] detected that the sandbox image "registry.k8s.io/pause:3.6" of the container runtime is inconsistent with that used by kubeadm.`, true},
		{"klog info", `I0610 17:39:22.955481    1980 kubelet_node_status.go:73] "Attempting to register node" node="worker1"`, false},
		{"klog info with a failure word", `I0617 16:18:42.080925 3814777 eviction_manager.go:381] "Eviction manager: attempting to reclaim" resourceName="ephemeral-storage"`, true},
		{"logrus warning", `time="2024-01-01T00:00:00Z" level=warning msg="something odd"`, true},
		{"logrus info", `time="2024-01-01T00:00:00Z" level=info msg="loading plugin"`, false},
		{"syslog-wrapped klog error", `May  1 00:01:40 node-1 kubelet[1]: E0501 00:01:40.000000       1 x.go:1] "msg"`, true},
		{"kubeadm ERROR", "\t[ERROR Port-6443]: Port 6443 is in use", true},
		{"kubeadm WARNING", "\t[WARNING Swap]: swap is supported for cgroup v2 only", true},
		{"kubeadm progress", `[kubelet-start] Writing kubelet configuration to file "/var/lib/kubelet/config.yaml"`, false},
		{"not healthy", `[kubelet-check] The kubelet is not healthy after 4m0.000208828s`, true},
		{"isn't running", `[kubelet-check] It seems like the kubelet isn't running or healthy.`, true},
		{"Unfortunately", `Unfortunately, an error has occurred, likely caused by:`, true},
		{"apt", `E: Unable to locate package kubelet`, true},
		{"dnf no match", `No match for argument: kubelet`, true},
		{"tar", `tar: This does not look like a tar archive`, true},
		{"gzip", `gzip: stdin: not in gzip format`, true},
		{"wget", `2024-03-18 10:00:00 ERROR 404: Not Found.`, true},
		{"curl resolve", `curl: (6) Could not resolve host: prod-cdn.packages.k8s.io`, true},
		{"http to https", `Head "https://127.0.0.1:5000/v2/kube-proxy/manifests/v1.30.0?ns=registry.k8s.io": http: server gave HTTP response to HTTPS client`, true},
		{"cloud-init warning level only", `2024-05-01 00:01:40,123 - cc_final_message.py[WARNING]: Used fallback datasource`, true},
		{"cloud-init debug", `2024-05-01 00:01:40,123 - util.py[DEBUG]: Reading from /proc/uptime (quiet=False)`, false},
		{"stage header", `Cloud-init v. 24.1.3 running 'modules:final' at Wed, 01 May 2024 00:01:38 +0000. Up 35.00 seconds.`, false},
		{"kernel oom", `Out of memory: Killed process 4242 (kube-apiserver)`, true},
		{"kernel oom-killer", `kube-apiserver invoked oom-killer: gfp_mask=0x100cca(GFP_HIGHUSER_MOVABLE), order=0, oom_score_adj=-997`, true},
		{"room is not oom", `the room is quiet`, false},
		{"ordinary", `[preflight] Running pre-flight checks`, false},
		{"capi script failure", `!!! [2024-05-01T00:05:00+00:00] too many errors, exiting`, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Notable(tt.text); got != tt.want {
				t.Errorf("Notable(%q) = %v, want %v", tt.text, got, tt.want)
			}
		})
	}
}

// render formats t as the timestamp of a line of format f, shaped like
// orig (the timestamp text it replaces: same fraction digits, padding and
// separators).
func render(f Format, orig string, t time.Time) string {
	switch f {
	case FormatKlog:
		return fmt.Sprintf("%02d%02d %02d:%02d:%02d.%06d", t.Month(), t.Day(), t.Hour(), t.Minute(), t.Second(), t.Nanosecond()/1000)
	case FormatSyslog:
		day := fmt.Sprintf("%2d", t.Day())
		if orig[4] == '0' {
			day = fmt.Sprintf("%02d", t.Day())
		} else if orig[4] != ' ' && orig[5] == ' ' {
			day = fmt.Sprintf("%d", t.Day())
		}
		s := fmt.Sprintf("%s %s %s", t.Format("Jan"), day, t.Format("15:04:05"))
		if i := strings.IndexByte(orig, '.'); i >= 0 {
			digits := len(orig) - i - 1
			s += "." + fmt.Sprintf("%09d", t.Nanosecond())[:digits]
		}
		return s
	case FormatRFC3339, FormatLogrus, FormatCAPIScript:
		return t.Format(time.RFC3339Nano)
	case FormatCloudInit, FormatDateTime:
		s := t.Format("2006-01-02 15:04:05")
		if len(orig) > 19 {
			digits := len(orig) - 20
			s += string(orig[19]) + fmt.Sprintf("%09d", t.Nanosecond())[:digits]
		}
		return s
	case FormatCloudInitStage:
		return t.Format(time.RFC1123Z)
	}
	panic("no renderer for format " + string(f))
}

// checkRerender replaces the timestamp of text by the rendering of the time
// Parse found, parses again, and expects the same time: Parse reads the
// timestamp it says it read.
func checkRerender(t *testing.T, text string, l Line, r time.Time) {
	t.Helper()
	orig := text[l.span[0]:l.span[1]]
	again := text[:l.span[0]] + render(l.Format, orig, l.Time) + text[l.span[1]:]
	got := Parse(again, r)
	if !got.HasTime || !got.Time.Equal(l.Time) {
		t.Errorf("re-rendered %q as %q: time %v (has %v), want %v", text, again, got.Time, got.HasTime, l.Time)
	}
}

func FuzzParse(f *testing.F) {
	seeds := []string{
		`E0823 13:53:14.926448    8691 run.go:72] "command failed" err="failed to parse kubelet flag: unknown flag: --improve-speed"`,
		`time="2023-05-13T03:52:00.921119344+08:00" level=error msg="PullImage failed"`,
		`2024-05-01T00:01:40.123456+00:00 node-1 kubelet[1234]: E0501 00:01:40.123400    1234 run.go:72] "x"`,
		`2024-05-01T02:01:40+0200 node-1 containerd[6666]: containerd: failed to load TOML`,
		`Jan 18 17:33:58 aura kubelet[1457370]: E0118 17:33:58.888700 1457370 bootstrap.go:265] x`,
		`May  1 00:01:40 node-1 kernel: [  123.456789] Out of memory`,
		`May 01 00:01:40.250000 node-1 cloud-init[1047]: hello`,
		`May 1 00:01:40 node-1 cloud-init: hello`,
		`2024-10-29 14:39:35,624 - cc_scripts_user.py[WARNING]: Failed to run module scripts_user`,
		`Cloud-init v. 24.1.3 running 'modules:final' at Wed, 01 May 2024 00:01:38 +0000. Up 35.00 seconds.`,
		`Cloud-init v. 24.2 finished at Mon, 30 Sep 2024 04:34:00 +0000. Datasource DataSourceAzure.  Up 31.94 seconds`,
		`2024-03-18 10:00:00 ERROR 404: Not Found.`,
		`2024-03-18 10:00:00.5 x`,
		`!!! [2024-05-01T00:05:00+00:00] too many errors, exiting`,
		`[   27.43] cloud-init[1047]: x`,
		`FATA[0000] validate service connection`,
		"\t[ERROR Swap]: x",
		`Feb 29 10:00:00 h p[1]: x`,
		`F0101 00:00:00.000000 1 a:1]`,
		`time="not a time" level=warning msg="x"`,
		`time="2024-01-01T00:00:00Z" msg="no level"`,
		`time="2024-01-01T00:00:00Z"  level=bogus`,
		`time="`,
		`[CLOUDINIT]2026-01-28 10:40:10,299 - user_data.py[WARNING]: [Errno 2] No such file or directory: '/etc/secret-userdata.txt' for url: file:///etc/secret-userdata.txt`,
		`[CLOUDINIT] util.py[WARNING]: Failed running /var/lib/cloud/instance/scripts/runcmd [1]`,
		`[CLOUDINIT]`,
		`[CLOUDINIT] [`,
	}
	for _, s := range seeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		l := Parse(text, ref)
		_ = Notable(text)
		for _, list := range []struct {
			words []string
			mask  uint8
		}{{failureWords, failureWord}, {keepWords, keepWord}} {
			if naive := naiveContainsWord(text, list.words); (wordsIn(text, list.mask) != 0) != naive {
				t.Fatalf("wordsIn(%q, %d) = %v, strings.Contains says %v", text, list.mask, !naive, naive)
			}
		}
		if quickLevel(text) != l.Level {
			t.Fatalf("quickLevel(%q) = %q, Parse says %q", text, quickLevel(text), l.Level)
		}
		if !l.HasTime {
			if !l.Time.IsZero() || l.Format != FormatNone {
				t.Fatalf("no time but Time=%v Format=%q", l.Time, l.Format)
			}
			return
		}
		if l.Time.Location() != time.UTC {
			t.Fatalf("time %v not in UTC", l.Time)
		}
		if l.span[0] < 0 || l.span[1] > len(text) || l.span[0] >= l.span[1] {
			t.Fatalf("bad span %v for %q", l.span, text)
		}
		if !utf8.ValidString(text) {
			return
		}
		checkRerender(t, text, l, ref)
	})
}

// naiveContainsWord is the obvious implementation wordsIn must agree
// with (for ASCII; strings.ToLower also folds non-ASCII letters).
func naiveContainsWord(text string, words []string) bool {
	lower := []byte(text)
	for i, c := range lower {
		lower[i] = lowerASCII(c)
	}
	for _, w := range words {
		if strings.Contains(string(lower), w) {
			return true
		}
	}
	return false
}

func TestParseInZone(t *testing.T) {
	plus2 := time.FixedZone("UTC+2", 2*60*60)
	ref := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	for _, tt := range []struct {
		line string
		want time.Time
	}{
		{"May  1 02:02:00 node-1 kubelet[12]: msg", time.Date(2024, 5, 1, 0, 2, 0, 0, time.UTC)},
		{"2024-05-01 02:00:00,123 - util.py[WARNING]: msg", time.Date(2024, 5, 1, 0, 0, 0, 123e6, time.UTC)},
		{"E0501 02:00:00.000000    1234 run.go:74] msg", time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC)},
		// A zone in the line wins.
		{"2024-05-01T02:00:00.000000+00:00 node-1 kubelet[1]: msg", time.Date(2024, 5, 1, 2, 0, 0, 0, time.UTC)},
	} {
		if got := ParseIn(tt.line, ref, plus2).Time; !got.Equal(tt.want) {
			t.Errorf("ParseIn(%q) = %v, want %v", tt.line, got, tt.want)
		}
	}
}
