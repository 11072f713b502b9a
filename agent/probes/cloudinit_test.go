package probes

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/nodediag/nodediag/agent/host"
	"github.com/nodediag/nodediag/agent/host/hosttest"
	"github.com/nodediag/nodediag/agent/probe"
	nodediagv1 "github.com/nodediag/nodediag/proto/nodediag/v1"
)

// ts is an epoch time as cloud-init writes it (float seconds).
func ciTime(f float64) *timestamppb.Timestamp { return ciEpochTime(f) }

func ciStage(name string, start, finished float64, errs ...string) *nodediagv1.CloudInitStage {
	sg := &nodediagv1.CloudInitStage{Name: name, Errors: errs}
	if start != 0 {
		sg.Start = ciTime(start)
	}
	if finished != 0 {
		sg.Finished = ciTime(finished)
	}
	return sg
}

func ciWithRecoverable(sg *nodediagv1.CloudInitStage, rec ...string) *nodediagv1.CloudInitStage {
	sg.RecoverableErrors = rec
	return sg
}

// fixture reads a file of a recipe tree.
func ciFixture(t testing.TB, rel string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "cloudinit", rel))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// fixtureFiles loads testdata/cloudinit/<state>/root as hosttest.Tree
// entries: files by content, symlinks as "->target", empty directories as
// "dir/"; extra entries are added, and an extra entry with the value "-"
// removes that path.
func ciFixtureFiles(t testing.TB, state string, extra map[string]string) map[string]string {
	t.Helper()
	root := filepath.Join("testdata", "cloudinit", state, "root")
	files := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == root {
			return err
		}
		rel := filepath.ToSlash(strings.TrimPrefix(p, root+string(filepath.Separator)))
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			files[rel] = "->" + target
		case d.IsDir():
			ents, err := os.ReadDir(p)
			if err != nil {
				return err
			}
			if len(ents) == 0 {
				files[rel+"/"] = ""
			}
		default:
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			files[rel] = string(b)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range extra {
		if v == "-" {
			delete(files, k)
			continue
		}
		files[k] = v
	}
	return files
}

