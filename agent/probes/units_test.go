package probes

import (
	"context"
	"errors"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/nodediag/nodediag/agent/host"
	"github.com/nodediag/nodediag/agent/host/hosttest"
	"github.com/nodediag/nodediag/agent/probe"
	"github.com/nodediag/nodediag/agent/probes/internal/nodesim"
	nodediagv1 "github.com/nodediag/nodediag/proto/nodediag/v1"
)

func TestParseBusAddress(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    []unitsEndpoint
		wantErr string
	}{
		{name: "system bus", in: "unix:path=/run/dbus/system_bus_socket",
			want: []unitsEndpoint{{network: "unix", address: "/run/dbus/system_bus_socket", hello: true}}},
		{name: "guid and escapes", in: "unix:path=/tmp/a%20b/bus,guid=0123456789abcdef",
			want: []unitsEndpoint{{network: "unix", address: "/tmp/a b/bus", hello: true}}},
		{name: "abstract", in: "unix:abstract=/tmp/dbus-XYZ",
			want: []unitsEndpoint{{network: "unix", address: "@/tmp/dbus-XYZ", hello: true}}},
		{name: "list skips other transports", in: "tcp:host=localhost,port=1234;unix:path=/b;;unix:path=/c",
			want: []unitsEndpoint{{network: "unix", address: "/b", hello: true}, {network: "unix", address: "/c", hello: true}}},
		{name: "tcp only", in: "tcp:host=localhost,port=1234", wantErr: `transport "tcp" is not supported`},
		{name: "no transport", in: "/run/dbus/system_bus_socket", wantErr: "no transport"},
		{name: "listen-only address", in: "unix:runtime=yes", wantErr: "no path= or abstract="},
		{name: "bad escape", in: "unix:path=/a%zz", wantErr: "key path"},
		{name: "not key=value", in: "unix:path", wantErr: "not key=value"},
		{name: "empty", in: ";", wantErr: "empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseBusAddress(tt.in)
			if tt.wantErr != "" {
				if !errors.Is(err, errBusAddress) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want errBusAddress containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(unitsEndpoint{})); diff != "" {
				t.Errorf("endpoints (-want +got):\n%s", diff)
			}
		})
	}
}

func FuzzParseBusAddress(f *testing.F) {
	for _, s := range []string{
		"unix:path=/run/dbus/system_bus_socket", "unix:path=/tmp/a%20b/bus,guid=0123", "unix:abstract=/tmp/x",
		"tcp:host=localhost,port=1234;unix:path=/b", "unix:runtime=yes", "unix:path=/a%zz", "unix:path", ";", "",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		eps, err := parseBusAddress(s)
		if (err == nil) == (len(eps) == 0) {
			t.Fatalf("parseBusAddress(%q) = %v, %v: want endpoints or an error", s, eps, err)
		}
		for _, ep := range eps {
			if ep.network != "unix" || ep.address == "" || ep.address == "@" {
				t.Fatalf("parseBusAddress(%q): bad endpoint %+v", s, ep)
			}
		}
	})
}

func TestUnitsEndpoints(t *testing.T) {
	tree := hosttest.Tree(t, map[string]string{
		"run/systemd/": "",
		"run/dbus":     "->/srv/dbus", // resolved inside the root
		"srv/dbus/":    "",
	})
	root := tree.Root
	slash, err := host.New("/", nil)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		h    *host.Host
		env  string
		want []unitsEndpoint
	}{
		{name: "the DaemonSet's /host", h: tree, want: []unitsEndpoint{
			{network: "unix", address: filepath.Join(root, "srv/dbus/system_bus_socket"), hello: true},
			{network: "unix", address: filepath.Join(root, "run/systemd/private")},
		}},
		{name: "a VM's /", h: slash, want: []unitsEndpoint{
			{network: "unix", address: "/run/dbus/system_bus_socket", hello: true},
			{network: "unix", address: "/run/systemd/private"},
		}},
		{name: "the environment overrides", h: tree, env: "unix:path=/tmp/sim/rt/bus", want: []unitsEndpoint{
			{network: "unix", address: "/tmp/sim/rt/bus", hello: true},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := unitsEndpoints(tt.h, tt.env)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(unitsEndpoint{})); diff != "" {
				t.Errorf("endpoints (-want +got):\n%s", diff)
			}
		})
	}
	if _, err := unitsEndpoints(tree, "tcp:host=x,port=1"); !errors.Is(err, errBusAddress) || !strings.Contains(err.Error(), unitsBusEnv) {
		t.Errorf("unusable %s: err = %v, want errBusAddress naming the variable", unitsBusEnv, err)
	}
}

