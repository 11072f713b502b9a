package reports

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"

	agentcli "github.com/nodediag/nodediag/agent/cli"
	nodediagv1 "github.com/nodediag/nodediag/proto/nodediag/v1"
)

const hosts = "../../agent/testdata/hosts"

// checkJSON is `nodediag-agent check --output json` of an example host.
func checkJSON(t *testing.T, host string) []byte {
	t.Helper()
	var out, errOut bytes.Buffer
	code := agentcli.Run(context.Background(), []string{"check", "--root", filepath.Join(hosts, host, "root"), "--exec", "none", "--offline", "--output", "json"}, &out, &errOut)
	if code == 2 {
		t.Fatalf("check %s: exit 2: %s", host, errOut.String())
	}
	return out.Bytes()
}

func topID(r *nodediagv1.Report) string {
	if len(r.GetFindings()) == 0 {
		return ""
	}
	return r.GetFindings()[0].GetId()
}

func TestLoad(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}

	// An agent's JSON report.
	js := checkJSON(t, "swap-enabled")
	var want nodediagv1.Report
	if err := protojson.Unmarshal(js, &want); err != nil {
		t.Fatal(err)
	}
	r, err := Load(ctx, write("swap.json", js))
	if err != nil {
		t.Fatal(err)
	}
	if topID(r) != "SwapEnabled" || topID(r) != topID(&want) {
		t.Errorf("report file: top finding %q, want SwapEnabled", topID(r))
	}

	// A node record as `nodediag node -o json` prints it: the node name
	// comes from the summary when the report has none.
	want.Host.NodeName = ""
	rec, err := protojson.Marshal(&nodediagv1.NodeRecord{Summary: &nodediagv1.NodeSummary{NodeName: "worker-7"}, Report: &want})
	if err != nil {
		t.Fatal(err)
	}
	r, err = Load(ctx, write("record.json", rec))
	if err != nil {
		t.Fatal(err)
	}
	if r.GetHost().GetNodeName() != "worker-7" || topID(r) != "SwapEnabled" {
		t.Errorf("node record: node %q top %q", r.GetHost().GetNodeName(), topID(r))
	}

	// A host root is checked by the agent's pipeline, evidence included,
	// with the verdict `check` gives.
	r, err = Load(ctx, filepath.Join(hosts, "disk-full", "root"))
	if err != nil {
		t.Fatal(err)
	}
	var diskFull nodediagv1.Report
	if err := protojson.Unmarshal(checkJSON(t, "disk-full"), &diskFull); err != nil {
		t.Fatal(err)
	}
	if topID(r) == "" || topID(r) != topID(&diskFull) || r.GetEvidence() == nil {
		t.Errorf("host root: top %q (check says %q), evidence %v", topID(r), topID(&diskFull), r.GetEvidence() != nil)
	}
	// Named as check names it (from its evidence), not after its
	// directory: the name joins the report to its Machine.
	if n := r.GetHost().GetNodeName(); n == "" || n != diskFull.GetHost().GetNodeName() || n == "root" {
		t.Errorf("host root named %q, check names it %q", n, diskFull.GetHost().GetNodeName())
	}

	// What is not a report.
	for name, path := range map[string]string{
		"garbage":        write("garbage.json", []byte("\x00\x01 not json")),
		"other JSON":     write("other.json", []byte(`{"kind": "Pod"}`)),
		"not a host dir": t.TempDir(),
	} {
		if _, err := Load(ctx, path); !errors.Is(err, ErrNotReport) {
			t.Errorf("%s: %v, want ErrNotReport", name, err)
		}
	}
	if _, err := Load(ctx, filepath.Join(dir, "missing.json")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
}

// A report from another machine reaches a terminal or a page only with its
// strings clipped: a 1 MiB node name is cut to MaxUntrustedString, and an
// honest agent's report is left as it is.
func TestLoadClipsUntrustedStrings(t *testing.T) {
	js := checkJSON(t, "swap-enabled")
	var r nodediagv1.Report
	if err := protojson.Unmarshal(js, &r); err != nil {
		t.Fatal(err)
	}
	honest, err := Load(context.Background(), writeFile(t, "honest.json", js))
	if err != nil {
		t.Fatal(err)
	}
	if honest.GetHost().GetNodeName() != r.GetHost().GetNodeName() || len(honest.GetFindings()) != len(r.GetFindings()) {
		t.Errorf("an honest report changed: node %q, %d findings", honest.GetHost().GetNodeName(), len(honest.GetFindings()))
	}
	r.Host.NodeName = string(bytes.Repeat([]byte("n"), 1<<20))
	huge, _ := protojson.Marshal(&r)
	got, err := Load(context.Background(), writeFile(t, "huge.json", huge))
	if err != nil {
		t.Fatal(err)
	}
	name := got.GetHost().GetNodeName()
	if len(name) > MaxUntrustedString+64 || !bytes.Contains([]byte(name), []byte("bytes clipped]")) {
		t.Errorf("node name of %d bytes (%.40q...), want it clipped at %d", len(name), name, MaxUntrustedString)
	}
}

func writeFile(t *testing.T, name string, b []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}
