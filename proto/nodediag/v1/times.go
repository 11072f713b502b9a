package nodediagv1

import (
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// Hand-written (not generated): the newest time each probe's data shows of
// the node itself, from which the rules take the clock of a copy of a host
// (a certificate's NotAfter, in the future, is no time the node was seen
// at). A probe data message without a Newest method shows none.

// Timed is probe data that shows times of the node.
type Timed interface {
	// Newest is the newest time the data shows; zero for none.
	Newest() time.Time
}

// Data is the probe's data message (KubeletConfig, Logs, ...), or nil.
func (x *ProbeEvidence) DataMessage() proto.Message {
	m := x.ProtoReflect()
	od := m.Descriptor().Oneofs().ByName("data")
	if od == nil {
		return nil
	}
	fd := m.WhichOneof(od)
	if fd == nil {
		return nil
	}
	return m.Get(fd).Message().Interface()
}

// Newest is the newest time the probe's data shows (Timed), zero for none.
func (x *ProbeEvidence) Newest() time.Time {
	if t, ok := x.DataMessage().(Timed); ok {
		return t.Newest()
	}
	return time.Time{}
}

func newest(ts ...*timestamppb.Timestamp) time.Time {
	var n time.Time
	for _, t := range ts {
		if t != nil && t.AsTime().After(n) {
			n = t.AsTime()
		}
	}
	return n
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// Newest is the last line's time of the newest log.
func (x *Logs) Newest() time.Time {
	var n time.Time
	for _, s := range x.GetSources() {
		n = later(n, newest(s.GetLastTime()))
	}
	return n
}

// Newest is the last entry's time of the newest unit.
func (x *Journal) Newest() time.Time {
	var n time.Time
	for _, s := range x.GetSources() {
		n = later(n, newest(s.GetLastTime()))
	}
	return n
}

// Newest is the last line's time of the newest container log.
func (x *Pods) Newest() time.Time {
	var n time.Time
	for _, c := range x.GetContainers() {
		n = later(n, newest(c.GetLastTime()))
	}
	return n
}

// Newest is cloud-init's last update or the end of its last stage.
func (x *CloudInit) Newest() time.Time {
	n := newest(x.GetLastUpdate())
	for _, st := range x.GetStages() {
		n = later(n, newest(st.GetStart(), st.GetFinished()))
	}
	return n
}