func TestUnitStateFromProps(t *testing.T) {
	at := time.Date(2024, 5, 1, 11, 58, 0, 123456000, time.UTC)
	us := uint64(at.UnixMicro())
	tests := []struct {
		name       string
		unit, svc  map[string]any
		want       *nodediagv1.UnitState
		wantQuoted string
	}{
		{
			name: "crash loop",
			unit: map[string]any{"LoadState": "loaded", "ActiveState": "activating", "SubState": "auto-restart",
				"ActiveEnterTimestamp": uint64(0), "InactiveEnterTimestamp": us, "Description": "kubelet"},
			svc: map[string]any{"Result": "exit-code", "NRestarts": uint32(6), "ExecMainCode": int32(1), "ExecMainStatus": int32(1), "MainPID": uint32(0)},
			want: &nodediagv1.UnitState{Name: "kubelet.service", LoadState: "loaded", ActiveState: "activating", SubState: "auto-restart",
				Result: "exit-code", NRestarts: 6, ExecMainCode: 1, ExecMainStatus: 1, InactiveEnter: timestamppb.New(at), Source: "dbus"},
			wantQuoted: "LoadState=loaded ActiveState=activating SubState=auto-restart Result=exit-code NRestarts=6 ExecMainCode=1 ExecMainStatus=1",
		},
		{
			name:       "not found: no service properties",
			unit:       map[string]any{"LoadState": "not-found", "ActiveState": "inactive", "SubState": "dead"},
			want:       &nodediagv1.UnitState{Name: "kubelet.service", LoadState: "not-found", ActiveState: "inactive", SubState: "dead", Source: "dbus"},
			wantQuoted: "LoadState=not-found ActiveState=inactive SubState=dead",
		},
		{
			name:       "mistyped and missing values stay zero",
			unit:       map[string]any{"LoadState": 3, "ActiveState": "active", "ActiveEnterTimestamp": "yesterday", "InactiveEnterTimestamp": ^uint64(0)},
			svc:        map[string]any{"NRestarts": int64(2), "ExecMainStatus": int32(-1)},
			want:       &nodediagv1.UnitState{Name: "kubelet.service", ActiveState: "active", ExecMainStatus: -1, Source: "dbus"},
			wantQuoted: "LoadState= ActiveState=active SubState= Result= NRestarts=0 ExecMainCode=0 ExecMainStatus=-1",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := unitStateFromProps("kubelet.service", tt.unit, tt.svc)
			want := tt.want
			want.Evidence = &nodediagv1.Quote{Source: "dbus:kubelet.service", Excerpt: tt.wantQuoted}
			if diff := cmp.Diff(want, got, protocmp.Transform()); diff != "" {
				t.Errorf("state (-want +got):\n%s", diff)
			}
		})
	}
}

// Units of the simulated node: a kubelet that runs, a containerd that exits
// 3 at start (as with a broken config.toml), and a unit that exits 1 and is
// restarted over and over.
var simUnits = map[string]string{
	"kubelet.service":    "[Service]\nExecStart=/bin/sleep infinity\n",
	"containerd.service": "[Service]\nExecStart=/bin/sh -c 'echo \"containerd: failed to load TOML: /etc/containerd/config.toml: (3, 2): unexpected token\"; exit 3'\n",
	// StartLimitIntervalSec=0: no start limit, so that it keeps restarting.
	"crashloop.service": "[Unit]\nStartLimitIntervalSec=0\n[Service]\nExecStart=/bin/sh -c 'exit 1'\nRestart=always\nRestartSec=100ms\n",
}

// simProps are the properties the probe reads, as systemctl show names them.
var simProps = []string{"LoadState", "ActiveState", "SubState", "Result", "NRestarts", "ExecMainCode", "ExecMainStatus", "ActiveEnterTimestamp", "InactiveEnterTimestamp"}

