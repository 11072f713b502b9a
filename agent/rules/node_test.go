package rules

import (
	"regexp"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/timestamppb"

	nodediagv1 "github.com/nodediag/nodediag/proto/nodediag/v1"
)

// nodeClock is the evidence clock of these tests (hosttest.Now).
var nodeClock = time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)

// nodeInput builds an Input from probe data at nodeClock; nil data (typed
// or not) stands for a probe that did not run.
func nodeInput(data ...any) *Input {
	ev := &nodediagv1.Evidence{CollectedAt: timestamppb.New(nodeClock)}
	for _, d := range data {
		pe := &nodediagv1.ProbeEvidence{Status: "ok"}
		switch d := d.(type) {
		case *nodediagv1.Filesystems:
			if d == nil {
				continue
			}
			pe.Data = &nodediagv1.ProbeEvidence_Filesystems{Filesystems: d}
		case *nodediagv1.Swap:
			if d == nil {
				continue
			}
			pe.Data = &nodediagv1.ProbeEvidence_Swap{Swap: d}
		case *nodediagv1.Certificates:
			if d == nil {
				continue
			}
			pe.Data = &nodediagv1.ProbeEvidence_Certificates{Certificates: d}
		case *nodediagv1.CNI:
			if d == nil {
				continue
			}
			pe.Data = &nodediagv1.ProbeEvidence_Cni{Cni: d}
		case *nodediagv1.KubeletConfig:
			if d == nil {
				continue
			}
			pe.Data = &nodediagv1.ProbeEvidence_KubeletConfig{KubeletConfig: d}
		case *nodediagv1.Kubeadm:
			if d == nil {
				continue
			}
			pe.Data = &nodediagv1.ProbeEvidence_Kubeadm{Kubeadm: d}
		case nil:
			continue
		default:
			panic("nodeInput: unexpected type")
		}
		ev.Probes = append(ev.Probes, pe)
	}
	return &Input{Ev: ev, Clock: nodeClock, Until: nodeClock}
}

// nodeGot is what the tables compare: the ID and title of each finding.
type nodeGot struct{ ID, Title string }

func nodeSummary(fs []*nodediagv1.Finding) []nodeGot {
	var out []nodeGot
	for _, f := range fs {
		out = append(out, nodeGot{f.Id, f.Title})
	}
	return out
}

var nodeUnfilled = regexp.MustCompile(`\{[a-z_]+\}`)

// nodeCheckFindings checks what every finding of these rules must have:
// filled templates and at least one quote.
func nodeCheckFindings(t *testing.T, fs []*nodediagv1.Finding) {
	t.Helper()
	for _, f := range fs {
		for _, s := range []string{f.Title, f.Remediation, f.RefutedBy} {
			if m := nodeUnfilled.FindString(s); m != "" {
				t.Errorf("%s: unfilled parameter %s in %q", f.Id, m, s)
			}
		}
		if len(f.Evidence) == 0 {
			t.Errorf("%s: no evidence quoted", f.Id)
		}
	}
}

const (
	gib = 1 << 30
	mib = 1 << 20
)

// fsys is a filesystem of total bytes with free available; used% and
// inodes as given (df semantics are the probe's business, not the rule's).
func fsys(p string, also []string, total, free uint64, usedPct float64, inodesTotal, inodesFree uint64, inodesPct float64) *nodediagv1.Filesystem {
	return &nodediagv1.Filesystem{
		Path: p, Also: also, MountPoint: p, Fstype: "ext4", Method: "statfs",
		TotalBytes: total, FreeBytes: free, UsedBytes: total - free, UsedPercent: usedPct,
		InodesTotal: inodesTotal, InodesFree: inodesFree, InodesUsedPercent: inodesPct,
	}
}

func kubeletEviction(m map[string]string) *nodediagv1.KubeletConfig {
	return &nodediagv1.KubeletConfig{Config: &nodediagv1.KubeletConfigFile{Path: "/var/lib/kubelet/config.yaml", Present: true, EvictionHard: m}}
}

