package server

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	"github.com/nodediag/nodediag/collector/certs"
	"github.com/nodediag/nodediag/collector/store"
	"github.com/nodediag/nodediag/internal/tlsconfig"
	nodediagv1 "github.com/nodediag/nodediag/proto/nodediag/v1"
)

func issueCerts(t *testing.T) string {
	t.Helper()
	set, err := certs.Issue(certs.Options{
		ServerIPs: []net.IP{net.IPv4(127, 0, 0, 1)},
		Agents:    []string{"node-a"},
		Validity:  time.Hour, CAValidity: 2 * time.Hour,
	})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if _, err := certs.Write(dir, set, false); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestMutualTLS runs the collector on loopback TCP with mutual TLS and
// checks who may call what.
func TestMutualTLS(t *testing.T) {
	dir := issueCerts(t)
	other := issueCerts(t) // another PKI
	f := func(d, name string) string { return filepath.Join(d, name) }

	srvTLS, err := tlsconfig.NewServer(f(dir, "server.crt"), f(dir, "server.key"), f(dir, "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(t.TempDir(), store.Options{Durability: store.ProcessCrash})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	srv, err := New(Options{Store: st, TLS: srvTLS, Registerer: prometheus.NewRegistry(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(lis) }()
	t.Cleanup(func() {
		if err := srv.Shutdown(context.Background()); err != nil {
			t.Error(err)
		}
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})

	dial := func(t *testing.T, cfg *tls.Config) *grpc.ClientConn {
		t.Helper()
		conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		return conn
	}
	client := func(t *testing.T, cert, key, ca string) *grpc.ClientConn {
		t.Helper()
		cfg, err := tlsconfig.NewClient(cert, key, ca)
		if err != nil {
			t.Fatal(err)
		}
		return dial(t, cfg)
	}
	caPEM, err := os.ReadFile(f(dir, "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)

	agentConn := client(t, f(dir, "agents/node-a.crt"), f(dir, "agents/node-a.key"), f(dir, "ca.crt"))
	operatorConn := client(t, f(dir, "operator.crt"), f(dir, "operator.key"), f(dir, "ca.crt"))
	healthy := join(t, agentConn, "node-a")

	listNodes := func(conn *grpc.ClientConn) error {
		_, err := nodediagv1.NewFleetClient(conn).ListNodes(context.Background(), &nodediagv1.ListNodesRequest{})
		return err
	}
	connectErr := func(conn *grpc.ClientConn, node string) error {
		_, _, err := tryConnect(conn, node)
		return err
	}
	for _, tc := range []struct {
		name    string
		call    func(t *testing.T) error
		want    codes.Code
		message string
	}{
		{
			name: "no client certificate, fleet",
			call: func(t *testing.T) error {
				return listNodes(dial(t, &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS13}))
			},
			want: codes.Unauthenticated, message: "no client certificate",
		},
		{
			name: "no client certificate, agent",
			call: func(t *testing.T) error {
				return connectErr(dial(t, &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS13}), "node-a")
			},
			want: codes.Unauthenticated, message: "no client certificate",
		},
		{
			name: "certificate of another CA",
			call: func(t *testing.T) error {
				return listNodes(client(t, f(other, "operator.crt"), f(other, "operator.key"), f(dir, "ca.crt")))
			},
			want: codes.Unauthenticated, message: "not trusted",
		},
		{
			name:    "agent certificate on the fleet service",
			call:    func(t *testing.T) error { return listNodes(agentConn) },
			want:    codes.PermissionDenied,
			message: "operator",
		},
		{
			name:    "agent certificate for another node",
			call:    func(t *testing.T) error { return connectErr(agentConn, "node-b") },
			want:    codes.PermissionDenied,
			message: `may not report for node "node-b"`,
		},
		{
			name:    "operator certificate on the collector service",
			call:    func(t *testing.T) error { return connectErr(operatorConn, "node-a") },
			want:    codes.PermissionDenied,
			message: "agent",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := metricValue(t, srv.metrics.refused.WithLabelValues(tc.want.String()))
			err := tc.call(t)
			st := status.Convert(err)
			if st.Code() != tc.want || !strings.Contains(st.Message(), tc.message) {
				t.Errorf("got %v, want %s containing %q", err, tc.want, tc.message)
			}
			if got := metricValue(t, srv.metrics.refused.WithLabelValues(tc.want.String())); got != before+1 {
				t.Errorf("refused_total{code=%s} = %v, want %v", tc.want, got, before+1)
			}
			// The agent's stream is unaffected.
			healthy.expectAck(t, healthy.upload(t, report("node-a", ""), "interval"))
		})
	}

	// The operator reads the fleet.
	resp, err := nodediagv1.NewFleetClient(operatorConn).ListNodes(context.Background(), &nodediagv1.ListNodesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Nodes) != 1 || resp.Nodes[0].NodeName != "node-a" || !resp.Nodes[0].Connected {
		t.Errorf("ListNodes as the operator: %v", resp.Nodes)
	}
}
