package cli

import (
	"regexp"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	"sigs.k8s.io/yaml"

	nodediagv1 "github.com/nodediag/nodediag/proto/nodediag/v1"
)

// rowOf returns the line of out that starts with node's name.
func rowOf(out, node string) string {
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, node+" ") {
			return l
		}
	}
	return ""
}

func TestSweepAllClean(t *testing.T) {
	c := startCollector(t, nil)
	connectAgent(t, c.addr, c.creds, "node-a", answers)
	connectAgent(t, c.addr, c.creds, "node-b", answers)

	r := run(t, append([]string{"sweep", "--timeout", "30s"}, c.insecureFlags()...)...)
	if r.code() != ExitOK {
		t.Fatalf("want exit 0: every node answered clean\n%s", r)
	}
	if !strings.Contains(r.stderr, "sweep: asked 2 nodes") {
		t.Errorf("no progress line on stderr (not a terminal: plain lines)\n%s", r)
	}
	if !regexp.MustCompile(`(?m)^NODE +SEVERITY +TOP FINDING$`).MatchString(r.stdout) {
		t.Errorf("no table header\n%s", r)
	}
	for _, n := range []string{"node-a", "node-b"} {
		if row := rowOf(r.stdout, n); !regexp.MustCompile(`^` + n + ` +ok +-$`).MatchString(row) {
			t.Errorf("row of %s = %q, want severity ok and no finding\n%s", n, row, r)
		}
	}
	if !regexp.MustCompile(`(?m)^sweep: 2/2 nodes answered in \S+; 0 with errors, 0 with warnings$`).MatchString(r.stdout) {
		t.Errorf("no summary line\n%s", r)
	}
}

// TestSweepOverMutualTLS: the operator's certificate sweeps agents that
// hold per-node certificates of the same CA; a node with an error finding
// makes the exit code 1.
func TestSweepOverMutualTLS(t *testing.T) {
	p := newPKI(t, "node-ok", "node-bad", "node-warn")
	c := startCollector(t, &p)
	connectAgent(t, c.addr, p.agentCreds(t, "agents/node-ok"), "node-ok", answers)
	connectAgent(t, c.addr, p.agentCreds(t, "agents/node-bad"), "node-bad", answers, errorFinding())
	connectAgent(t, c.addr, p.agentCreds(t, "agents/node-warn"), "node-warn", answers, warningFinding())

	r := run(t, append([]string{"sweep", "--timeout", "30s"}, p.operatorFlags(c.addr)...)...)
	if r.code() != ExitFindings {
		t.Fatalf("want exit 1: node-bad has an error finding\n%s", r)
	}
	oneLineErr(t, r.err)
	if !strings.Contains(r.err.Error(), "1 of 3 nodes answered with a finding at error or above") {
		t.Errorf("error %q does not say how many nodes are broken", r.err)
	}
	if row := rowOf(r.stdout, "node-bad"); !strings.Contains(row, " error ") || !strings.Contains(row, "KubeletRemovedFlag: kubelet v1.35.0 rejects") {
		t.Errorf("row of node-bad = %q, want its severity and top finding\n%s", row, r)
	}
	if row := rowOf(r.stdout, "node-warn"); !strings.Contains(row, " warning ") || !strings.Contains(row, "SwapEnabled") {
		t.Errorf("row of node-warn = %q\n%s", row, r)
	}
	if !strings.Contains(r.stdout, "sweep: 3/3 nodes answered") || !strings.Contains(r.stdout, "1 with errors, 1 with warnings") {
		t.Errorf("summary does not count 3/3, 1 error, 1 warning\n%s", r)
	}
	// The answers are stored: the fleet table shows they answer a sweep.
	r = run(t, append([]string{"nodes", "-o", "json"}, p.operatorFlags(c.addr)...)...)
	resp := &nodediagv1.ListNodesResponse{}
	if err := protojson.Unmarshal([]byte(r.stdout), resp); err != nil {
		t.Fatalf("%v\n%s", err, r)
	}
	for _, n := range resp.GetNodes() {
		if n.GetRequestId() == "" {
			t.Errorf("%s: latest report answers no sweep: %v", n.GetNodeName(), n)
		}
	}
}

