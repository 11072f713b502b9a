package probes

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/nodediag/nodediag/agent/host"
	"github.com/nodediag/nodediag/agent/probe"
	nodediagv1 "github.com/nodediag/nodediag/proto/nodediag/v1"
)

// Files of cloud-init's own state. The probe reads them; it never runs
// cloud-init (`cloud-init status` would also shell out to systemctl).
const (
	// cloud-init's status_wrapper (cloudinit/cmd/main.py) writes status.json
	// under /var/lib/cloud/data at the start and end of every stage and links
	// it from /run/cloud-init with a relative symlink. At the start of
	// init-local it deletes both status and result files, so the /run link
	// (a tmpfs, wiped at reboot) is the state of this boot; the file under
	// /var/lib survives reboots and may describe an earlier boot.
	cloudInitRunStatus  = "/run/cloud-init/status.json"
	cloudInitDataStatus = "/var/lib/cloud/data/status.json"
	// result.json is written by the same wrapper only when modules-final ends:
	// {"v1": {"datasource": ..., "errors": [every stage's errors]}}.
	cloudInitRunResult  = "/run/cloud-init/result.json"
	cloudInitDataResult = "/var/lib/cloud/data/result.json"
	// Written by cc_final_message at the end of modules-final, at every
	// boot: "<uptime> - <timestamp> - v. <version>".
	cloudInitBootFinished = "/var/lib/cloud/instance/boot-finished"
	// The systemd generator (cloud-init-generator, run by systemd at every
	// boot) writes one of these two markers for this boot.
	cloudInitRunDir         = "/run/cloud-init"
	cloudInitEnabledMarker  = "/run/cloud-init/enabled"
	cloudInitDisabledMarker = "/run/cloud-init/disabled"
	// Created by an administrator or an image build to disable cloud-init.
	cloudInitDisabledFile = "/etc/cloud/cloud-init.disabled"
	// cloud-init's per-instance semaphore of the scripts_user module, which
	// runs the runcmd script. cloud-init writes "<pid>: <epoch seconds>"
	// (older releases: "<epoch seconds>") just before it runs the module
	// (cloudinit/helpers.py FileSemaphores._acquire).
	cloudInitScriptsUserSem = "/var/lib/cloud/instance/sem/config_scripts_user"
	// Cluster API's kubeadm bootstrap provider (CABPK) writes the sentinel as
	// the last runcmd: its cloud-config renders
	//   kubeadm init --config /run/kubeadm/kubeadm.yaml && echo success > /run/cluster-api/bootstrap-success.complete
	// (sentinelFileCommand in kubernetes-sigs/cluster-api
	// bootstrap/kubeadm/internal/cloudinit/cloudinit.go), and the
	// CAPZ.Linux.Bootstrapping VM extension waits for it. Its write_files
	// also create /run/cluster-api/placeholder, so the directory exists as
	// soon as the init stage has run the bootstrap's write_files.
	cloudInitCAPISentinel = "/run/cluster-api/bootstrap-success.complete"
	cloudInitCAPIDir      = "/run/cluster-api"
)

// cloudInitTraces are the paths that exist wherever cloud-init is installed
// or has run; with none of them (nor a cloud-init log, nor the CAPI
// directory) the probe does not apply.
var cloudInitTraces = []string{cloudInitRunDir, "/var/lib/cloud", "/etc/cloud"}

// cloudInitStageOrder is the order cloud-init runs its stages in; status.json
// names them so.
var cloudInitStageOrder = []string{"init-local", "init", "modules-init", "modules-config", "modules-final"}

// Statuses of CloudInit.Status.
const (
	cloudInitDone       = "done"
	cloudInitError      = "error"
	cloudInitDegraded   = "degraded"
	cloudInitRunning    = "running"
	cloudInitNotStarted = "not-started"
	cloudInitDisabled   = "disabled"
	cloudInitUnknown    = "unknown"
)

// cloudInit reports cloud-init's state from its own files (status.json,
// result.json, boot-finished, the enable/disable markers) and whether the
// Cluster API bootstrap sentinel exists.
type cloudInit struct{}

func (cloudInit) Name() string { return "cloud-init" }

