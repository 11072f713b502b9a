package corpus

import (
	"crypto/sha256"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/nodediag/nodediag/agent/journal/journaltest"
)

// A JournalLine is one entry of a case's journal.
type JournalLine struct {
	Time time.Time
	// Unit is the unit the line belongs to (_SYSTEMD_UNIT), or for
	// systemd[1] the unit its message is about (UNIT=); "" for the kernel.
	Unit    string
	Ident   string
	PID     int
	Message string
	// Boot counts the "-- boot --" lines above the line.
	Boot int
}

// Kernel says whether the line is the kernel's.
func (l JournalLine) Kernel() bool { return l.Ident == "kernel" }

// Source is how the agent names the line's log: journal:UNIT, or
// journal:kernel.
func (l JournalLine) Source() string {
	if l.Kernel() {
		return "journal:kernel"
	}
	return "journal:" + l.Unit
}

// BootMarker starts a new boot in a case's journal.
const BootMarker = "-- boot --"

var journalLineShape = regexp.MustCompile(`(?s)^(\S+) (?:(\S+\.(?:service|scope|socket|mount|timer|slice|target)) )?([^\s\[\]:]+)(?:\[(\d+)\])?: (.*)$`)

// defaultUnits are the units of identifiers that name no unit.
var defaultUnits = map[string]string{
	"kubelet": "kubelet.service", "containerd": "containerd.service", "cloud-init": "cloud-final.service",
	"dockerd": "docker.service", "etcd": "etcd.service", "crio": "crio.service", "cri-dockerd": "cri-docker.service",
}

// JournalLines parses the case's journal: "TIME [UNIT] IDENT[PID]: MESSAGE"
// lines, times increasing, "-- boot --" between boots.
func (c *Case) JournalLines() ([]JournalLine, error) {
	var out []JournalLine
	boot := 0
	var last time.Time
	for i, raw := range c.Journal {
		s := strings.TrimRight(raw, "\n")
		if strings.TrimSpace(s) == BootMarker {
			boot++
			continue
		}
		m := journalLineShape.FindStringSubmatch(s)
		if m == nil {
			return nil, fmt.Errorf("journal line %d: want TIME [UNIT] IDENT[PID]: MESSAGE, got %q", i+1, clip(s))
		}
		t, err := time.Parse(time.RFC3339Nano, m[1])
		if err != nil {
			return nil, fmt.Errorf("journal line %d: time %q: want RFC 3339", i+1, m[1])
		}
		if t.Before(last) {
			return nil, fmt.Errorf("journal line %d: %s is before the line above (%s)", i+1, m[1], last.Format(time.RFC3339Nano))
		}
		last = t
		l := JournalLine{Time: t.UTC(), Unit: m[2], Ident: m[3], Message: m[5], Boot: boot}
		if m[4] != "" {
			l.PID, _ = strconv.Atoi(m[4])
		}
		switch {
		case l.Kernel():
			if l.Unit != "" {
				return nil, fmt.Errorf("journal line %d: a kernel line belongs to no unit", i+1)
			}
		case l.Ident == "systemd" && l.PID == 1 && l.Unit == "":
			// PID 1 about a unit: "kubelet.service: Main process exited ...".
			if u, _, ok := strings.Cut(l.Message, ": "); ok && unitName.MatchString(u) {
				l.Unit = u
			} else if u := startedUnit.FindStringSubmatch(l.Message); u != nil {
				l.Unit = u[1]
			}
		case l.Unit == "":
			l.Unit = defaultUnits[l.Ident]
		}
		if l.Unit == "" && !l.Kernel() && !(l.Ident == "systemd" && l.PID == 1) {
			return nil, fmt.Errorf("journal line %d: %s names no unit: write TIME UNIT %s[PID]: ...", i+1, l.Ident, l.Ident)
		}
		if l.PID == 0 && !l.Kernel() {
			return nil, fmt.Errorf("journal line %d: %s without a [PID]", i+1, l.Ident)
		}
		out = append(out, l)
	}
	return out, nil
}

var (
	unitName    = regexp.MustCompile(`^[\w@.-]+\.(?:service|scope|socket|mount|timer|slice|target)$`)
	startedUnit = regexp.MustCompile(`^(?:Started|Starting|Stopped|Stopping|Reloading|Reloaded) ([\w@.-]+\.service)\b`)
)

func clip(s string) string {
	if len(s) > 120 {
		return s[:120] + "..."
	}
	return s
}

// entries are the journal's lines as journald would store them, for
// journal-remote: each boot has its own boot ID, monotonic time from its
// first line.
func entries(c *Case, lines []JournalLine, hostname, machineID string) []journaltest.Entry {
	var out []journaltest.Entry
	bootStart := map[int]time.Time{}
	for _, l := range lines {
		if _, ok := bootStart[l.Boot]; !ok {
			start := l.Time.Add(-5 * time.Second)
			if l.Boot == lastBoot(lines) && !c.Node.Boot.IsZero() && !c.Node.Boot.After(l.Time) {
				start = c.Node.Boot
			}
			bootStart[l.Boot] = start
		}
		mono := l.Time.Sub(bootStart[l.Boot]) + time.Second
		e := journaltest.Entry{
			{Name: "__REALTIME_TIMESTAMP", Value: strconv.FormatInt(l.Time.UnixMicro(), 10)},
			{Name: "__MONOTONIC_TIMESTAMP", Value: strconv.FormatInt(mono.Microseconds(), 10)},
			{Name: "_BOOT_ID", Value: bootID(c.Name, l.Boot)},
			{Name: "_MACHINE_ID", Value: machineID},
			{Name: "_HOSTNAME", Value: hostname},
			{Name: "SYSLOG_IDENTIFIER", Value: l.Ident},
			{Name: "MESSAGE", Value: l.Message},
		}
		switch {
		case l.Kernel():
			e = append(e, journaltest.Field{Name: "_TRANSPORT", Value: "kernel"}, journaltest.Field{Name: "PRIORITY", Value: "6"},
				journaltest.Field{Name: "SYSLOG_FACILITY", Value: "0"})
		case l.Ident == "systemd" && l.PID == 1:
			e = append(e, journaltest.Field{Name: "_TRANSPORT", Value: "journal"}, journaltest.Field{Name: "PRIORITY", Value: "6"},
				journaltest.Field{Name: "_PID", Value: "1"}, journaltest.Field{Name: "_SYSTEMD_UNIT", Value: "init.scope"})
			if l.Unit != "" {
				e = append(e, journaltest.Field{Name: "UNIT", Value: l.Unit})
			}
		default:
			// journald sets PRIORITY 6 for every stdout line.
			e = append(e, journaltest.Field{Name: "_TRANSPORT", Value: "stdout"}, journaltest.Field{Name: "PRIORITY", Value: "6"},
				journaltest.Field{Name: "_PID", Value: strconv.Itoa(l.PID)}, journaltest.Field{Name: "_SYSTEMD_UNIT", Value: l.Unit})
		}
		out = append(out, e)
	}
	return out
}

func lastBoot(lines []JournalLine) int {
	if len(lines) == 0 {
		return 0
	}
	return lines[len(lines)-1].Boot
}

// bootID is a boot's ID, derived from the case so that builds repeat.
func bootID(name string, boot int) string {
	return fmt.Sprintf("%x", sha256.Sum256([]byte(fmt.Sprintf("%s boot %d", name, boot))))[:32]
}
