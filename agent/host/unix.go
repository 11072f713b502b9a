package host

import (
	"context"
	"net"
)

// DialUnix connects to the unix socket at a host path, resolved inside Root
// (symlinks included), as the node's own clients would: containerd's CRI
// socket. Connecting changes nothing on the node; what is asked over the
// connection is the caller's responsibility (read-only calls only). ctx
// bounds the connection attempt.
func (h *Host) DialUnix(ctx context.Context, name string) (net.Conn, error) {
	p, err := h.Path(name)
	if err != nil {
		return nil, err
	}
	var d net.Dialer
	return d.DialContext(ctx, "unix", p)
}