func (cloudInit) Run(ctx context.Context, h *host.Host) (*nodediagv1.ProbeEvidence, error) {
	pe := &nodediagv1.ProbeEvidence{}
	// exists records a failure to look (EACCES, ELOOP) and reports false;
	// unsure says whether any such failure happened.
	unsure := false
	exists := func(p string) bool {
		ok, err := h.Exists(p)
		if err != nil {
			probe.Unreadable(pe, p, err)
			unsure = true
		}
		return ok
	}

	ci := &nodediagv1.CloudInit{
		Status:               cloudInitUnknown,
		SentinelPath:         cloudInitCAPISentinel,
		SentinelPresent:      exists(cloudInitCAPISentinel),
		ClusterApiDirPresent: exists(cloudInitCAPIDir),
	}
	traced := false
	for _, p := range cloudInitTraces {
		if exists(p) {
			traced = true
		}
	}
	if !traced {
		traced = cloudInitLogPresent(h, pe, &unsure)
	}
	if !traced && !unsure && !ci.SentinelPresent && !ci.ClusterApiDirPresent {
		return nil, fmt.Errorf("%w: no cloud-init state, configuration or log (%s, /var/lib/cloud, /etc/cloud, /var/log/cloud-init*.log)", probe.ErrNotApplicable, cloudInitRunDir)
	}
	pe.Data = &nodediagv1.ProbeEvidence_CloudInit{CloudInit: ci}

	var st cloudInitState
	st.runStatusPresent = exists(cloudInitRunStatus)
	st.enabled = exists(cloudInitEnabledMarker)
	st.runDisabled = exists(cloudInitDisabledMarker)
	st.fileDisabled = exists(cloudInitDisabledFile)

	// status.json: this boot's /run link first; the /var/lib file only when
	// /run has none (a copy of a host without /run, a boot on which cloud-init
	// did not start). A corrupt file is a gap, not a reason to read an older one.
	if b, path, ok := readCloudInitFile(h, pe, cloudInitRunStatus, cloudInitDataStatus); ok {
		ci.StatusJsonPath = path
		s, err := parseCloudInitStatus(b)
		if err != nil {
			probe.Unreadable(pe, path, err)
		} else {
			st.status = s
		}
	}
	if b, path, ok := readCloudInitFile(h, pe, cloudInitRunResult, cloudInitDataResult); ok {
		ci.ResultJsonPath = path
		ci.ResultPresent = true
		st.resultPresent = true
		r, err := parseCloudInitResult(b)
		if err != nil {
			probe.Unreadable(pe, path, err)
		} else {
			st.result = r
		}
	}
	cloudInitDecide(ci, &st)

	switch b, _, err := h.ReadFileLimit(cloudInitBootFinished, 4096); {
	case err == nil:
		ci.BootFinished = true
		ci.BootFinishedText = strings.TrimSpace(string(b))
	case errors.Is(err, fs.ErrNotExist):
	default:
		probe.Unreadable(pe, cloudInitBootFinished, err)
		// Present but unreadable (EACCES) still says modules-final ended.
		if _, serr := h.Stat(cloudInitBootFinished); serr == nil {
			ci.BootFinished = true
		}
	}

	ci.DatasourceConfig = cloudInitDatasourceConfig(h, pe)

	if b, _, err := h.ReadFileLimit(cloudInitScriptsUserSem, 256); err == nil {
		if t, ok := parseCloudInitSemaphore(b); ok {
			ci.ScriptsUserRan = timestamppb.New(t)
		} else if fi, err := h.Stat(cloudInitScriptsUserSem); err == nil {
			// A semaphore whose content is not a time (edited, or a
			// release that writes something else): its mtime is when it was written.
			ci.ScriptsUserRan = timestamppb.New(fi.ModTime().UTC())
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		probe.Unreadable(pe, cloudInitScriptsUserSem, err)
	}
	return pe, nil
}

// Where cloud-init's datasource is chosen: its configuration (the files of
// cloud.cfg.d are merged in name order after cloud.cfg), ds-identify's
// verdict for this boot, and a ds= argument of the kernel command line,
// which overrides both (as GRUB's defaults set it for the next boot).
var (
	cloudInitConfigFiles = []string{"/etc/cloud/cloud.cfg", "/etc/cloud/cloud.cfg.d/*.cfg", "/run/cloud-init/cloud.cfg"}
	kernelCmdlineFiles   = []string{"/proc/cmdline", "/etc/default/grub", "/etc/default/grub.d/*.cfg"}
	datasourceListLine   = regexp.MustCompile(`^\s*datasource_list\s*:`)
	kernelDatasourceArg  = regexp.MustCompile(`(?:^|[\s"'])ds=\S`)
)

// maxDatasourceFile bounds each file read for its datasource lines.
const maxDatasourceFile = 256 << 10

// cloudInitDatasourceConfig quotes the lines that choose cloud-init's
// datasource. A file that cannot be read is recorded; absence is not.
func cloudInitDatasourceConfig(h *host.Host, pe *nodediagv1.ProbeEvidence) []*nodediagv1.SourceLine {
	var out []*nodediagv1.SourceLine
	scan := func(patterns []string, re *regexp.Regexp) {
		for _, pat := range patterns {
			for _, p := range expandCfgGlob(h, pe, pat) {
				b, _, err := h.ReadFileLimit(p, maxDatasourceFile)
				if err != nil {
					if !errors.Is(err, fs.ErrNotExist) {
						probe.Unreadable(pe, p, err)
					}
					continue
				}
				for i, l := range strings.Split(string(b), "\n") {
					if re.MatchString(l) && !strings.HasPrefix(strings.TrimSpace(l), "#") {
						out = append(out, &nodediagv1.SourceLine{Path: p, Line: int32(i + 1), Text: capSourceText(strings.ToValidUTF8(strings.TrimRight(l, "\r"), "\uFFFD"))})
					}
				}
			}
		}
	}
	scan(cloudInitConfigFiles, datasourceListLine)
	scan(kernelCmdlineFiles, kernelDatasourceArg)
	return out
}

// expandCfgGlob is pattern itself, or for DIR/*.cfg the .cfg files of DIR in
// name order (the order cloud-init and GRUB read them in).
func expandCfgGlob(h *host.Host, pe *nodediagv1.ProbeEvidence, pattern string) []string {
	dir, ok := strings.CutSuffix(pattern, "/*.cfg")
	if !ok {
		return []string{pattern}
	}
	ents, err := h.ReadDir(dir)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			probe.Unreadable(pe, dir, err)
		}
		return nil
	}
	var out []string
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".cfg") && !e.IsDir() {
			out = append(out, dir+"/"+e.Name())
		}
	}
	sort.Strings(out)
	return out
}

