package probes

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/nodediag/nodediag/agent/host"
	"github.com/nodediag/nodediag/agent/journal"
	"github.com/nodediag/nodediag/agent/logline"
	"github.com/nodediag/nodediag/agent/probe"
	"github.com/nodediag/nodediag/agent/redact"
	nodediagv1 "github.com/nodediag/nodediag/proto/nodediag/v1"
)

// journalDirs are where journald keeps its files: persistent, then
// volatile (when /var/log/journal does not exist, or Storage=volatile).
var journalDirs = []string{"/var/log/journal", "/run/log/journal"}

// journalUnits are the units whose journal the probe reads, and the kind of
// log each is (LogExcerpt.kind: which log signatures apply).
var journalUnits = []struct{ unit, kind string }{
	{"kubelet.service", "kubelet"},
	{"containerd.service", "containerd"},
	// cloud-init's stages: their output is cloud-init-output.log's, for
	// nodes (or copies) where only the journal kept it.
	{"cloud-final.service", "cloud-init-output"},
	{"cloud-config.service", "cloud-init-output"},
	{"cloud-init.service", "cloud-init-output"},
	{"cloud-init-local.service", "cloud-init-output"},
	// cloud-init 24.3 and later run their stages from one service.
	{"cloud-init-main.service", "cloud-init-output"},
	// Kubermatic's machine-controller: cloud-init's runcmd starts
	// bootstrap.service, which fetches and runs the node's provisioning.
	{"bootstrap.service", "cloud-init-output"},
	// etcd as a systemd unit (kubespray, kubeadm's external etcd): its
	// clock and disk complaints.
	{"etcd.service", "etcd"},
	// The network's managers, which say when a link is lost.
	{"systemd-networkd.service", "network"},
	{"NetworkManager.service", "network"},
}

// journalKernel is the source of the kernel's messages (_TRANSPORT=kernel:
// OOM kills, filesystem errors, hung tasks, links), read like a unit's.
const journalKernel = "journal:kernel"

// journalFields are the fields the probe decodes: the rest of an entry is
// never read.
var journalFields = []string{"MESSAGE", "SYSLOG_IDENTIFIER", "_SYSTEMD_UNIT", "UNIT", "_PID", "_TRANSPORT"}

// journalProbe reads the systemd journal files of the host itself (no
// journalctl, no libsystemd: the agent stays static and reads journals
// copied off a host too): for each unit of journalUnits, the entries of the
// last boot that journald stored for it (_SYSTEMD_UNIT) and that systemd
// wrote about it (UNIT=, from PID 1: exits, restarts), kept by the same
// policy as text logs. It derives the units' state from systemd's messages
// for when the bus cannot be asked (the units probe).
//
// Given text exports (JournalText: a CI artifact tree's journal.log and
// kubelet.log, journalctl's short output), it reads them instead, into the
// same evidence: what is judged cannot tell the two sources apart.
type journalProbe struct {
	text []journal.TextExport
}

// JournalText returns the probes with the journal read from text exports
// instead of journal files (nodediag analyze of a CI artifact tree).
func JournalText(exports ...journal.TextExport) []probe.Probe {
	ps := All()
	for i, p := range ps {
		if _, ok := p.(journalProbe); ok {
			ps[i] = journalProbe{text: exports}
		}
	}
	return ps
}

func (journalProbe) Name() string { return "journal" }

// journalSource is what the probe reads entries from: journal files
// (journal.Journal) or text exports (journal.TextJournal).
type journalSource interface {
	Query(q journal.Query, fn func(*journal.Entry) bool) error
	Boots() ([]journal.Boot, error)
}

