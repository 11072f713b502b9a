package store

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/klauspost/compress/zstd"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/timestamppb"

	nodediagv1 "github.com/nodediag/nodediag/proto/nodediag/v1"
)

// t0 is a fixed reception time: the tests that do not test MaxAge open
// their stores with a negative MaxAge, so that its age does not matter.
var t0 = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

// agentStart is the start of the agent run most test records come from.
var agentStart = time.Date(2026, 5, 1, 11, 0, 0, 123456789, time.UTC)

// testReport is a small report of node whose content depends on seq, so
// that a report read back can be matched to the Put that stored it.
func testReport(node string, seq uint64) *nodediagv1.Report {
	return &nodediagv1.Report{
		Agent: &nodediagv1.AgentInfo{Version: "v0.5.0", Revision: "abc123"},
		Host:  &nodediagv1.HostInfo{Hostname: node, MachineId: "mid-" + node, Os: "Ubuntu 22.04.4 LTS"},
		Findings: []*nodediagv1.Finding{{
			Id:       "KubeletRemovedFlag",
			Severity: "error",
			Title:    fmt.Sprintf("kubelet flag removed (upload %d)", seq),
		}},
		Gaps:      []string{fmt.Sprintf("gap of upload %d", seq)},
		RequestId: fmt.Sprintf("req-%d", seq),
	}
}

func testSummary(node string, seq uint64) *nodediagv1.NodeSummary {
	return &nodediagv1.NodeSummary{
		NodeName:    node,
		MachineId:   "mid-" + node,
		ProviderId:  "azure:///vm/" + node,
		Agent:       &nodediagv1.AgentInfo{Version: "v0.5.0", Revision: "abc123"},
		ReportedAt:  timestamppb.New(t0.Add(time.Duration(seq) * time.Second)),
		TopId:       "KubeletRemovedFlag",
		TopTitle:    fmt.Sprintf("kubelet flag removed (upload %d)", seq),
		TopSeverity: "error",
		Errors:      int32(seq % 7),
		Warnings:    int32(seq % 3),
		RequestId:   fmt.Sprintf("req-%d", seq),
	}
}

func testRecord(node string, seq uint64) *Record {
	return &Record{
		Summary:    testSummary(node, seq),
		AgentStart: agentStart,
		Seq:        seq,
		ReceivedAt: t0.Add(time.Duration(seq) * time.Second),
		Report:     testReport(node, seq),
	}
}

// keepAll keeps every report whatever its age.
var keepAll = Options{MaxAge: -1}

