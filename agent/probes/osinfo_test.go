package probes

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/nodediag/nodediag/agent/host/hosttest"
	"github.com/nodediag/nodediag/agent/probe"
	nodediagv1 "github.com/nodediag/nodediag/proto/nodediag/v1"
)

// azureLinux3 is /etc/os-release of an Azure Linux 3 image.
const azureLinux3 = `NAME="Microsoft Azure Linux"
VERSION="3.0.20240824"
ID=azurelinux
VERSION_ID="3.0"
PRETTY_NAME="Microsoft Azure Linux 3.0"
ANSI_COLOR="1;34"
HOME_URL="https://aka.ms/azurelinux"
`

const ubuntu2204 = `PRETTY_NAME="Ubuntu 22.04.4 LTS"
NAME="Ubuntu"
VERSION_ID="22.04"
VERSION="22.04.4 LTS (Jammy Jellyfish)"
ID=ubuntu
ID_LIKE=debian
`

func TestParseOSRelease(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want map[string]string
	}{
		{
			name: "azure linux 3",
			in:   azureLinux3,
			want: map[string]string{
				"NAME": "Microsoft Azure Linux", "VERSION": "3.0.20240824", "ID": "azurelinux", "VERSION_ID": "3.0",
				"PRETTY_NAME": "Microsoft Azure Linux 3.0", "ANSI_COLOR": "1;34", "HOME_URL": "https://aka.ms/azurelinux",
			},
		},
		{
			name: "comments, blank lines, single quotes, unquoted",
			in:   "# written by the image build\n\nID=flatcar\n  # indented comment\nVERSION_ID='3815.2.5'\nPRETTY_NAME=Flatcar\n",
			want: map[string]string{"ID": "flatcar", "VERSION_ID": "3815.2.5", "PRETTY_NAME": "Flatcar"},
		},
		{
			name: "escapes in double quotes",
			in:   "PRETTY_NAME=\"A \\\"quoted\\\" \\$name with \\\\ and \\`tick\\`\"\n",
			want: map[string]string{"PRETTY_NAME": "A \"quoted\" $name with \\ and `tick`"},
		},
		{
			name: "not assignments are skipped, = in values kept",
			in:   "garbage line\n=novalue\nBAD KEY=x\nHOME_URL=\"https://x/?a=b\"\nEMPTY=\nLONE=\"\n",
			want: map[string]string{"HOME_URL": "https://x/?a=b", "EMPTY": "", "LONE": "\""},
		},
		{name: "empty", in: "", want: map[string]string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, parseOSRelease([]byte(tt.in))); diff != "" {
				t.Errorf("parseOSRelease (-want +got):\n%s", diff)
			}
		})
	}
}

