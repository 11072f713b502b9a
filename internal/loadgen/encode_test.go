package loadgen

import (
	"bytes"
	"testing"

	"google.golang.org/protobuf/proto"

	nodediagv1 "github.com/nodediag/nodediag/proto/nodediag/v1"
)

// TestPreEncodedUploadDecodesAsBuilt: the framed upload decodes to exactly
// the message a real agent would build, node name and request ID set.
func TestPreEncodedUploadDecodesAsBuilt(t *testing.T) {
	r, err := ExampleReport("../../agent/testdata/hosts/disk-full/root")
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Findings) == 0 || r.Host == nil {
		t.Fatalf("the example report has no findings or host: %v", r)
	}
	enc, err := newEncoder(r)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		seq               uint64
		node, req, reason string
	}{
		{1, "sim-00001", "", "connect"},
		{300, "a-much-longer-node-name.example.internal", "sweep-0123456789abcdef", "request"},
	} {
		got := &nodediagv1.AgentMessage{}
		if err := proto.Unmarshal(bytes.Join(enc.upload(tc.seq, tc.node, tc.req, tc.reason), nil), got); err != nil {
			t.Fatalf("decoding the pre-encoded upload: %v", err)
		}
		want := proto.Clone(r).(*nodediagv1.Report)
		want.Host.NodeName, want.RequestId = tc.node, tc.req
		wantMsg := &nodediagv1.AgentMessage{Msg: &nodediagv1.AgentMessage_Upload{Upload: &nodediagv1.Upload{Seq: tc.seq, Report: want, Reason: tc.reason}}}
		if !proto.Equal(got, wantMsg) {
			t.Errorf("seq %d: the pre-encoded upload decodes to something else than the built one", tc.seq)
		}
	}
}
