package journal

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/klauspost/compress/zstd"
	"github.com/nodediag/nodediag/agent/host"
	"github.com/nodediag/nodediag/agent/host/hosttest"
	"github.com/pierrec/lz4/v4"
	"github.com/ulikunitz/xz"
)

func TestHashFunctions(t *testing.T) {
	// SipHash-2-4 reference vectors (the SipHash paper): key 00..0f,
	// message 00..len-1.
	var key [16]byte
	for i := range key {
		key[i] = byte(i)
	}
	sip := []uint64{
		0x726fdb47dd0e0e31, 0x74f839c593dc67fd, 0x0d6c8009d9a94f5a, 0x85676696d7fb7e2d,
		0xcf2794e0277187b7, 0x18765564cd99a68d, 0xcbc9466e58fee3ce, 0xab0200f58b01d137,
		0x93f5f5799a932462, 0x9e0082df0ba9e4b0,
	}
	for n, want := range sip {
		msg := make([]byte, n)
		for i := range msg {
			msg[i] = byte(i)
		}
		if got := siphash24(key, msg); got != want {
			t.Errorf("siphash24(%d bytes) = %#x, want %#x", n, got, want)
		}
	}
	// lookup3's own self-test values (driver5 of lookup3.c).
	four := []byte("Four score and seven years ago")
	tests := []struct {
		name   string
		key    []byte
		pc, pb uint32
		c, b   uint32
	}{
		{"empty", nil, 0, 0, 0xdeadbeef, 0xdeadbeef},
		{"empty, pb", nil, 0, 0xdeadbeef, 0xbd5b7dde, 0xdeadbeef},
		{"empty, pc pb", nil, 0xdeadbeef, 0xdeadbeef, 0x9c093ccd, 0xbd5b7dde},
		{"four score", four, 0, 0, 0x17770551, 0xce7226e6},
		{"four score, pb", four, 0, 1, 0xe3607cae, 0xbd371de4},
		{"four score, pc", four, 1, 0, 0xcd628161, 0x6cbea4b3},
	}
	for _, tc := range tests {
		c, b := hashlittle2(tc.key, tc.pc, tc.pb)
		if c != tc.c || b != tc.b {
			t.Errorf("%s: hashlittle2 = %#x %#x, want %#x %#x", tc.name, c, b, tc.c, tc.b)
		}
	}
	if got, want := jenkinsHash64(four), uint64(0x17770551)<<32|0xce7226e6; got != want {
		t.Errorf("jenkinsHash64 = %#x, want %#x", got, want)
	}
}

// singleFile writes a journal of the node log (n entries, boot 2 from n/2)
// as /var/log/journal/<machine-id>/system.journal of a new host.
func singleFile(t *testing.T, o writerOptions, n int) (*host.Host, string) {
	t.Helper()
	needJournalRemote(t)
	h := hosttest.Tree(t, map[string]string{"var/log/journal/": ""})
	p := filepath.Join(h.Root, "var/log/journal", machineID, "system.journal")
	writeJournalWith(t, p, o, nodeLog{n: n, start: t0, step: fixtureStep}.entries)
	return h, p
}

// checkAgainstJournalctl runs q through the reader and args through
// journalctl and compares the results entry by entry.
func checkAgainstJournalctl(t *testing.T, h *host.Host, j *Journal, q Query, args ...string) []*Entry {
	t.Helper()
	want := journalctlExport(t, h, args...)
	got := queryAll(t, j, q)
	if len(got) != len(want) {
		t.Fatalf("reader yields %d entries, journalctl prints %d (%v)", len(got), len(want), args)
	}
	for i := range want {
		if d := cmp.Diff(fromExport(t, want[i], q.Fields), fromEntry(got[i])); d != "" {
			t.Fatalf("entry %d (-journalctl +reader):\n%s", i, d)
		}
	}
	return got
}

func openHost(t *testing.T, h *host.Host, dirs ...string) *Journal {
	t.Helper()
	if len(dirs) == 0 {
		dirs = DefaultDirs
	}
	j, err := Open(h, dirs...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Close() })
	return j
}

