package cli

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"

	agentcli "github.com/nodediag/nodediag/agent/cli"
	"github.com/nodediag/nodediag/agent/host/hosttest"
	"github.com/nodediag/nodediag/agent/redact/redacttest"
	"github.com/nodediag/nodediag/collector/store"
	nodediagv1 "github.com/nodediag/nodediag/proto/nodediag/v1"
)

// TestSecretShapesNeverLeave plants the secret-shapes corpus (every shape
// in every form) in a node's log and follows it down every path out of the
// agent and the collector: check text, json and compact, the full evidence,
// the bundle of collect, the report run uploads to a real collector, the
// collector's files on disk, node -o text and json, analyze of the bundle
// in each of its formats (the HTML page included); then a hostile agent that
// uploads the corpus unredacted, shown by node and stored. No secret may
// appear in any of them, in any encoding.
func TestSecretShapesNeverLeave(t *testing.T) {
	shapes := redacttest.Shapes()
	root := hosttest.Tree(t, map[string]string{
		"etc/hostname":        "capz-shapes-md-0-x1\n",
		"etc/machine-id":      "5b1a2fa389d21bb347503742d7c022d4\n",
		redacttest.PlantedLog: redacttest.Plant(shapes),
	}).Root
	outputs := map[string]string{}
	agent := func(name string, args ...string) string {
		t.Helper()
		var out, errOut strings.Builder
		if code := agentcli.Run(context.Background(), args, &out, &errOut); code > 1 {
			t.Fatalf("nodediag-agent %s: exit %d\n%s", name, code, errOut.String())
		}
		outputs["agent "+name] = out.String() + errOut.String()
		return out.String()
	}
	for _, o := range []string{"text", "json", "compact"} {
		agent("check -o "+o, "check", "--root", root, "--output", o, "--exec", "none")
	}
	bundle := filepath.Join(t.TempDir(), "b.tar.gz")
	agent("collect", "collect", "--root", root, "--bundle", bundle, "--exec", "none")
	outputs["bundle"] = untar(t, bundle)
	if !strings.Contains(outputs["bundle"], redacttest.Marker(shapes[0], redacttest.Plain)) {
		t.Fatalf("the bundle lacks the planted log: it would prove nothing")
	}

	// The real collector: run --once uploads the full report (evidence
	// included), node shows it, the data directory keeps it.
	dataDir := t.TempDir()
	s := startServe(t, false, "--listen", "127.0.0.1:0", "--insecure", "--data-dir", dataDir)
	agent("run --once", "run", "--once", "--collector", s.addr, "--insecure", "--root", root, "--node-name", "shapes-node", "--offline", "--exec", "none")
	for _, o := range []string{"text", "json"} {
		r := run(t, "node", "shapes-node", "--collector", s.addr, "--insecure", "-o", o)
		if r.code() > 1 {
			t.Fatalf("node -o %s: %s", o, r)
		}
		outputs["node -o "+o] = r.stdout + r.stderr
	}
	for _, o := range []string{"markdown", "json", "html", "text"} {
		r := run(t, "analyze", bundle, "-o", o)
		if r.code() > 1 {
			t.Fatalf("analyze -o %s: %s", o, r)
		}
		outputs["analyze -o "+o] = r.stdout + r.stderr
	}

	// A hostile (or old) agent sends the corpus unredacted: the collector
	// redacts what it receives before it keeps or shows it.
	var raw []*nodediagv1.Quote
	for _, sh := range shapes {
		for _, f := range redacttest.Forms {
			raw = append(raw, &nodediagv1.Quote{Source: "/" + redacttest.PlantedLog, Excerpt: redacttest.Marker(sh, f) + " " + f.In(sh.Text)})
		}
	}
	hostile := errorFinding()
	hostile.Evidence = raw
	hostile.Title = "hostile: " + shapes[0].Text
	connectAgent(t, s.addr, insecureCreds(), "hostile-node", silent, hostile)
	for _, o := range []string{"text", "json"} {
		r := run(t, "node", "hostile-node", "--collector", s.addr, "--insecure", "-o", o)
		if r.code() > 1 {
			t.Fatalf("node hostile-node -o %s: %s", o, r)
		}
		outputs["hostile node -o "+o] = r.stdout + r.stderr
	}
	if !strings.Contains(outputs["hostile node -o json"], redacttest.Marker(shapes[len(shapes)-1], redacttest.Base64)) {
		t.Errorf("the hostile agent's evidence was not shown: the test proves nothing\n%s", outputs["hostile node -o json"])
	}
	s.stop(t)
	outputs["stored"] = storedReports(t, dataDir, "shapes-node")
	// The evidence the agent uploaded kept every planted line, redacted:
	// a test of lines the agent never kept would prove nothing.
	for _, sh := range shapes {
		for _, f := range redacttest.Forms {
			if m := redacttest.Marker(sh, f) + " "; !strings.Contains(outputs["stored"], m) {
				t.Errorf("%s: the stored report lacks the line %s: was it read?", sh, m)
			}
		}
	}
	outputs["stored hostile"] = storedReports(t, dataDir, "hostile-node")
	if !strings.Contains(outputs["stored hostile"], redacttest.Marker(shapes[0], redacttest.JSON)) {
		t.Errorf("the hostile agent's report was not stored: the test proves nothing")
	}

	for name, out := range outputs {
		for _, l := range redacttest.Leaks(out, shapes) {
			if l.Shape.LineByLineLimit() {
				// A known limit (SECURITY.md, and agent/redact's
				// TestShapesLineByLine): a log is read line by line.
				t.Logf("%s: %s (a key without its BEGIN line)", name, l)
				continue
			}
			t.Errorf("%s: %s", name, l)
		}
	}
}

// untar returns the members of a gzipped tar, concatenated.
func untar(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return b.String()
		}
		if err != nil {
			t.Fatal(err)
		}
		b.WriteString(h.Name + "\n")
		io.Copy(&b, tr)
	}
}

// storedReports opens the collector's data directory after serve stopped
// and returns every report it keeps for nodes, as JSON.
func storedReports(t *testing.T, dir string, nodes ...string) string {
	t.Helper()
	st, err := store.Open(dir, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var b strings.Builder
	for _, n := range nodes {
		recs, err := st.History(context.Background(), n, 100)
		if err != nil || len(recs) == 0 {
			t.Fatalf("stored reports of %s: %d, %v", n, len(recs), err)
		}
		for _, r := range recs {
			js, err := protojson.Marshal(r.Report)
			if err != nil {
				t.Fatal(err)
			}
			b.Write(js)
		}
	}
	return b.String()
}