func openStore(t testing.TB, dir string, opts Options) *SQLite {
	t.Helper()
	s, err := Open(dir, opts)
	if err != nil {
		t.Fatalf("Open(%s): %v", dir, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func put(t testing.TB, s *SQLite, rec *Record) {
	t.Helper()
	if err := s.Put(context.Background(), rec); err != nil {
		t.Fatalf("Put(%s seq %d): %v", rec.Summary.GetNodeName(), rec.Seq, err)
	}
}

func history(t testing.TB, s *SQLite, node string, limit int) []*Record {
	t.Helper()
	recs, err := s.History(context.Background(), node, limit)
	if err != nil {
		t.Fatalf("History(%s, %d): %v", node, limit, err)
	}
	return recs
}

func seqs(recs []*Record) []uint64 {
	out := make([]uint64, 0, len(recs))
	for _, r := range recs {
		out = append(out, r.Seq)
	}
	return out
}

// rawDB opens the store's file with plain database/sql, as another program
// (or an operator with sqlite3) would.
func rawDB(t testing.TB, dir string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, FileName)+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	t.Cleanup(func() { db.Close() })
	return db
}

func execSQL(t testing.TB, db *sql.DB, q string, args ...any) {
	t.Helper()
	if _, err := db.Exec(q, args...); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

// storedSummary is what a summary reads back as: Connected and LastSeen
// are the collector's live state and are not stored.
func storedSummary(s *nodediagv1.NodeSummary) *nodediagv1.NodeSummary {
	s = proto.Clone(s).(*nodediagv1.NodeSummary)
	s.Connected = false
	s.LastSeen = nil
	return s
}

func checkRecord(t *testing.T, got, want *Record) {
	t.Helper()
	if diff := cmp.Diff(storedSummary(want.Summary), got.Summary, protocmp.Transform()); diff != "" {
		t.Errorf("summary of %s seq %d (-want +got):\n%s", want.Summary.GetNodeName(), want.Seq, diff)
	}
	wantReport := want.Report
	if len(want.Encoded) > 0 {
		wantReport = &nodediagv1.Report{}
		if err := proto.Unmarshal(want.Encoded, wantReport); err != nil {
			t.Fatal(err)
		}
	}
	if !proto.Equal(got.Report, wantReport) {
		t.Errorf("report of %s seq %d: got %v, want %v", want.Summary.GetNodeName(), want.Seq, got.Report, wantReport)
	}
	if got.Seq != want.Seq {
		t.Errorf("Seq = %d, want %d", got.Seq, want.Seq)
	}
	if !got.AgentStart.Equal(want.AgentStart) {
		t.Errorf("AgentStart = %v, want %v", got.AgentStart, want.AgentStart)
	}
	if !got.ReceivedAt.Equal(want.ReceivedAt) {
		t.Errorf("ReceivedAt = %v, want %v", got.ReceivedAt, want.ReceivedAt)
	}
	if got.Encoded != nil {
		t.Errorf("a record read back has Encoded (%d bytes), want none", len(got.Encoded))
	}
}

func TestPutLatestHistoryRoundTrip(t *testing.T) {
	ctx := context.Background()
	s := openStore(t, t.TempDir(), keepAll)
	var puts []*Record
	for seq := uint64(1); seq <= 4; seq++ {
		rec := testRecord("node-a", seq)
		puts = append(puts, rec)
		put(t, s, rec)
	}
	// Live state given to Put is not stored.
	b := testRecord("node-b", 1)
	b.Summary.Connected = true
	b.Summary.LastSeen = timestamppb.New(t0)
	b.Summary.Agent = nil // no agent: reads back as nil, not an empty message
	b.Summary.ReportedAt = nil
	put(t, s, b)

	got, err := s.Latest(ctx, "node-a")
	if err != nil {
		t.Fatal(err)
	}
	checkRecord(t, got, puts[3])
	gotB, err := s.Latest(ctx, "node-b")
	if err != nil {
		t.Fatal(err)
	}
	checkRecord(t, gotB, b)

	all := history(t, s, "node-a", 0)
	if diff := cmp.Diff([]uint64{4, 3, 2, 1}, seqs(all)); diff != "" {
		t.Fatalf("History(node-a, 0) seqs (-want +got):\n%s", diff)
	}
	for i, rec := range all {
		checkRecord(t, rec, puts[3-i])
	}
	if diff := cmp.Diff([]uint64{4, 3}, seqs(history(t, s, "node-a", 2))); diff != "" {
		t.Errorf("History(node-a, 2) seqs (-want +got):\n%s", diff)
	}
	if got := history(t, s, "no-such-node", 5); len(got) != 0 {
		t.Errorf("History of an unknown node = %d records, want none", len(got))
	}

	nodes, err := s.Nodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []*nodediagv1.NodeSummary{storedSummary(puts[3].Summary), storedSummary(b.Summary)}
	if diff := cmp.Diff(want, nodes, protocmp.Transform()); diff != "" {
		t.Errorf("Nodes (-want +got):\n%s", diff)
	}

	// Everything is still there after a reopen.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2 := openStore(t, filepath.Dir(s.path), keepAll)
	got, err = s2.Latest(ctx, "node-a")
	if err != nil {
		t.Fatal(err)
	}
	checkRecord(t, got, puts[3])
}

func TestLatestUnknownNode(t *testing.T) {
	s := openStore(t, t.TempDir(), keepAll)
	_, err := s.Latest(context.Background(), "nobody")
	if !errors.Is(err, ErrNotFound) {
		t.Fatalf("Latest(empty store) = %v, want ErrNotFound", err)
	}
	put(t, s, testRecord("somebody", 1))
	_, err = s.Latest(context.Background(), "nobody")
	if !errors.Is(err, ErrNotFound) {
		t.Fatalf("Latest(unknown node) = %v, want ErrNotFound", err)
	}
	if !strings.Contains(err.Error(), "nobody") {
		t.Errorf("error %q does not name the node", err)
	}
}

func TestZeroTimes(t *testing.T) {
	// A zero AgentStart (unknown) reads back as zero; a zero ReceivedAt
	// is taken as the time of the Put.
	s := openStore(t, t.TempDir(), keepAll)
	rec := testRecord("n", 1)
	rec.AgentStart = time.Time{}
	rec.ReceivedAt = time.Time{}
	before := time.Now()
	put(t, s, rec)
	after := time.Now()
	got, err := s.Latest(context.Background(), "n")
	if err != nil {
		t.Fatal(err)
	}
	if !got.AgentStart.IsZero() {
		t.Errorf("AgentStart = %v, want zero", got.AgentStart)
	}
	if got.ReceivedAt.Before(before.Truncate(0)) || got.ReceivedAt.After(after) {
		t.Errorf("ReceivedAt = %v, want between %v and %v", got.ReceivedAt, before, after)
	}
}

// withUnknownField appends field 999 (a string) to a report's encoding, as
// a newer agent's report would carry a field this collector does not know.
func withUnknownField(b []byte) []byte {
	b = protowire.AppendTag(b, 999, protowire.BytesType)
	return protowire.AppendString(b, "from a newer agent")
}

func unknownField999(t *testing.T, r *nodediagv1.Report) string {
	t.Helper()
	raw := r.ProtoReflect().GetUnknown()
	for len(raw) > 0 {
		num, typ, n := protowire.ConsumeTag(raw)
		if n < 0 {
			t.Fatalf("unknown fields: %v", protowire.ParseError(n))
		}
		raw = raw[n:]
		if num == 999 && typ == protowire.BytesType {
			v, n := protowire.ConsumeString(raw)
			if n < 0 {
				t.Fatalf("field 999: %v", protowire.ParseError(n))
			}
			return v
		}
		n = protowire.ConsumeFieldValue(num, typ, raw)
		if n < 0 {
			t.Fatalf("unknown field %d: %v", num, protowire.ParseError(n))
		}
		raw = raw[n:]
	}
	return ""
}

// storedBytes is the protobuf encoding the store keeps for (node, seq),
// read with raw SQL and decompressed.
func storedBytes(t *testing.T, dir, node string, seq uint64) []byte {
	t.Helper()
	var codec int64
	var data []byte
	err := rawDB(t, dir).QueryRow(`SELECT d.codec, d.data FROM reports r JOIN report_data d ON d.id = r.id
		WHERE r.node = ? AND r.seq = ?`, node, int64(seq)).Scan(&codec, &data)
	if err != nil {
		t.Fatal(err)
	}
	switch codec {
	case codecProto:
		return data
	case codecZstd:
		dec, err := zstd.NewReader(nil)
		if err != nil {
			t.Fatal(err)
		}
		defer dec.Close()
		b, err := dec.DecodeAll(data, nil)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	t.Fatalf("codec %d", codec)
	return nil
}

func TestPutEncodedStoresBytesAsIs(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openStore(t, dir, keepAll)

	for _, tc := range []struct {
		name   string
		report *nodediagv1.Report // set alongside Encoded: Encoded wins
	}{
		{name: "encoded only"},
		{name: "encoded and a different report", report: testReport("other", 77)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			node := strings.ReplaceAll(tc.name, " ", "-")
			b, err := proto.Marshal(testReport(node, 1))
			if err != nil {
				t.Fatal(err)
			}
			enc := withUnknownField(b)
			rec := testRecord(node, 1)
			rec.Report = tc.report
			rec.Encoded = bytes.Clone(enc)
			put(t, s, rec)
			if !bytes.Equal(rec.Encoded, enc) {
				t.Errorf("Put modified rec.Encoded")
			}

			if got := storedBytes(t, dir, node, 1); !bytes.Equal(got, enc) {
				t.Errorf("stored bytes differ from Encoded:\n got %x\nwant %x", got, enc)
			}
			latest, err := s.Latest(ctx, node)
			if err != nil {
				t.Fatal(err)
			}
			hist := history(t, s, node, 1)
			if len(hist) != 1 {
				t.Fatalf("History = %d records, want 1", len(hist))
			}
			for name, got := range map[string]*Record{"Latest": latest, "History": hist[0]} {
				checkRecord(t, got, rec)
				if v := unknownField999(t, got.Report); v != "from a newer agent" {
					t.Errorf("%s: unknown field 999 = %q, want it kept", name, v)
				}
				// Re-encoding the report read back gives the bytes the
				// agent sent, the unknown field included.
				again, err := proto.MarshalOptions{Deterministic: true}.Marshal(got.Report)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(again, enc) {
					t.Errorf("%s: re-encoded report differs from what the agent sent", name)
				}
			}
		})
	}
}

func TestCompressionPaysOrNot(t *testing.T) {
	// A report that does not compress is stored as plain protobuf (codec
	// 0); one that does as zstd (codec 1). Both read back the same.
	ctx := context.Background()
	dir := t.TempDir()
	s := openStore(t, dir, keepAll)
	tiny := testRecord("tiny", 1)
	tiny.Report = &nodediagv1.Report{RequestId: "x"}
	big := testRecord("big", 1)
	big.Report.Gaps = nil
	for i := range 500 {
		big.Report.Gaps = append(big.Report.Gaps, fmt.Sprintf("/var/log/pods/ns_pod-%d/container/0.log: permission denied", i))
	}
	put(t, s, tiny)
	put(t, s, big)
	db := rawDB(t, dir)
	for _, tc := range []struct {
		rec   *Record
		codec int64
	}{{tiny, codecProto}, {big, codecZstd}} {
		node := tc.rec.Summary.GetNodeName()
		var codec, size, n int64
		if err := db.QueryRow(`SELECT d.codec, d.size, length(d.data) FROM reports r JOIN report_data d ON d.id = r.id WHERE r.node = ?`,
			node).Scan(&codec, &size, &n); err != nil {
			t.Fatal(err)
		}
		if codec != tc.codec {
			t.Errorf("%s: codec %d, want %d", node, codec, tc.codec)
		}
		if want := int64(proto.Size(tc.rec.Report)); size != want {
			t.Errorf("%s: size %d, want %d", node, size, want)
		}
		if codec == codecZstd && n >= size {
			t.Errorf("%s: compressed %d bytes into %d", node, size, n)
		}
		got, err := s.Latest(ctx, node)
		if err != nil {
			t.Fatal(err)
		}
		checkRecord(t, got, tc.rec)
	}
}

func TestDedupe(t *testing.T) {
	ctx := context.Background()
	s := openStore(t, t.TempDir(), keepAll)
	first := testRecord("n", 5)
	put(t, s, first)
	// The same upload again (an agent that reconnected before its Ack),
	// even with another content and reception time: stored once, the
	// first copy kept.
	again := testRecord("n", 5)
	again.Report.RequestId = "changed"
	again.ReceivedAt = t0.Add(time.Hour)
	put(t, s, again)
	recs := history(t, s, "n", 0)
	if len(recs) != 1 {
		t.Fatalf("History after the same upload twice = seqs %v, want one record", seqs(recs))
	}
	checkRecord(t, recs[0], first)

	// The same seq from another agent run is another upload.
	restarted := testRecord("n", 5)
	restarted.AgentStart = agentStart.Add(time.Hour)
	put(t, s, restarted)
	recs = history(t, s, "n", 0)
	if len(recs) != 2 {
		t.Fatalf("History after a restarted agent's seq 5 = %d records, want 2", len(recs))
	}
	checkRecord(t, recs[0], restarted)
	checkRecord(t, recs[1], first)
	latest, err := s.Latest(ctx, "n")
	if err != nil {
		t.Fatal(err)
	}
	checkRecord(t, latest, restarted)

	// The same seq and agent start for another node is another upload.
	put(t, s, testRecord("m", 5))
	if got := history(t, s, "m", 0); len(got) != 1 {
		t.Errorf("History(m) = %d records, want 1", len(got))
	}
}

func TestDedupeWithinOneBatch(t *testing.T) {
	// Concurrent Puts of the same upload likely share a transaction: all
	// return nil, one is stored.
	s := openStore(t, t.TempDir(), keepAll)
	var wg sync.WaitGroup
	errs := make(chan error, 50)
	for range 50 {
		wg.Go(func() { errs <- s.Put(context.Background(), testRecord("n", 9)) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("Put: %v", err)
		}
	}
	if got := history(t, s, "n", 0); len(got) != 1 {
		t.Errorf("History = %d records, want 1", len(got))
	}
}

func TestLatestIgnoresResentOlderUpload(t *testing.T) {
	ctx := context.Background()
	s := openStore(t, t.TempDir(), keepAll)
	put(t, s, testRecord("n", 10))
	put(t, s, testRecord("n", 11))
	// seq 8 of the same agent run, re-sent late: kept in the history, not
	// the latest.
	put(t, s, testRecord("n", 8))
	latest, err := s.Latest(ctx, "n")
	if err != nil {
		t.Fatal(err)
	}
	if latest.Seq != 11 {
		t.Errorf("Latest after a late seq 8 = seq %d, want 11", latest.Seq)
	}
	if diff := cmp.Diff([]uint64{8, 11, 10}, seqs(history(t, s, "n", 0))); diff != "" {
		t.Errorf("History seqs, in the order received (-want +got):\n%s", diff)
	}
	nodes, err := s.Nodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes) != 1 || nodes[0].GetRequestId() != "req-11" {
		t.Errorf("Nodes = %v, want the summary of seq 11", nodes)
	}
	// A new agent run (a reboot whose clock went backwards included) with
	// a lower seq becomes the latest.
	rebooted := testRecord("n", 1)
	rebooted.AgentStart = agentStart.Add(-time.Hour)
	put(t, s, rebooted)
	latest, err = s.Latest(ctx, "n")
	if err != nil {
		t.Fatal(err)
	}
	checkRecord(t, latest, rebooted)
}

func TestBoundedHistory(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openStore(t, dir, Options{History: 3, MaxAge: -1})
	for seq := uint64(1); seq <= 10; seq++ {
		put(t, s, testRecord("a", seq))
		if seq%2 == 0 {
			put(t, s, testRecord("b", seq))
		}
	}
	for _, tc := range []struct {
		node string
		want []uint64
	}{{"a", []uint64{10, 9, 8}}, {"b", []uint64{10, 8, 6}}} {
		recs := history(t, s, tc.node, 0)
		if diff := cmp.Diff(tc.want, seqs(recs)); diff != "" {
			t.Errorf("History(%s) seqs (-want +got):\n%s", tc.node, diff)
		}
		for _, r := range recs {
			checkRecord(t, r, testRecord(tc.node, r.Seq))
		}
		latest, err := s.Latest(ctx, tc.node)
		if err != nil {
			t.Fatal(err)
		}
		checkRecord(t, latest, testRecord(tc.node, 10))
	}
	// The pruned reports are gone from the file, their data included.
	db := rawDB(t, dir)
	for table, want := range map[string]int{"reports": 6, "report_data": 6, "nodes": 2} {
		var n int
		if err := db.QueryRow("SELECT count(*) FROM " + table).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != want {
			t.Errorf("%s has %d rows, want %d", table, n, want)
		}
	}
	nodes, err := s.Nodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []*nodediagv1.NodeSummary{testSummary("a", 10), testSummary("b", 10)}
	if diff := cmp.Diff(want, nodes, protocmp.Transform()); diff != "" {
		t.Errorf("Nodes (-want +got):\n%s", diff)
	}
}

func TestBoundedHistoryKeepsLatest(t *testing.T) {
	// With History 2, a late re-sent upload (lower seq, same agent run)
	// does not push the node's latest out of the history.
	ctx := context.Background()
	s := openStore(t, t.TempDir(), Options{History: 2, MaxAge: -1})
	put(t, s, testRecord("n", 10))
	put(t, s, testRecord("n", 3))
	put(t, s, testRecord("n", 4))
	latest, err := s.Latest(ctx, "n")
	if err != nil {
		t.Fatalf("Latest: %v", err)
	}
	if latest.Seq != 10 {
		t.Errorf("Latest = seq %d, want 10", latest.Seq)
	}
	if diff := cmp.Diff([]uint64{4, 3, 10}, seqs(history(t, s, "n", 0))); diff != "" {
		t.Errorf("History seqs (-want +got):\n%s", diff)
	}
}

// waitFor polls cond until it holds or a generous deadline passes: the
// age pruning runs in the writer goroutine, on its own schedule.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestMaxAgePrunesOnTicker(t *testing.T) {
	// MaxAge 2s: the writer prunes every second (MaxAge/4, at least 1s).
	// Reports received an hour ago go; reports "received" an hour from now
	// stay for the test's duration whatever the machine's speed.
	ctx := context.Background()
	s := openStore(t, t.TempDir(), Options{MaxAge: 2 * time.Second})
	now := time.Now()
	rec := func(node string, seq uint64, received time.Time) *Record {
		r := testRecord(node, seq)
		r.ReceivedAt = received
		return r
	}
	// old: only old reports, forgotten entirely.
	put(t, s, rec("old", 1, now.Add(-time.Hour)))
	put(t, s, rec("old", 2, now.Add(-time.Hour)))
	// mixed: its latest (seq 2) is old and goes; seq 1 becomes the latest.
	put(t, s, rec("mixed", 1, now.Add(time.Hour)))
	put(t, s, rec("mixed", 2, now.Add(-time.Hour)))
	// fresh: untouched.
	put(t, s, rec("fresh", 1, now.Add(time.Hour)))

	waitFor(t, "the old reports to be pruned", func() bool {
		h, err := s.History(ctx, "old", 0)
		if err != nil {
			t.Fatal(err)
		}
		m, err := s.History(ctx, "mixed", 0)
		if err != nil {
			t.Fatal(err)
		}
		return len(h) == 0 && len(m) == 1
	})
	if _, err := s.Latest(ctx, "old"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Latest(old) after pruning = %v, want ErrNotFound", err)
	}
	latest, err := s.Latest(ctx, "mixed")
	if err != nil {
		t.Fatalf("Latest(mixed) after pruning: %v", err)
	}
	if latest.Seq != 1 {
		t.Errorf("Latest(mixed) = seq %d, want 1", latest.Seq)
	}
	if got := seqs(history(t, s, "fresh", 0)); len(got) != 1 {
		t.Errorf("History(fresh) = %v, want seq 1 kept", got)
	}
	nodes, err := s.Nodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, n := range nodes {
		names = append(names, n.GetNodeName())
	}
	if diff := cmp.Diff([]string{"fresh", "mixed"}, names); diff != "" {
		t.Errorf("Nodes after pruning (-want +got):\n%s", diff)
	}
	// The store keeps working.
	put(t, s, rec("old", 3, now.Add(time.Hour)))
	if _, err := s.Latest(ctx, "old"); err != nil {
		t.Errorf("Latest(old) after a new report: %v", err)
	}
}

func TestMaxAgePrunesAtOpen(t *testing.T) {
	// Reports stored by a collector that kept everything are pruned as
	// soon as a store with MaxAge opens, a backlog larger than one pruning
	// transaction included; recent ones stay.
	ctx := context.Background()
	dir := t.TempDir()
	s := openStore(t, dir, Options{MaxAge: -1, History: 1})
	old := time.Now().Add(-48 * time.Hour)
	var wg sync.WaitGroup
	errs := make(chan error, 2*agePruneChunk+100)
	for i := range 2*agePruneChunk + 100 {
		wg.Go(func() {
			r := testRecord(fmt.Sprintf("old-%d", i), 1)
			r.ReceivedAt = old
			errs <- s.Put(ctx, r)
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	recent := testRecord("recent", 1)
	recent.ReceivedAt = time.Now()
	put(t, s, recent)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = openStore(t, dir, Options{MaxAge: time.Hour, History: 1})
	waitFor(t, "the old reports to be pruned", func() bool {
		nodes, err := s.Nodes(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return len(nodes) == 1
	})
	nodes, err := s.Nodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if nodes[0].GetNodeName() != "recent" {
		t.Errorf("Nodes after pruning = %v, want recent only", nodes)
	}
	var n int
	if err := rawDB(t, dir).QueryRow("SELECT count(*) FROM report_data").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Errorf("report_data has %d rows after pruning, want 1", n)
	}
}

func TestConcurrentPuts(t *testing.T) {
	for _, d := range []Durability{PowerLoss, ProcessCrash} {
		t.Run(d.String(), func(t *testing.T) {
			ctx := context.Background()
			dir := t.TempDir()
			s := openStore(t, dir, Options{MaxAge: -1, Durability: d})
			const goroutines, perG = 200, 5
			var wg sync.WaitGroup
			errs := make(chan error, goroutines*perG)
			for g := range goroutines {
				wg.Go(func() {
					node := fmt.Sprintf("node-%03d", g)
					for seq := uint64(1); seq <= perG; seq++ {
						errs <- s.Put(ctx, testRecord(node, seq))
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				if err != nil {
					t.Errorf("Put: %v", err)
				}
			}
			nodes, err := s.Nodes(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if len(nodes) != goroutines {
				t.Fatalf("Nodes = %d, want %d", len(nodes), goroutines)
			}
			for g := range goroutines {
				node := fmt.Sprintf("node-%03d", g)
				if nodes[g].GetNodeName() != node || nodes[g].GetRequestId() != "req-5" {
					t.Errorf("Nodes[%d] = %s %s, want %s req-5", g, nodes[g].GetNodeName(), nodes[g].GetRequestId(), node)
				}
				recs := history(t, s, node, 0)
				if diff := cmp.Diff([]uint64{5, 4, 3, 2, 1}, seqs(recs)); diff != "" {
					t.Fatalf("History(%s) (-want +got):\n%s", node, diff)
				}
				for _, r := range recs {
					checkRecord(t, r, testRecord(node, r.Seq))
				}
			}
			var n int64
			if err := rawDB(t, dir).QueryRow("SELECT count(*) FROM reports JOIN report_data USING (id)").Scan(&n); err != nil {
				t.Fatal(err)
			}
			if n != goroutines*perG {
				t.Errorf("%d reports with data in the file, want %d", n, goroutines*perG)
			}
		})
	}
}

func TestConcurrentReadsAndWrites(t *testing.T) {
	// Readers run alongside the writer and see whole records.
	ctx := context.Background()
	s := openStore(t, t.TempDir(), Options{MaxAge: -1, History: 5})
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for w := range 4 {
		wg.Go(func() {
			for seq := uint64(1); seq <= 50; seq++ {
				if err := s.Put(ctx, testRecord(fmt.Sprintf("w%d", w), seq)); err != nil {
					t.Errorf("Put: %v", err)
					return
				}
			}
		})
	}
	var readers sync.WaitGroup
	for range 4 {
		readers.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := s.Nodes(ctx); err != nil {
					t.Errorf("Nodes: %v", err)
					return
				}
				for w := range 4 {
					rec, err := s.Latest(ctx, fmt.Sprintf("w%d", w))
					if errors.Is(err, ErrNotFound) {
						continue
					}
					if err != nil {
						t.Errorf("Latest: %v", err)
						return
					}
					if rec.Report.GetRequestId() != rec.Summary.GetRequestId() {
						t.Errorf("Latest: report of %s with summary of %s", rec.Report.GetRequestId(), rec.Summary.GetRequestId())
					}
				}
			}
		})
	}
	wg.Wait()
	close(stop)
	readers.Wait()
}

func TestInvalidRecords(t *testing.T) {
	s := openStore(t, t.TempDir(), keepAll)
	noName := testRecord("", 1)
	noReport := testRecord("n", 1)
	noReport.Report = nil
	emptyEncoded := testRecord("n", 1)
	emptyEncoded.Report = nil
	emptyEncoded.Encoded = []byte{}
	noSummary := testRecord("n", 1)
	noSummary.Summary = nil
	bigSeq := testRecord("n", 1<<63)
	for name, rec := range map[string]*Record{
		"nil":           nil,
		"no summary":    noSummary,
		"no node name":  noName,
		"no report":     noReport,
		"empty encoded": emptyEncoded,
		"seq > int64":   bigSeq,
	} {
		t.Run(name, func(t *testing.T) {
			if err := s.Put(context.Background(), rec); !errors.Is(err, ErrInvalidRecord) {
				t.Errorf("Put = %v, want ErrInvalidRecord", err)
			}
		})
	}
	nodes, err := s.Nodes(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes) != 0 {
		t.Errorf("invalid records stored: %v", nodes)
	}
	// The largest valid seq round-trips.
	put(t, s, testRecord("n", 1<<63-1))
	if latest, err := s.Latest(context.Background(), "n"); err != nil || latest.Seq != 1<<63-1 {
		t.Errorf("Latest = %v, %v; want seq %d", latest, err, uint64(1<<63-1))
	}
}

func TestCancelledContext(t *testing.T) {
	s := openStore(t, t.TempDir(), keepAll)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := s.Put(ctx, testRecord("n", 1))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Put(cancelled ctx) = %v, want context.Canceled", err)
	}
	if _, err := s.Nodes(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Nodes(cancelled ctx) = %v, want context.Canceled", err)
	}
	if _, err := s.Latest(ctx, "n"); !errors.Is(err, context.Canceled) {
		t.Errorf("Latest(cancelled ctx) = %v, want context.Canceled", err)
	}
	// The cancelled Put stored nothing; the store still works.
	if got := history(t, s, "n", 0); len(got) != 0 {
		t.Errorf("a cancelled Put stored %v", seqs(got))
	}
	put(t, s, testRecord("n", 1))
	if got := history(t, s, "n", 0); len(got) != 1 {
		t.Errorf("History after a Put = %v, want seq 1", seqs(got))
	}
}

func TestCancelWhilePutsAreUnderWay(t *testing.T) {
	// Puts whose context ends while they wait return an error wrapping
	// context.Canceled or nil (committed first); the nil ones are stored,
	// and the store keeps working.
	ctx := context.Background()
	s := openStore(t, t.TempDir(), keepAll)
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var stored []uint64
	for seq := uint64(1); seq <= 300; seq++ {
		wg.Go(func() {
			err := s.Put(pctx, testRecord("n", seq))
			switch {
			case err == nil:
				mu.Lock()
				stored = append(stored, seq)
				mu.Unlock()
			case !errors.Is(err, context.Canceled):
				t.Errorf("Put seq %d = %v, want nil or context.Canceled", seq, err)
			}
		})
		if seq == 150 {
			cancel()
		}
	}
	wg.Wait()
	have := map[uint64]bool{}
	for _, r := range history(t, s, "n", 0) {
		have[r.Seq] = true
	}
	for _, seq := range stored {
		if !have[seq] {
			t.Errorf("seq %d: Put returned nil, not stored", seq)
		}
	}
	put(t, s, testRecord("after", 1))
}

func TestClose(t *testing.T) {
	ctx := context.Background()
	s := openStore(t, t.TempDir(), keepAll)
	put(t, s, testRecord("n", 1))
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if err := s.Put(ctx, testRecord("n", 2)); !errors.Is(err, ErrClosed) {
		t.Errorf("Put after Close = %v, want ErrClosed", err)
	}
	if _, err := s.Latest(ctx, "n"); !errors.Is(err, ErrClosed) {
		t.Errorf("Latest after Close = %v, want ErrClosed", err)
	}
	if _, err := s.History(ctx, "n", 1); !errors.Is(err, ErrClosed) {
		t.Errorf("History after Close = %v, want ErrClosed", err)
	}
	if _, err := s.Nodes(ctx); !errors.Is(err, ErrClosed) {
		t.Errorf("Nodes after Close = %v, want ErrClosed", err)
	}
	// Closing checkpoints the write-ahead log into the database.
	if fi, err := os.Stat(s.path + "-wal"); err == nil && fi.Size() > 0 {
		t.Errorf("%s-wal is %d bytes after Close, want it checkpointed", s.path, fi.Size())
	}
}

func TestCloseAnswersQueuedPuts(t *testing.T) {
	// Close while Puts are under way: each Put returns nil (then its
	// report is stored) or ErrClosed, never hangs, never loses a nil one.
	ctx := context.Background()
	dir := t.TempDir()
	// One node, 400 reports: a history long enough to keep them all.
	opts := Options{MaxAge: -1, History: 1000}
	s := openStore(t, dir, opts)
	var wg sync.WaitGroup
	results := make(chan error, 400)
	for seq := uint64(1); seq <= 400; seq++ {
		wg.Go(func() {
			err := s.Put(ctx, testRecord("n", seq))
			if err != nil && !errors.Is(err, ErrClosed) {
				t.Errorf("Put seq %d = %v, want nil or ErrClosed", seq, err)
			}
			if err == nil {
				results <- fmt.Errorf("%d", seq)
			}
		})
		if seq == 200 {
			wg.Go(func() {
				if err := s.Close(); err != nil {
					t.Errorf("Close: %v", err)
				}
			})
		}
	}
	wg.Wait()
	close(results)
	s2 := openStore(t, dir, opts)
	have := map[string]bool{}
	for _, r := range history(t, s2, "n", 0) {
		have[fmt.Sprint(r.Seq)] = true
	}
	for r := range results {
		if !have[r.Error()] {
			t.Errorf("seq %s: Put returned nil, not stored", r)
		}
	}
}

func TestOptions(t *testing.T) {
	for name, o := range map[string]Options{
		"negative history":   {History: -1},
		"unknown durability": {Durability: Durability(42)},
	} {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "data")
			if s, err := Open(dir, o); err == nil {
				s.Close()
				t.Fatalf("Open(%+v) = nil error", o)
			}
			if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("Open with bad options created %s", dir)
			}
		})
	}
	for d, want := range map[Durability]string{
		DurabilityDefault: "power-loss", PowerLoss: "power-loss", ProcessCrash: "process-crash", Durability(9): "Durability(9)",
	} {
		if got := d.String(); got != want {
			t.Errorf("Durability(%d).String() = %q, want %q", int(d), got, want)
		}
	}
}

func TestOpenCreatesPrivateDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a", "b")
	openStore(t, dir, keepAll)
	fi, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if perm := fi.Mode().Perm(); perm != 0o700 {
		t.Errorf("data dir mode %v, want 0700", perm)
	}
	var appID, version int64
	db := rawDB(t, dir)
	if err := db.QueryRow("PRAGMA application_id").Scan(&appID); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRow("PRAGMA user_version").Scan(&version); err != nil {
		t.Fatal(err)
	}
	if appID != applicationID || version != SchemaVersion {
		t.Errorf("application_id %#x user_version %d, want %#x %d", appID, version, applicationID, SchemaVersion)
	}
	var mode string
	if err := db.QueryRow("PRAGMA journal_mode").Scan(&mode); err != nil {
		t.Fatal(err)
	}
	if mode != "wal" {
		t.Errorf("journal_mode %q, want wal", mode)
	}
}

