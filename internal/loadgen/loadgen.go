// Package loadgen simulates a fleet of agents against a collector: N
// streams that say Hello, upload a realistic report, and answer every
// CheckRequest with a report for it, as `nodediag-agent run` does. It is
// what the collector's benchmarks and fault tests drive.
//
// Agents share gRPC connections (Options.PerConn streams each): a stream is
// what the collector serves an agent by, and 10,000 TLS connections from
// one process would measure the load generator rather than the collector.
package loadgen

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/nodediag/nodediag/agent/check"
	"github.com/nodediag/nodediag/agent/host"
	nodediagv1 "github.com/nodediag/nodediag/proto/nodediag/v1"
)

// Options shape the simulated fleet.
type Options struct {
	// Addr is the collector's address.
	Addr string
	// TLS, when set, is the client's TLS configuration; nil is plaintext
	// (a collector started with --insecure).
	TLS *tls.Config
	// Agents is the number of simulated agents, named NamePrefix-00001...
	Agents     int
	NamePrefix string
	// PerConn is the number of agents sharing a connection (100 if zero).
	PerConn int
	// Report is what every agent uploads, with its node name set.
	Report *nodediagv1.Report
	// OnAck, when set, is called for every Ack with the agent's node name,
	// its agent_start and the acknowledged seq (from many goroutines): the
	// fault tests check that every acknowledged upload is in the store.
	OnAck func(node string, agentStart time.Time, seq uint64)
}

// Fleet is a running simulated fleet.
type Fleet struct {
	o      Options
	enc    *encoder
	conns  []*grpc.ClientConn
	cancel context.CancelFunc
	wg     sync.WaitGroup

	// Ready counts agents that got their Welcome; Acked counts acks;
	// Uploads counts uploads sent; Requests counts CheckRequests answered.
	Ready, Acked, Uploads, Requests atomic.Int64
	errMu                           sync.Mutex
	errs                            []error
}

// Start connects the fleet. Each agent uploads one report at connect; the
// call returns once every agent has been welcomed and its first upload
// acknowledged, or ctx ends.
func Start(ctx context.Context, o Options) (*Fleet, error) {
	if o.PerConn <= 0 {
		o.PerConn = 100
	}
	if o.NamePrefix == "" {
		o.NamePrefix = "sim"
	}
	creds := insecure.NewCredentials()
	if o.TLS != nil {
		creds = credentials.NewTLS(o.TLS)
	}
	enc, err := newEncoder(o.Report)
	if err != nil {
		return nil, err
	}
	runCtx, cancel := context.WithCancel(context.Background())
	f := &Fleet{o: o, cancel: cancel, enc: enc}
	for i := 0; i < o.Agents; i += o.PerConn {
		c, err := grpc.NewClient(o.Addr, grpc.WithTransportCredentials(creds),
			grpc.WithDefaultCallOptions(grpc.MaxCallSendMsgSize(64<<20)))
		if err != nil {
			f.Stop()
			return nil, err
		}
		f.conns = append(f.conns, c)
	}
	welcomed := make(chan struct{}, o.Agents)
	for i := 0; i < o.Agents; i++ {
		name := fmt.Sprintf("%s-%05d", o.NamePrefix, i+1)
		conn := f.conns[i/o.PerConn]
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			if err := f.agent(runCtx, conn, name, welcomed); err != nil && runCtx.Err() == nil {
				f.fail(fmt.Errorf("%s: %w", name, err))
			}
		}()
	}
	for n := 0; n < o.Agents; n++ {
		select {
		case <-welcomed:
		case <-ctx.Done():
			f.Stop()
			return nil, fmt.Errorf("%d of %d agents ready: %w (first errors: %v)", n, o.Agents, ctx.Err(), f.Errors())
		}
	}
	return f, nil
}

func (f *Fleet) fail(err error) {
	f.errMu.Lock()
	defer f.errMu.Unlock()
	if len(f.errs) < 10 {
		f.errs = append(f.errs, err)
	}
}

// Errors returns the first errors the agents met.
func (f *Fleet) Errors() []error {
	f.errMu.Lock()
	defer f.errMu.Unlock()
	return append([]error(nil), f.errs...)
}

// Stop ends every stream and connection.
func (f *Fleet) Stop() {
	f.cancel()
	for _, c := range f.conns {
		c.Close()
	}
	f.wg.Wait()
}

// agent is one simulated agent's stream: Hello, Welcome, the connect
// upload, then an upload for each CheckRequest. Acks are counted; the first
// one signals ready.
func (f *Fleet) agent(ctx context.Context, conn *grpc.ClientConn, name string, ready chan<- struct{}) error {
	desc := &nodediagv1.Collector_ServiceDesc.Streams[0]
	stream, err := conn.NewStream(ctx, desc, "/"+nodediagv1.Collector_ServiceDesc.ServiceName+"/"+desc.StreamName, grpc.ForceCodecV2(codec{}))
	if err != nil {
		return err
	}
	start := timestamppb.Now()
	if err := stream.SendMsg(&nodediagv1.AgentMessage{Msg: &nodediagv1.AgentMessage_Hello{Hello: &nodediagv1.Hello{
		NodeName: name, Agent: f.o.Report.GetAgent(), MachineId: fmt.Sprintf("%032x", len(name)*7919+int(name[len(name)-1])), AgentStart: start,
	}}}); err != nil {
		return err
	}
	m := &nodediagv1.CollectorMessage{}
	if err := stream.RecvMsg(m); err != nil {
		return fmt.Errorf("waiting for Welcome: %w", err)
	}
	if m.GetWelcome() == nil {
		return fmt.Errorf("first message is not a Welcome: %v", m)
	}
	var seq uint64
	upload := func(requestID, reason string) error {
		seq++
		f.Uploads.Add(1)
		return stream.SendMsg(f.enc.upload(seq, name, requestID, reason))
	}
	if err := upload("", "connect"); err != nil {
		return err
	}
	first := true
	for {
		m := &nodediagv1.CollectorMessage{}
		err := stream.RecvMsg(m)
		if errors.Is(err, io.EOF) || ctx.Err() != nil {
			return nil
		}
		if err != nil {
			return err
		}
		switch {
		case m.GetAck() != nil:
			f.Acked.Add(1)
			if f.o.OnAck != nil {
				f.o.OnAck(name, start.AsTime(), m.GetAck().GetSeq())
			}
			if first {
				first = false
				f.Ready.Add(1)
				ready <- struct{}{}
			}
		case m.GetCheck() != nil:
			f.Requests.Add(1)
			if err := upload(m.GetCheck().GetRequestId(), "request"); err != nil {
				return err
			}
		}
	}
}

// ExampleReport is the report `nodediag-agent check` makes of an example
// host root (agent/testdata/hosts/NAME/root), evidence included, as an
// agent uploads it: a realistic size and shape. Binaries are not run.
func ExampleReport(root string) (*nodediagv1.Report, error) {
	h, err := host.New(root, host.NoExec{})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return check.Host(ctx, h, check.Options{NodeName: "example"})
}
