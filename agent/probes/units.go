package probes

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	sddbus "github.com/coreos/go-systemd/v22/dbus"
	godbus "github.com/godbus/dbus/v5"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/nodediag/nodediag/agent/host"
	"github.com/nodediag/nodediag/agent/probe"
	nodediagv1 "github.com/nodediag/nodediag/proto/nodediag/v1"
)

// Host paths of the sockets through which the node's systemd answers on
// D-Bus.
const (
	// The system bus, served by dbus-daemon or dbus-broker; systemd's
	// Manager is org.freedesktop.systemd1 on it. /var/run/dbus is the same
	// directory through the /var/run -> /run symlink.
	unitsSystemBus = "/run/dbus/system_bus_socket"
	// systemd's own socket, created by PID 1 for systemctl when the bus is
	// down: a direct connection to the manager, without a bus daemon (so
	// without Hello); the manager serves only root on it.
	unitsSystemdPrivate = "/run/systemd/private"
)

// unitsBusEnv names a D-Bus address that replaces the host's sockets when
// set: the variable libdbus, sd-bus and godbus read for the system bus. It is
// the agent's configuration, not the node's (tests point it at a simulated
// node's bus), so it is read from the agent's own environment.
const unitsBusEnv = "DBUS_SYSTEM_BUS_ADDRESS"

// unitsDefault are the units whose state the rules judge: the kubelet, the
// container runtime, and the cloud-init stage that runs the bootstrap
// commands.
var unitsDefault = []string{"kubelet.service", "containerd.service", "cloud-final.service"}

// Time bounds: a bus that accepts a connection and never answers must not
// hold the agent. Each address gets unitsHandshakeTimeout to connect,
// authenticate and say Hello; the whole probe, reads included, gets
// unitsTimeout (less if the caller's context ends first).
const (
	unitsTimeout          = 10 * time.Second
	unitsHandshakeTimeout = 3 * time.Second
)

// units reads the state of systemd units (kubelet, containerd, cloud-final)
// from the host's systemd over D-Bus, with go-systemd: LoadState,
// ActiveState, SubState, and for services Result, NRestarts and the main
// process's last exit. It only reads properties: it never starts, stops,
// reloads or resets a unit.
//
// The bus is the host's, reached through the root: the system bus socket,
// else systemd's private socket, under Root (the DaemonSet's /host) or at
// the usual paths when Root is "/". $DBUS_SYSTEM_BUS_ADDRESS replaces them
// when set. A copy of a host has no bus, and the bus of the machine
// examining the copy is not the copied host's: the probe is then skipped
// without connecting to anything. It is skipped too when no bus answers;
// the journal probe then derives unit state from systemd's messages.
type units struct {
	// names overrides unitsDefault (tests).
	names []string
}

func (units) Name() string { return "units" }

func (p units) Run(ctx context.Context, h *host.Host) (*nodediagv1.ProbeEvidence, error) {
	if !h.Live() {
		return nil, fmt.Errorf("%w: no bus: a copy of a host", probe.ErrNotApplicable)
	}
	eps, err := unitsEndpoints(h, os.Getenv(unitsBusEnv))
	if err != nil {
		return nil, fmt.Errorf("%w: the host's systemd bus is not reachable from the root: %v", probe.ErrNotApplicable, err)
	}
	ctx, cancel := context.WithTimeout(ctx, unitsTimeout)
	defer cancel()
	conn, err := unitsConnect(ctx, eps)
	if err != nil {
		return nil, fmt.Errorf("%w: the host's systemd bus is not reachable from the root: %v", probe.ErrNotApplicable, err)
	}
	defer conn.Close()

	names := p.names
	if names == nil {
		names = unitsDefault
	}
	pe := &nodediagv1.ProbeEvidence{}
	data := &nodediagv1.Units{Source: unitsSourceDBus}
	for _, name := range names {
		st, err := unitsRead(ctx, conn, name)
		if err != nil {
			probe.Unreadable(pe, "dbus:"+name, err)
			continue
		}
		data.Units = append(data.Units, st)
	}
	pe.Data = &nodediagv1.ProbeEvidence_Units{Units: data}
	if len(data.Units) == 0 && len(pe.Unreadable) > 0 {
		return pe, fmt.Errorf("no unit could be read over the bus: %s", pe.Unreadable[0].GetError())
	}
	return pe, nil
}

// unitsSourceDBus is Units.source and UnitState.source for state read from
// systemd itself.
const unitsSourceDBus = "dbus"