// cloudInitLogPresent says whether /var/log holds a cloud-init*.log.
func cloudInitLogPresent(h *host.Host, pe *nodediagv1.ProbeEvidence, unsure *bool) bool {
	ents, err := h.ReadDir("/var/log")
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			probe.Unreadable(pe, "/var/log", err)
			*unsure = true
		}
		return false
	}
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "cloud-init") && strings.HasSuffix(e.Name(), ".log") {
			return true
		}
	}
	return false
}

// readCloudInitFile reads the first of paths that exists; ok says whether
// one was read. A failure to read an existing file is recorded and stops the
// search: the next path is a fallback for absence, not for damage.
func readCloudInitFile(h *host.Host, pe *nodediagv1.ProbeEvidence, paths ...string) (data []byte, path string, ok bool) {
	for _, p := range paths {
		b, err := h.ReadFile(p)
		if err == nil {
			return b, p, true
		}
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		probe.Unreadable(pe, p, err)
		return nil, "", false
	}
	return nil, "", false
}

// cloudInitState is what the probe found, before a status is decided.
type cloudInitState struct {
	status *cloudInitStatusFile // nil when absent or unreadable
	result *cloudInitResultFile // nil when absent or unreadable
	// resultPresent is true when result.json exists, even unreadable: its
	// existence alone says modules-final ended.
	resultPresent bool
	// runStatusPresent: /run/cloud-init/status.json exists (this boot).
	runStatusPresent bool
	// enabled, runDisabled: the generator's markers for this boot.
	enabled, runDisabled bool
	// fileDisabled: /etc/cloud/cloud-init.disabled exists.
	fileDisabled bool
}