// checkRefused opens dir, expects an error wrapping want (if not nil) and
// naming the database file, and checks that the file is byte for byte what
// it was and that no journal was left next to it.
func checkRefused(t *testing.T, dir string, want error) error {
	t.Helper()
	path := filepath.Join(dir, FileName)
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s, err := Open(dir, keepAll)
	if err == nil {
		s.Close()
		t.Fatalf("Open accepted the file")
	}
	if want != nil && !errors.Is(err, want) {
		t.Errorf("Open = %v, want an error wrapping %v", err, want)
	}
	if !strings.Contains(err.Error(), path) {
		t.Errorf("error %q does not name %s", err, path)
	}
	after, err2 := os.ReadFile(path)
	if err2 != nil {
		t.Fatal(err2)
	}
	if !bytes.Equal(before, after) {
		t.Errorf("Open modified %s", path)
	}
	for _, suffix := range []string{"-wal", "-shm", "-journal"} {
		if fi, err := os.Stat(path + suffix); err == nil && fi.Size() > 0 {
			t.Errorf("Open left %s%s (%d bytes)", path, suffix, fi.Size())
		}
	}
	return err
}

func TestOpenRefusesGarbage(t *testing.T) {
	for name, content := range map[string][]byte{
		"text":          bytes.Repeat([]byte("this is not a database\n"), 300),
		"short":         []byte("hello"),
		"sqlite header": append([]byte("SQLite format 3\x00"), bytes.Repeat([]byte{0xff}, 4080)...),
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, FileName), content, 0o600); err != nil {
				t.Fatal(err)
			}
			checkRefused(t, dir, ErrNotStore)
		})
	}
}