// unitsEndpoint is one socket a bus may answer on.
type unitsEndpoint struct {
	// network and address for net.Dial: "unix" and a path, or "@name" for
	// an abstract socket.
	network, address string
	// hello: a bus daemon wants the Hello call before anything else; a
	// direct connection to systemd has no daemon to greet.
	hello bool
}

func (e unitsEndpoint) String() string { return e.network + ":" + e.address }

// unitsEndpoints lists the sockets to try, in order: the address of
// $DBUS_SYSTEM_BUS_ADDRESS when set (env), else the host's system bus and
// systemd's private socket resolved inside the root.
func unitsEndpoints(h *host.Host, env string) ([]unitsEndpoint, error) {
	if env != "" {
		eps, err := parseBusAddress(env)
		if err != nil {
			return nil, fmt.Errorf("%s=%q: %w", unitsBusEnv, env, err)
		}
		return eps, nil
	}
	var eps []unitsEndpoint
	var errs []string
	for _, s := range []struct {
		path  string
		hello bool
	}{{unitsSystemBus, true}, {unitsSystemdPrivate, false}} {
		p, err := h.Path(s.path)
		if err != nil {
			errs = append(errs, err.Error())
			continue
		}
		eps = append(eps, unitsEndpoint{network: "unix", address: p, hello: s.hello})
	}
	if len(eps) == 0 {
		return nil, errors.New(strings.Join(errs, "; "))
	}
	return eps, nil
}

// errBusAddress is wrapped by parseBusAddress for an address it cannot use.
var errBusAddress = errors.New("unusable D-Bus address")

// parseBusAddress parses a D-Bus server address list (the D-Bus
// specification, "Server Addresses"): "unix:path=/run/dbus/system_bus_socket",
// "unix:abstract=name", several separated by ";", each with optional keys
// (guid=...). Values are %-escaped. Only the unix transport is used: the
// system bus is never served over TCP, and EXTERNAL authentication needs a
// unix socket. Entries of another transport are skipped; an error wrapping
// errBusAddress says why when no entry is usable.
func parseBusAddress(s string) ([]unitsEndpoint, error) {
	var eps []unitsEndpoint
	var bad []string
	for _, entry := range strings.Split(s, ";") {
		if entry == "" {
			continue
		}
		transport, keys, ok := strings.Cut(entry, ":")
		if !ok {
			bad = append(bad, fmt.Sprintf("%q: no transport", entry))
			continue
		}
		if transport != "unix" {
			bad = append(bad, fmt.Sprintf("%q: transport %q is not supported (only unix)", entry, transport))
			continue
		}
		kv := map[string]string{}
		var keyErr error
		for _, pair := range strings.Split(keys, ",") {
			if pair == "" {
				continue
			}
			k, v, ok := strings.Cut(pair, "=")
			if !ok {
				keyErr = fmt.Errorf("%q: %q is not key=value", entry, pair)
				break
			}
			uv, err := godbus.UnescapeBusAddressValue(v)
			if err != nil {
				keyErr = fmt.Errorf("%q: key %s: %v", entry, k, err)
				break
			}
			kv[k] = uv
		}
		switch {
		case keyErr != nil:
			bad = append(bad, keyErr.Error())
		case kv["path"] != "":
			eps = append(eps, unitsEndpoint{network: "unix", address: kv["path"], hello: true})
		case kv["abstract"] != "":
			eps = append(eps, unitsEndpoint{network: "unix", address: "@" + kv["abstract"], hello: true})
		default:
			bad = append(bad, fmt.Sprintf("%q: no path= or abstract= to connect to", entry))
		}
	}
	if len(eps) == 0 {
		if len(bad) == 0 {
			bad = append(bad, "empty")
		}
		return nil, fmt.Errorf("%w: %s", errBusAddress, strings.Join(bad, "; "))
	}
	return eps, nil
}

// unitsConnect connects go-systemd to the first endpoint that answers. The
// connection lives until ctx ends or it is closed.
func unitsConnect(ctx context.Context, eps []unitsEndpoint) (*sddbus.Conn, error) {
	var errs []string
	for _, ep := range eps {
		conn, err := sddbus.NewConnection(func() (*godbus.Conn, error) { return unitsDial(ctx, ep) })
		if err == nil {
			return conn, nil
		}
		msg := err.Error()
		if !strings.Contains(msg, ep.address) {
			msg = ep.address + ": " + msg
		}
		errs = append(errs, msg)
		if ctx.Err() != nil {
			break
		}
	}
	return nil, errors.New(strings.Join(errs, "; "))
}