// cloudInitDecide fills ci's status and the facts derived from the parsed
// files. It is pure, so that the decision is table-tested.
//
// The decision follows cloud-init's own (cloudinit/cmd/status.py) with two
// differences that matter on a node: status.json read from /var/lib is used
// when /run has none, and a /etc/cloud/cloud-init.disabled created after
// cloud-init started in this boot (some images disable cloud-init from their
// last runcmd so that it does not run again) does not hide this boot's run:
// the generator's /run/cloud-init/enabled says this boot was enabled.
func cloudInitDecide(ci *nodediagv1.CloudInit, st *cloudInitState) {
	switch {
	case st.fileDisabled:
		ci.DisabledBy = cloudInitDisabledFile
	case st.runDisabled:
		ci.DisabledBy = cloudInitDisabledMarker
	}

	var stageErrors, recoverable []string
	if s := st.status; s != nil {
		ci.Datasource = s.Datasource
		ci.RunningStage = s.Stage
		ci.Stages = s.Stages
		var newest time.Time
		for _, sg := range s.Stages {
			stageErrors = append(stageErrors, sg.Errors...)
			recoverable = append(recoverable, sg.RecoverableErrors...)
			for _, t := range []*timestamppb.Timestamp{sg.Start, sg.Finished} {
				if t != nil && t.AsTime().After(newest) {
					newest = t.AsTime()
				}
			}
		}
		if !newest.IsZero() {
			ci.LastUpdate = timestamppb.New(newest)
		}
	}
	ci.Errors = stageErrors
	stageRecoverable := len(recoverable) > 0
	resultErrors := false
	if r := st.result; r != nil {
		if ci.Datasource == "" {
			ci.Datasource = r.Datasource
		}
		if len(r.Errors) > 0 {
			// result.json gathers every stage's errors: cloud-init's own summary.
			ci.Errors, resultErrors = r.Errors, true
		}
		recoverable = append(recoverable, r.RecoverableErrors...)
	}
	// finished decides between error, degraded and done once modules-final
	// has ended; the source is the file that holds what the status rests on
	// (the errors, when there are any), so that rules quote the right file.
	finished := func() (string, string) {
		switch {
		case resultErrors:
			return cloudInitError, ci.ResultJsonPath
		case len(stageErrors) > 0:
			return cloudInitError, ci.StatusJsonPath
		case stageRecoverable:
			return cloudInitDegraded, ci.StatusJsonPath
		case len(recoverable) > 0:
			return cloudInitDegraded, ci.ResultJsonPath
		case st.resultPresent:
			return cloudInitDone, ci.ResultJsonPath
		}
		return cloudInitDone, ci.StatusJsonPath
	}

	switch {
	case st.runDisabled || (st.fileDisabled && !st.enabled && !st.runStatusPresent):
		ci.Status, ci.StatusSource = cloudInitDisabled, ci.DisabledBy
	case st.enabled && !st.runStatusPresent:
		// The generator enabled cloud-init in this boot and no stage has
		// started yet; a status.json under /var/lib is an earlier boot's.
		ci.Status, ci.StatusSource = cloudInitNotStarted, cloudInitEnabledMarker
	case st.status != nil:
		started, unfinished, finalFinished := false, false, false
		for _, sg := range st.status.Stages {
			if sg.Start != nil {
				started = true
				if sg.Finished == nil {
					unfinished = true
				}
			}
			if sg.Name == "modules-final" && sg.Finished != nil {
				finalFinished = true
			}
		}
		switch {
		case st.status.Stage != "" || unfinished || (!st.resultPresent && started && !finalFinished):
			// A stage is running, or cloud-init is between two stages
			// (each is its own systemd unit) before modules-final ended.
			ci.Status, ci.StatusSource = cloudInitRunning, ci.StatusJsonPath
		case st.resultPresent || finalFinished:
			// result.json exists (even unreadable): modules-final ended.
			ci.Status, ci.StatusSource = finished()
		default:
			ci.Status, ci.StatusSource = cloudInitNotStarted, ci.StatusJsonPath
		}
	case st.result != nil:
		// status.json absent or unreadable; result.json alone still says
		// how the run ended.
		ci.Status, ci.StatusSource = finished()
	default:
		// Nothing readable says what cloud-init did (an unreadable
		// status.json is recorded as such): a gap, not a verdict.
		ci.Status, ci.StatusSource = cloudInitUnknown, ""
	}
}