func FuzzParseOSRelease(f *testing.F) {
	f.Add(azureLinux3)
	f.Add(ubuntu2204)
	f.Add(`A="\`)
	f.Add("A='")
	f.Fuzz(func(t *testing.T, in string) {
		_ = parseOSRelease([]byte(in))
	})
}

const procStat = "cpu  2255 34 2290 22625563 6290 127 456 0 0 0\ncpu0 1132 34 1441 11311718 3675 127 438 0 0 0\nintr 114930548 113199788 3 0 5 263 0 4 [... lots more numbers ...]\nctxt 1990473\nbtime 1714550400\nprocesses 2915\nprocs_running 1\nprocs_blocked 0\n"

func TestParseBtime(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    time.Time
		wantErr error
	}{
		{name: "proc(5) layout", in: procStat, want: time.Date(2024, 5, 1, 8, 0, 0, 0, time.UTC)},
		{name: "btime first", in: "btime 1\n", want: time.Unix(1, 0).UTC()},
		{name: "no btime", in: "cpu 1 2 3\nctxt 5\n", wantErr: errNoBtime},
		{name: "not a number", in: "btime soon\n", wantErr: errNoBtime},
		{name: "negative", in: "btime -5\n", wantErr: errNoBtime},
		{name: "extra field", in: "btime 1714550400 x\n", wantErr: errNoBtime},
		{name: "a field that starts like btime", in: "btimes 5\nbtime 1714550400\n", want: time.Date(2024, 5, 1, 8, 0, 0, 0, time.UTC)},
		{name: "empty", in: "", wantErr: errNoBtime},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseBtime([]byte(tt.in))
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("error = %v, want %v", err, tt.wantErr)
			}
			if !got.Equal(tt.want) {
				t.Errorf("parseBtime = %v, want %v", got, tt.want)
			}
		})
	}
}

func FuzzParseBtime(f *testing.F) {
	f.Add(procStat)
	f.Add("btime 99999999999999999999\n")
	f.Fuzz(func(t *testing.T, in string) {
		bt, err := parseBtime([]byte(in))
		if err == nil && bt.Unix() <= 0 {
			t.Errorf("boot time %v from %q", bt, in)
		}
	})
}

func TestOSInfoProbe(t *testing.T) {
	tests := []struct {
		name       string
		files      map[string]string
		wantStatus string
		want       *nodediagv1.OSInfo
		unreadable int
	}{
		{
			name: "copy of a host: /etc/hostname, no boot time from a stale /proc/stat",
			files: map[string]string{
				"proc/stat":                procStat,
				"proc/sys/kernel/hostname": "the-analysts-laptop\n",
				"etc/hostname":             "node-1\n",
				"usr/lib/os-release":       ubuntu2204,
			},
			wantStatus: probe.StatusOK,
			want:       &nodediagv1.OSInfo{Id: "ubuntu", VersionId: "22.04", PrettyName: "Ubuntu 22.04.4 LTS", Hostname: "node-1"},
		},
		{
			name:       "no PRETTY_NAME: NAME and VERSION",
			files:      map[string]string{"etc/os-release": "NAME=Distro\nVERSION=\"9 (Nine)\"\nID=distro\n"},
			wantStatus: probe.StatusOK,
			want:       &nodediagv1.OSInfo{Id: "distro", PrettyName: "Distro 9 (Nine)"},
		},
		{
			// Files of /proc in a copy: not live (host.Host.Live wants a
			// procfs), so the stale kernel host name and boot time are not used.
			name: "copy of a host carrying proc/self/stat",
			files: map[string]string{
				"proc/self/stat":           "1 (systemd) S 0\n",
				"proc/stat":                procStat,
				"proc/sys/kernel/hostname": "stale-kernel-name\n",
				"etc/hostname":             "node-1\n",
			},
			wantStatus: probe.StatusOK,
			want:       &nodediagv1.OSInfo{Hostname: "node-1"},
		},
		{
			name:       "nothing to identify: skipped",
			files:      map[string]string{"var/log/": ""},
			wantStatus: probe.StatusSkipped,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := hosttest.Tree(t, tt.files)
			pe := probe.RunAll(context.Background(), h, []probe.Probe{osInfo{}}).Probes[0]
			if pe.Status != tt.wantStatus {
				t.Fatalf("status = %q (%s), want %q", pe.Status, pe.Error, tt.wantStatus)
			}
			if diff := cmp.Diff(tt.want, pe.GetOs(), protocmp.Transform()); diff != "" {
				t.Errorf("os (-want +got):\n%s", diff)
			}
			if len(pe.Unreadable) != tt.unreadable {
				t.Errorf("unreadable = %v, want %d", pe.Unreadable, tt.unreadable)
			}
		})
	}
}

// A live root (a procfs mounted at its /proc, as the node's /proc under
// /host in the DaemonSet): the host name and the boot time are the kernel's,
// not /etc/hostname's.
func TestOSInfoLiveRoot(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("skipping: mounting a procfs into the test tree needs root")
	}
	h := hosttest.Tree(t, map[string]string{
		"proc/":              "",
		"etc/hostname":       "stale-name\n",
		"usr/lib/os-release": azureLinux3,
	})
	procDir := filepath.Join(h.Root, "proc")
	if err := unix.Mount("proc", procDir, "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		t.Skipf("skipping: mount proc on %s: %v", procDir, err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(procDir, unix.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", procDir, err)
		}
	})
	// What the kernel says, read the way the test machine reads it.
	hostname, err := os.ReadFile("/proc/sys/kernel/hostname")
	if err != nil {
		t.Fatal(err)
	}
	kernel, err := os.ReadFile("/proc/sys/kernel/osrelease")
	if err != nil {
		t.Fatal(err)
	}
	stat, err := os.ReadFile("/proc/stat")
	if err != nil {
		t.Fatal(err)
	}
	btime, err := parseBtime(stat)
	if err != nil {
		t.Fatal(err)
	}

	pe := probe.RunAll(context.Background(), h, []probe.Probe{osInfo{}}).Probes[0]
	if pe.Status != probe.StatusOK || len(pe.Unreadable) > 0 {
		t.Fatalf("status = %q (%s), unreadable %v", pe.Status, pe.Error, pe.Unreadable)
	}
	want := &nodediagv1.OSInfo{
		Id: "azurelinux", VersionId: "3.0", PrettyName: "Microsoft Azure Linux 3.0",
		Kernel:   strings.TrimSpace(string(kernel)),
		Hostname: strings.TrimSpace(string(hostname)),
		BootTime: timestamppb.New(btime),
	}
	if diff := cmp.Diff(want, pe.GetOs(), protocmp.Transform()); diff != "" {
		t.Errorf("os (-want +got):\n%s", diff)
	}
}
