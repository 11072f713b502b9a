package host

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// A log that shrinks between the fstat that measured it and the reads
// (logrotate's copytruncate) gives what could still be read, never an error.
// The file is a real one, opened and measured, then truncated before
// readHeadTail reads it: the race made deterministic.
func TestReadHeadTailShrinking(t *testing.T) {
	// 100 bytes: "0123456789" ten times. Head 10, tail 20: bytes 80-99 are
	// the tail, 10-79 the unread middle.
	content := strings.Repeat("0123456789", 10)
	type result struct {
		First, Last   string
		Size, Skipped int64
	}
	tests := []struct {
		name     string
		truncate int64 // the file's size when it is read; -1: not truncated
		want     result
	}{
		{name: "unchanged", truncate: -1, want: result{"0123456789", content[80:], 100, 70}},
		{name: "emptied", truncate: 0, want: result{"", "", 0, 0}},
		{name: "now ends in the head: read whole", truncate: 5, want: result{"01234", "", 5, 0}},
		{name: "now ends exactly at the head", truncate: 10, want: result{"0123456789", "", 100, 70}},
		{name: "now ends in the middle: no tail", truncate: 50, want: result{"0123456789", "", 100, 70}},
		{name: "now ends in the tail: the tail up to the new end", truncate: 90, want: result{"0123456789", content[80:90], 100, 70}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "kubelet.log")
			if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
			f, err := os.Open(p)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			fi, err := f.Stat()
			if err != nil {
				t.Fatal(err)
			}
			if tt.truncate >= 0 {
				if err := os.Truncate(p, tt.truncate); err != nil {
					t.Fatal(err)
				}
			}
			first, last, size, skipped, err := readHeadTail(f, fi.Size(), 10, 20)
			if err != nil {
				t.Fatalf("readHeadTail: %v", err)
			}
			got := result{string(first), string(last), size, skipped}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("readHeadTail (-want +got):\n%s", diff)
			}
		})
	}
}

// An error other than the end of the file is an error.
func TestReadHeadTailReadError(t *testing.T) {
	p := filepath.Join(t.TempDir(), "kubelet.log")
	if err := os.WriteFile(p, []byte(strings.Repeat("x", 100)), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if _, _, _, _, err := readHeadTail(f, 100, 10, 20); !errors.Is(err, os.ErrClosed) {
		t.Errorf("readHeadTail of a closed file: %v, want os.ErrClosed", err)
	}
}
