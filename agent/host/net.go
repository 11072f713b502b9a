package host

import (
	"context"
	"errors"
	"fmt"
	"net"
)

// ErrNetworkDisabled is returned (wrapped) by NoNetwork: the agent was told
// to stay off the network (--offline).
var ErrNetworkDisabled = errors.New("network access is disabled")

// Network is how the agent reaches the network from the node: name
// resolution and TCP connections. It is a capability of the Host, as Runner
// is for commands: the agent told --offline gets NoNetwork, whose every call
// fails without touching the network.
//
// Implementations never use a proxy: what is measured is whether the node
// itself reaches an address.
type Network interface {
	// LookupHost resolves a host name to its addresses ("10.0.0.4",
	// "fd00::4"), in the resolver's order. A name that does not exist gives
	// a *net.DNSError with IsNotFound set.
	LookupHost(ctx context.Context, host string) ([]string, error)
	// DialContext connects to address ("10.0.0.4:443") over network
	// ("tcp"); ctx bounds the connection attempt only.
	DialContext(ctx context.Context, network, address string) (net.Conn, error)
}

// LocalNetwork is this process's network: the node's own on a VM (az vm
// run-command) and in the DaemonSet with hostNetwork.
//
// Names are resolved with this process's resolver configuration
// (/etc/resolv.conf and /etc/hosts as the agent sees them). In the
// DaemonSet that is the node's only with dnsPolicy: Default; under
// ClusterFirstWithHostNet, cluster DNS answers first.
type LocalNetwork struct {
	// Resolver resolves names; nil is net.DefaultResolver. Tests point it
	// at a resolver on loopback so that no query leaves the machine.
	Resolver *net.Resolver
}

var _ Network = LocalNetwork{}

func (n LocalNetwork) resolver() *net.Resolver {
	if n.Resolver != nil {
		return n.Resolver
	}
	return net.DefaultResolver
}

// LookupHost implements Network.
func (n LocalNetwork) LookupHost(ctx context.Context, host string) ([]string, error) {
	return n.resolver().LookupHost(ctx, host)
}

// DialContext implements Network. A name in address is resolved with
// Resolver.
func (n LocalNetwork) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	d := net.Dialer{Resolver: n.resolver()}
	return d.DialContext(ctx, network, address)
}

// NoNetwork touches nothing: every call fails with an error wrapping
// ErrNetworkDisabled.
type NoNetwork struct{}

var _ Network = NoNetwork{}

// LookupHost implements Network.
func (NoNetwork) LookupHost(_ context.Context, host string) ([]string, error) {
	return nil, fmt.Errorf("lookup %s: %w", host, ErrNetworkDisabled)
}

// DialContext implements Network.
func (NoNetwork) DialContext(_ context.Context, network, address string) (net.Conn, error) {
	return nil, fmt.Errorf("dial %s %s: %w", network, address, ErrNetworkDisabled)
}

// Network returns h's network: Net, else LocalNetwork{} (every Host from
// New reaches the network until told otherwise).
func (h *Host) Network() Network {
	if h.Net != nil {
		return h.Net
	}
	return LocalNetwork{}
}

// Offline says whether h must not touch the network: its Network is
// NoNetwork. A probe that only measures the network then reports that it
// did not, instead of a failure at every step.
func (h *Host) Offline() bool {
	_, off := h.Network().(NoNetwork)
	return off
}
