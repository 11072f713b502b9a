package probes

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strconv"
	"strings"

	"github.com/nodediag/nodediag/agent/host"
	"github.com/nodediag/nodediag/agent/probe"
	nodediagv1 "github.com/nodediag/nodediag/proto/nodediag/v1"
)

// procSwaps is the kernel's list of active swap areas (mm/swapfile.c
// swap_show). It is the file the kubelet itself reads to decide that swap is
// on (pkg/kubelet/cm: "running with swap on is not supported").
const procSwaps = "/proc/swaps"

// swap reports the active swap areas of /proc/swaps. It is skipped when the
// root has no /proc/swaps (a copy of a host without it).
type swap struct{}

func (swap) Name() string { return "swap" }

func (swap) Run(ctx context.Context, h *host.Host) (*nodediagv1.ProbeEvidence, error) {
	b, err := h.ReadFile(procSwaps)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: no %s", probe.ErrNotApplicable, procSwaps)
	}
	if err != nil {
		return nil, err
	}
	pe := &nodediagv1.ProbeEvidence{}
	devices, err := parseSwaps(b)
	if err != nil {
		// The devices that parsed are still reported.
		probe.Unreadable(pe, procSwaps, err)
	}
	data := &nodediagv1.Swap{Text: string(b)}
	for _, d := range devices {
		d.Line.Path = procSwaps
		data.Devices = append(data.Devices, d)
	}
	pe.Data = &nodediagv1.ProbeEvidence_Swap{Swap: data}
	return pe, nil
}

// errSwapsLine is wrapped by parseSwaps for a row it cannot read.
var errSwapsLine = errors.New("malformed /proc/swaps row")

// parseSwaps parses /proc/swaps:
//
//	Filename				Type		Size		Used		Priority
//	/swapfile                               file		2097148		0		-2
//
// Sizes are in KiB. The kernel escapes a space, tab, newline or backslash in
// a file name as \ooo (seq_file_path), so a row has exactly five fields. The
// header is optional. Rows that do not parse give an error wrapping
// errSwapsLine that names them; the others are returned. Lines carry their
// 1-based number and text, without a path.
func parseSwaps(b []byte) ([]*nodediagv1.SwapDevice, error) {
	var out []*nodediagv1.SwapDevice
	var bad []string
	for i, line := range strings.Split(string(b), "\n") {
		text := strings.TrimRight(line, "\r")
		fields := strings.Fields(text)
		if len(fields) == 0 || (i == 0 && fields[0] == "Filename") {
			continue
		}
		d, err := parseSwapsRow(fields)
		if err != nil {
			bad = append(bad, fmt.Sprintf("line %d: %v", i+1, err))
			continue
		}
		d.Line = &nodediagv1.SourceLine{Line: int32(i + 1), Text: text}
		out = append(out, d)
	}
	if len(bad) > 0 {
		return out, fmt.Errorf("%w: %s", errSwapsLine, strings.Join(bad, "; "))
	}
	return out, nil
}

func parseSwapsRow(fields []string) (*nodediagv1.SwapDevice, error) {
	if len(fields) != 5 {
		return nil, fmt.Errorf("%d fields, want 5 (Filename Type Size Used Priority)", len(fields))
	}
	size, err := strconv.ParseUint(fields[2], 10, 64)
	if err != nil {
		return nil, fmt.Errorf("size %q: %w", fields[2], err)
	}
	used, err := strconv.ParseUint(fields[3], 10, 64)
	if err != nil {
		return nil, fmt.Errorf("used %q: %w", fields[3], err)
	}
	prio, err := strconv.ParseInt(fields[4], 10, 32)
	if err != nil {
		return nil, fmt.Errorf("priority %q: %w", fields[4], err)
	}
	return &nodediagv1.SwapDevice{
		Filename: host.UnescapeOctal(fields[0]),
		Type:     fields[1],
		SizeKib:  size,
		UsedKib:  used,
		Priority: int32(prio),
	}, nil
}
