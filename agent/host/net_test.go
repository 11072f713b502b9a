package host_test

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/nodediag/nodediag/agent/host"
	"github.com/nodediag/nodediag/agent/host/hosttest"
	"github.com/nodediag/nodediag/internal/testenv"
)

func TestNetworkDefaultAndSet(t *testing.T) {
	h := hosttest.Tree(t, map[string]string{"etc/hostname": "node-1\n"})
	if _, ok := h.Network().(host.LocalNetwork); !ok || h.Offline() {
		t.Fatalf("default network = %#v (offline %v), want LocalNetwork", h.Network(), h.Offline())
	}
	h.Net = host.NoNetwork{}
	if !h.Offline() {
		t.Error("with Net = NoNetwork{}: not offline")
	}
	h.Net = nil
	if h.Offline() {
		t.Error("with Net = nil: still offline")
	}
}

// NoNetwork fails every call with ErrNetworkDisabled and connects nowhere:
// a listener on the address it is asked to dial sees nothing.
func TestNoNetwork(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	accepted := make(chan struct{}, 1)
	go func() {
		if c, err := l.Accept(); err == nil {
			c.Close()
			accepted <- struct{}{}
		}
	}()
	ctx := context.Background()
	var n host.Network = host.NoNetwork{}
	if _, err := n.LookupHost(ctx, "registry.k8s.io"); !errors.Is(err, host.ErrNetworkDisabled) {
		t.Errorf("LookupHost: %v, want ErrNetworkDisabled", err)
	}
	if _, err := n.DialContext(ctx, "tcp", l.Addr().String()); !errors.Is(err, host.ErrNetworkDisabled) {
		t.Errorf("DialContext: %v, want ErrNetworkDisabled", err)
	}
	// A real dial afterwards is the first connection the listener sees.
	c, err := host.LocalNetwork{}.DialContext(ctx, "tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	<-accepted
	select {
	case <-accepted:
		t.Error("the listener accepted more than the one real connection")
	default:
	}
}

// LocalNetwork resolves with its Resolver: a name that does not exist is a
// not-found DNS error from the test's resolver, never the machine's.
func TestLocalNetworkResolver(t *testing.T) {
	r, queries := testenv.NXDomainResolver(t)
	n := host.LocalNetwork{Resolver: r}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := n.LookupHost(ctx, "mirror.nodediag-test.invalid")
	var de *net.DNSError
	if !errors.As(err, &de) || !de.IsNotFound {
		t.Fatalf("LookupHost = %v, want not found", err)
	}
	// Dialling a name resolves it with the same resolver.
	if _, err := n.DialContext(ctx, "tcp", "mirror.nodediag-test.invalid:5000"); !errors.As(err, &de) || !de.IsNotFound {
		t.Fatalf("DialContext = %v, want not found", err)
	}
	if queries.Load() == 0 {
		t.Error("the test's resolver got no query")
	}
	// IP literals need no resolver.
	addrs, err := n.LookupHost(ctx, "127.0.0.1")
	if err != nil || len(addrs) != 1 || addrs[0] != "127.0.0.1" {
		t.Errorf("LookupHost(127.0.0.1) = %v, %v", addrs, err)
	}
}