// cloudInitStatusFile is the v1 object of status.json.
type cloudInitStatusFile struct {
	Datasource string
	// Stage is the stage running when the file was written, "" for null.
	Stage string
	// Stages in the order cloud-init runs them; stages the file does not
	// name are left out.
	Stages []*nodediagv1.CloudInitStage
}

// cloudInitResultFile is the v1 object of result.json.
type cloudInitResultFile struct {
	Datasource        string
	Errors            []string
	RecoverableErrors []string
}

// parseCloudInitStatus parses status.json as written by cloud-init 22.x and
// 23.4+:
//
//	{"v1": {"datasource": "DataSourceAzure [seed=/dev/sr0]" | null,
//	        "stage": "modules-config" | null,
//	        "init-local": {"errors": [...], "start": 1714521663.75 | null, "finished": ... | null,
//	                       "recoverable_errors": {"WARNING": [...], ...}},   (23.4+)
//	        "init": {...}, "modules-init": {...}, "modules-config": {...}, "modules-final": {...}}}
//
// Unknown keys are ignored, a missing "errors" is none, a 0 or null time is
// unset; another object with start/finished/errors keys is kept as a stage of
// that name after the known ones. Only JSON that is not an object with a v1
// object is an error.
func parseCloudInitStatus(b []byte) (*cloudInitStatusFile, error) {
	v1, err := cloudInitV1(b)
	if err != nil {
		return nil, err
	}
	out := &cloudInitStatusFile{
		Datasource: ciJSONString(v1["datasource"]),
		Stage:      ciJSONString(v1["stage"]),
	}
	known := map[string]bool{}
	for _, name := range cloudInitStageOrder {
		known[name] = true
		if sg, ok := parseCloudInitStage(name, v1[name]); ok {
			out.Stages = append(out.Stages, sg)
		}
	}
	var others []string
	for k := range v1 {
		if k != "" && !known[k] && k != "datasource" && k != "stage" {
			others = append(others, k)
		}
	}
	sort.Strings(others)
	for _, name := range others {
		if sg, ok := parseCloudInitStage(name, v1[name]); ok {
			out.Stages = append(out.Stages, sg)
		}
	}
	return out, nil
}

// parseCloudInitResult parses result.json:
//
//	{"v1": {"datasource": "...", "errors": [...], "recoverable_errors": {...}}}
//
// recoverable_errors is accepted but not required (cloud-init keeps them per
// stage in status.json).
func parseCloudInitResult(b []byte) (*cloudInitResultFile, error) {
	v1, err := cloudInitV1(b)
	if err != nil {
		return nil, err
	}
	return &cloudInitResultFile{
		Datasource:        ciJSONString(v1["datasource"]),
		Errors:            ciJSONStrings(v1["errors"]),
		RecoverableErrors: ciJSONRecoverable(v1["recoverable_errors"]),
	}, nil
}

// cloudInitV1 returns the members of the "v1" object of a cloud-init state file.
func cloudInitV1(b []byte) (map[string]json.RawMessage, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(b, &top); err != nil {
		return nil, fmt.Errorf("parse cloud-init state (%d bytes): %w", len(b), err)
	}
	raw, ok := top["v1"]
	if !ok || ciIsJSONNull(raw) {
		return nil, errors.New(`parse cloud-init state: no "v1" object`)
	}
	var v1 map[string]json.RawMessage
	if err := json.Unmarshal(raw, &v1); err != nil {
		return nil, fmt.Errorf(`parse cloud-init state: "v1" is not an object: %w`, err)
	}
	return v1, nil
}