func TestOpenRefusesAnotherProgramsDatabase(t *testing.T) {
	for name, setup := range map[string][]string{
		"a table, no application_id": {"CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT)", "INSERT INTO users VALUES (1, 'ann')"},
		"another application_id":     {"PRAGMA application_id = 1234"},
		"another id and a version":   {"PRAGMA application_id = 1234", "PRAGMA user_version = 1", "CREATE TABLE reports (x)"},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			db, err := sql.Open("sqlite", filepath.Join(dir, FileName))
			if err != nil {
				t.Fatal(err)
			}
			for _, q := range setup {
				execSQL(t, db, q)
			}
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			checkRefused(t, dir, ErrNotStore)
		})
	}
}

func TestOpenRefusesNewerSchema(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir, keepAll)
	put(t, s, testRecord("n", 1))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	db := rawDB(t, dir)
	execSQL(t, db, fmt.Sprintf("PRAGMA user_version = %d", SchemaVersion+1))
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	err := checkRefused(t, dir, ErrNewerSchema)
	if errors.Is(err, ErrNotStore) {
		t.Errorf("a newer nodediag database refused as not ours: %v", err)
	}
}

func TestOpenBadDataDir(t *testing.T) {
	t.Run("data dir is a file", func(t *testing.T) {
		file := filepath.Join(t.TempDir(), "data")
		if err := os.WriteFile(file, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := Open(file, keepAll)
		if err == nil || !strings.Contains(err.Error(), file) {
			t.Fatalf("Open(a file) = %v, want an error naming %s", err, file)
		}
		if b, _ := os.ReadFile(file); string(b) != "x" {
			t.Errorf("Open modified %s", file)
		}
	})
	t.Run("data dir under a file", func(t *testing.T) {
		file := filepath.Join(t.TempDir(), "data")
		if err := os.WriteFile(file, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
		dir := filepath.Join(file, "sub")
		if _, err := Open(dir, keepAll); err == nil || !strings.Contains(err.Error(), file) {
			t.Fatalf("Open(%s) = %v, want an error naming %s", dir, err, file)
		}
	})
	t.Run("database is a directory", func(t *testing.T) {
		dir := t.TempDir()
		path := filepath.Join(dir, FileName)
		if err := os.Mkdir(path, 0o700); err != nil {
			t.Fatal(err)
		}
		_, err := Open(dir, keepAll)
		if !errors.Is(err, ErrNotStore) || !strings.Contains(err.Error(), path) {
			t.Fatalf("Open = %v, want ErrNotStore naming %s", err, path)
		}
	})
	t.Run("unwritable data dir", func(t *testing.T) {
		if os.Geteuid() == 0 {
			t.Skip("root writes into a 0500 directory")
		}
		dir := t.TempDir()
		if err := os.Chmod(dir, 0o500); err != nil {
			t.Fatal(err)
		}
		defer os.Chmod(dir, 0o700)
		_, err := Open(dir, keepAll)
		if err == nil || !strings.Contains(err.Error(), filepath.Join(dir, FileName)) {
			t.Fatalf("Open(unwritable dir) = %v, want an error naming the database", err)
		}
	})
}

func TestCorruptReportData(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		damage func(data []byte) (codec int64, out []byte)
	}{
		{"flipped bytes", func(d []byte) (int64, []byte) {
			d = bytes.Clone(d)
			for i := len(d) / 3; i < len(d)/3+8; i++ {
				d[i] ^= 0xa5
			}
			return codecZstd, d
		}},
		{"truncated", func(d []byte) (int64, []byte) { return codecZstd, d[:len(d)/2] }},
		{"unknown codec", func(d []byte) (int64, []byte) { return 7, d }},
		{"not protobuf", func([]byte) (int64, []byte) { return codecProto, []byte{0xff, 0xff, 0xff} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			s := openStore(t, dir, keepAll)
			big := testRecord("n", 1)
			for i := range 200 {
				big.Report.Gaps = append(big.Report.Gaps, fmt.Sprintf("gap %d: permission denied", i))
			}
			put(t, s, big)
			put(t, s, testRecord("other", 1))
			db := rawDB(t, dir)
			var id, codec int64
			var data []byte
			if err := db.QueryRow(`SELECT d.id, d.codec, d.data FROM report_data d JOIN reports r ON r.id = d.id WHERE r.node = 'n'`).
				Scan(&id, &codec, &data); err != nil {
				t.Fatal(err)
			}
			if codec != codecZstd {
				t.Fatalf("codec %d, want the report compressed", codec)
			}
			codec, data = tc.damage(data)
			execSQL(t, db, `UPDATE report_data SET codec = ?, data = ? WHERE id = ?`, codec, data, id)

			rec, err := s.Latest(ctx, "n")
			if err == nil {
				t.Fatalf("Latest of a corrupt report = %v, want an error", rec.Report)
			}
			if errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "n seq 1") {
				t.Errorf("Latest = %v, want an error naming the report", err)
			}
			if _, err := s.History(ctx, "n", 0); err == nil {
				t.Errorf("History of a corrupt report = nil error")
			}
			nodes, err := s.Nodes(ctx)
			if err != nil || len(nodes) != 2 {
				t.Errorf("Nodes with a corrupt report = %d nodes, %v; want both", len(nodes), err)
			}
			if _, err := s.Latest(ctx, "other"); err != nil {
				t.Errorf("Latest of another node: %v", err)
			}
			// A new report of the node replaces it as the latest.
			put(t, s, testRecord("n", 2))
			if _, err := s.Latest(ctx, "n"); err != nil {
				t.Errorf("Latest after a new report: %v", err)
			}
		})
	}
}

