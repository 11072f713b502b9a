// Package tlsconfig builds the TLS configurations of nodediag's mutual TLS
// from PEM files: the collector's (`nodediag serve --tls-cert --tls-key
// --client-ca`) and its clients' (agents and the operator's CLI: --tls-cert
// --tls-key --ca). The files are those `nodediag certs` writes or the
// Secrets cert-manager keeps (tls.crt, tls.key, ca.crt).
//
// Files are re-read when they change (size, modification time or inode):
// cert-manager renews certificates in place, and a collector or an agent
// must not need a restart to present the new one. The check is a stat of
// each file at each handshake; handshakes are rare (streams are long-lived).
// A file that changed but does not load (a renewal half-written, a key that
// does not match) leaves the previous configuration in use.
//
// Both sides demand TLS 1.3: both are nodediag, and 1.3 leaves no cipher
// suite to choose.
//
// The collector requests a client certificate during the handshake but does
// not verify it there (tls.RequestClientCert): it verifies it per RPC with
// VerifyClient, so that a client without a valid certificate gets a gRPC
// status it can act on (Unauthenticated, with the reason) instead of a
// broken handshake that looks like a network failure (Unavailable) and
// would be retried forever.
package tlsconfig

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"
)

// ErrNoClientCertificate is returned (wrapped) by VerifyClient when the
// client presented no certificate.
var ErrNoClientCertificate = errors.New("no client certificate")

// ErrUntrustedClient is returned (wrapped) by VerifyClient when the client's
// certificate does not verify against the client CA (unknown authority,
// expired, not for client authentication).
var ErrUntrustedClient = errors.New("client certificate not trusted")

// Server is the collector's side: its certificate and key, and the CA that
// signs its clients' certificates.
type Server struct {
	cert *reloader[*tls.Certificate]
	ca   *reloader[*x509.CertPool]
	now  func() time.Time
}

// NewServer loads the collector's certificate and key and the client CA.
// Every file must load now: a mistake is reported at startup, not at the
// first handshake.
func NewServer(certFile, keyFile, clientCAFile string) (*Server, error) {
	if certFile == "" || keyFile == "" || clientCAFile == "" {
		return nil, errors.New("mutual TLS needs a certificate, its key and the client CA")
	}
	cert, err := newReloader(func() (*tls.Certificate, error) { return loadKeyPair(certFile, keyFile) }, certFile, keyFile)
	if err != nil {
		return nil, err
	}
	ca, err := newReloader(func() (*x509.CertPool, error) { return loadPool(clientCAFile) }, clientCAFile)
	if err != nil {
		return nil, err
	}
	return &Server{cert: cert, ca: ca, now: time.Now}, nil
}

// Config is the server's tls.Config: TLS 1.3, its certificate (re-read when
// the files change), a client certificate requested but verified by
// VerifyClient rather than by the handshake (see the package comment).
//
// No acceptable-CA list is sent to clients, so that a client with a
// certificate from another CA still presents it and hears why it is refused
// instead of presenting none.
func (s *Server) Config() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS13,
		ClientAuth: tls.RequestClientCert,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			return s.cert.get(), nil
		},
	}
}

// VerifyClient verifies the client certificate of a connection against the
// client CA, as tls.RequireAndVerifyClientCert would: chain to the CA,
// validity dates, extended key usage client authentication. It returns the
// client's (leaf) certificate. The handshake already proved that the client
// holds the certificate's key.
func (s *Server) VerifyClient(cs tls.ConnectionState) (*x509.Certificate, error) {
	if len(cs.PeerCertificates) == 0 {
		return nil, ErrNoClientCertificate
	}
	leaf := cs.PeerCertificates[0]
	inter := x509.NewCertPool()
	for _, c := range cs.PeerCertificates[1:] {
		inter.AddCert(c)
	}
	_, err := leaf.Verify(x509.VerifyOptions{
		Roots:         s.ca.get(),
		Intermediates: inter,
		CurrentTime:   s.now(),
		KeyUsages:     []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrUntrustedClient, Describe(leaf), err)
	}
	return leaf, nil
}

// NewClient is the configuration of a client of the collector (an agent,
// the operator's CLI): its certificate and key (re-read when the files
// change), and the CA the collector's certificate must chain to. The server
// name to verify is the host of the address dialled (gRPC sets it).
func NewClient(certFile, keyFile, caFile string) (*tls.Config, error) {
	if certFile == "" || keyFile == "" || caFile == "" {
		return nil, errors.New("mutual TLS needs a client certificate, its key and the CA of the collector")
	}
	cert, err := newReloader(func() (*tls.Certificate, error) { return loadKeyPair(certFile, keyFile) }, certFile, keyFile)
	if err != nil {
		return nil, err
	}
	pool, err := loadPool(caFile)
	if err != nil {
		return nil, err
	}
	return &tls.Config{
		MinVersion: tls.VersionTLS13,
		RootCAs:    pool,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return cert.get(), nil
		},
	}, nil
}

// Describe names a certificate in messages: its subject and serial number.
func Describe(c *x509.Certificate) string {
	return fmt.Sprintf("certificate %q (serial %s)", c.Subject.String(), c.SerialNumber.Text(16))
}

func loadKeyPair(certFile, keyFile string) (*tls.Certificate, error) {
	c, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("loading the key pair %s, %s: %w", certFile, keyFile, err)
	}
	return &c, nil
}

func loadPool(caFile string) (*x509.CertPool, error) {
	b, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("reading the CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("%s holds no PEM certificate", caFile)
	}
	return pool, nil
}

// reloader keeps a value loaded from files and loads it again when one of
// the files changed since.
type reloader[T any] struct {
	files []string
	load  func() (T, error)

	mu    sync.Mutex
	val   T
	stamp []os.FileInfo
}

func newReloader[T any](load func() (T, error), files ...string) (*reloader[T], error) {
	r := &reloader[T]{files: files, load: load}
	st, err := r.stat()
	if err != nil {
		return nil, err
	}
	if r.val, err = load(); err != nil {
		return nil, err
	}
	r.stamp = st
	return r, nil
}

func (r *reloader[T]) stat() ([]os.FileInfo, error) {
	st := make([]os.FileInfo, len(r.files))
	for i, f := range r.files {
		fi, err := os.Stat(f)
		if err != nil {
			return nil, err
		}
		st[i] = fi
	}
	return st, nil
}

// get returns the value, loaded again first if a file changed. A file that
// cannot be read or loaded now leaves the previous value: better the old
// certificate for a while than no handshake at all. The change is noticed
// again at the next call, so a renewal that was half-written is picked up
// once complete.
func (r *reloader[T]) get() T {
	r.mu.Lock()
	defer r.mu.Unlock()
	st, err := r.stat()
	if err != nil || same(st, r.stamp) {
		return r.val
	}
	if v, err := r.load(); err == nil {
		r.val, r.stamp = v, st
	}
	return r.val
}

func same(a, b []os.FileInfo) bool {
	for i := range a {
		if !os.SameFile(a[i], b[i]) || a[i].Size() != b[i].Size() || !a[i].ModTime().Equal(b[i].ModTime()) {
			return false
		}
	}
	return true
}
