package store

import (
	"bytes"
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"google.golang.org/protobuf/proto"

	nodediagv1 "github.com/nodediag/nodediag/proto/nodediag/v1"
)

// FuzzPutEncoded puts arbitrary bytes as a report's encoding. The store
// keeps them as they are; reading them back decodes them exactly when
// proto.Unmarshal does, and fails with an error (never a panic) otherwise.
func FuzzPutEncoded(f *testing.F) {
	good, err := proto.Marshal(testReport("n", 1))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add(withUnknownField(good))
	f.Add(good[:len(good)/2])
	f.Add([]byte{0xff})
	f.Add(bytes.Repeat([]byte{0x3a, 0x01, 'x'}, 1000)) // gaps: compresses
	dir := f.TempDir()
	s, err := Open(dir, Options{MaxAge: -1, History: 1})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { s.Close() })
	var n atomic.Uint64
	f.Fuzz(func(t *testing.T, enc []byte) {
		if len(enc) == 0 {
			return // ErrInvalidRecord, tested elsewhere
		}
		node := fmt.Sprintf("fuzz-%d", n.Add(1))
		rec := testRecord(node, 1)
		rec.Report = nil
		rec.Encoded = bytes.Clone(enc)
		if err := s.Put(context.Background(), rec); err != nil {
			t.Fatalf("Put: %v", err)
		}
		got, err := s.Latest(context.Background(), node)
		var want nodediagv1.Report
		if uerr := proto.Unmarshal(enc, &want); uerr != nil {
			if err == nil {
				t.Fatalf("Latest decoded bytes proto.Unmarshal refuses (%v)", uerr)
			}
			return
		}
		if err != nil {
			t.Fatalf("Latest: %v", err)
		}
		if !proto.Equal(got.Report, &want) {
			t.Fatalf("Latest = %v, want %v", got.Report, &want)
		}
	})
}