func TestPathWithURIChars(t *testing.T) {
	// The data dir is put into a file: URI; characters meaningful there
	// must not change which file is opened.
	dir := filepath.Join(t.TempDir(), "a?b#c%41d")
	s := openStore(t, dir, keepAll)
	put(t, s, testRecord("n", 1))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, FileName)); err != nil {
		t.Fatalf("database not at %s: %v", dir, err)
	}
	s = openStore(t, dir, keepAll)
	if got := history(t, s, "n", 0); len(got) != 1 {
		t.Errorf("History after reopen = %d records, want 1", len(got))
	}
}

func TestCloseWhileReading(t *testing.T) {
	// Reads under way when Close is called finish (or fail with
	// ErrClosed); none panics or fails with another error.
	ctx := context.Background()
	for round := range 20 {
		s := openStore(t, t.TempDir(), keepAll)
		big := testRecord("n", 1)
		for i := range 300 {
			big.Report.Gaps = append(big.Report.Gaps, fmt.Sprintf("gap %d", i))
		}
		put(t, s, big)
		var wg sync.WaitGroup
		started := make(chan struct{}, 8)
		for range 8 {
			wg.Go(func() {
				started <- struct{}{}
				for {
					_, err := s.Latest(ctx, "n")
					if err == nil {
						_, err = s.History(ctx, "n", 0)
					}
					if err == nil {
						_, err = s.Nodes(ctx)
					}
					if errors.Is(err, ErrClosed) {
						return
					}
					if err != nil {
						t.Errorf("round %d: a read during Close = %v, want nil or ErrClosed", round, err)
						return
					}
				}
			})
		}
		for range 8 {
			<-started
		}
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		wg.Wait()
	}
}