func TestParseCloudInitStatus(t *testing.T) {
	tests := []struct {
		name    string
		in      []byte
		want    *cloudInitStatusFile
		wantErr bool
	}{
		{
			name: "22.4 done",
			in:   ciFixture(t, "done/root/var/lib/cloud/data/status.json"),
			want: &cloudInitStatusFile{
				Datasource: "DataSourceAzure [seed=/dev/sr0]",
				Stages: []*nodediagv1.CloudInitStage{
					ciStage("init-local", 1714521606.25, 1714521610.0),
					ciStage("init", 1714521615.0, 1714521618.75),
					ciStage("modules-init", 1714521623.75, 1714521627.5),
					ciStage("modules-config", 1714521632.5, 1714521636.25),
					ciStage("modules-final", 1714521641.25, 1714521645.0),
				},
			},
		},
		{
			name: "22.4 running in modules-config, modules-final not started",
			in:   ciFixture(t, "running/root/var/lib/cloud/data/status.json"),
			want: &cloudInitStatusFile{
				Datasource: "DataSourceAzure [seed=/dev/sr0]",
				Stage:      "modules-config",
				Stages: []*nodediagv1.CloudInitStage{
					ciStage("init-local", 1714521717.5, 1714521721.25),
					ciStage("init", 1714521726.25, 1714521730.0),
					ciStage("modules-init", 1714521735.0, 1714521738.75),
					ciStage("modules-config", 1714521741.25, 0),
					ciStage("modules-final", 0, 0),
				},
			},
		},
		{
			name: "22.4 error in modules-final",
			in:   ciFixture(t, "error/root/var/lib/cloud/data/status.json"),
			want: &cloudInitStatusFile{
				Datasource: "DataSourceAzure [seed=/dev/sr0]",
				Stages: []*nodediagv1.CloudInitStage{
					ciStage("init-local", 1714521663.75, 1714521667.5),
					ciStage("init", 1714521672.5, 1714521676.25),
					ciStage("modules-init", 1714521681.25, 1714521685.0),
					ciStage("modules-config", 1714521690.0, 1714521693.75),
					ciStage("modules-final", 1714521698.75, 1714521702.5,
						"('scripts_user', RuntimeError('Runparts: 1 failures (part-001) in 1 attempted commands'))"),
				},
			},
		},
		{
			name: "23.4+ degraded: recoverable_errors per stage",
			in:   ciFixture(t, "degraded/root/var/lib/cloud/data/status.json"),
			want: &cloudInitStatusFile{
				Datasource: "DataSourceAzure [seed=/dev/sr0]",
				Stages: []*nodediagv1.CloudInitStage{
					ciStage("init-local", 1714521606.25, 1714521610.0),
					ciStage("init", 1714521615.0, 1714521618.75),
					ciStage("modules-init", 1714521623.75, 1714521627.5),
					ciWithRecoverable(ciStage("modules-config", 1714521632.5, 1714521636.25),
						"WARNING: Removing /etc/apt/sources.list to favor deb822 source format"),
					ciWithRecoverable(ciStage("modules-final", 1714521641.25, 1714521645.0),
						"DEPRECATED: 'user' of type string is deprecated in 22.2 and scheduled to be removed in 27.2. Use 'users' list instead."),
				},
			},
		},
		{
			name: "23.4+ levels sorted, several messages per level",
			in: []byte(`{"v1": {"stage": null, "datasource": null,
				"init": {"errors": [], "start": 1714521615.5, "finished": 1714521618.0,
				         "recoverable_errors": {"WARNING": ["w1", "w2"], "DEPRECATED": ["d1"]}}}}`),
			want: &cloudInitStatusFile{
				Stages: []*nodediagv1.CloudInitStage{
					ciWithRecoverable(ciStage("init", 1714521615.5, 1714521618.0), "DEPRECATED: d1", "WARNING: w1", "WARNING: w2"),
				},
			},
		},
		{
			name: "newer shape: stages without errors keys, unknown keys ignored",
			in: []byte(`{"v1": {"stage": "init", "extended_status": "running", "boot_status_code": "enabled-by-generator",
				"init": {"start": 1714521615.0, "finished": null},
				"init-local": {"start": 1714521606.0, "finished": 1714521610.0},
				"schemas": {"1": {"status": "running"}}}}`),
			want: &cloudInitStatusFile{
				Stage: "init",
				Stages: []*nodediagv1.CloudInitStage{
					ciStage("init-local", 1714521606.0, 1714521610.0),
					ciStage("init", 1714521615.0, 0),
				},
			},
		},
		{
			name: "an unknown stage-shaped object is kept after the known stages",
			in: []byte(`{"v1": {"modules-final": {"errors": [], "start": 1714521641.0, "finished": 1714521645.0},
				"init-network": {"errors": [], "start": 1714521615.0, "finished": 1714521618.0}}}`),
			want: &cloudInitStatusFile{
				Stages: []*nodediagv1.CloudInitStage{
					ciStage("modules-final", 1714521641.0, 1714521645.0),
					ciStage("init-network", 1714521615.0, 1714521618.0),
				},
			},
		},
		{
			name: "times of 0, negative, absurd or not numbers are unset; non-string errors kept as JSON",
			in: []byte(`{"v1": {"init-local": {"errors": [{"module": "x"}, 3, "plain"], "start": 0, "finished": -5},
				"init": {"start": "yesterday", "finished": 1e300}}}`),
			want: &cloudInitStatusFile{
				Stages: []*nodediagv1.CloudInitStage{
					ciStage("init-local", 0, 0, `{"module":"x"}`, "3", "plain"),
					ciStage("init", 0, 0),
				},
			},
		},
		{
			name: "empty v1",
			in:   []byte(`{"v1": {}}`),
			want: &cloudInitStatusFile{},
		},
		{
			name:    "truncated (cut while written or copied)",
			in:      ciFixture(t, "done/root/var/lib/cloud/data/status.json")[:200],
			wantErr: true,
		},
		{name: "empty file", in: []byte(""), wantErr: true},
		{name: "not JSON", in: []byte("status: done\n"), wantErr: true},
		{name: "no v1", in: []byte(`{"v2": {}}`), wantErr: true},
		{name: "v1 null", in: []byte(`{"v1": null}`), wantErr: true},
		{name: "v1 not an object", in: []byte(`{"v1": ["init"]}`), wantErr: true},
		{name: "top level not an object", in: []byte(`"{}"`), wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseCloudInitStatus(tt.in)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, want error %v", err, tt.wantErr)
			}
			if diff := cmp.Diff(tt.want, got, protocmp.Transform()); diff != "" {
				t.Errorf("parseCloudInitStatus (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseCloudInitStatusErrorSaysWhy(t *testing.T) {
	_, err := parseCloudInitStatus(ciFixture(t, "done/root/var/lib/cloud/data/status.json")[:200])
	var se *json.SyntaxError
	if !errors.As(err, &se) {
		t.Fatalf("err = %v, want a wrapped *json.SyntaxError", err)
	}
	if !strings.Contains(err.Error(), "unexpected end of JSON input") {
		t.Errorf("err = %q, want it to say the input ended early", err)
	}
}

func TestParseCloudInitResult(t *testing.T) {
	tests := []struct {
		name    string
		in      []byte
		want    *cloudInitResultFile
		wantErr bool
	}{
		{
			name: "22.4 done",
			in:   ciFixture(t, "done/root/var/lib/cloud/data/result.json"),
			want: &cloudInitResultFile{Datasource: "DataSourceAzure [seed=/dev/sr0]"},
		},
		{
			name: "22.4 error",
			in:   ciFixture(t, "error/root/var/lib/cloud/data/result.json"),
			want: &cloudInitResultFile{
				Datasource: "DataSourceAzure [seed=/dev/sr0]",
				Errors:     []string{"('scripts_user', RuntimeError('Runparts: 1 failures (part-001) in 1 attempted commands'))"},
			},
		},
		{
			name: "recoverable_errors accepted",
			in:   []byte(`{"v1": {"datasource": null, "errors": [], "recoverable_errors": {"WARNING": ["w"]}, "extended_status": "degraded done"}}`),
			want: &cloudInitResultFile{RecoverableErrors: []string{"WARNING: w"}},
		},
		{
			name: "recoverable_errors as a plain list",
			in:   []byte(`{"v1": {"recoverable_errors": ["w"]}}`),
			want: &cloudInitResultFile{RecoverableErrors: []string{"w"}},
		},
		{name: "truncated", in: ciFixture(t, "error/root/var/lib/cloud/data/result.json")[:60], wantErr: true},
		{name: "no v1", in: []byte(`{}`), wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseCloudInitResult(tt.in)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, want error %v", err, tt.wantErr)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("parseCloudInitResult (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseCloudInitSemaphore(t *testing.T) {
	tests := []struct {
		name   string
		in     string
		want   time.Time
		wantOK bool
	}{
		{name: "pid and time", in: "1843: 1714521641.5\n", want: time.Date(2024, 5, 1, 0, 0, 41, 500_000_000, time.UTC), wantOK: true},
		{name: "time only (older releases)", in: "1714521641.5\n", want: time.Date(2024, 5, 1, 0, 0, 41, 500_000_000, time.UTC), wantOK: true},
		{name: "empty", in: ""},
		{name: "garbage", in: "locked\n"},
		{name: "zero", in: "12: 0\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := parseCloudInitSemaphore([]byte(tt.in))
			if ok != tt.wantOK || !got.Equal(tt.want) {
				t.Errorf("parseCloudInitSemaphore(%q) = %v, %v; want %v, %v", tt.in, got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

func TestCloudInitDecide(t *testing.T) {
	mustStatus := func(rel string) *cloudInitStatusFile {
		s, err := parseCloudInitStatus(ciFixture(t, rel))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	mustResult := func(rel string) *cloudInitResultFile {
		r, err := parseCloudInitResult(ciFixture(t, rel))
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	const runS, runR = cloudInitRunStatus, cloudInitRunResult
	const scriptsErr = "('scripts_user', RuntimeError('Runparts: 1 failures (part-001) in 1 attempted commands'))"
	betweenStages := &cloudInitStatusFile{Stages: []*nodediagv1.CloudInitStage{
		ciStage("init-local", 1714521606.25, 1714521610.0),
		ciStage("init", 1714521615.0, 1714521618.75),
		ciStage("modules-init", 0, 0),
	}}
	errorWhileRunning := &cloudInitStatusFile{Stage: "modules-config", Stages: []*nodediagv1.CloudInitStage{
		ciStage("init", 1714521615.0, 1714521618.75, "No instance datasource found."),
		ciStage("modules-config", 1714521632.5, 0),
	}}
	nothingStarted := &cloudInitStatusFile{Stages: []*nodediagv1.CloudInitStage{ciStage("init-local", 0, 0)}}

	type want struct {
		status, source, disabledBy string
		errors                     []string
	}
	tests := []struct {
		name       string
		st         cloudInitState
		statusPath string
		resultPath string
		want       want
	}{
		{
			name:       "done: result.json without errors",
			st:         cloudInitState{status: mustStatus("done/root/var/lib/cloud/data/status.json"), result: mustResult("done/root/var/lib/cloud/data/result.json"), resultPresent: true, runStatusPresent: true, enabled: true},
			statusPath: runS, resultPath: runR,
			want: want{status: "done", source: runR},
		},
		{
			name:       "error: result.json errors",
			st:         cloudInitState{status: mustStatus("error/root/var/lib/cloud/data/status.json"), result: mustResult("error/root/var/lib/cloud/data/result.json"), resultPresent: true, runStatusPresent: true, enabled: true},
			statusPath: runS, resultPath: runR,
			want: want{status: "error", source: runR, errors: []string{scriptsErr}},
		},
		{
			name:       "error from status.json stages when result.json is unreadable",
			st:         cloudInitState{status: mustStatus("error/root/var/lib/cloud/data/status.json"), resultPresent: true, runStatusPresent: true, enabled: true},
			statusPath: runS, resultPath: runR,
			want: want{status: "error", source: runS, errors: []string{scriptsErr}},
		},
		{
			name:       "degraded: only recoverable errors",
			st:         cloudInitState{status: mustStatus("degraded/root/var/lib/cloud/data/status.json"), result: mustResult("degraded/root/var/lib/cloud/data/result.json"), resultPresent: true, runStatusPresent: true, enabled: true},
			statusPath: runS, resultPath: runR,
			want: want{status: "degraded", source: runS},
		},
		{
			name:       "running: a stage is named",
			st:         cloudInitState{status: mustStatus("running/root/var/lib/cloud/data/status.json"), runStatusPresent: true, enabled: true},
			statusPath: runS,
			want:       want{status: "running", source: runS},
		},
		{
			name:       "running: between two stages, before modules-final",
			st:         cloudInitState{status: betweenStages, runStatusPresent: true, enabled: true},
			statusPath: runS,
			want:       want{status: "running", source: runS},
		},
		{
			name:       "running with an error of an earlier stage stays running",
			st:         cloudInitState{status: errorWhileRunning, runStatusPresent: true, enabled: true},
			statusPath: runS,
			want:       want{status: "running", source: runS, errors: []string{"No instance datasource found."}},
		},
		{
			name:       "status.json written, no stage started",
			st:         cloudInitState{status: nothingStarted, runStatusPresent: true, enabled: true},
			statusPath: runS,
			want:       want{status: "not-started", source: runS},
		},
		{
			name: "not run: the generator enabled it, no status.json (22.4 'not run')",
			st:   cloudInitState{enabled: true},
			want: want{status: "not-started", source: cloudInitEnabledMarker},
		},
		{
			name:       "not started in this boot: status.json under /var/lib is an earlier boot's",
			st:         cloudInitState{status: mustStatus("done/root/var/lib/cloud/data/status.json"), result: mustResult("done/root/var/lib/cloud/data/result.json"), resultPresent: true, enabled: true},
			statusPath: cloudInitDataStatus, resultPath: cloudInitDataResult,
			want: want{status: "not-started", source: cloudInitEnabledMarker},
		},
		{
			name: "disabled by /etc/cloud/cloud-init.disabled",
			st:   cloudInitState{fileDisabled: true},
			want: want{status: "disabled", source: cloudInitDisabledFile, disabledBy: cloudInitDisabledFile},
		},
		{
			name: "disabled by the generator for this boot",
			st:   cloudInitState{runDisabled: true},
			want: want{status: "disabled", source: cloudInitDisabledMarker, disabledBy: cloudInitDisabledMarker},
		},
		{
			name:       "disabled after an earlier boot's run: the old state is kept, status disabled",
			st:         cloudInitState{status: mustStatus("done/root/var/lib/cloud/data/status.json"), result: mustResult("done/root/var/lib/cloud/data/result.json"), resultPresent: true, runDisabled: true, fileDisabled: true},
			statusPath: cloudInitDataStatus, resultPath: cloudInitDataResult,
			want: want{status: "disabled", source: cloudInitDisabledFile, disabledBy: cloudInitDisabledFile},
		},
		{
			name:       "marker file created after this boot's run does not hide the run",
			st:         cloudInitState{status: mustStatus("done/root/var/lib/cloud/data/status.json"), result: mustResult("done/root/var/lib/cloud/data/result.json"), resultPresent: true, runStatusPresent: true, enabled: true, fileDisabled: true},
			statusPath: runS, resultPath: runR,
			want: want{status: "done", source: runR, disabledBy: cloudInitDisabledFile},
		},
		{
			name:       "snapshot without /run: /var/lib state is used",
			st:         cloudInitState{status: mustStatus("error/root/var/lib/cloud/data/status.json"), result: mustResult("error/root/var/lib/cloud/data/result.json"), resultPresent: true},
			statusPath: cloudInitDataStatus, resultPath: cloudInitDataResult,
			want: want{status: "error", source: cloudInitDataResult, errors: []string{scriptsErr}},
		},
		{
			name:       "result.json alone",
			st:         cloudInitState{result: mustResult("done/root/var/lib/cloud/data/result.json"), resultPresent: true},
			resultPath: cloudInitDataResult,
			want:       want{status: "done", source: cloudInitDataResult},
		},
		{
			name: "nothing",
			want: want{status: "unknown"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ci := &nodediagv1.CloudInit{StatusJsonPath: tt.statusPath, ResultJsonPath: tt.resultPath}
			cloudInitDecide(ci, &tt.st)
			got := want{status: ci.Status, source: ci.StatusSource, disabledBy: ci.DisabledBy, errors: ci.Errors}
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(want{}), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("decision (-want +got):\n%s", diff)
			}
		})
	}
}

func runCloudInitProbe(t *testing.T, h *host.Host) (*nodediagv1.ProbeEvidence, *nodediagv1.CloudInit) {
	t.Helper()
	pe, err := cloudInit{}.Run(context.Background(), h)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	return pe, pe.GetCloudInit()
}

// TestCloudInitAgreesWithCloudInit runs the probe on the trees cloud-init
// 22.4 wrote and compares its verdict with what that cloud-init's own
// `status --format json` said about the same files.
func TestCloudInitAgreesWithCloudInit(t *testing.T) {
	for _, state := range []string{"done", "error", "running", "not-run", "disabled"} {
		t.Run(state, func(t *testing.T) {
			var own struct {
				Status     string   `json:"status"`
				Errors     []string `json:"errors"`
				LastUpdate string   `json:"last_update"`
			}
			if err := json.Unmarshal(ciFixture(t, state+"/cloud-init-status.json"), &own); err != nil {
				t.Fatal(err)
			}
			wantStatus := strings.ReplaceAll(own.Status, "not run", "not-started") // renamed "not started" in 23.4+
			pe, ci := runCloudInitProbe(t, hosttest.Tree(t, ciFixtureFiles(t, state, nil)))
			if len(pe.Unreadable) != 0 {
				t.Errorf("unreadable: %v", pe.Unreadable)
			}
			if ci.Status != wantStatus {
				t.Errorf("status = %q, cloud-init said %q", ci.Status, own.Status)
			}
			if diff := cmp.Diff(own.Errors, ci.Errors, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("errors (-cloud-init +probe):\n%s", diff)
			}
			var gotUpdate string
			if ci.LastUpdate != nil {
				gotUpdate = ci.LastUpdate.AsTime().Format("Mon, 02 Jan 2006 15:04:05 -0700")
			}
			if gotUpdate != own.LastUpdate {
				t.Errorf("last_update = %q, cloud-init said %q", gotUpdate, own.LastUpdate)
			}
		})
	}
}

func TestCloudInitProbe(t *testing.T) {
	doneStages := []*nodediagv1.CloudInitStage{
		ciStage("init-local", 1714521606.25, 1714521610.0),
		ciStage("init", 1714521615.0, 1714521618.75),
		ciStage("modules-init", 1714521623.75, 1714521627.5),
		ciStage("modules-config", 1714521632.5, 1714521636.25),
		ciStage("modules-final", 1714521641.25, 1714521645.0),
	}
	degradedStages := []*nodediagv1.CloudInitStage{
		ciStage("init-local", 1714521606.25, 1714521610.0),
		ciStage("init", 1714521615.0, 1714521618.75),
		ciStage("modules-init", 1714521623.75, 1714521627.5),
		ciWithRecoverable(ciStage("modules-config", 1714521632.5, 1714521636.25),
			"WARNING: Removing /etc/apt/sources.list to favor deb822 source format"),
		ciWithRecoverable(ciStage("modules-final", 1714521641.25, 1714521645.0),
			"DEPRECATED: 'user' of type string is deprecated in 22.2 and scheduled to be removed in 27.2. Use 'users' list instead."),
	}
	const azure = "DataSourceAzure [seed=/dev/sr0]"
	tests := []struct {
		name           string
		state          string
		extra          map[string]string
		want           *nodediagv1.CloudInit
		wantUnreadable []string
		// datasources, when set, is compared instead of want.
		datasources []*nodediagv1.SourceLine
	}{
		{
			name:  "22.4 done, CAPI bootstrap finished",
			state: "done",
			extra: map[string]string{
				"run/cluster-api/bootstrap-success.complete":  "success\n",
				"run/cluster-api/placeholder":                 "",
				"var/lib/cloud/instance":                      "->/var/lib/cloud/instances/iid-1",
				"var/lib/cloud/instances/iid-1/boot-finished": "38.79 - Wed, 01 May 2024 00:00:45 +0000 - v. 22.4.2\n",
			},
			want: &nodediagv1.CloudInit{
				Status: "done", Datasource: azure, Stages: doneStages,
				BootFinished: true, BootFinishedText: "38.79 - Wed, 01 May 2024 00:00:45 +0000 - v. 22.4.2",
				SentinelPresent: true, SentinelPath: cloudInitCAPISentinel, ClusterApiDirPresent: true,
				StatusSource: cloudInitRunResult, LastUpdate: ciTime(1714521645.0), ResultPresent: true,
				StatusJsonPath: cloudInitRunStatus, ResultJsonPath: cloudInitRunResult,
			},
		},
		{
			name:  "23.4+ degraded, absolute instance symlink, scripts_user semaphore",
			state: "degraded",
			want: &nodediagv1.CloudInit{
				Status: "degraded", Datasource: azure, Stages: degradedStages,
				BootFinished: true, BootFinishedText: "38.79 - Wed, 01 May 2024 00:00:45 +0000 - v. 24.1.3-0ubuntu1~22.04.5",
				SentinelPresent: true, SentinelPath: cloudInitCAPISentinel, ClusterApiDirPresent: true,
				StatusSource: cloudInitRunStatus, LastUpdate: ciTime(1714521645.0), ResultPresent: true,
				StatusJsonPath: cloudInitRunStatus, ResultJsonPath: cloudInitRunResult,
				ScriptsUserRan: ciTime(1714521641.5),
			},
		},
		{
			name:  "snapshot without /run: falls back to /var/lib/cloud/data",
			state: "error",
			extra: map[string]string{"run/cloud-init/status.json": "-", "run/cloud-init/result.json": "-", "run/cloud-init/enabled": "-"},
			want: &nodediagv1.CloudInit{
				Status: "error", Datasource: azure, SentinelPath: cloudInitCAPISentinel,
				Stages: []*nodediagv1.CloudInitStage{
					ciStage("init-local", 1714521663.75, 1714521667.5),
					ciStage("init", 1714521672.5, 1714521676.25),
					ciStage("modules-init", 1714521681.25, 1714521685.0),
					ciStage("modules-config", 1714521690.0, 1714521693.75),
					ciStage("modules-final", 1714521698.75, 1714521702.5,
						"('scripts_user', RuntimeError('Runparts: 1 failures (part-001) in 1 attempted commands'))"),
				},
				Errors:       []string{"('scripts_user', RuntimeError('Runparts: 1 failures (part-001) in 1 attempted commands'))"},
				StatusSource: cloudInitDataResult, LastUpdate: ciTime(1714521702.5), ResultPresent: true,
				StatusJsonPath: cloudInitDataStatus, ResultJsonPath: cloudInitDataResult,
			},
		},
		{
			name:  "truncated status.json: recorded, result.json and the rest still reported",
			state: "done",
			extra: map[string]string{
				"var/lib/cloud/data/status.json":       string(ciFixture(t, "done/root/var/lib/cloud/data/status.json")[:200]),
				"var/lib/cloud/instance/boot-finished": "38.79 - Wed, 01 May 2024 00:00:45 +0000 - v. 22.4.2\n",
			},
			want: &nodediagv1.CloudInit{
				Status: "done", Datasource: azure, SentinelPath: cloudInitCAPISentinel,
				BootFinished: true, BootFinishedText: "38.79 - Wed, 01 May 2024 00:00:45 +0000 - v. 22.4.2",
				StatusSource: cloudInitRunResult, ResultPresent: true,
				StatusJsonPath: cloudInitRunStatus, ResultJsonPath: cloudInitRunResult,
			},
			wantUnreadable: []string{cloudInitRunStatus},
		},
		{
			name:           "status.json not a regular file: recorded, no fallback to an older file, status unknown",
			state:          "running",
			extra:          map[string]string{"run/cloud-init/status.json": "-", "run/cloud-init/status.json/": ""},
			want:           &nodediagv1.CloudInit{Status: "unknown", SentinelPath: cloudInitCAPISentinel},
			wantUnreadable: []string{cloudInitRunStatus},
		},
		{
			name:  "cloud-init installed, never ran, no markers",
			state: "disabled",
			extra: map[string]string{"etc/cloud/cloud-init.disabled": "-", "etc/cloud/cloud.cfg": "datasource_list: [Azure]\n"},
			want: &nodediagv1.CloudInit{Status: "unknown", SentinelPath: cloudInitCAPISentinel,
				DatasourceConfig: []*nodediagv1.SourceLine{{Path: "/etc/cloud/cloud.cfg", Line: 1, Text: "datasource_list: [Azure]"}}},
		},
		{
			// subiquity's leftover pins the None datasource; ds-identify's
			// verdict and the kernel's ds= argument are quoted too, comments
			// and other keys are not.
			name:  "the lines that choose the datasource",
			state: "done",
			extra: map[string]string{
				"etc/cloud/cloud.cfg":                       "# datasource_list: [Ec2]\nsystem_info:\n  distro: ubuntu\n",
				"etc/cloud/cloud.cfg.d/99-installer.cfg":    "datasource:\n  None:\n    metadata: {}\ndatasource_list:\n- None\n",
				"etc/cloud/cloud.cfg.d/90_dpkg.cfg":         "datasource_list: [ NoCloud, ConfigDrive, Azure, None ]\n",
				"etc/cloud/cloud.cfg.d/README":              "datasource_list: [ Ec2 ]\n",
				"run/cloud-init/cloud.cfg":                  "di_report:\n  datasource_list: [ None ]\n",
				"etc/default/grub.d/50-curtin-settings.cfg": "GRUB_CMDLINE_LINUX_DEFAULT=\"autoinstall ds=nocloud-net;s=http://10.0.2.2:8359/22.04/\"\n",
			},
			datasources: []*nodediagv1.SourceLine{
				{Path: "/etc/cloud/cloud.cfg.d/90_dpkg.cfg", Line: 1, Text: "datasource_list: [ NoCloud, ConfigDrive, Azure, None ]"},
				{Path: "/etc/cloud/cloud.cfg.d/99-installer.cfg", Line: 4, Text: "datasource_list:"},
				{Path: "/run/cloud-init/cloud.cfg", Line: 2, Text: "  datasource_list: [ None ]"},
				{Path: "/etc/default/grub.d/50-curtin-settings.cfg", Line: 1, Text: "GRUB_CMDLINE_LINUX_DEFAULT=\"autoinstall ds=nocloud-net;s=http://10.0.2.2:8359/22.04/\""},
			},
		},
		{
			name:  "only the sentinel (no cloud-init trace): still reported",
			state: "disabled",
			extra: map[string]string{"etc/cloud/cloud-init.disabled": "-", "run/cluster-api/bootstrap-success.complete": "success\n"},
			want: &nodediagv1.CloudInit{
				Status: "unknown", SentinelPath: cloudInitCAPISentinel, SentinelPresent: true, ClusterApiDirPresent: true,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pe, ci := runCloudInitProbe(t, hosttest.Tree(t, ciFixtureFiles(t, tt.state, tt.extra)))
			if tt.datasources != nil {
				if diff := cmp.Diff(tt.datasources, ci.GetDatasourceConfig(), protocmp.Transform()); diff != "" {
					t.Errorf("DatasourceConfig (-want +got):\n%s", diff)
				}
			} else if diff := cmp.Diff(tt.want, ci, protocmp.Transform()); diff != "" {
				t.Errorf("CloudInit (-want +got):\n%s", diff)
			}
			var unreadable []string
			for _, u := range pe.Unreadable {
				unreadable = append(unreadable, u.Source)
				if u.Error == "" {
					t.Errorf("unreadable %s without a reason", u.Source)
				}
			}
			if diff := cmp.Diff(tt.wantUnreadable, unreadable); diff != "" {
				t.Errorf("unreadable sources (-want +got):\n%s\n%v", diff, pe.Unreadable)
			}
		})
	}
}

// An unreadable status.json is recorded with the reason.
func TestCloudInitUnreadableReason(t *testing.T) {
	files := ciFixtureFiles(t, "running", map[string]string{"run/cloud-init/status.json": "-", "run/cloud-init/status.json/": ""})
	pe, _ := runCloudInitProbe(t, hosttest.Tree(t, files))
	if len(pe.Unreadable) != 1 || !strings.Contains(pe.Unreadable[0].Error, host.ErrNotRegular.Error()) {
		t.Errorf("unreadable = %v, want one saying %q", pe.Unreadable, host.ErrNotRegular)
	}
}

func TestCloudInitTruncatedReason(t *testing.T) {
	files := ciFixtureFiles(t, "done", map[string]string{
		"var/lib/cloud/data/status.json": string(ciFixture(t, "done/root/var/lib/cloud/data/status.json")[:200]),
	})
	pe, _ := runCloudInitProbe(t, hosttest.Tree(t, files))
	if len(pe.Unreadable) != 1 || !strings.Contains(pe.Unreadable[0].Error, "unexpected end of JSON input") {
		t.Errorf("unreadable = %v, want the parse error of the truncated file", pe.Unreadable)
	}
}

func TestCloudInitNotApplicable(t *testing.T) {
	h := hosttest.Tree(t, map[string]string{"etc/hostname": "node-1\n", "var/log/syslog": "x\n"})
	_, err := cloudInit{}.Run(context.Background(), h)
	if !errors.Is(err, probe.ErrNotApplicable) {
		t.Fatalf("err = %v, want ErrNotApplicable", err)
	}
}

func TestCloudInitLogIsATrace(t *testing.T) {
	h := hosttest.Tree(t, map[string]string{"var/log/cloud-init-output.log": "Cloud-init v. 22.4.2 running 'init-local'\n"})
	_, ci := runCloudInitProbe(t, h)
	if ci.Status != "unknown" {
		t.Errorf("status = %q, want unknown", ci.Status)
	}
}

func TestCloudInitName(t *testing.T) {
	if got := (cloudInit{}).Name(); got != "cloud-init" {
		t.Errorf("Name() = %q", got)
	}
}

func FuzzParseCloudInitStatus(f *testing.F) {
	for _, rel := range []string{
		"done/root/var/lib/cloud/data/status.json",
		"error/root/var/lib/cloud/data/status.json",
		"running/root/var/lib/cloud/data/status.json",
		"degraded/root/var/lib/cloud/data/status.json",
	} {
		b := ciFixture(f, rel)
		f.Add(b)
		f.Add(b[:len(b)/2])
	}
	f.Add([]byte(`{"v1": {"init": {"start": "x", "errors": [1, {"a": []}], "recoverable_errors": ["w"]}}}`))
	f.Add([]byte(`{"v1": null}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := parseCloudInitStatus(b)
		if err != nil {
			if s != nil {
				t.Fatalf("result with an error: %v", s)
			}
			return
		}
		for _, sg := range s.Stages {
			if sg.Name == "" {
				t.Fatalf("stage without a name: %v", sg)
			}
		}
		ci := &nodediagv1.CloudInit{}
		cloudInitDecide(ci, &cloudInitState{status: s, runStatusPresent: true})
		if ci.Status == "" {
			t.Fatal("no status decided")
		}
	})
}

func FuzzParseCloudInitResult(f *testing.F) {
	for _, rel := range []string{
		"done/root/var/lib/cloud/data/result.json",
		"error/root/var/lib/cloud/data/result.json",
	} {
		b := ciFixture(f, rel)
		f.Add(b)
		f.Add(b[:len(b)/2])
	}
	f.Add([]byte(`{"v1": {"errors": [null, true], "recoverable_errors": {"X": "y"}}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := parseCloudInitResult(b)
		if (err == nil) == (r == nil) {
			t.Fatalf("result %v with error %v", r, err)
		}
	})
}

func FuzzParseCloudInitSemaphore(f *testing.F) {
	f.Add([]byte("1843: 1714521641.5\n"))
	f.Add([]byte("1714521641.5"))
	f.Add([]byte("1: 1e308"))
	f.Fuzz(func(t *testing.T, b []byte) {
		if tm, ok := parseCloudInitSemaphore(b); ok && tm.Year() > 5200 {
			t.Fatalf("absurd time %v accepted", tm)
		}
	})
}

// A semaphore whose content is not a time is dated by its mtime.
func TestCloudInitSemaphoreMtime(t *testing.T) {
	h := hosttest.Tree(t, ciFixtureFiles(t, "done", map[string]string{
		"var/lib/cloud/instance/sem/config_scripts_user": "locked\n",
	}))
	mtime := time.Date(2024, 5, 1, 0, 0, 42, 0, time.UTC)
	if err := os.Chtimes(filepath.Join(h.Root, "var/lib/cloud/instance/sem/config_scripts_user"), mtime, mtime); err != nil {
		t.Fatal(err)
	}
	_, ci := runCloudInitProbe(t, h)
	if got := ci.GetScriptsUserRan().AsTime(); !got.Equal(mtime) {
		t.Errorf("scripts_user_ran = %v, want the mtime %v", got, mtime)
	}
}