// TestFormats reads the formats systemd writes: compact or regular layout,
// keyed or Jenkins hashes, compressed or not.
func TestFormats(t *testing.T) {
	const n = 3000
	tests := []struct {
		name     string
		opts     writerOptions
		features []string
	}{
		{"compact, keyed hash, zstd (systemd 252's default)", writerOptions{}, []string{"compact", "keyed-hash", "zstd"}},
		{"compact, keyed hash, uncompressed", writerOptions{args: []string{"--compress=no"}}, []string{"compact", "keyed-hash"}},
		{"regular layout, keyed hash, zstd", writerOptions{env: []string{"SYSTEMD_JOURNAL_COMPACT=0"}}, []string{"keyed-hash", "zstd"}},
		{"regular layout, Jenkins hash, zstd", writerOptions{env: []string{"SYSTEMD_JOURNAL_COMPACT=0", "SYSTEMD_JOURNAL_KEYED_HASH=0"}}, []string{"zstd"}},
		{"regular layout, Jenkins hash, uncompressed (systemd < 246)", writerOptions{env: []string{"SYSTEMD_JOURNAL_COMPACT=0", "SYSTEMD_JOURNAL_KEYED_HASH=0"}, args: []string{"--compress=no"}}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h, _ := singleFile(t, tc.opts, n)
			j := openHost(t, h)
			if len(j.Files) != 1 || len(j.Problems) != 0 {
				t.Fatalf("files %v problems %v", j.Files, j.Problems)
			}
			f := j.Files[0]
			if !slices.Equal(f.Features, tc.features) {
				t.Errorf("features %v, want %v", f.Features, tc.features)
			}
			if f.Entries != n || !f.Head.Equal(t0) || !f.Tail.Equal(t0.Add((n-1)*fixtureStep)) {
				t.Errorf("entries %d head %s tail %s", f.Entries, f.Head, f.Tail)
			}
			all := checkAgainstJournalctl(t, h, j, Query{})
			if len(all) != n {
				t.Errorf("%d entries, want %d", len(all), n)
			}
			large := 0
			for _, e := range all {
				if len(e.Fields["MESSAGE"]) > 2000 {
					large++
				}
			}
			if large != 3 {
				t.Errorf("%d large messages, want 3", large)
			}
			checkAgainstJournalctl(t, h, j,
				Query{Any: [][]Term{{{"_SYSTEMD_UNIT", "kubelet.service"}}, {{"UNIT", "kubelet.service"}, {"_PID", "1"}}}, Fields: compared},
				"_SYSTEMD_UNIT=kubelet.service", "+", "UNIT=kubelet.service", "_PID=1")
			checkAgainstJournalctl(t, h, j,
				Query{Any: [][]Term{{{"_SYSTEMD_UNIT", "containerd.service"}}}, BootID: boot2, Fields: compared},
				"_SYSTEMD_UNIT=containerd.service", "_BOOT_ID="+boot2)
			boots, err := j.Boots()
			if err != nil {
				t.Fatal(err)
			}
			want := []Boot{
				{boot1, t0, t0.Add((n/2 - 1) * fixtureStep)},
				{boot2, t0.Add(n / 2 * fixtureStep), t0.Add((n - 1) * fixtureStep)},
			}
			if d := cmp.Diff(want, boots); d != "" {
				t.Errorf("boots (-want +got):\n%s", d)
			}
			if len(j.Problems) != 0 {
				t.Errorf("problems: %v", j.Problems)
			}
		})
	}
}

// dataOffset finds the DATA object holding payload in the journal file at
// path (for tests that alter a file).
func dataOffset(t *testing.T, h *host.Host, hostPath string, payload string) (dataObject, *File) {
	t.Helper()
	j, err := Open(h, filepath.Dir(hostPath))
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	for _, f := range j.Files {
		if f.Path != hostPath {
			continue
		}
		d, found, err := j.findData(f, []byte(payload))
		if err != nil || !found {
			t.Fatalf("no DATA object %.40q: %v", payload, err)
		}
		return d, f
	}
	t.Fatalf("%s not opened: %v", hostPath, j.Problems)
	return dataObject{}, nil
}

