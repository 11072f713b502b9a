package server

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"log/slog"
	"math/big"
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

	unlabelledCert, unlabelledKey := unlabelledClient(t, dir)
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
			name: "certificate of the CA without a nodediag role",
			call: func(t *testing.T) error {
				return listNodes(client(t, unlabelledCert, unlabelledKey, f(dir, "ca.crt")))
			},
			want: codes.PermissionDenied, message: "no nodediag role",
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

// unlabelledClient issues, with the CA of dir, a client certificate whose
// subject has no organization: what another workload of a shared CA holds.
func unlabelledClient(t *testing.T, dir string) (certFile, keyFile string) {
	t.Helper()
	ca, err := tls.LoadX509KeyPair(filepath.Join(dir, "ca.crt"), filepath.Join(dir, "ca.key"))
	if err != nil {
		t.Fatal(err)
	}
	caCert, err := x509.ParseCertificate(ca.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(4242),
		Subject:      pkix.Name{CommonName: "some-other-workload"},
		NotBefore:    time.Now().Add(-time.Minute),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, ca.PrivateKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	certFile, keyFile = filepath.Join(out, "other.crt"), filepath.Join(out, "other.key")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}
