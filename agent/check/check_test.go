package check

import (
	"context"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/nodediag/nodediag/agent/host"
	"github.com/nodediag/nodediag/agent/rules"
	nodediagv1 "github.com/nodediag/nodediag/proto/nodediag/v1"
)

const exampleHosts = "../testdata/hosts/"

func checkExample(t *testing.T, name string, o Options) *nodediagv1.Report {
	t.Helper()
	h, err := host.New(exampleHosts+name+"/root", host.NoExec{})
	if err != nil {
		t.Fatal(err)
	}
	h.Net = host.NoNetwork{}
	r, err := Host(context.Background(), h, o)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestHostNamesTheRootAndNode(t *testing.T) {
	r := checkExample(t, "swap-enabled", Options{Root: "/copy-of-node", NodeName: "node-x"})
	if got := r.GetHost().GetRoot(); got != "/copy-of-node" {
		t.Errorf("root %q", got)
	}
	if got := r.GetHost().GetNodeName(); got != "node-x" {
		t.Errorf("node name %q", got)
	}
	if len(r.GetFindings()) == 0 || r.GetFindings()[0].GetId() != "SwapEnabled" {
		t.Errorf("findings %v", r.GetFindings())
	}
	if r.GetEvidence() == nil {
		t.Error("the report carries no evidence")
	}
}

// TestRejudge: judging a stored report again keeps what its agent said of
// itself and of the node, leaves the stored report unchanged, and applies
// what the caller adds (an expected version).
func TestRejudge(t *testing.T) {
	stored := checkExample(t, "healthy-worker", Options{})
	stored.Agent = &nodediagv1.AgentInfo{Version: "v0.0.1-old-agent", Revision: "abc"}
	stored.Host.Root = "/host"
	before := proto.Clone(stored)
	for _, redact := range []bool{false, true} {
		r, err := Rejudge(stored, Options{Context: rules.Context{ExpectVersion: "v1.30.0"}}, redact)
		if err != nil {
			t.Fatal(err)
		}
		if !proto.Equal(stored, before) {
			t.Fatalf("redact=%v: the stored report was changed", redact)
		}
		if r.GetAgent().GetVersion() != "v0.0.1-old-agent" {
			t.Errorf("redact=%v: agent %v: the collecting agent's version is lost", redact, r.GetAgent())
		}
		if r.GetHost().GetRoot() != "/host" || r.GetHost().GetNodeName() != stored.GetHost().GetNodeName() {
			t.Errorf("redact=%v: host %v", redact, r.GetHost())
		}
		if len(r.GetFindings()) == 0 || r.GetFindings()[0].GetId() != "VersionMismatch" {
			t.Errorf("redact=%v: the expected version changed nothing: %v", redact, r.GetFindings())
		}
		if !proto.Equal(r.GetWindow(), stored.GetWindow()) {
			t.Errorf("redact=%v: window %v, the agent's was %v", redact, r.GetWindow(), stored.GetWindow())
		}
	}
	bare := proto.Clone(stored).(*nodediagv1.Report)
	bare.Evidence = nil
	if r, _ := Rejudge(bare, Options{}, true); r != bare {
		t.Error("a report without evidence is not returned as it is")
	}
}

// TestNowIsTheHostsClock: --now dates the host's yearless lines too.
func TestNowIsTheHostsClock(t *testing.T) {
	now := time.Date(2024, 5, 1, 0, 30, 0, 0, time.UTC)
	r := checkExample(t, "swap-enabled", Options{Context: rules.Context{Now: now}})
	if got := r.GetWindow().GetUntil().AsTime(); !got.Equal(now) {
		t.Errorf("window until %v, want %v", got, now)
	}
}