// TestUnitsSimulator reads unit state from a real systemd manager over its
// real bus, and compares it with what systemctl show says of the same units.
func TestUnitsSimulator(t *testing.T) {
	sim := nodesim.Start(t, nodesim.Options{Units: simUnits, Start: []string{"kubelet.service", "containerd.service", "crashloop.service"}})

	const settle = 10 * time.Second
	sim.WaitUnit("kubelet.service", settle, func(m map[string]string) bool { return m["SubState"] == "running" }, simProps...)
	sim.WaitUnit("containerd.service", settle, func(m map[string]string) bool { return m["ActiveState"] == "failed" }, simProps...)
	sim.WaitUnit("crashloop.service", settle, func(m map[string]string) bool { n, _ := strconv.Atoi(m["NRestarts"]); return n >= 3 }, simProps...)
	// Hold the crash loop still between two restarts, so that what the
	// probe reads is what systemctl read: after the reload the next restart
	// is an hour away (the manager re-arms the timer with the new
	// RestartSec), and NRestarts survives the reload.
	sim.DropIn("crashloop.service", "hold.conf", "[Service]\nRestartSec=1h\n")
	sim.WaitUnit("crashloop.service", settle, func(m map[string]string) bool { return m["SubState"] == "auto-restart" }, simProps...)

	names := []string{"kubelet.service", "containerd.service", "crashloop.service", "cloud-final.service"}
	oracle := map[string]map[string]string{}
	for _, n := range names {
		m, err := sim.Show(n, simProps...)
		if err != nil {
			t.Fatal(err)
		}
		oracle[n] = m
	}

	h, err := host.New("/", nil)
	if err != nil {
		t.Fatal(err)
	}
	if !h.Live() {
		t.Skip("/ is not a live root here")
	}
	t.Setenv(unitsBusEnv, sim.BusAddress())
	pe, err := units{names: names}.Run(context.Background(), h)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if len(pe.GetUnreadable()) > 0 {
		t.Errorf("unreadable: %v", pe.GetUnreadable())
	}
	data := pe.GetUnits()
	if data.GetSource() != "dbus" {
		t.Errorf("source = %q, want dbus", data.GetSource())
	}
	got := map[string]*nodediagv1.UnitState{}
	for _, u := range data.GetUnits() {
		got[u.GetName()] = u
	}

	// What the scenario must show.
	type state struct {
		Load, Active, Sub, Result string
		Code, Status              int32
	}
	wantState := map[string]state{
		"kubelet.service":     {"loaded", "active", "running", "success", 0, 0},
		"containerd.service":  {"loaded", "failed", "failed", "exit-code", 1, 3},
		"crashloop.service":   {"loaded", "activating", "auto-restart", "exit-code", 1, 1},
		"cloud-final.service": {"not-found", "inactive", "dead", "success", 0, 0},
	}
	for _, n := range names {
		u := got[n]
		if u == nil {
			t.Errorf("%s: not reported", n)
			continue
		}
		t.Logf("%s: %s", n, u.GetEvidence().GetExcerpt())
		gs := state{u.LoadState, u.ActiveState, u.SubState, u.Result, u.ExecMainCode, u.ExecMainStatus}
		if diff := cmp.Diff(wantState[n], gs); diff != "" {
			t.Errorf("%s (-want +got):\n%s", n, diff)
		}
		// Equal to systemctl show, the oracle, field by field.
		o := oracle[n]
		for _, c := range []struct{ key, got string }{
			{"LoadState", u.LoadState}, {"ActiveState", u.ActiveState}, {"SubState", u.SubState}, {"Result", u.Result},
			{"NRestarts", strconv.Itoa(int(u.NRestarts))}, {"ExecMainCode", strconv.Itoa(int(u.ExecMainCode))},
			{"ExecMainStatus", strconv.Itoa(int(u.ExecMainStatus))},
			{"ActiveEnterTimestamp", unixSeconds(u.ActiveEnter)}, {"InactiveEnterTimestamp", unixSeconds(u.InactiveEnter)},
		} {
			if c.got != o[c.key] {
				t.Errorf("%s: %s = %q, systemctl show says %q", n, c.key, c.got, o[c.key])
			}
		}
		if u.GetSource() != "dbus" || u.GetEvidence().GetSource() != "dbus:"+n {
			t.Errorf("%s: source %q, evidence source %q", n, u.GetSource(), u.GetEvidence().GetSource())
		}
	}
	if cl := got["crashloop.service"]; cl != nil {
		if cl.NRestarts < 3 {
			t.Errorf("crashloop.service: NRestarts = %d, want >= 3", cl.NRestarts)
		}
		want := "LoadState=loaded ActiveState=activating SubState=auto-restart Result=exit-code NRestarts=" +
			strconv.Itoa(int(cl.NRestarts)) + " ExecMainCode=1 ExecMainStatus=1"
		if cl.GetEvidence().GetExcerpt() != want {
			t.Errorf("crashloop.service excerpt = %q, want %q", cl.GetEvidence().GetExcerpt(), want)
		}
	}
	if k := got["kubelet.service"]; k != nil && k.ActiveEnter == nil {
		t.Error("kubelet.service: no ActiveEnter time")
	}

	// systemd's private socket (what /run/systemd/private is for PID 1): a
	// direct connection, without Hello.
	t.Run("private socket", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), unitsTimeout)
		defer cancel()
		conn, err := unitsConnect(ctx, []unitsEndpoint{{network: "unix", address: sim.PrivateSocket()}})
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		st, err := unitsRead(ctx, conn, "containerd.service")
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(got["containerd.service"], st, protocmp.Transform()); diff != "" {
			t.Errorf("containerd.service over the private socket (-bus +private):\n%s", diff)
		}
	})
}

