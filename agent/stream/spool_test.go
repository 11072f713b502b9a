package stream

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	nodediagv1 "github.com/nodediag/nodediag/proto/nodediag/v1"
)

func upload(seq uint64, name string) *nodediagv1.Upload {
	return &nodediagv1.Upload{Seq: seq, Reason: ReasonInterval, Report: &nodediagv1.Report{Host: &nodediagv1.HostInfo{Hostname: name}}}
}

// A damaged spool file (truncated, extended, flipped) is discarded when a
// spool is opened; a good one is loaded.
func TestSpoolDiscardsDamagedFiles(t *testing.T) {
	good, err := EncodeSpoolFile(upload(1, "good"))
	if err != nil {
		t.Fatal(err)
	}
	flipped := append([]byte(nil), good...)
	flipped[len(flipped)-1] ^= 0xff
	for name, b := range map[string][]byte{
		"truncated": good[:len(good)-3],
		"extended":  append(append([]byte(nil), good...), 'x'),
		"flipped":   flipped,
		"header":    good[:5],
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := DecodeSpoolFile(b); !errors.Is(err, ErrSpoolDamaged) {
				t.Errorf("DecodeSpoolFile: %v; want ErrSpoolDamaged", err)
			}
			dir := t.TempDir()
			os.WriteFile(filepath.Join(dir, "upload-00000000000000000001.pb"), good, 0o600)
			os.WriteFile(filepath.Join(dir, "upload-00000000000000000002.pb"), b, 0o600)
			var warned int
			s := OpenSpool(dir, 0, 0, func(string, ...any) { warned++ })
			if s.Len() != 1 || s.Entries()[0].Upload.GetReport().GetHost().GetHostname() != "good" || warned != 1 {
				t.Errorf("loaded %d uploads with %d warnings; want the good one and one warning", s.Len(), warned)
			}
			if files, _ := os.ReadDir(dir); len(files) != 1 {
				t.Errorf("%d files left; the damaged one must be removed", len(files))
			}
		})
	}
}

// An unwritable directory: a warning, and the spool works in memory.
func TestSpoolUnwritableDirFallsBackToMemory(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	os.WriteFile(file, nil, 0o600)
	var warned int
	s := OpenSpool(filepath.Join(file, "spool"), 2, 0, func(string, ...any) { warned++ })
	if s.Dir() != "" || warned != 1 {
		t.Fatalf("dir %q, %d warnings; want memory only and one warning", s.Dir(), warned)
	}
	for i := uint64(1); i <= 3; i++ {
		s.Add(upload(i, "r"))
	}
	if s.Len() != 2 || s.Has(1) || !s.Remove(3) || s.Len() != 1 {
		t.Errorf("bounds or Remove wrong in memory: %d kept", s.Len())
	}
}

func TestBackoffBounds(t *testing.T) {
	b := Backoff{Initial: 10 * time.Millisecond, Max: 80 * time.Millisecond, Factor: 2, Rand: func() float64 { return 0.999 }}
	var got []time.Duration
	for range 6 {
		got = append(got, b.Next().Round(time.Millisecond))
	}
	want := []time.Duration{10, 20, 40, 80, 80, 80}
	for i := range want {
		if got[i] != want[i]*time.Millisecond {
			t.Fatalf("delays %v, want %v ms", got, want)
		}
	}
	b.Reset()
	if d := b.Next(); d > 10*time.Millisecond || d < 5*time.Millisecond {
		t.Errorf("after Reset: %v, want in [5ms, 10ms]", d)
	}
}

func FuzzDecodeSpoolFile(f *testing.F) {
	good, _ := EncodeSpoolFile(upload(7, "seed"))
	f.Add(good)
	f.Add(good[:10])
	f.Add([]byte("NDSPOOL1\x00\x00\x00\x00\x00\x00\x00\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		u, err := DecodeSpoolFile(b)
		if err == nil && u.GetReport() == nil {
			t.Error("decoded an upload without a report")
		}
	})
}