func (p journalProbe) Run(ctx context.Context, h *host.Host) (*nodediagv1.ProbeEvidence, error) {
	pe := &nodediagv1.ProbeEvidence{}
	var src journalSource
	var files []*journal.File
	var problems func() []journal.Problem
	data := &nodediagv1.Journal{Dirs: journalDirs}
	if len(p.text) > 0 {
		var units []string
		for _, u := range journalUnits {
			units = append(units, u.unit)
		}
		tj, err := journal.OpenText(h, journal.TextOptions{Units: units}, p.text...)
		problems = func() []journal.Problem { return tj.Problems }
		if err != nil {
			for _, pr := range tj.Problems {
				probe.Unreadable(pe, pr.Path, pr.Err)
			}
			return pe, fmt.Errorf("reading the journal's text exports: %w", err)
		}
		src, files = tj, tj.Files
		data.Dirs = nil
		for _, e := range p.text {
			data.Dirs = append(data.Dirs, e.Path)
		}
	} else {
		j, err := journal.Open(h, journalDirs...)
		if err != nil {
			return nil, fmt.Errorf("opening the journal: %w", err)
		}
		defer j.Close()
		problems = func() []journal.Problem { return j.Problems }
		if len(j.Files) == 0 {
			return pe, fmt.Errorf("%w: no journal files in %s", probe.ErrNotApplicable, strings.Join(journalDirs, " or "))
		}
		src, files = j, j.Files
	}
	defer func() {
		for _, p := range problems() {
			src := p.Path
			if p.Offset > 0 {
				src = fmt.Sprintf("%s (offset %d)", p.Path, p.Offset)
			}
			probe.Unreadable(pe, src, p.Err)
		}
	}()
	for _, f := range files {
		jf := &nodediagv1.JournalFile{Path: f.Path, SizeBytes: f.Size, NEntries: int64(f.Entries), Features: f.Features}
		if !f.Head.IsZero() {
			jf.Head = timestamppb.New(f.Head)
		}
		if !f.Tail.IsZero() {
			jf.Tail = timestamppb.New(f.Tail)
		}
		data.Files = append(data.Files, jf)
	}
	boots, err := src.Boots()
	if err != nil {
		probe.Unreadable(pe, "journal boots", err)
	}
	for _, b := range boots {
		data.Boots = append(data.Boots, &nodediagv1.JournalBoot{BootId: b.ID, First: timestamppb.New(b.First), Last: timestamppb.New(b.Last)})
	}
	if len(boots) > 0 {
		data.BootId = boots[len(boots)-1].ID
	}
	if err := ctx.Err(); err != nil {
		for _, u := range journalUnits {
			probe.Unreadable(pe, "journal:"+u.unit, fmt.Errorf("not read: %w", err))
		}
	} else {
		outs, err := journalUnitsRead(ctx, src, data.BootId, h.Since)
		for _, u := range journalUnits {
			o := outs[u.unit]
			switch {
			case err != nil:
				probe.Unreadable(pe, "journal:"+u.unit, err)
			case o.ex != nil:
				data.Sources = append(data.Sources, o.ex)
				if o.state != nil {
					data.Units = append(data.Units, o.state)
				}
			}
		}
	}
	// A unit with no entry in this boot: its last run in the boot before (a
	// kubelet that was not enabled does not come back after a reboot).
	if len(boots) >= 2 && h.Since.IsZero() {
		prev := boots[len(boots)-2].ID
		for _, unit := range []string{"kubelet.service", "containerd.service"} {
			if ctx.Err() != nil || journalHasSource(data, "journal:"+unit) {
				continue
			}
			run, err := journalLastRun(ctx, src, unit, prev)
			if err != nil {
				probe.Unreadable(pe, "journal:"+unit+" (boot "+prev+")", err)
				continue
			}
			if run != nil {
				data.EarlierRuns = append(data.EarlierRuns, run)
			}
		}
	}
	if err := ctx.Err(); err != nil {
		probe.Unreadable(pe, journalKernel, fmt.Errorf("not read: %w", err))
	} else if ex, err := journalKernelLines(ctx, src, data.BootId, h.Since); err != nil {
		probe.Unreadable(pe, journalKernel, err)
	} else if ex != nil {
		data.Sources = append(data.Sources, ex)
	}
	pe.Data = &nodediagv1.ProbeEvidence_Journal{Journal: data}
	return pe, nil
}

// unitRead is what journalUnitsRead made of one unit's entries.
type unitRead struct {
	ex    *nodediagv1.LogExcerpt
	state *nodediagv1.UnitState
	keep  *lineKeeper
	st    *unitFromJournal
	keys  redact.KeyBlock
}