// TestCompressionAlgorithms reads DATA objects compressed with each
// algorithm systemd has used: xz (systemd < 246 by default), lz4 (some
// distributions) and zstd. journal-remote 252 writes zstd only, so the test
// compresses three large payloads of an uncompressed file in place, as
// systemd's compress.c does (lz4: le64 size + block), and sets the header
// flags; journalctl reads the result as the oracle.
func TestCompressionAlgorithms(t *testing.T) {
	for _, layout := range []struct {
		name string
		env  []string
	}{
		{"compact", nil},
		{"regular", []string{"SYSTEMD_JOURNAL_COMPACT=0", "SYSTEMD_JOURNAL_KEYED_HASH=0"}},
	} {
		t.Run(layout.name, func(t *testing.T) {
			h, p := singleFile(t, writerOptions{env: layout.env, args: []string{"--compress=no"}}, 3000)
			hostPath := h.HostPath(p)
			g := nodeLog{n: 3000, start: t0, step: fixtureStep}
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			algos := []struct {
				entry int
				flag  uint8
				hflag uint32
				comp  func([]byte) []byte
			}{
				{9, compressedXZ, incompatibleXZ, compressXZ},
				{1011, compressedLZ4, incompatibleLZ4, compressLZ4},
				{2013, compressedZstd, incompatibleZstd, compressZstd},
			}
			for _, a := range algos {
				payload := "MESSAGE=" + g.entry(a.entry).Get("MESSAGE")
				d, f := dataOffset(t, h, hostPath, payload)
				c := a.comp([]byte(payload))
				if uint64(len(c)) >= d.size-d.payloadOff {
					t.Fatalf("compressed payload of %d bytes does not fit in %d", len(c), d.size-d.payloadOff)
				}
				copy(b[d.off+f.dataPayloadOffset():], c)
				binary.LittleEndian.PutUint64(b[d.off+8:], f.dataPayloadOffset()+uint64(len(c)))
				b[d.off+1] = a.flag
				binary.LittleEndian.PutUint32(b[hIncompatibleFlags:], binary.LittleEndian.Uint32(b[hIncompatibleFlags:])|a.hflag)
			}
			if err := os.WriteFile(p, b, 0o644); err != nil {
				t.Fatal(err)
			}
			j := openHost(t, h)
			if len(j.Files) != 1 {
				t.Fatalf("files %v problems %v", j.Files, j.Problems)
			}
			for _, want := range []string{"xz", "lz4", "zstd"} {
				if !slices.Contains(j.Files[0].Features, want) {
					t.Errorf("features %v lack %s", j.Files[0].Features, want)
				}
			}
			all := checkAgainstJournalctl(t, h, j, Query{})
			for _, a := range algos {
				if got, want := all[a.entry].Fields["MESSAGE"], g.entry(a.entry).Get("MESSAGE"); got != want {
					t.Errorf("entry %d: MESSAGE %.60q…, want %.60q…", a.entry, got, want)
				}
			}
			// The compressed objects are found by their uncompressed value.
			for _, a := range algos {
				got := queryAll(t, j, Query{Any: [][]Term{{{"MESSAGE", g.entry(a.entry).Get("MESSAGE")}}}})
				if len(got) != 1 || got[0].Seqnum != uint64(a.entry+1) {
					t.Errorf("lookup of the message of entry %d: %d entries", a.entry, len(got))
				}
			}
			if len(j.Problems) != 0 {
				t.Errorf("problems: %v", j.Problems)
			}
		})
	}
}

func compressXZ(b []byte) []byte {
	var out bytes.Buffer
	w, err := xz.WriterConfig{CheckSum: xz.CRC32}.NewWriter(&out)
	if err != nil {
		panic(err)
	}
	w.Write(b)
	w.Close()
	return out.Bytes()
}

