package server

import (
	"fmt"
	"sync"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/encoding"
	_ "google.golang.org/grpc/encoding/proto" // registers the "proto" codec wrapped here
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	nodediagv1 "github.com/nodediag/nodediag/proto/nodediag/v1"
)

// agentCodec is the server's protobuf codec. It differs from gRPC's in one
// way: an agent message that does not decode is not an error of RecvMsg.
// gRPC ends a stream whose message fails to decode by itself, with
// Internal, before the handler can say anything, and Internal tells the
// agent that the collector is at fault. Instead the message is left empty
// and its decoding error kept in malformed, where Connect finds it
// (recvAgent) and ends the stream with InvalidArgument, counted as a
// refusal. Other messages (the Fleet's requests) decode as with gRPC's
// codec.
type agentCodec struct {
	base      encoding.CodecV2
	malformed *sync.Map // *nodediagv1.AgentMessageRaw → error
}

func newAgentCodec(malformed *sync.Map) (*agentCodec, error) {
	base := encoding.GetCodecV2("proto")
	if base == nil {
		return nil, fmt.Errorf("server: gRPC's proto codec is not registered")
	}
	return &agentCodec{base: base, malformed: malformed}, nil
}

func (c *agentCodec) Marshal(v any) (mem.BufferSlice, error) { return c.base.Marshal(v) }

func (c *agentCodec) Unmarshal(data mem.BufferSlice, v any) error {
	err := c.base.Unmarshal(data, v)
	if m, ok := v.(*nodediagv1.AgentMessageRaw); ok && err != nil {
		proto.Reset(m)
		c.malformed.Store(m, err)
		return nil
	}
	return err
}

// Name is gRPC's: the codec handles content-subtype "proto" (and none).
func (c *agentCodec) Name() string { return c.base.Name() }

// recvAgent receives the agent's next message; one that did not decode is
// an InvalidArgument error (see agentCodec).
func (s *Server) recvAgent(stream interface{ RecvMsg(any) error }) (*nodediagv1.AgentMessageRaw, error) {
	m := &nodediagv1.AgentMessageRaw{}
	if err := stream.RecvMsg(m); err != nil {
		return nil, err
	}
	if e, ok := s.malformed.LoadAndDelete(m); ok {
		return nil, status.Errorf(codes.InvalidArgument, "malformed message: %v", e)
	}
	return m, nil
}