func TestSweepNodeDidNotAnswer(t *testing.T) {
	c := startCollector(t, nil)
	connectAgent(t, c.addr, c.creds, "node-a", answers)
	connectAgent(t, c.addr, c.creds, "node-mute", silent)

	r := run(t, append([]string{"sweep", "--timeout", "1s"}, c.insecureFlags()...)...)
	if r.code() != ExitIncomplete {
		t.Fatalf("want exit 3: node-mute never answers\n%s", r)
	}
	oneLineErr(t, r.err)
	if !strings.Contains(r.err.Error(), "1 of 2 nodes did not answer") {
		t.Errorf("error %q", r.err)
	}
	if rowOf(r.stdout, "node-a") == "" || rowOf(r.stdout, "node-mute") != "" {
		t.Errorf("want a row for node-a only\n%s", r)
	}
	if !strings.Contains(r.stdout, "sweep: 1/2 nodes answered") || !strings.Contains(r.stdout, "(timed out)") || !strings.Contains(r.stdout, "missing 1: node-mute") {
		t.Errorf("summary does not name the missing node\n%s", r)
	}
}

func TestSweepWithoutAgents(t *testing.T) {
	c := startCollector(t, nil)
	r := run(t, append([]string{"sweep", "--timeout", "5s"}, c.insecureFlags()...)...)
	if r.code() != ExitIncomplete || !strings.Contains(errString(r.err), "no agent is connected") {
		t.Fatalf("want exit 3, no agent connected\n%s", r)
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func TestNodes(t *testing.T) {
	c := startCollector(t, nil)
	connectAgent(t, c.addr, c.creds, "node-ok", answers)
	connectAgent(t, c.addr, c.creds, "node-bad", answers, errorFinding(), warningFinding())
	connectAgent(t, c.addr, c.creds, "node-warn", answers, warningFinding())

	t.Run("table", func(t *testing.T) {
		r := run(t, append([]string{"nodes"}, c.insecureFlags()...)...)
		if r.code() != ExitOK {
			t.Fatalf("%s", r)
		}
		lines := strings.Split(strings.TrimRight(r.stdout, "\n"), "\n")
		if len(lines) != 4 || !regexp.MustCompile(`^NODE +CONNECTED +LAST SEEN +SEVERITY +TOP FINDING$`).MatchString(lines[0]) {
			t.Fatalf("want a header and 3 rows\n%s", r)
		}
		// Worst first.
		for i, want := range []string{"node-bad", "node-warn", "node-ok"} {
			if !strings.HasPrefix(lines[i+1], want+" ") {
				t.Errorf("row %d = %q, want %s (worst nodes first)", i+1, lines[i+1], want)
			}
		}
		if !regexp.MustCompile(`^node-bad +yes +\S.* +error +KubeletRemovedFlag: kubelet`).MatchString(lines[1]) {
			t.Errorf("row of node-bad = %q", lines[1])
		}
		for _, l := range lines {
			if len([]rune(l)) > defaultWidth {
				t.Errorf("line wider than %d off a terminal: %q", defaultWidth, l)
			}
		}
	})
	t.Run("wide", func(t *testing.T) {
		r := run(t, append([]string{"nodes", "-o", "wide"}, c.insecureFlags()...)...)
		if r.code() != ExitOK {
			t.Fatalf("%s", r)
		}
		for _, want := range []string{"ERRORS", "WARNINGS", "MACHINE ID", "PROVIDER ID", "machine-node-bad", "azure:///vm/node-bad", "v0.0.0-test", "rejects --pod-infra-container-image set in /etc/sysconfig/kubelet"} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("-o wide lacks %q\n%s", want, r)
			}
		}
		if row := rowOf(r.stdout, "node-bad"); !regexp.MustCompile(` 1 +1 +\d{4}-`).MatchString(row) {
			t.Errorf("row of node-bad = %q, want 1 error, 1 warning, then the time of the report", row)
		}
	})
	var fromJSON *nodediagv1.ListNodesResponse
	t.Run("json", func(t *testing.T) {
		r := run(t, append([]string{"nodes", "-o", "json"}, c.insecureFlags()...)...)
		if r.code() != ExitOK {
			t.Fatalf("%s", r)
		}
		if !strings.Contains(r.stdout, `"node_name"`) {
			t.Errorf("want proto field names (docs/CONTRACTS.md)\n%s", r.stdout)
		}
		resp := &nodediagv1.ListNodesResponse{}
		if err := protojson.Unmarshal([]byte(r.stdout), resp); err != nil {
			t.Fatalf("%v\n%s", err, r.stdout)
		}
		fromJSON = resp
		var names []string
		for _, n := range resp.GetNodes() {
			names = append(names, n.GetNodeName())
		}
		if want := []string{"node-bad", "node-ok", "node-warn"}; !slices.Equal(names, want) {
			t.Errorf("nodes %v, want %v (by name)", names, want)
		}
		bad := resp.GetNodes()[0]
		if bad.GetTopId() != "KubeletRemovedFlag" || bad.GetTopSeverity() != "error" || bad.GetErrors() != 1 || bad.GetWarnings() != 1 || !bad.GetConnected() || bad.GetMachineId() != "machine-node-bad" {
			t.Errorf("node-bad = %v", bad)
		}
		if ok := resp.GetNodes()[1]; ok.GetTopId() != "" || ok.GetReportedAt() == nil {
			t.Errorf("node-ok = %v, want a report without findings", ok)
		}
	})
	t.Run("yaml", func(t *testing.T) {
		r := run(t, append([]string{"nodes", "-o", "yaml"}, c.insecureFlags()...)...)
		if r.code() != ExitOK {
			t.Fatalf("%s", r)
		}
		j, err := yaml.YAMLToJSON([]byte(r.stdout))
		if err != nil {
			t.Fatalf("%v\n%s", err, r.stdout)
		}
		resp := &nodediagv1.ListNodesResponse{}
		if err := protojson.Unmarshal(j, resp); err != nil {
			t.Fatalf("%v\n%s", err, r.stdout)
		}
		if len(resp.GetNodes()) != 3 || resp.GetNodes()[0].GetTopId() != "KubeletRemovedFlag" {
			t.Errorf("yaml document = %v", resp)
		}
		if fromJSON != nil && len(fromJSON.GetNodes()) == 3 && resp.GetNodes()[2].GetNodeName() != fromJSON.GetNodes()[2].GetNodeName() {
			t.Errorf("yaml and json disagree")
		}
	})
	t.Run("bad output", func(t *testing.T) {
		r := run(t, append([]string{"nodes", "-o", "xml"}, c.insecureFlags()...)...)
		if r.code() != ExitUsage || !strings.Contains(errString(r.err), `--output "xml"`) {
			t.Errorf("%s", r)
		}
	})
}