func compressLZ4(b []byte) []byte {
	out := make([]byte, 8+lz4.CompressBlockBound(len(b)))
	binary.LittleEndian.PutUint64(out, uint64(len(b)))
	var c lz4.Compressor
	n, err := c.CompressBlock(b, out[8:])
	if err != nil || n == 0 {
		panic(fmt.Sprint("lz4: ", n, err))
	}
	return out[:8+n]
}

func compressZstd(b []byte) []byte {
	enc, err := zstd.NewWriter(nil)
	if err != nil {
		panic(err)
	}
	defer enc.Close()
	return enc.EncodeAll(b, nil)
}

// TestHeaderSizes reads files whose header is of every size systemd wrote
// since 187 (208 bytes before n_data, then 224, 240, 256, 264): the fields
// a header lacks are not read. The file's state may be online (a writer
// has it open).
func TestHeaderSizes(t *testing.T) {
	h, p := singleFile(t, writerOptions{env: []string{"SYSTEMD_JOURNAL_COMPACT=0", "SYSTEMD_JOURNAL_KEYED_HASH=0"}}, 1000)
	orig, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	q := Query{Any: [][]Term{{{"_SYSTEMD_UNIT", "kubelet.service"}}}}
	j := openHost(t, h)
	want := queryAll(t, j, q)
	wantBoots, _ := j.Boots()
	j.Close()
	hs := binary.LittleEndian.Uint64(orig[hHeaderSize:])
	for _, size := range []uint64{208, 224, 240, 256, hs} {
		for _, state := range []byte{stateOffline, stateOnline, stateArchived} {
			t.Run(fmt.Sprintf("header %d state %d", size, state), func(t *testing.T) {
				b := slices.Clone(orig)
				binary.LittleEndian.PutUint64(b[hHeaderSize:], size)
				arena := binary.LittleEndian.Uint64(b[hArenaSize:])
				binary.LittleEndian.PutUint64(b[hArenaSize:], arena+hs-size)
				b[hState] = state
				if err := os.WriteFile(p, b, 0o644); err != nil {
					t.Fatal(err)
				}
				j := openHost(t, h)
				if got := queryAll(t, j, q); !cmp.Equal(got, want) {
					t.Errorf("%d entries, want %d (or different ones)", len(got), len(want))
				}
				if boots, err := j.Boots(); err != nil || !cmp.Equal(boots, wantBoots) {
					t.Errorf("boots %v %v, want %v", boots, err, wantBoots)
				}
				if len(j.Problems) != 0 {
					t.Errorf("problems: %v", j.Problems)
				}
			})
		}
	}
}

func TestBoots(t *testing.T) {
	h := nodeFixture(t)
	j := openHost(t, h)
	got, err := j.Boots()
	if err != nil {
		t.Fatal(err)
	}
	want := []Boot{
		{boot1, t0, t0.Add((fixtureBootAt - 1) * fixtureStep)},
		{boot2, t0.Add(fixtureBootAt * fixtureStep), t0.Add((fixtureEntries - 1) * fixtureStep)},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("boots (-want +got):\n%s", d)
	}
}