// parseCloudInitStage reads one stage object; ok is false when raw is not an
// object, or (for a name cloud-init does not document) has none of the keys
// of a stage.
func parseCloudInitStage(name string, raw json.RawMessage) (*nodediagv1.CloudInitStage, bool) {
	if raw == nil {
		return nil, false
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		return nil, false
	}
	_, hasStart := m["start"]
	_, hasFinished := m["finished"]
	_, hasErrors := m["errors"]
	if !hasStart && !hasFinished && !hasErrors && !isCloudInitStageName(name) {
		return nil, false
	}
	return &nodediagv1.CloudInitStage{
		Name:              name,
		Start:             ciJSONEpoch(m["start"]),
		Finished:          ciJSONEpoch(m["finished"]),
		Errors:            ciJSONStrings(m["errors"]),
		RecoverableErrors: ciJSONRecoverable(m["recoverable_errors"]),
	}, true
}

func isCloudInitStageName(name string) bool {
	for _, n := range cloudInitStageOrder {
		if n == name {
			return true
		}
	}
	return false
}

// parseCloudInitSemaphore reads the time of a cloud-init semaphore file:
// "<pid>: <epoch seconds>" or "<epoch seconds>".
func parseCloudInitSemaphore(b []byte) (time.Time, bool) {
	s := strings.TrimSpace(string(b))
	if i := strings.LastIndexByte(s, ':'); i >= 0 {
		s = strings.TrimSpace(s[i+1:])
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return time.Time{}, false
	}
	t := ciEpochTime(f)
	if t == nil {
		return time.Time{}, false
	}
	return t.AsTime(), true
}

func ciIsJSONNull(raw json.RawMessage) bool {
	return string(bytes.TrimSpace(raw)) == "null"
}

// ciJSONString is raw as a string; null, absent and other types are "".
func ciJSONString(raw json.RawMessage) string {
	var s string
	if raw == nil || json.Unmarshal(raw, &s) != nil {
		return ""
	}
	return s
}

// ciJSONStrings is a JSON list as strings: strings verbatim, anything else as
// its compact JSON text (cloud-init writes strings; nothing is dropped).
func ciJSONStrings(raw json.RawMessage) []string {
	var items []json.RawMessage
	if raw == nil || json.Unmarshal(raw, &items) != nil {
		return nil
	}
	var out []string
	for _, it := range items {
		var s string
		if json.Unmarshal(it, &s) == nil {
			out = append(out, s)
			continue
		}
		var buf bytes.Buffer
		if json.Compact(&buf, it) == nil {
			out = append(out, buf.String())
		}
	}
	return out
}

// ciJSONRecoverable flattens cloud-init 23.4+ recoverable_errors, a dict of
// log level to messages, into "LEVEL: message" in level order.
func ciJSONRecoverable(raw json.RawMessage) []string {
	var byLevel map[string]json.RawMessage
	if raw == nil || json.Unmarshal(raw, &byLevel) != nil {
		// Not a dict: keep a plain list's messages as they are.
		return ciJSONStrings(raw)
	}
	levels := make([]string, 0, len(byLevel))
	for l := range byLevel {
		levels = append(levels, l)
	}
	sort.Strings(levels)
	var out []string
	for _, l := range levels {
		for _, msg := range ciJSONStrings(byLevel[l]) {
			out = append(out, l+": "+msg)
		}
	}
	return out
}

// ciJSONEpoch reads a float epoch time; null, 0, negatives, absurd values and
// other types are unset.
func ciJSONEpoch(raw json.RawMessage) *timestamppb.Timestamp {
	var f float64
	if raw == nil || json.Unmarshal(raw, &f) != nil {
		return nil
	}
	return ciEpochTime(f)
}

// ciEpochTime converts float epoch seconds, to the microsecond (a float64 of
// today's epoch holds no more), or nil when out of range.
func ciEpochTime(f float64) *timestamppb.Timestamp {
	// 1e11 s is year 5138: anything beyond is not a time cloud-init wrote.
	if !(f > 0 && f < 1e11) {
		return nil
	}
	sec, frac := math.Modf(f)
	usec := int64(math.Round(frac * 1e6))
	return timestamppb.New(time.Unix(int64(sec), usec*1000).UTC())
}
