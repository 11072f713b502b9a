// Package store keeps what agents report: the latest report of every node
// and a bounded history, on the collector's disk.
//
// The contract the collector's acknowledgements rest on: when Put returns
// nil, the report survives a crash of the collector process. The collector
// acknowledges an upload only after that.
package store

import (
	"context"
	"errors"
	"time"

	nodediagv1 "github.com/nodediag/nodediag/proto/nodediag/v1"
)

// ErrNotFound is returned (wrapped) for a node the store has no report of.
var ErrNotFound = errors.New("not found")

// Record is one report of a node as the collector received it.
type Record struct {
	// Summary is the node's line of the fleet table for this report:
	// identity (node name, machine and provider IDs, agent), the top
	// finding and the counts. Its NodeName is the record's key. Connected
	// and LastSeen are the collector's live state and are not stored.
	Summary *nodediagv1.NodeSummary
	// AgentStart and Seq identify the upload across reconnects: a report
	// put again with the same node, AgentStart and Seq is stored once.
	AgentStart time.Time
	Seq        uint64
	// ReceivedAt is when the collector received the report.
	ReceivedAt time.Time
	// Report is the report; Encoded, when set, is its protobuf encoding
	// as the agent sent it, stored as is instead of encoding Report (which
	// may then be nil). Records read back always have Report, decoded from
	// what was stored, and no Encoded.
	Report  *nodediagv1.Report
	Encoded []byte
}

// Store is where reports are kept. Implementations are safe for concurrent
// use.
type Store interface {
	// Put stores rec durably: when it returns nil, rec survives a crash of
	// the process. Putting a record whose (node, AgentStart, Seq) is
	// already stored returns nil and stores nothing. Many concurrent Puts
	// may share one commit.
	Put(ctx context.Context, rec *Record) error
	// Nodes returns the summary of the latest report of every node, by
	// node name.
	Nodes(ctx context.Context) ([]*nodediagv1.NodeSummary, error)
	// Latest returns the latest report of node, or an error wrapping
	// ErrNotFound.
	Latest(ctx context.Context, node string) (*Record, error)
	// History returns up to limit reports of node, newest first.
	History(ctx context.Context, node string, limit int) ([]*Record, error)
	Close() error
}
