package testenv

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/binary"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// A Registry is Debian's docker-registry (distribution 2.8) serving on a
// free loopback port for one test: filesystem storage in a temporary
// directory, no notifications, nothing that leaves the machine. It is
// stopped by PID when the test ends.
type Registry struct {
	*Daemon
	// Addr is "127.0.0.1:<port>"; URL is "http://Addr" or "https://Addr".
	Addr, URL string
	// Dir holds config.yml, the storage (data/) and the TLS files.
	Dir string
}

// RegistryOptions shape the registry.
type RegistryOptions struct {
	// TLS, when set, makes the registry serve https with a certificate for
	// 127.0.0.1 issued by this CA.
	TLS *CA
	// Auth makes the registry demand basic auth (htpasswd): GET /v2/
	// answers 401 with WWW-Authenticate, as a private registry does.
	Auth bool
}

// registryReadyTimeout bounds the start; the registry is ready in ~40 ms.
const registryReadyTimeout = 10 * time.Second

// StartRegistry starts a registry and waits until GET /v2/ answers.
func StartRegistry(t testing.TB, o RegistryOptions) *Registry {
	t.Helper()
	bin := RequireBinary(t, "docker-registry", "docker-registry")
	dir := t.TempDir()
	r := &Registry{Dir: dir, Addr: fmt.Sprintf("127.0.0.1:%d", FreePort(t))}
	var cfg strings.Builder
	fmt.Fprintf(&cfg, "version: 0.1\nlog:\n  level: info\nstorage:\n  filesystem:\n    rootdirectory: %s\n  delete:\n    enabled: true\nhttp:\n  addr: %s\n", filepath.Join(dir, "data"), r.Addr)
	client := &http.Client{Timeout: time.Second, Transport: &http.Transport{Proxy: nil}}
	r.URL = "http://" + r.Addr
	if o.TLS != nil {
		certPEM, keyPEM := o.TLS.Issue(t, nil, []net.IP{net.IPv4(127, 0, 0, 1)})
		cert, key := filepath.Join(dir, "registry.crt"), filepath.Join(dir, "registry.key")
		writeRegistryFile(t, cert, certPEM)
		writeRegistryFile(t, key, keyPEM)
		fmt.Fprintf(&cfg, "  tls:\n    certificate: %s\n    key: %s\n", cert, key)
		client.Transport = &http.Transport{Proxy: nil, TLSClientConfig: &tls.Config{RootCAs: o.TLS.Pool()}}
		r.URL = "https://" + r.Addr
	}
	if o.Auth {
		// The hash is never checked: no test logs in.
		htpasswd := filepath.Join(dir, "htpasswd")
		writeRegistryFile(t, htpasswd, []byte("nodediag:$2y$05$0000000000000000000000000000000000000000000000000000u\n"))
		fmt.Fprintf(&cfg, "auth:\n  htpasswd:\n    realm: nodediag-test\n    path: %s\n", htpasswd)
	}
	config := filepath.Join(dir, "config.yml")
	writeRegistryFile(t, config, []byte(cfg.String()))
	r.Daemon = Start(t, []string{bin, "serve", config}, nil, "", registryReadyTimeout, func() error {
		resp, err := client.Get(r.URL + "/v2/")
		if err != nil {
			return err
		}
		resp.Body.Close()
		return nil
	})
	return r
}

func writeRegistryFile(t testing.TB, name string, b []byte) {
	t.Helper()
	if err := os.WriteFile(name, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// A CA is a certificate authority made for one test.
type CA struct {
	Cert *x509.Certificate
	key  *ecdsa.PrivateKey
	// PEM is the CA certificate, as a ca file of hosts.toml holds it.
	PEM []byte
}

// NewCA makes a self-signed CA named name.
func NewCA(t testing.TB, name string) *CA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(t),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &CA{Cert: cert, key: key, PEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// Pool is a pool holding only this CA.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.Cert)
	return p
}

// Issue makes a server certificate for the names and addresses, and its
// key, both PEM.
func (ca *CA) Issue(t testing.TB, dnsNames []string, ips []net.IP) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(t),
		Subject:      pkix.Name{CommonName: "registry"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:     dnsNames,
		IPAddresses:  ips,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
}

func serial(t testing.TB) *big.Int {
	t.Helper()
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// NXDomainResolver is a resolver whose every query goes to a DNS server on
// a loopback UDP port that answers NXDOMAIN ("no such host") to everything:
// a test of name resolution failures that sends no query to the machine's
// resolver. (A name under .invalid, RFC 6761, is not enough: the machine's
// resolver may forward it.) queries counts the questions the server got.
func NXDomainResolver(t testing.TB) (r *net.Resolver, queries *atomic.Int64) {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	queries = &atomic.Int64{}
	go func() {
		buf := make([]byte, 1500)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			if resp := nxdomain(buf[:n]); resp != nil {
				queries.Add(1)
				pc.WriteTo(resp, from)
			}
		}
	}()
	addr := pc.LocalAddr().String()
	r = &net.Resolver{
		PreferGo: true,
		Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "udp", addr)
		},
	}
	return r, queries
}

// nxdomain answers a DNS query (RFC 1035 section 4.1) with NXDOMAIN: the
// query's ID and question, flags QR, RD as asked, RA, RCODE 3, no records.
// It returns nil for what is not a query with one question.
func nxdomain(q []byte) []byte {
	const header = 12
	if len(q) < header || q[2]&0x80 != 0 || binary.BigEndian.Uint16(q[4:6]) != 1 {
		return nil
	}
	// The question: a name (labels ending with a zero byte), type, class.
	i := header
	for i < len(q) && q[i] != 0 {
		i += int(q[i]) + 1
	}
	end := i + 1 + 4
	if end > len(q) {
		return nil
	}
	resp := make([]byte, end)
	copy(resp, q[:end])
	resp[2] = 0x80 | q[2]&0x79 // QR, opcode and RD of the query
	resp[3] = 0x80 | 3         // RA, NXDOMAIN
	binary.BigEndian.PutUint16(resp[6:8], 0)
	binary.BigEndian.PutUint16(resp[8:10], 0)
	binary.BigEndian.PutUint16(resp[10:12], 0)
	return resp
}
