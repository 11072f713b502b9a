package probes

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/nodediag/nodediag/agent/host"
	"github.com/nodediag/nodediag/agent/probe"
	nodediagv1 "github.com/nodediag/nodediag/proto/nodediag/v1"
)

// Files that identify the host (os-release(5), machine-id(5), proc(5)).
const (
	// Written by the distribution's packages; /etc/os-release is usually a
	// symlink to /usr/lib/os-release, which is the fallback.
	osReleaseEtc = "/etc/os-release"
	osReleaseUsr = "/usr/lib/os-release"
	// The running kernel's release and the host name, from the kernel.
	osKernelRelease = "/proc/sys/kernel/osrelease"
	osKernelHost    = "/proc/sys/kernel/hostname"
	// Written by the image or at first boot (systemd-hostnamed, cloud-init's
	// set_hostname module).
	osEtcHostname = "/etc/hostname"
	// Written by systemd at first boot.
	osMachineID = "/etc/machine-id"
	// The kernel's statistics; its btime line is the boot time in seconds
	// since the epoch.
	osProcStat = "/proc/stat"
)

// osInfo identifies the host: distribution, kernel, host name, machine id
// and, on a live root only, the boot time (a /proc/stat copied into a bundle
// is stale, and the evidence window is anchored on the boot).
type osInfo struct{}

func (osInfo) Name() string { return "os" }

func (osInfo) Run(ctx context.Context, h *host.Host) (*nodediagv1.ProbeEvidence, error) {
	pe := &nodediagv1.ProbeEvidence{}
	data := &nodediagv1.OSInfo{}
	found := false

	// read returns the file's trimmed content, "" when it is absent;
	// other failures are recorded.
	read := func(name string) string {
		b, _, err := h.ReadFileLimit(name, 64<<10)
		if errors.Is(err, fs.ErrNotExist) {
			return ""
		}
		if err != nil {
			probe.Unreadable(pe, name, err)
			return ""
		}
		found = true
		return strings.TrimSpace(string(b))
	}

	release := read(osReleaseEtc)
	if release == "" {
		release = read(osReleaseUsr)
	}
	if release != "" {
		kv := parseOSRelease([]byte(release))
		data.Id, data.VersionId, data.PrettyName = kv["ID"], kv["VERSION_ID"], kv["PRETTY_NAME"]
		if data.PrettyName == "" {
			// os-release(5): PRETTY_NAME defaults to "Linux".
			data.PrettyName = strings.TrimSpace(kv["NAME"] + " " + kv["VERSION"])
		}
	}
	data.Kernel = read(osKernelRelease)
	live := h.Live()
	if live {
		data.Hostname = read(osKernelHost)
	}
	if data.Hostname == "" {
		data.Hostname = read(osEtcHostname)
	}
	data.MachineId = read(osMachineID)
	if live {
		b, _, err := h.ReadFileLimit(osProcStat, 1<<20)
		switch {
		case err != nil:
			probe.Unreadable(pe, osProcStat, err)
		default:
			bt, err := parseBtime(b)
			if err != nil {
				probe.Unreadable(pe, osProcStat, err)
			} else {
				data.BootTime = timestamppb.New(bt)
			}
		}
	}
	if !found && len(pe.Unreadable) == 0 {
		return nil, fmt.Errorf("%w: no %s, %s, %s or %s", probe.ErrNotApplicable, osReleaseEtc, osReleaseUsr, osEtcHostname, osKernelRelease)
	}
	pe.Data = &nodediagv1.ProbeEvidence_Os{Os: data}
	return pe, nil
}

// parseOSRelease parses os-release(5): KEY=value lines, values optionally in
// double or single quotes, with the shell escapes \" \\ \$ \` inside double
// quotes; blank lines and # comments are skipped, and so are lines that are
// not assignments.
func parseOSRelease(b []byte) map[string]string {
	out := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		key, val, ok := strings.Cut(line, "=")
		if !ok || key == "" || strings.ContainsAny(key, " \t\"'") {
			continue
		}
		out[key] = osReleaseValue(val)
	}
	return out
}

// osReleaseValue unquotes a value of os-release.
func osReleaseValue(v string) string {
	if len(v) >= 2 && v[0] == '\'' && v[len(v)-1] == '\'' {
		return v[1 : len(v)-1]
	}
	if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
		v = v[1 : len(v)-1]
		var b strings.Builder
		for i := 0; i < len(v); i++ {
			if v[i] == '\\' && i+1 < len(v) && strings.IndexByte("\"\\$`", v[i+1]) >= 0 {
				i++
			}
			b.WriteByte(v[i])
		}
		return b.String()
	}
	return v
}

// errNoBtime is wrapped by parseBtime when /proc/stat has no usable btime.
var errNoBtime = errors.New("no btime line")

// parseBtime returns the boot time of /proc/stat's "btime <seconds>" line.
func parseBtime(b []byte) (time.Time, error) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 || f[0] != "btime" {
			continue
		}
		if len(f) != 2 {
			return time.Time{}, fmt.Errorf("%w: %q", errNoBtime, sc.Text())
		}
		s, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil || s <= 0 {
			return time.Time{}, fmt.Errorf("%w: btime %q is not seconds since the epoch", errNoBtime, f[1])
		}
		return time.Unix(s, 0).UTC(), nil
	}
	return time.Time{}, errNoBtime
}