// journalUnitsRead reads the entries of a boot of every unit of
// journalUnits in one pass (one query for all, as journalctl -u A -u B
// does: the file is read once, not once per unit), from since when it is
// set (--since: the reader finds it by bisection): each unit's own entries
// (_SYSTEMD_UNIT) and what systemd wrote about it (UNIT=, from PID 1), kept
// by the same policy as text logs, and the unit's state derived from
// systemd's messages. A unit without entries has no excerpt.
func journalUnitsRead(ctx context.Context, j journalSource, bootID string, since time.Time) (map[string]*unitRead, error) {
	q := journal.Query{BootID: bootID, Since: since, Fields: journalFields, Reuse: true}
	outs := map[string]*unitRead{}
	for _, u := range journalUnits {
		q.Any = append(q.Any,
			[]journal.Term{{Field: "_SYSTEMD_UNIT", Value: u.unit}},
			[]journal.Term{{Field: "UNIT", Value: u.unit}, {Field: "_PID", Value: "1"}})
		outs[u.unit] = &unitRead{
			ex:   &nodediagv1.LogExcerpt{Source: "journal:" + u.unit, Kind: u.kind},
			keep: newLineKeeper(),
			st:   &unitFromJournal{unit: u.unit},
		}
	}
	n := 0
	err := j.Query(q, func(e *journal.Entry) bool {
		if n%1024 == 0 && ctx.Err() != nil {
			return false
		}
		n++
		fromSystemd := false
		o := outs[e.Fields["_SYSTEMD_UNIT"]]
		if e.Fields["_PID"] == "1" {
			if so := outs[e.Fields["UNIT"]]; so != nil {
				o, fromSystemd = so, true
			}
		}
		if o == nil {
			return true
		}
		msg := o.keys.Line(strings.TrimRight(e.Fields["MESSAGE"], "\n"))
		program := e.Fields["SYSLOG_IDENTIFIER"]
		if fromSystemd {
			program = "systemd"
			o.st.see(e, msg)
		}
		o.ex.TotalLines++
		o.keep.seeTime(e.Realtime)
		o.keep.add(logsCandidate{raw: msg, time: e.Realtime, program: program, important: fromSystemd || logline.Notable(msg)})
		return true
	})
	if err != nil && n == 0 {
		return nil, err
	}
	if ctx.Err() != nil {
		return nil, fmt.Errorf("not read to the end: %w", ctx.Err())
	}
	for unit, o := range outs {
		if o.ex.TotalLines == 0 {
			outs[unit] = &unitRead{}
			continue
		}
		o.keep.finish(o.ex)
		o.state = o.st.state()
	}
	return outs, nil
}

func journalHasSource(j *nodediagv1.Journal, source string) bool {
	for _, s := range j.GetSources() {
		if s.GetSource() == source {
			return true
		}
	}
	return false
}

// journalLastRun is what a unit did in an earlier boot: its entries and
// systemd's about it, counted, and the last one kept. Nil without any.
func journalLastRun(ctx context.Context, j journalSource, unit, bootID string) (*nodediagv1.UnitLastRun, error) {
	q := journal.Query{
		Any: [][]journal.Term{
			{{Field: "_SYSTEMD_UNIT", Value: unit}},
			{{Field: "UNIT", Value: unit}, {Field: "_PID", Value: "1"}},
		},
		BootID: bootID,
		Fields: []string{"MESSAGE"},
		Reuse:  true,
	}
	run := &nodediagv1.UnitLastRun{Unit: unit, BootId: bootID}
	err := j.Query(q, func(e *journal.Entry) bool {
		if run.Entries%1024 == 0 && ctx.Err() != nil {
			return false
		}
		if run.Entries == 0 {
			run.First = timestamppb.New(e.Realtime)
		}
		run.Entries++
		run.Last = timestamppb.New(e.Realtime)
		run.LastLine = strings.TrimRight(e.Fields["MESSAGE"], "\n")
		return true
	})
	if err != nil && run.Entries == 0 {
		return nil, err
	}
	if run.Entries == 0 {
		return nil, nil
	}
	return run, nil
}