// unixSeconds formats a time as systemctl show --timestamp=unix does.
func unixSeconds(ts *timestamppb.Timestamp) string {
	if ts == nil {
		return ""
	}
	return "@" + strconv.FormatInt(ts.AsTime().Unix(), 10)
}

// No bus at the address: skipped, with the reason.
func TestUnitsNoBus(t *testing.T) {
	h, err := host.New("/", nil)
	if err != nil {
		t.Fatal(err)
	}
	if !h.Live() {
		t.Skip("/ is not a live root here")
	}
	t.Setenv(unitsBusEnv, "unix:path=/nonexistent")
	pe := probe.RunAll(context.Background(), h, []probe.Probe{units{}}).GetProbes()[0]
	if pe.GetStatus() != probe.StatusSkipped {
		t.Fatalf("status = %q (%s), want skipped", pe.GetStatus(), pe.GetError())
	}
	for _, want := range []string{"not reachable from the root", "/nonexistent"} {
		if !strings.Contains(pe.GetError(), want) {
			t.Errorf("error %q does not say %q", pe.GetError(), want)
		}
	}
}

// A bus that accepts the connection and never answers is given up on when
// the context ends: the agent does not hang on it.
func TestUnitsSilentBus(t *testing.T) {
	h, err := host.New("/", nil)
	if err != nil {
		t.Fatal(err)
	}
	if !h.Live() {
		t.Skip("/ is not a live root here")
	}
	sock := filepath.Join(t.TempDir(), "bus")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			defer c.Close() // held open, never answered
		}
	}()
	t.Setenv(unitsBusEnv, "unix:path="+sock)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err = units{}.Run(ctx, h)
	if !errors.Is(err, probe.ErrNotApplicable) || !strings.Contains(err.Error(), sock) {
		t.Fatalf("err = %v, want not applicable naming %s", err, sock)
	}
}

// A copy of a host has no bus: the probe is skipped without connecting to
// anything, even with a bus named in the environment and sockets in the
// copy.
func TestUnitsCopyOfHost(t *testing.T) {
	h := hosttest.Tree(t, map[string]string{"run/dbus/": "", "etc/hostname": "node-1\n"})
	sock := filepath.Join(h.Root, "run/dbus/system_bus_socket")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	t.Setenv(unitsBusEnv, "unix:path="+sock)

	_, err = units{}.Run(context.Background(), h)
	if !errors.Is(err, probe.ErrNotApplicable) || !strings.Contains(err.Error(), "a copy of a host") {
		t.Fatalf("err = %v, want not applicable: a copy of a host", err)
	}
	// Connections are accepted in order: if the probe had connected, its
	// connection would come before this sentinel.
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte("S")); err != nil {
		t.Fatal(err)
	}
	first, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	b := make([]byte, 1)
	if _, err := first.Read(b); err != nil || b[0] != 'S' {
		t.Fatalf("first connection to the socket read %q, %v: the probe dialled", b, err)
	}
}