func TestDiskRule(t *testing.T) {
	all := []string{"/var", "/var/lib/kubelet", "/var/lib/containerd", "/var/log"}
	tests := []struct {
		name    string
		fs      []*nodediagv1.Filesystem
		kubelet *nodediagv1.KubeletConfig
		want    []nodeGot
	}{
		{
			name: "healthy",
			fs:   []*nodediagv1.Filesystem{fsys("/", all, 100*gib, 60*gib, 40, 1000, 900, 10)},
		},
		{
			name: "nodefs at exactly 10% available: not yet pressure, but nearly full",
			fs:   []*nodediagv1.Filesystem{fsys("/", []string{"/var/lib/kubelet"}, 1000*mib, 100*mib, 90, 1000, 900, 10)},
			want: []nodeGot{{"DiskNearlyFull", "/ is 90.0% full (100 MiB free)"}},
		},
		{
			name: "nodefs below 10% available",
			fs:   []*nodediagv1.Filesystem{fsys("/", []string{"/var/lib/kubelet"}, 1000*mib, 99*mib, 90.1, 1000, 900, 10)},
			want: []nodeGot{{"DiskFull", "/var/lib/kubelet is full: 90.1% used, 99 MiB free"}},
		},
		{
			name: "imagefs at exactly 15% available",
			fs:   []*nodediagv1.Filesystem{fsys("/var/lib/containerd", nil, 1000*mib, 150*mib, 85, 1000, 900, 10)},
			want: []nodeGot{{"DiskNearlyFull", "/var/lib/containerd is 85.0% full (150 MiB free)"}},
		},
		{
			name: "imagefs below 15% available",
			fs:   []*nodediagv1.Filesystem{fsys("/var/lib/containerd", nil, 1000*mib, 149*mib, 85.1, 1000, 900, 10)},
			want: []nodeGot{{"DiskFull", "/var/lib/containerd is full: 85.1% used, 149 MiB free"}},
		},
		{
			name: "one disk for both: imagefs's 15% trips first",
			fs:   []*nodediagv1.Filesystem{fsys("/", all, 100*gib, 12*gib, 88, 1000, 900, 10)},
			want: []nodeGot{{"DiskFull", "/var/lib/containerd is full: 88.0% used, 12 GiB free"}},
		},
		{
			name: "a filesystem the kubelet does not watch: 94.9% is nearly full",
			fs:   []*nodediagv1.Filesystem{fsys("/var/log", nil, 100*gib, 5*gib+100*mib, 94.9, 1000, 900, 10)},
			want: []nodeGot{{"DiskNearlyFull", "/var/log is 94.9% full (5.1 GiB free)"}},
		},
		{
			name: "a filesystem the kubelet does not watch: 95.0% is full",
			fs:   []*nodediagv1.Filesystem{fsys("/var/log", nil, 100*gib, 5*gib, 95, 1000, 900, 10)},
			want: []nodeGot{{"DiskFull", "/var/log is full: 95.0% used, 5.0 GiB free"}},
		},
		{
			name: "94.96% shows as 95.0 and is judged so",
			fs:   []*nodediagv1.Filesystem{fsys("/var/log", nil, 100*gib, 5*gib, 94.96, 1000, 900, 10)},
			want: []nodeGot{{"DiskFull", "/var/log is full: 95.0% used, 5.0 GiB free"}},
		},
		{
			name: "84.9% is fine, 85.0% nearly full",
			fs: []*nodediagv1.Filesystem{
				fsys("/var/log", nil, 100*gib, 16*gib, 84.9, 1000, 900, 10),
				fsys("/var/lib/etcd", nil, 100*gib, 15*gib, 85, 1000, 900, 10),
			},
			want: []nodeGot{{"DiskNearlyFull", "/var/lib/etcd is 85.0% full (15 GiB free)"}},
		},
		{
			name: "inodes: 94.9% is fine, 95.0% exhausted",
			fs: []*nodediagv1.Filesystem{
				fsys("/var/log", nil, 100*gib, 60*gib, 40, 1000, 51, 94.9),
				fsys("/var/lib/containerd", nil, 100*gib, 60*gib, 40, 1000, 50, 95),
			},
			want: []nodeGot{{"DiskInodesExhausted", "/var/lib/containerd has no inodes left: 95.0% used"}},
		},
		{
			name: "space and inodes both out",
			fs:   []*nodediagv1.Filesystem{fsys("/", all, 100*gib, 0, 100, 1000, 0, 100)},
			want: []nodeGot{
				{"DiskFull", "/var/lib/kubelet is full: 100.0% used, 0 B free"},
				{"DiskInodesExhausted", "/var/lib/kubelet has no inodes left: 100.0% used"},
			},
		},
		{
			name: "a filesystem reporting no inodes (btrfs) is judged on space only",
			fs:   []*nodediagv1.Filesystem{fsys("/var/lib/containerd", nil, 100*gib, 60*gib, 40, 0, 0, 0)},
		},
		{
			name: "an unmeasured filesystem is skipped",
			fs:   []*nodediagv1.Filesystem{{Path: "/"}},
		},
		{
			name:    "evictionHard of the kubelet's configuration replaces the defaults",
			kubelet: kubeletEviction(map[string]string{"memory.available": "100Mi", "nodefs.available": "20%", "nodefs.inodesFree": "10%"}),
			fs: []*nodediagv1.Filesystem{
				fsys("/", []string{"/var/lib/kubelet"}, 100*gib, 19*gib, 81, 1000, 99, 90.1),
				// imagefs.available is off: 12% available is only nearly full.
				fsys("/var/lib/containerd", nil, 100*gib, 12*gib, 88, 1000, 900, 10),
			},
			want: []nodeGot{
				{"DiskFull", "/var/lib/kubelet is full: 81.0% used, 19 GiB free"},
				{"DiskInodesExhausted", "/var/lib/kubelet has no inodes left: 90.1% used"},
				{"DiskNearlyFull", "/var/lib/containerd is 88.0% full (12 GiB free)"},
			},
		},
		{
			name:    "an absolute evictionHard quantity",
			kubelet: kubeletEviction(map[string]string{"imagefs.available": "2Gi"}),
			fs: []*nodediagv1.Filesystem{
				fsys("/var/lib/containerd", nil, 100*gib, 2*gib-1, 70, 1000, 900, 10),
				fsys("/var/lib/kubelet", nil, 100*gib, 2*gib, 70, 1000, 900, 10),
			},
			want: []nodeGot{{"DiskFull", "/var/lib/containerd is full: 70.0% used, 2.0 GiB free"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := nodeInput(&nodediagv1.Filesystems{Filesystems: tt.fs}, tt.kubelet)
			got := diskRule(in)
			if diff := cmp.Diff(tt.want, nodeSummary(got)); diff != "" {
				t.Errorf("findings (-want +got):\n%s", diff)
			}
			nodeCheckFindings(t, got)
		})
	}
}

func TestDiskRuleQuote(t *testing.T) {
	f := fsys("/", []string{"/var/lib/kubelet"}, 30*gib, 312*mib, 99, 1000, 875, 12.5)
	got := diskRule(nodeInput(&nodediagv1.Filesystems{Filesystems: []*nodediagv1.Filesystem{f}}))
	if len(got) != 1 {
		t.Fatalf("got %v, want one DiskFull", nodeSummary(got))
	}
	want := []*nodediagv1.Quote{{
		Source:  "statfs:/var/lib/kubelet",
		Excerpt: "/ ext4 size=30 GiB used=30 GiB avail=312 MiB use%=99.0 inodes used%=12.5 (below the kubelet's hard eviction threshold nodefs.available<10%)",
	}}
	if diff := cmp.Diff(want, got[0].Evidence, protocmp.Transform()); diff != "" {
		t.Errorf("quote (-want +got):\n%s", diff)
	}
	if got[0].Title != "/var/lib/kubelet is full: 99.0% used, 312 MiB free" {
		t.Errorf("title = %q", got[0].Title)
	}
}

func TestParseDiskThreshold(t *testing.T) {
	tests := []struct {
		in     string
		want   diskThreshold
		wantOK bool
	}{
		{"10%", diskThreshold{percent: 10, isPct: true}, true},
		{"7.5%", diskThreshold{percent: 7.5, isPct: true}, true},
		{"500Mi", diskThreshold{amount: 500 << 20}, true},
		{"2Gi", diskThreshold{amount: 2 << 30}, true},
		{"1G", diskThreshold{amount: 1e9}, true},
		{"1024", diskThreshold{amount: 1024}, true},
		{"150%", diskThreshold{}, false},
		{"-1%", diskThreshold{}, false},
		{"lots", diskThreshold{}, false},
		{"", diskThreshold{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, ok := parseDiskThreshold("s", tt.in)
			if ok != tt.wantOK {
				t.Fatalf("ok = %v, want %v", ok, tt.wantOK)
			}
			if ok && (got.percent != tt.want.percent || got.amount != tt.want.amount || got.isPct != tt.want.isPct) {
				t.Errorf("parseDiskThreshold(%q) = %+v, want %+v", tt.in, got, tt.want)
			}
		})
	}
}

func TestDiskHumanBytes(t *testing.T) {
	for n, want := range map[uint64]string{
		0: "0 B", 1023: "1023 B", 1024: "1.0 KiB", 312 * mib: "312 MiB", 2 * gib: "2.0 GiB",
		10 * gib: "10 GiB", 9*gib + 900*mib: "9.9 GiB", 3 << 40: "3.0 TiB",
	} {
		if got := diskHumanBytes(n); got != want {
			t.Errorf("diskHumanBytes(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestSwapRule(t *testing.T) {
	swapfile := &nodediagv1.SwapDevice{Filename: "/swapfile", Type: "file", SizeKib: 2 << 20,
		Line: &nodediagv1.SourceLine{Path: "/proc/swaps", Line: 2, Text: "/swapfile file 2097152 0 -2"}}
	zram := &nodediagv1.SwapDevice{Filename: "/dev/zram0", Type: "partition", SizeKib: 512 << 10,
		Line: &nodediagv1.SourceLine{Path: "/proc/swaps", Line: 3, Text: "/dev/zram0 partition 524288 0 100"}}
	yes, no := true, false
	cfgLine := func(v bool) *nodediagv1.KubeletConfig {
		text := "failSwapOn: true"
		if !v {
			text = "failSwapOn: false"
		}
		return &nodediagv1.KubeletConfig{Config: &nodediagv1.KubeletConfigFile{
			Path: "/var/lib/kubelet/config.yaml", Present: true, FailSwapOn: &v,
			FailSwapOnLine: &nodediagv1.SourceLine{Path: "/var/lib/kubelet/config.yaml", Line: 12, Text: text},
		}}
	}
	flag := func(value string, active bool) *nodediagv1.KubeletFlag {
		return &nodediagv1.KubeletFlag{Name: "fail-swap-on", Value: value, Active: active,
			Source: &nodediagv1.SourceLine{Path: "/etc/sysconfig/kubelet", Line: 1, Text: "KUBELET_EXTRA_ARGS=--fail-swap-on=" + value}}
	}
	const title = "swap is on (/swapfile 2.0 GiB) and the kubelet refuses to run with swap"
	tests := []struct {
		name       string
		swap       *nodediagv1.Swap
		kubelet    *nodediagv1.KubeletConfig
		want       []nodeGot
		confidence string
		quotes     int
	}{
		{name: "no swap", swap: &nodediagv1.Swap{Text: "Filename Type Size Used Priority\n"}, kubelet: &nodediagv1.KubeletConfig{}},
		{name: "swap probe did not run", kubelet: &nodediagv1.KubeletConfig{}},
		{
			name: "swap on, failSwapOn by default", swap: &nodediagv1.Swap{Devices: []*nodediagv1.SwapDevice{swapfile}},
			kubelet: &nodediagv1.KubeletConfig{Config: &nodediagv1.KubeletConfigFile{Present: true}},
			want:    []nodeGot{{"SwapEnabled", title}}, confidence: High, quotes: 1,
		},
		{
			name: "swap on, kubelet configuration unknown: medium confidence", swap: &nodediagv1.Swap{Devices: []*nodediagv1.SwapDevice{swapfile}},
			want: []nodeGot{{"SwapEnabled", title}}, confidence: Medium, quotes: 1,
		},
		{
			name: "failSwapOn: true is quoted", swap: &nodediagv1.Swap{Devices: []*nodediagv1.SwapDevice{swapfile}}, kubelet: cfgLine(yes),
			want: []nodeGot{{"SwapEnabled", title}}, confidence: High, quotes: 2,
		},
		{name: "failSwapOn: false allows swap", swap: &nodediagv1.Swap{Devices: []*nodediagv1.SwapDevice{swapfile}}, kubelet: cfgLine(no)},
		{
			name: "two devices", swap: &nodediagv1.Swap{Devices: []*nodediagv1.SwapDevice{swapfile, zram}}, kubelet: &nodediagv1.KubeletConfig{},
			want:       []nodeGot{{"SwapEnabled", "swap is on (/swapfile 2.0 GiB, /dev/zram0 512 MiB) and the kubelet refuses to run with swap"}},
			confidence: High, quotes: 2,
		},
		{
			name: "--fail-swap-on=false on the command line wins over the file",
			swap: &nodediagv1.Swap{Devices: []*nodediagv1.SwapDevice{swapfile}},
			kubelet: func() *nodediagv1.KubeletConfig {
				kc := cfgLine(yes)
				kc.Flags = []*nodediagv1.KubeletFlag{flag("false", true)}
				return kc
			}(),
		},
		{
			name: "an inactive --fail-swap-on=false does not count",
			swap: &nodediagv1.Swap{Devices: []*nodediagv1.SwapDevice{swapfile}},
			kubelet: &nodediagv1.KubeletConfig{Flags: []*nodediagv1.KubeletFlag{flag("false", false)},
				Config: &nodediagv1.KubeletConfigFile{Present: true}},
			want: []nodeGot{{"SwapEnabled", title}}, confidence: High, quotes: 1,
		},
		{
			name: "--fail-swap-on=true on the command line over failSwapOn: false",
			swap: &nodediagv1.Swap{Devices: []*nodediagv1.SwapDevice{swapfile}},
			kubelet: func() *nodediagv1.KubeletConfig {
				kc := cfgLine(no)
				kc.Flags = []*nodediagv1.KubeletFlag{flag("true", true)}
				return kc
			}(),
			want: []nodeGot{{"SwapEnabled", title}}, confidence: High, quotes: 2,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := swapRule(nodeInput(tt.swap, tt.kubelet))
			if diff := cmp.Diff(tt.want, nodeSummary(got)); diff != "" {
				t.Errorf("findings (-want +got):\n%s", diff)
			}
			nodeCheckFindings(t, got)
			if len(got) == 1 {
				if got[0].Confidence != tt.confidence {
					t.Errorf("confidence = %s, want %s", got[0].Confidence, tt.confidence)
				}
				if len(got[0].Evidence) != tt.quotes {
					t.Errorf("quotes = %v, want %d", got[0].Evidence, tt.quotes)
				}
				if got[0].Evidence[0].Source != "/proc/swaps" || got[0].Evidence[0].Line != 2 {
					t.Errorf("first quote = %v, want /proc/swaps line 2", got[0].Evidence[0])
				}
			}
		})
	}
}

func TestCertificateRule(t *testing.T) {
	cert := func(p string, notBefore, notAfter time.Time) *nodediagv1.Certificate {
		return &nodediagv1.Certificate{Path: p, Subject: "CN=x", Issuer: "CN=kubernetes",
			NotBefore: timestamppb.New(notBefore), NotAfter: timestamppb.New(notAfter)}
	}
	const apiserver = "/etc/kubernetes/pki/apiserver.crt"
	year := 365 * 24 * time.Hour
	tests := []struct {
		name  string
		certs []*nodediagv1.Certificate
		want  []nodeGot
	}{
		{name: "valid for months", certs: []*nodediagv1.Certificate{cert(apiserver, nodeClock.Add(-year), nodeClock.Add(200*24*time.Hour))}},
		{
			name:  "expired a second ago",
			certs: []*nodediagv1.Certificate{cert(apiserver, nodeClock.Add(-year), nodeClock.Add(-time.Second))},
			want:  []nodeGot{{"CertificateExpired", "certificate /etc/kubernetes/pki/apiserver.crt expired on 2024-05-01T11:59:59Z"}},
		},
		{
			name:  "notAfter is now: still valid (x509 expires after notAfter), expiring",
			certs: []*nodediagv1.Certificate{cert(apiserver, nodeClock.Add(-year), nodeClock)},
			want:  []nodeGot{{"CertificateExpiresSoon", "certificate /etc/kubernetes/pki/apiserver.crt expires on 2024-05-01T12:00:00Z (0s left)"}},
		},
		{
			name:  "not valid for another second: the clock is behind",
			certs: []*nodediagv1.Certificate{cert(apiserver, nodeClock.Add(time.Second), nodeClock.Add(year))},
			want:  []nodeGot{{"CertificateNotYetValid", "certificate /etc/kubernetes/pki/apiserver.crt is not valid until 2024-05-01T12:00:01Z: the clock is behind"}},
		},
		{name: "notBefore is now: valid", certs: []*nodediagv1.Certificate{cert(apiserver, nodeClock, nodeClock.Add(year))}},
		{
			name:  "exactly 14 days left: warned",
			certs: []*nodediagv1.Certificate{cert(apiserver, nodeClock.Add(-year), nodeClock.Add(14*24*time.Hour))},
			want:  []nodeGot{{"CertificateExpiresSoon", "certificate /etc/kubernetes/pki/apiserver.crt expires on 2024-05-15T12:00:00Z (14d left)"}},
		},
		{name: "14 days and a second left: not yet", certs: []*nodediagv1.Certificate{cert(apiserver, nodeClock.Add(-year), nodeClock.Add(14*24*time.Hour+time.Second))}},
		{
			name:  "hours left",
			certs: []*nodediagv1.Certificate{cert(apiserver, nodeClock.Add(-year), nodeClock.Add(7*time.Hour+30*time.Minute))},
			want:  []nodeGot{{"CertificateExpiresSoon", "certificate /etc/kubernetes/pki/apiserver.crt expires on 2024-05-01T19:30:00Z (7h30m left)"}},
		},
		{
			name: "only the current kubelet client and serving certificates count",
			certs: []*nodediagv1.Certificate{
				cert("/var/lib/kubelet/pki/kubelet-client-2023-04-01-12-00-00.pem", nodeClock.Add(-2*year), nodeClock.Add(-year)),
				func() *nodediagv1.Certificate {
					c := cert("/var/lib/kubelet/pki/kubelet-client-current.pem", nodeClock.Add(-year), nodeClock.Add(-time.Hour))
					c.ResolvedPath = "/var/lib/kubelet/pki/kubelet-client-2024-04-01-12-00-00.pem"
					return c
				}(),
				cert("/var/lib/kubelet/pki/kubelet-server-2023-04-01-12-00-00.pem", nodeClock.Add(-2*year), nodeClock.Add(-year)),
				// A kubelet-client file elsewhere is not a rotation.
				cert("/etc/kubernetes/pki/kubelet-client-old.pem", nodeClock.Add(-2*year), nodeClock.Add(-year)),
			},
			want: []nodeGot{
				{"CertificateExpired", "certificate /var/lib/kubelet/pki/kubelet-client-current.pem expired on 2024-05-01T11:00:00Z"},
				{"CertificateExpired", "certificate /etc/kubernetes/pki/kubelet-client-old.pem expired on 2023-05-02T12:00:00Z"},
			},
		},
		{
			name: "embedded in a kubeconfig, second of a bundle",
			certs: []*nodediagv1.Certificate{
				func() *nodediagv1.Certificate {
					c := cert("/etc/kubernetes/admin.conf", nodeClock.Add(-year), nodeClock.Add(-24*time.Hour))
					c.EmbeddedIn = "/etc/kubernetes/admin.conf"
					return c
				}(),
				func() *nodediagv1.Certificate {
					c := cert("/etc/kubernetes/pki/ca-bundle.crt", nodeClock.Add(-year), nodeClock.Add(5*24*time.Hour))
					c.Index = 1
					return c
				}(),
			},
			want: []nodeGot{
				{"CertificateExpired", "certificate /etc/kubernetes/admin.conf (client-certificate-data) expired on 2024-04-30T12:00:00Z"},
				{"CertificateExpiresSoon", "certificate /etc/kubernetes/pki/ca-bundle.crt (certificate #2 of the file) expires on 2024-05-06T12:00:00Z (5d left)"},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := certificateRule(nodeInput(&nodediagv1.Certificates{Certificates: tt.certs}))
			if diff := cmp.Diff(tt.want, nodeSummary(got)); diff != "" {
				t.Errorf("findings (-want +got):\n%s", diff)
			}
			nodeCheckFindings(t, got)
		})
	}
}

func TestCertificateRuleQuote(t *testing.T) {
	c := &nodediagv1.Certificate{
		Path: "/var/lib/kubelet/pki/kubelet-client-current.pem", Subject: "CN=system:node:node-1,O=system:nodes", Issuer: "CN=kubernetes",
		NotBefore: timestamppb.New(time.Date(2023, 4, 1, 12, 0, 0, 0, time.UTC)), NotAfter: timestamppb.New(time.Date(2024, 4, 1, 12, 0, 0, 0, time.UTC)),
	}
	got := certificateRule(nodeInput(&nodediagv1.Certificates{Certificates: []*nodediagv1.Certificate{c}}))
	want := []*nodediagv1.Quote{{
		Source:  "/var/lib/kubelet/pki/kubelet-client-current.pem",
		Excerpt: "subject=CN=system:node:node-1,O=system:nodes notBefore=2023-04-01T12:00:00Z notAfter=2024-04-01T12:00:00Z",
	}}
	if len(got) != 1 {
		t.Fatalf("got %v, want one finding", nodeSummary(got))
	}
	if diff := cmp.Diff(want, got[0].Evidence, protocmp.Transform()); diff != "" {
		t.Errorf("quote (-want +got):\n%s", diff)
	}
}

func TestCNIRule(t *testing.T) {
	calico := &nodediagv1.CNIConfig{Path: "/etc/cni/net.d/10-calico.conflist", Name: "k8s-pod-network", CniVersion: "0.3.1", Types: []string{"calico", "bandwidth", "portmap"}}
	broken := func(name string) *nodediagv1.CNIConfig {
		return &nodediagv1.CNIConfig{Path: "/etc/cni/net.d/" + name, ParseError: "truncated JSON: unexpected EOF"}
	}
	base := func(configs []*nodediagv1.CNIConfig, binPresent bool, plugins ...string) *nodediagv1.CNI {
		return &nodediagv1.CNI{ConfDir: "/etc/cni/net.d", ConfDirPresent: true, Configs: configs, BinDir: "/opt/cni/bin", BinDirPresent: binPresent, Plugins: plugins}
	}
	joined := &nodediagv1.Kubeadm{KubeletConf: &nodediagv1.KubeconfigFile{Path: "/etc/kubernetes/kubelet.conf", Present: true}}
	tests := []struct {
		name    string
		cni     *nodediagv1.CNI
		kubeadm *nodediagv1.Kubeadm
		want    []nodeGot
	}{
		{name: "cni probe did not run"},
		{
			name:    "no conf dir",
			cni:     &nodediagv1.CNI{ConfDir: "/etc/cni/net.d", BinDir: "/opt/cni/bin"},
			kubeadm: joined,
			want:    []nodeGot{{"CNIConfigMissing", "no CNI network configuration in /etc/cni/net.d"}},
		},
		{
			name:    "empty conf dir",
			cni:     base(nil, true, "bridge"),
			kubeadm: joined,
			want:    []nodeGot{{"CNIConfigMissing", "no CNI network configuration in /etc/cni/net.d"}},
		},
		{
			name: "empty conf dir on a node that has not joined: the add-on cannot have come yet",
			cni:  base(nil, true, "bridge"),
		},
		{name: "calico with its plugins", cni: base([]*nodediagv1.CNIConfig{calico}, true, "bandwidth", "calico", "calico-ipam", "portmap")},
		{
			name: "calico's binaries not installed",
			cni:  base([]*nodediagv1.CNIConfig{calico}, true, "bandwidth", "bridge", "portmap"),
			want: []nodeGot{{"CNIPluginMissing", "CNI config /etc/cni/net.d/10-calico.conflist uses plugin calico, which is not in /opt/cni/bin"}},
		},
		{
			name: "bin dir empty: every plugin missing",
			cni:  base([]*nodediagv1.CNIConfig{calico}, true),
			want: []nodeGot{
				{"CNIPluginMissing", "CNI config /etc/cni/net.d/10-calico.conflist uses plugin calico, which is not in /opt/cni/bin"},
				{"CNIPluginMissing", "CNI config /etc/cni/net.d/10-calico.conflist uses plugin bandwidth, which is not in /opt/cni/bin"},
				{"CNIPluginMissing", "CNI config /etc/cni/net.d/10-calico.conflist uses plugin portmap, which is not in /opt/cni/bin"},
			},
		},
		{name: "bin dir not listed: plugins unknown, nothing said", cni: base([]*nodediagv1.CNIConfig{calico}, false)},
		{
			name: "a broken file before the valid one stops the load",
			cni:  base([]*nodediagv1.CNIConfig{calico, broken("05-old.conf")}, true, "bandwidth", "calico", "portmap"),
			want: []nodeGot{{"CNIConfigInvalid", "CNI config /etc/cni/net.d/05-old.conf cannot be parsed"}},
		},
		{
			name: "a broken file after the valid one is never read",
			cni:  base([]*nodediagv1.CNIConfig{calico, broken("99-old.conf")}, true, "bandwidth", "calico", "portmap"),
		},
		{
			name: "nothing valid: every broken file",
			cni:  base([]*nodediagv1.CNIConfig{broken("10-a.conflist"), broken("20-b.conf")}, true),
			want: []nodeGot{
				{"CNIConfigInvalid", "CNI config /etc/cni/net.d/10-a.conflist cannot be parsed"},
				{"CNIConfigInvalid", "CNI config /etc/cni/net.d/20-b.conf cannot be parsed"},
			},
		},
		{
			name: "only the first valid config (lexical order) is the runtime's",
			cni: base([]*nodediagv1.CNIConfig{
				{Path: "/etc/cni/net.d/87-podman.conflist", Name: "podman", Types: []string{"bridge", "portmap", "firewall", "tuning"}},
				calico,
			}, true, "bandwidth", "calico", "portmap"),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := cniRule(nodeInput(tt.cni, tt.kubeadm))
			if diff := cmp.Diff(tt.want, nodeSummary(got)); diff != "" {
				t.Errorf("findings (-want +got):\n%s", diff)
			}
			nodeCheckFindings(t, got)
		})
	}
}

// The rules are wired: Analyze runs them.
func TestNodeRulesWired(t *testing.T) {
	names := map[string]bool{}
	for _, r := range goRules() {
		names[r.Name] = true
	}
	for _, want := range []string{"disk-usage", "swap", "certificate-validity", "cni-config"} {
		if !names[want] {
			t.Errorf("rule %s is not in goRules()", want)
		}
	}
}

// On a copy of a host the evidence clock is a lower bound: a certificate
// issued shortly after the newest log line proves nothing; days after does.
func TestCertificateRuleLowerBoundClock(t *testing.T) {
	c := func(notBefore time.Time) *nodediagv1.Certificates {
		return &nodediagv1.Certificates{Certificates: []*nodediagv1.Certificate{{
			Path: "/var/lib/kubelet/pki/kubelet.crt", NotBefore: timestamppb.New(notBefore), NotAfter: timestamppb.New(notBefore.AddDate(1, 0, 0)),
		}}}
	}
	for _, tt := range []struct {
		name      string
		notBefore time.Time
		want      int
	}{
		{"issued an hour after the newest log line", nodeClock.Add(time.Hour), 0},
		{"issued two days after", nodeClock.Add(48 * time.Hour), 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			in := nodeInput(c(tt.notBefore))
			in.ClockIsLowerBound = true
			if got := certificateRule(in); len(got) != tt.want {
				t.Errorf("got %v, want %d finding(s)", nodeSummary(got), tt.want)
			}
		})
	}
}

// The kubelet's self-signed serving certificate is never renewed: once
// expired it is a warning with its own remedy, not a node-breaking error.
func TestKubeletServingCertificate(t *testing.T) {
	self := &nodediagv1.Certificate{
		Path: "/var/lib/kubelet/pki/kubelet.crt", Subject: "CN=node-1@1714521645", Issuer: "CN=node-1@1714521645",
		NotBefore: timestamppb.New(nodeClock.AddDate(-2, 0, 0)), NotAfter: timestamppb.New(nodeClock.AddDate(-1, 0, 0)),
	}
	signed := proto.Clone(self).(*nodediagv1.Certificate)
	signed.Issuer = "CN=kubernetes"
	got := certificateRule(nodeInput(&nodediagv1.Certificates{Certificates: []*nodediagv1.Certificate{self, signed}}))
	want := []nodeGot{
		{"KubeletServingCertificateExpired", "the kubelet's self-signed serving certificate /var/lib/kubelet/pki/kubelet.crt expired on 2023-05-01T12:00:00Z"},
		{"CertificateExpired", "certificate /var/lib/kubelet/pki/kubelet.crt expired on 2023-05-01T12:00:00Z"},
	}
	if diff := cmp.Diff(want, nodeSummary(got)); diff != "" {
		t.Errorf("findings (-want +got):\n%s", diff)
	}
}

// pflag keeps the last value of a repeated flag, and reads _ as -.
func TestSwapFailSwapOnLastFlagWins(t *testing.T) {
	kc := &nodediagv1.KubeletConfig{Flags: []*nodediagv1.KubeletFlag{
		{Name: "fail-swap-on", Value: "true", Active: true},
		{Name: "fail_swap_on", Value: "false", Active: true},
	}}
	if on, _ := swapFailSwapOn(kc); on {
		t.Error("the last --fail_swap_on=false should win")
	}
}

func TestDiskRuleSkipsReadOnly(t *testing.T) {
	fs := &nodediagv1.Filesystems{Filesystems: []*nodediagv1.Filesystem{{
		Path: "/", MountPoint: "/", Fstype: "squashfs", TotalBytes: 1 << 30, UsedBytes: 1 << 30, UsedPercent: 100, ReadOnly: true,
	}}}
	if got := diskRule(nodeInput(fs)); len(got) != 0 {
		t.Errorf("a read-only image filesystem is full by design: got %v", nodeSummary(got))
	}
}
