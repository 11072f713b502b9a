package probes

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/nodediag/nodediag/agent/host/hosttest"
	"github.com/nodediag/nodediag/agent/probe"
	nodediagv1 "github.com/nodediag/nodediag/proto/nodediag/v1"
)

const (
	swapsHeader   = "Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n"
	swapsSwapfile = "/swapfile                               file\t\t2097148\t\t0\t\t-2\n"
	swapsPart     = "/dev/sdb2                               partition\t8388604\t\t1024\t\t5\n"
)

var swapsTests = []struct {
	name    string
	in      string
	want    []*nodediagv1.SwapDevice
	wantErr error
}{
	{name: "no swap: header only", in: swapsHeader},
	{name: "empty file", in: ""},
	{
		name: "a swap file",
		in:   swapsHeader + swapsSwapfile,
		want: []*nodediagv1.SwapDevice{{
			Filename: "/swapfile", Type: "file", SizeKib: 2097148, Priority: -2,
			Line: &nodediagv1.SourceLine{Line: 2, Text: "/swapfile                               file\t\t2097148\t\t0\t\t-2"},
		}},
	},
	{
		name: "a file and a partition",
		in:   swapsHeader + swapsSwapfile + swapsPart,
		want: []*nodediagv1.SwapDevice{
			{Filename: "/swapfile", Type: "file", SizeKib: 2097148, Priority: -2, Line: &nodediagv1.SourceLine{Line: 2, Text: "/swapfile                               file\t\t2097148\t\t0\t\t-2"}},
			{Filename: "/dev/sdb2", Type: "partition", SizeKib: 8388604, UsedKib: 1024, Priority: 5, Line: &nodediagv1.SourceLine{Line: 3, Text: "/dev/sdb2                               partition\t8388604\t\t1024\t\t5"}},
		},
	},
	{
		name: "a file name with spaces, escaped by the kernel",
		in:   swapsHeader + "/mnt/my\\040swap\\040file file 1024 0 -3\n",
		want: []*nodediagv1.SwapDevice{{
			Filename: "/mnt/my swap file", Type: "file", SizeKib: 1024, Priority: -3,
			Line: &nodediagv1.SourceLine{Line: 2, Text: "/mnt/my\\040swap\\040file file 1024 0 -3"},
		}},
	},
	{
		name: "no header, CRLF, trailing blank lines",
		in:   "/swapfile file 100 1 -2\r\n\n\n",
		want: []*nodediagv1.SwapDevice{{
			Filename: "/swapfile", Type: "file", SizeKib: 100, UsedKib: 1, Priority: -2,
			Line: &nodediagv1.SourceLine{Line: 1, Text: "/swapfile file 100 1 -2"},
		}},
	},
	{
		name: "a malformed row is reported, the good one kept",
		in:   swapsHeader + "/swapfile file lots 0 -2\n/zram0 partition 4096 0 100\n/truncated file 10",
		want: []*nodediagv1.SwapDevice{{
			Filename: "/zram0", Type: "partition", SizeKib: 4096, Priority: 100,
			Line: &nodediagv1.SourceLine{Line: 3, Text: "/zram0 partition 4096 0 100"},
		}},
		wantErr: errSwapsLine,
	},
}

func TestParseSwaps(t *testing.T) {
	for _, tt := range swapsTests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseSwaps([]byte(tt.in))
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("error = %v, want %v", err, tt.wantErr)
			}
			if diff := cmp.Diff(tt.want, got, protocmp.Transform()); diff != "" {
				t.Errorf("parseSwaps (-want +got):\n%s", diff)
			}
		})
	}
}

func FuzzParseSwaps(f *testing.F) {
	for _, tt := range swapsTests {
		f.Add(tt.in)
	}
	f.Fuzz(func(t *testing.T, in string) {
		devices, err := parseSwaps([]byte(in))
		for _, d := range devices {
			if d.Line == nil || d.Line.Line < 1 {
				t.Errorf("device %v without its line", d)
			}
		}
		if err != nil && !errors.Is(err, errSwapsLine) {
			t.Errorf("error %v does not wrap errSwapsLine", err)
		}
	})
}

func TestSwapProbe(t *testing.T) {
	tests := []struct {
		name       string
		files      map[string]string
		wantStatus string
		want       *nodediagv1.Swap
		unreadable int
	}{
		{
			name:       "no /proc/swaps: skipped",
			files:      map[string]string{"etc/hostname": "node-1\n"},
			wantStatus: probe.StatusSkipped,
		},
		{
			name:       "swap off",
			files:      map[string]string{"proc/swaps": swapsHeader},
			wantStatus: probe.StatusOK,
			want:       &nodediagv1.Swap{Text: swapsHeader},
		},
		{
			name:       "swap on: the line is quoted with its path",
			files:      map[string]string{"proc/swaps": swapsHeader + swapsSwapfile},
			wantStatus: probe.StatusOK,
			want: &nodediagv1.Swap{
				Text: swapsHeader + swapsSwapfile,
				Devices: []*nodediagv1.SwapDevice{{
					Filename: "/swapfile", Type: "file", SizeKib: 2097148, Priority: -2,
					Line: &nodediagv1.SourceLine{Path: "/proc/swaps", Line: 2, Text: "/swapfile                               file\t\t2097148\t\t0\t\t-2"},
				}},
			},
		},
		{
			name:       "a malformed row is unreadable, the rest reported",
			files:      map[string]string{"proc/swaps": swapsHeader + "garbage\n" + swapsPart},
			wantStatus: probe.StatusOK,
			want: &nodediagv1.Swap{
				Text: swapsHeader + "garbage\n" + swapsPart,
				Devices: []*nodediagv1.SwapDevice{{
					Filename: "/dev/sdb2", Type: "partition", SizeKib: 8388604, UsedKib: 1024, Priority: 5,
					Line: &nodediagv1.SourceLine{Path: "/proc/swaps", Line: 3, Text: "/dev/sdb2                               partition\t8388604\t\t1024\t\t5"},
				}},
			},
			unreadable: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := hosttest.Tree(t, tt.files)
			pe := probe.RunAll(context.Background(), h, []probe.Probe{swap{}}).Probes[0]
			if pe.Status != tt.wantStatus {
				t.Fatalf("status = %q (%s), want %q", pe.Status, pe.Error, tt.wantStatus)
			}
			if diff := cmp.Diff(tt.want, pe.GetSwap(), protocmp.Transform()); diff != "" {
				t.Errorf("swap (-want +got):\n%s", diff)
			}
			if len(pe.Unreadable) != tt.unreadable {
				t.Errorf("unreadable = %v, want %d entries", pe.Unreadable, tt.unreadable)
			}
		})
	}
}