func TestOpenEmptyFile(t *testing.T) {
	// A zero-length nodediag.db (touched by an operator, or left by a
	// crash before the first write) is an empty SQLite database: Open
	// takes it as new.
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, FileName), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	s := openStore(t, dir, keepAll)
	put(t, s, testRecord("n", 1))
	if got := history(t, s, "n", 0); len(got) != 1 {
		t.Errorf("History = %d records, want 1", len(got))
	}
}

func TestConnectionSettings(t *testing.T) {
	// What a process kill cannot show: PowerLoss fsyncs every commit
	// (synchronous=FULL), ProcessCrash leaves the log to the kernel
	// (NORMAL); both in WAL mode. Readers cannot write.
	for _, tc := range []struct {
		d    Durability
		sync int
	}{{DurabilityDefault, 2}, {PowerLoss, 2}, {ProcessCrash, 1}} {
		t.Run(tc.d.String(), func(t *testing.T) {
			s := openStore(t, t.TempDir(), Options{Durability: tc.d})
			var syncMode, busy int
			var mode string
			if err := s.wdb.QueryRow("PRAGMA synchronous").Scan(&syncMode); err != nil {
				t.Fatal(err)
			}
			if syncMode != tc.sync {
				t.Errorf("writer synchronous = %d, want %d", syncMode, tc.sync)
			}
			if err := s.wdb.QueryRow("PRAGMA journal_mode").Scan(&mode); err != nil || mode != "wal" {
				t.Errorf("journal_mode = %q, %v; want wal", mode, err)
			}
			if err := s.wdb.QueryRow("PRAGMA busy_timeout").Scan(&busy); err != nil || busy != int(busyTimeout.Milliseconds()) {
				t.Errorf("writer busy_timeout = %d, %v; want %d", busy, err, busyTimeout.Milliseconds())
			}
			if _, err := s.rdb.Exec("DELETE FROM nodes"); err == nil {
				t.Errorf("a reader connection wrote to the database")
			}
		})
	}
}

// The database and its companions are the owner's only, also in a data
// directory that others may list, and also when an earlier version left
// the file readable.
func TestDatabaseFilesArePrivate(t *testing.T) {
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	s := openStore(t, dir, keepAll)
	if err := s.Put(context.Background(), testRecord("n", 1)); err != nil {
		t.Fatal(err)
	}
	check := func(when string) {
		t.Helper()
		for _, name := range []string{FileName, FileName + "-wal", FileName + "-shm"} {
			fi, err := os.Stat(filepath.Join(dir, name))
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			if perm := fi.Mode().Perm(); perm != 0o600 {
				t.Errorf("%s: %s is %v, want 0600", when, name, perm)
			}
		}
	}
	check("new store")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(dir, FileName), 0o644); err != nil {
		t.Fatal(err)
	}
	s2 := openStore(t, dir, keepAll)
	if err := s2.Put(context.Background(), testRecord("n", 2)); err != nil {
		t.Fatal(err)
	}
	check("reopened 0644 file")
}