// TestQueryTimeBounds checks Since and Until (inclusive, to the
// microsecond) against a filter over all entries.
func TestQueryTimeBounds(t *testing.T) {
	h := nodeFixture(t)
	j := openHost(t, h)
	all := queryAll(t, j, Query{Fields: []string{}})
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	tests := []struct {
		name         string
		since, until time.Time
		q            Query
		wantNone     bool
	}{
		{name: "a window", since: at(10 * time.Second), until: at(20 * time.Second)},
		{name: "across the boots", since: at(24995 * time.Millisecond), until: at(25005 * time.Millisecond)},
		{name: "since only", since: at(59 * time.Second)},
		{name: "until only", until: at(50 * time.Millisecond)},
		{name: "bound between microseconds", since: at(10*time.Second + 500), until: at(11*time.Second - 500)},
		{name: "one entry", since: at(10 * time.Second), until: at(10 * time.Second)},
		{name: "after everything", since: at(time.Hour), wantNone: true},
		{name: "before everything", until: at(-time.Hour), wantNone: true},
		{name: "between two entries", since: at(10*time.Second + time.Millisecond), until: at(10*time.Second + 4*time.Millisecond), wantNone: true},
		{name: "with a unit and a boot", since: at(20 * time.Second), until: at(40 * time.Second),
			q: Query{Any: [][]Term{{{"_SYSTEMD_UNIT", "kubelet.service"}}}, BootID: boot2}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			q := tc.q
			q.Since, q.Until, q.Fields = tc.since, tc.until, []string{}
			got := queryAll(t, j, q)
			// The expected entries: the query without bounds, filtered.
			base := all
			if q.Any != nil || q.BootID != "" {
				base = queryAll(t, j, Query{Any: q.Any, BootID: q.BootID, Fields: []string{}})
			}
			var want []*Entry
			for _, e := range base {
				if (tc.since.IsZero() || !e.Realtime.Before(tc.since)) && (tc.until.IsZero() || !e.Realtime.After(tc.until)) {
					want = append(want, e)
				}
			}
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
			if (len(got) == 0) != tc.wantNone {
				t.Errorf("%d entries", len(got))
			}
		})
	}
}

func TestQueryFieldsAndStop(t *testing.T) {
	h := nodeFixture(t)
	j := openHost(t, h)
	kubelet := [][]Term{{{"_SYSTEMD_UNIT", "kubelet.service"}}}
	for _, tc := range []struct {
		name   string
		fields []string
		want   []string
	}{
		{"message only", []string{"MESSAGE"}, []string{"MESSAGE"}},
		{"two fields", []string{"PRIORITY", "_PID"}, []string{"PRIORITY", "_PID"}},
		{"none", []string{}, nil},
		{"absent field", []string{"NOPE"}, nil},
		{"all", nil, []string{"MESSAGE", "PRIORITY", "SYSLOG_IDENTIFIER", "_BOOT_ID", "_HOSTNAME", "_PID", "_SYSTEMD_UNIT", "_TRANSPORT"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := queryAll(t, j, Query{Any: kubelet, Fields: tc.fields})
			if len(got) == 0 {
				t.Fatal("no entries")
			}
			for _, e := range got {
				names := make([]string, 0, len(e.Fields))
				for k := range e.Fields {
					names = append(names, k)
				}
				slices.Sort(names)
				if !slices.Equal(names, tc.want) {
					t.Fatalf("fields %v, want %v", names, tc.want)
				}
				if e.Fields == nil {
					t.Fatal("nil Fields map")
				}
			}
		})
	}
	t.Run("stop", func(t *testing.T) {
		calls := 0
		err := j.Query(Query{Any: kubelet}, func(*Entry) bool {
			calls++
			return calls < 5
		})
		if err != nil || calls != 5 {
			t.Errorf("calls %d err %v", calls, err)
		}
	})
	t.Run("a clause without terms matches all", func(t *testing.T) {
		if got := queryAll(t, j, Query{Any: [][]Term{kubelet[0], {}}, Fields: []string{}}); len(got) != fixtureEntries+fixtureUser {
			t.Errorf("%d entries", len(got))
		}
	})
	t.Run("a boot ID as a UUID", func(t *testing.T) {
		uuid := boot2[:8] + "-" + boot2[8:12] + "-" + boot2[12:16] + "-" + boot2[16:20] + "-" + boot2[20:]
		got := queryAll(t, j, Query{BootID: strings.ToUpper(uuid), Fields: []string{}})
		if len(got) == 0 {
			t.Fatal("no entries")
		}
		for _, e := range got {
			if e.BootID != boot2 {
				t.Fatalf("entry of boot %s", e.BootID)
			}
		}
	})
	t.Run("invalid queries", func(t *testing.T) {
		for _, q := range []Query{
			{Any: [][]Term{{{"", "x"}}}},
			{Any: [][]Term{{{"A=B", "x"}}}},
			{BootID: "not-a-boot"},
			{BootID: boot1 + "00"},
			{Since: t0.Add(time.Second), Until: t0},
		} {
			if err := j.Query(q, func(*Entry) bool { return true }); err == nil {
				t.Errorf("%+v: no error", q)
			}
		}
	})
}

