package loadgen

import (
	"fmt"

	"google.golang.org/grpc/encoding"
	_ "google.golang.org/grpc/encoding/proto" // the codec wrapped here
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	nodediagv1 "github.com/nodediag/nodediag/proto/nodediag/v1"
)

// The simulated agents must cost the machine little, so that a benchmark
// measures the collector: a real agent encodes its report on its own node.
// The report is encoded once; each upload is that encoding framed by a few
// bytes written per upload (the Upload's seq and reason, the report's node
// name and request ID), sent without copying the shared part. Protobuf
// makes this exact: a message field that appears twice is merged and a
// scalar field's last value wins, so appending HostInfo{node_name} and
// request_id to the encoded report sets them.

// encoder frames uploads around the shared encoded report.
type encoder struct {
	base []byte // the report, encoded once (read-only)
	// Field numbers, from the descriptors.
	reportHost, reportRequestID, hostNodeName        protowire.Number
	uploadSeq, uploadReport, uploadReason, msgUpload protowire.Number
}

func newEncoder(r *nodediagv1.Report) (*encoder, error) {
	base, err := proto.MarshalOptions{Deterministic: true}.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("loadgen: encoding the report: %w", err)
	}
	num := func(m proto.Message, name protoreflect.Name) protowire.Number {
		fd := m.ProtoReflect().Descriptor().Fields().ByName(name)
		if fd == nil {
			panic(fmt.Sprintf("loadgen: %s has no field %s", m.ProtoReflect().Descriptor().FullName(), name))
		}
		return fd.Number()
	}
	return &encoder{
		base:            base,
		reportHost:      num(&nodediagv1.Report{}, "host"),
		reportRequestID: num(&nodediagv1.Report{}, "request_id"),
		hostNodeName:    num(&nodediagv1.HostInfo{}, "node_name"),
		uploadSeq:       num(&nodediagv1.Upload{}, "seq"),
		uploadReport:    num(&nodediagv1.Upload{}, "report"),
		uploadReason:    num(&nodediagv1.Upload{}, "reason"),
		msgUpload:       num(&nodediagv1.AgentMessage{}, "upload"),
	}, nil
}

// preEncoded is an AgentMessage already encoded, in parts.
type preEncoded [][]byte

// upload is AgentMessage{Upload{seq, report with node name and request ID,
// reason}}.
func (e *encoder) upload(seq uint64, node, requestID, reason string) preEncoded {
	var host []byte
	host = protowire.AppendTag(host, e.hostNodeName, protowire.BytesType)
	host = protowire.AppendString(host, node)
	var tail []byte
	tail = protowire.AppendTag(tail, e.reportHost, protowire.BytesType)
	tail = protowire.AppendBytes(tail, host)
	if requestID != "" {
		tail = protowire.AppendTag(tail, e.reportRequestID, protowire.BytesType)
		tail = protowire.AppendString(tail, requestID)
	}
	reportLen := len(e.base) + len(tail)

	var up []byte // the Upload up to the report's bytes
	up = protowire.AppendTag(up, e.uploadSeq, protowire.VarintType)
	up = protowire.AppendVarint(up, seq)
	up = protowire.AppendTag(up, e.uploadReport, protowire.BytesType)
	up = protowire.AppendVarint(up, uint64(reportLen))
	var after []byte // the report's own tail, then the Upload's reason
	after = append(after, tail...)
	after = protowire.AppendTag(after, e.uploadReason, protowire.BytesType)
	after = protowire.AppendString(after, reason)
	uploadLen := len(up) + len(e.base) + len(after)

	var head []byte
	head = protowire.AppendTag(head, e.msgUpload, protowire.BytesType)
	head = protowire.AppendVarint(head, uint64(uploadLen))
	head = append(head, up...)
	return preEncoded{head, e.base, after}
}

// codec sends preEncoded messages as they are and everything else as
// gRPC's protobuf codec does.
type codec struct{}

func (codec) Marshal(v any) (mem.BufferSlice, error) {
	if p, ok := v.(preEncoded); ok {
		out := make(mem.BufferSlice, len(p))
		for i, b := range p {
			out[i] = mem.SliceBuffer(b)
		}
		return out, nil
	}
	return encoding.GetCodecV2("proto").Marshal(v)
}

func (codec) Unmarshal(data mem.BufferSlice, v any) error {
	return encoding.GetCodecV2("proto").Unmarshal(data, v)
}

func (codec) Name() string { return "proto" }