func TestNode(t *testing.T) {
	c := startCollector(t, nil)
	connectAgent(t, c.addr, c.creds, "node-ok", answers)
	connectAgent(t, c.addr, c.creds, "node-bad", answers, errorFinding())

	t.Run("text", func(t *testing.T) {
		r := run(t, append([]string{"node", "node-bad"}, c.insecureFlags()...)...)
		if r.code() != ExitFindings {
			t.Fatalf("want exit 1: the report has an error finding\n%s", r)
		}
		if !strings.HasPrefix(r.stdout, "collector: node node-bad, agent connected, last seen ") {
			t.Errorf("first line is not the collector's view\n%s", r)
		}
		for _, want := range []string{"KubeletRemovedFlag", "/etc/sysconfig/kubelet", "KUBELET_EXTRA_ARGS=--pod-infra-container-image"} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("report lacks %q\n%s", want, r)
			}
		}
		lines := strings.Split(strings.TrimRight(r.stdout, "\n"), "\n")
		if !strings.HasPrefix(lines[len(lines)-1], "SUMMARY") {
			t.Errorf("last line is not the SUMMARY\n%s", r)
		}
		if r := run(t, append([]string{"node", "node-ok"}, c.insecureFlags()...)...); r.code() != ExitOK {
			t.Errorf("node-ok: want exit 0\n%s", r)
		}
	})
	t.Run("json", func(t *testing.T) {
		r := run(t, append([]string{"node", "node-bad", "-o", "json"}, c.insecureFlags()...)...)
		if r.code() != ExitFindings {
			t.Fatalf("%s", r)
		}
		rep := &nodediagv1.Report{}
		if err := protojson.Unmarshal([]byte(r.stdout), rep); err != nil {
			t.Fatalf("%v\n%s", err, r.stdout)
		}
		if len(rep.GetFindings()) != 1 || rep.GetFindings()[0].GetId() != "KubeletRemovedFlag" || rep.GetHost().GetNodeName() != "node-bad" {
			t.Errorf("report = %v", rep)
		}
	})
	t.Run("unknown node", func(t *testing.T) {
		r := run(t, append([]string{"node", "no-such-node"}, c.insecureFlags()...)...)
		if r.code() != ExitUsage {
			t.Fatalf("want exit 2\n%s", r)
		}
		oneLineErr(t, r.err)
		if !strings.Contains(r.err.Error(), `has no report of node "no-such-node"`) || !strings.Contains(r.err.Error(), "nodediag nodes") {
			t.Errorf("error %q does not name the node and where to look", r.err)
		}
		if r.stdout != "" {
			t.Errorf("printed %q", r.stdout)
		}
	})
}

