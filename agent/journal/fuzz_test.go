package journal

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/nodediag/nodediag/agent/host"
)

// FuzzOpenQuery opens arbitrary bytes as a journal file and reads them every
// way. It must not panic, hang or yield more entries than the bytes can
// hold. The seeds are the real journal of testdata and damaged copies.
func FuzzOpenQuery(f *testing.F) {
	seed, err := os.ReadFile(seedPath)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seed)
	f.Add(seed[:len(seed)/2])
	f.Add(seed[:len(seed)-5])
	f.Add(seed[:headerSizeMax])
	f.Add([]byte{})
	f.Add([]byte("LPKSHHRH"))
	loop := slices.Clone(seed)
	first := binary.LittleEndian.Uint64(loop[hEntryArrayOffset:])
	if first+entryArrayItems < uint64(len(loop)) {
		binary.LittleEndian.PutUint64(loop[first+entryArrayNext:], first)
	}
	f.Add(loop)
	flipped := slices.Clone(seed)
	for i := headerSizeMax; i < len(flipped); i += 97 {
		flipped[i] ^= 0xa5
	}
	f.Add(flipped)

	root := f.TempDir()
	dir := filepath.Join(root, "var/log/journal", machineID)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		f.Fatal(err)
	}
	h, err := host.New(root, nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if err := os.WriteFile(filepath.Join(dir, "system.journal"), b, 0o644); err != nil {
			t.Fatal(err)
		}
		j, err := Open(h, "/var/log/journal")
		if err != nil {
			t.Fatal(err)
		}
		defer j.Close()
		// An entry takes at least 64 bytes at its own offset.
		maxEntries := len(b)/entryItems + 1
		count := func(q Query) int {
			n := 0
			j.Query(q, func(e *Entry) bool {
				n++
				if !q.Since.IsZero() && e.Realtime.Before(q.Since) || !q.Until.IsZero() && e.Realtime.After(q.Until) {
					t.Errorf("entry at %s outside [%s, %s]", e.Realtime, q.Since, q.Until)
				}
				return n <= maxEntries
			})
			if n > maxEntries {
				t.Errorf("%d entries from %d bytes", n, len(b))
			}
			return n
		}
		count(Query{})
		boots, _ := j.Boots()
		q := Query{Any: [][]Term{{{"_SYSTEMD_UNIT", "kubelet.service"}}, {{"UNIT", "kubelet.service"}, {"_PID", "1"}}}, Fields: benchFields}
		if len(boots) > 0 {
			q.BootID = boots[len(boots)-1].ID
		}
		count(q)
		count(Query{Since: t0.Add(5 * fixtureStep), Until: t0.Add(30 * fixtureStep), Fields: []string{}})
		if len(j.Problems) > (maxProblemsPerFile+1)*2 {
			t.Errorf("%d problems", len(j.Problems))
		}
	})
}