// journalKernelLines reads the kernel's entries of a boot (_TRANSPORT=kernel),
// kept by the same policy as a unit's lines; nil, nil when it has none.
func journalKernelLines(ctx context.Context, j journalSource, bootID string, since time.Time) (*nodediagv1.LogExcerpt, error) {
	q := journal.Query{Any: [][]journal.Term{{{Field: "_TRANSPORT", Value: "kernel"}}}, BootID: bootID, Since: since, Fields: journalFields, Reuse: true}
	ex := &nodediagv1.LogExcerpt{Source: journalKernel, Kind: "kernel"}
	k := newLineKeeper()
	n := 0
	err := j.Query(q, func(e *journal.Entry) bool {
		if n%1024 == 0 && ctx.Err() != nil {
			return false
		}
		n++
		msg := strings.TrimRight(e.Fields["MESSAGE"], "\n")
		ex.TotalLines++
		k.seeTime(e.Realtime)
		k.add(logsCandidate{raw: msg, time: e.Realtime, program: "kernel", important: logline.Notable(msg)})
		return true
	})
	if err != nil && n == 0 {
		return nil, err
	}
	if ctx.Err() != nil {
		return nil, fmt.Errorf("not read to the end: %w", ctx.Err())
	}
	if n == 0 {
		return nil, nil
	}
	k.finish(ex)
	return ex, nil
}

// Messages systemd (PID 1) writes about a unit (src/core/service.c,
// unit.c), in today's wording and in that of systemd before 236 (CentOS 7:
// "main process exited", "holdoff time over, scheduling restart", "Unit
// kubelet.service entered failed state.").
var (
	unitRestartRe    = regexp.MustCompile(`Scheduled restart job, restart counter is at (\d+)`)
	unitExitRe       = regexp.MustCompile(`[Mm]ain process exited, code=(\w+), status=(\d+)(?:/(\S+))?`)
	unitResultRe     = regexp.MustCompile(`Failed with result '([\w-]+)'`)
	unitHoldoffRe    = regexp.MustCompile(`holdoff time over, scheduling restart`)
	unitStartLimitRe = regexp.MustCompile(`[Ss]tart request repeated too quickly`)
	unitFailedOldRe  = regexp.MustCompile(`^Unit \S+ entered failed state\.|^\S+\.service failed\.$|^Failed to start `)
)

// unitFromJournal derives a unit's state from systemd's messages about it.
type unitFromJournal struct {
	unit     string
	seen     bool
	restarts uint32
	code     int32
	status   int32
	result   string
	active   string
	sub      string
	last     *nodediagv1.Quote
}

func (u *unitFromJournal) see(e *journal.Entry, msg string) {
	q := &nodediagv1.Quote{Source: "journal:" + u.unit, Time: timestamppb.New(e.Realtime), Excerpt: msg}
	switch {
	case unitRestartRe.MatchString(msg):
		n, _ := strconv.ParseUint(unitRestartRe.FindStringSubmatch(msg)[1], 10, 32)
		u.restarts, u.active, u.sub = uint32(n), "activating", "auto-restart"
	case unitExitRe.MatchString(msg):
		m := unitExitRe.FindStringSubmatch(msg)
		u.code = map[string]int32{"exited": 1, "killed": 2, "dumped": 3}[m[1]]
		s, _ := strconv.ParseInt(m[2], 10, 32)
		u.status = int32(s)
		u.active, u.sub = "deactivating", "stop-post"
	case unitResultRe.MatchString(msg):
		u.result = unitResultRe.FindStringSubmatch(msg)[1]
		u.active, u.sub = "failed", "failed"
	case unitHoldoffRe.MatchString(msg):
		// systemd before 236 counts no restarts: they are counted here.
		u.restarts++
		u.active, u.sub = "activating", "auto-restart"
	case unitStartLimitRe.MatchString(msg):
		u.result = "start-limit-hit"
		u.active, u.sub = "failed", "failed"
	case unitFailedOldRe.MatchString(msg):
		if u.result == "" {
			u.result = "exit-code"
		}
		u.active, u.sub = "failed", "failed"
	case strings.HasPrefix(msg, "Started "):
		u.active, u.sub = "active", "running"
	case strings.HasPrefix(msg, "Stopped ") || strings.Contains(msg, "Deactivated successfully"):
		u.active, u.sub = "inactive", "dead"
	default:
		return
	}
	u.seen = true
	u.last = q
}

func (u *unitFromJournal) state() *nodediagv1.UnitState {
	if !u.seen {
		return nil
	}
	return &nodediagv1.UnitState{
		Name: u.unit, LoadState: "loaded", ActiveState: u.active, SubState: u.sub, Result: u.result,
		NRestarts: u.restarts, ExecMainCode: u.code, ExecMainStatus: u.status, Source: "journal", Evidence: u.last,
	}
}