// TestRefusals: what the operator reads when the collector refuses the
// client: one line with the reason, exit 2.
func TestRefusals(t *testing.T) {
	p := newPKI(t)
	c := startCollector(t, &p)
	other := newPKI(t) // another CA

	for _, tc := range []struct {
		name  string
		flags []string
		want  []string
	}{
		{
			name:  "no client certificate",
			flags: []string{"--collector", c.addr, "--ca", p.path("ca.crt")},
			want:  []string{"refused this client (Unauthenticated)", "no client certificate", "--tls-cert"},
		},
		{
			name:  "certificate of another CA",
			flags: []string{"--collector", c.addr, "--tls-cert", other.path("operator.crt"), "--tls-key", other.path("operator.key"), "--ca", p.path("ca.crt")},
			want:  []string{"refused this client (Unauthenticated)", "client certificate not trusted"},
		},
		{
			name:  "an agent's certificate",
			flags: []string{"--collector", c.addr, "--tls-cert", p.path("agent.crt"), "--tls-key", p.path("agent.key"), "--ca", p.path("ca.crt")},
			want:  []string{"refused this client (PermissionDenied)", "operator"},
		},
		{
			name:  "plaintext to a TLS collector",
			flags: []string{"--collector", c.addr, "--insecure"},
			want:  []string{c.addr, "TLS"},
		},
		{
			name:  "no TLS flags",
			flags: []string{"--collector", c.addr},
			want:  []string{"requires mutual TLS", "nodediag certs", "--insecure"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := run(t, append([]string{"nodes"}, tc.flags...)...)
			if r.code() != ExitUsage {
				t.Fatalf("want exit 2\n%s", r)
			}
			oneLineErr(t, r.err)
			t.Logf("nodediag: %v", r.err)
			for _, w := range tc.want {
				if !strings.Contains(r.err.Error(), w) {
					t.Errorf("error %q lacks %q", r.err, w)
				}
			}
		})
	}
}