// unitsDial opens one authenticated connection to ep, as go-systemd's own
// constructors do (EXTERNAL authentication with the numeric uid, which needs
// no user database; Hello on a bus), within unitsHandshakeTimeout. The
// connection is closed when ctx ends, which bounds every later call too.
func unitsDial(ctx context.Context, ep unitsEndpoint) (*godbus.Conn, error) {
	hctx, cancel := context.WithTimeout(ctx, unitsHandshakeTimeout)
	defer cancel()
	var d net.Dialer
	nc, err := d.DialContext(hctx, ep.network, ep.address)
	if err != nil {
		return nil, err
	}
	uc, ok := nc.(*net.UnixConn)
	if !ok {
		nc.Close()
		return nil, fmt.Errorf("%s is not a unix socket", ep)
	}
	// The handshake reads and writes the socket directly: its deadline is
	// the handshake's bound. It is lifted once the bus has answered.
	deadline, _ := hctx.Deadline()
	if err := uc.SetDeadline(deadline); err != nil {
		uc.Close()
		return nil, err
	}
	conn, err := godbus.DialUnix(uc, godbus.WithContext(ctx))
	if err != nil {
		uc.Close()
		return nil, err
	}
	if err := conn.Auth([]godbus.Auth{godbus.AuthExternal(strconv.Itoa(os.Getuid()))}); err != nil {
		conn.Close()
		return nil, fmt.Errorf("authenticate: %w", err)
	}
	if ep.hello {
		if err := conn.Hello(); err != nil {
			conn.Close()
			return nil, fmt.Errorf("hello: %w", err)
		}
	}
	if err := uc.SetDeadline(time.Time{}); err != nil {
		conn.Close()
		return nil, err
	}
	return conn, nil
}

// unitsRead reads one unit's state. Only properties are read (the
// org.freedesktop.DBus.Properties GetAll of the unit's object), which
// loads the unit's file if systemd has not, as systemctl show does.
func unitsRead(ctx context.Context, conn *sddbus.Conn, name string) (*nodediagv1.UnitState, error) {
	unit, err := conn.GetUnitPropertiesContext(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("unit properties: %w", err)
	}
	var svc map[string]any
	if strings.HasSuffix(name, ".service") {
		svc, err = conn.GetUnitTypePropertiesContext(ctx, name, "Service")
		if err != nil && propString(unit, "LoadState") == "loaded" {
			return nil, fmt.Errorf("service properties: %w", err)
		}
	}
	return unitStateFromProps(name, unit, svc), nil
}

// unitStateFromProps builds the state of unit name from the properties of
// its org.freedesktop.systemd1.Unit interface and, for a service, of its
// org.freedesktop.systemd1.Service interface (svc nil otherwise). Missing
// or mistyped properties stay zero. The evidence quotes the values in
// systemctl show's Key=Value form, so that an operator can compare with
// `systemctl show <unit>`.
func unitStateFromProps(name string, unit, svc map[string]any) *nodediagv1.UnitState {
	st := &nodediagv1.UnitState{
		Name:          name,
		LoadState:     propString(unit, "LoadState"),
		ActiveState:   propString(unit, "ActiveState"),
		SubState:      propString(unit, "SubState"),
		ActiveEnter:   propTime(unit, "ActiveEnterTimestamp"),
		InactiveEnter: propTime(unit, "InactiveEnterTimestamp"),
		Source:        unitsSourceDBus,
	}
	excerpt := fmt.Sprintf("LoadState=%s ActiveState=%s SubState=%s", st.LoadState, st.ActiveState, st.SubState)
	if svc != nil {
		st.Result = propString(svc, "Result")
		n, _ := svc["NRestarts"].(uint32)
		st.NRestarts = n
		st.ExecMainCode, _ = svc["ExecMainCode"].(int32)
		st.ExecMainStatus, _ = svc["ExecMainStatus"].(int32)
		excerpt += fmt.Sprintf(" Result=%s NRestarts=%d ExecMainCode=%d ExecMainStatus=%d",
			st.Result, st.NRestarts, st.ExecMainCode, st.ExecMainStatus)
	}
	st.Evidence = &nodediagv1.Quote{Source: "dbus:" + name, Excerpt: excerpt}
	return st
}

func propString(m map[string]any, key string) string {
	s, _ := m[key].(string)
	return s
}

// propTime converts a systemd timestamp (µs since the epoch, 0 for never).
func propTime(m map[string]any, key string) *timestamppb.Timestamp {
	us, _ := m[key].(uint64)
	if us == 0 || us > 1<<62 {
		return nil
	}
	return timestamppb.New(time.UnixMicro(int64(us)).UTC())
}