func TestOpen(t *testing.T) {
	seed, err := os.ReadFile(seedPath)
	if err != nil {
		t.Fatal(err)
	}
	unknownFlag := slices.Clone(seed)
	binary.LittleEndian.PutUint32(unknownFlag[hIncompatibleFlags:], binary.LittleEndian.Uint32(unknownFlag[hIncompatibleFlags:])|1<<5)
	hugeHeader := slices.Clone(seed)
	binary.LittleEndian.PutUint64(hugeHeader[hHeaderSize:], 1<<40)
	dir := "var/log/journal/" + machineID + "/"
	h := hosttest.Tree(t, map[string]string{
		dir + "system.journal":                           string(seed),
		dir + "system@00-01-02.journal~":                 string(seed[:len(seed)-7]),
		dir + "empty.journal":                            "",
		dir + "garbage.journal":                          strings.Repeat("not a journal\n", 30),
		dir + "future.journal":                           string(unknownFlag),
		dir + "huge-header.journal":                      string(hugeHeader),
		dir + "notes.txt":                                string(seed),
		dir + "deeper/system.journal":                    string(seed),
		"var/log/journal/top.journal":                    string(seed),
		"run/log/journal/" + machineID + "/x.journal~":   string(seed),
		"run/log/journal/" + machineID + "/dir.journal/": "",
	})
	j, err := Open(h, "/var/log/journal", "/run/log/journal", "/no/such/dir", "/var/log/journal")
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	var paths []string
	for _, f := range j.Files {
		paths = append(paths, f.Path)
	}
	slices.Sort(paths)
	wantPaths := []string{
		"/run/log/journal/" + machineID + "/x.journal~",
		"/var/log/journal/" + machineID + "/system.journal",
		"/var/log/journal/" + machineID + "/system@00-01-02.journal~",
		"/var/log/journal/top.journal",
	}
	if d := cmp.Diff(wantPaths, paths); d != "" {
		t.Errorf("files (-want +got):\n%s", d)
	}
	problems := map[string]error{}
	for _, p := range j.Problems {
		problems[strings.TrimPrefix(p.Path, "/var/log/journal/"+machineID+"/")] = p.Err
	}
	for name, want := range map[string]error{
		"empty.journal":       errShort,
		"garbage.journal":     errSignature,
		"future.journal":      errIncompatible,
		"huge-header.journal": errBadHeader,
	} {
		if !errors.Is(problems[name], want) {
			t.Errorf("%s: problem %v, want %v", name, problems[name], want)
		}
	}
	// The cut copy is used; its truncation is reported.
	if p := problems["system@00-01-02.journal~"]; p == nil || !strings.Contains(p.Error(), "truncated") {
		t.Errorf("truncated file: problem %v", p)
	}
	if len(j.Problems) != 5 {
		t.Errorf("problems: %v", j.Problems)
	}
	for _, bad := range [][]string{nil, {"relative/dir"}} {
		if _, err := Open(h, bad...); err == nil {
			t.Errorf("Open(%q): no error", bad)
		}
	}
	if _, err := Open(nil, "/var/log/journal"); err == nil {
		t.Error("Open(nil host): no error")
	}
}

func TestOpenNothing(t *testing.T) {
	h := hosttest.Tree(t, map[string]string{"etc/hostname": "node-0\n"})
	j := openHost(t, h)
	if len(j.Files) != 0 || len(j.Problems) != 0 {
		t.Fatalf("files %v problems %v", j.Files, j.Problems)
	}
	if err := j.Query(Query{}, func(*Entry) bool { t.Fatal("an entry"); return false }); err != nil {
		t.Errorf("Query: %v", err)
	}
	if boots, err := j.Boots(); err != nil || len(boots) != 0 {
		t.Errorf("Boots: %v %v", boots, err)
	}
}
