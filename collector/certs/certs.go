// Package certs issues the certificates of nodediag's mutual TLS: a
// certificate authority, the collector's server certificate, the agents'
// client certificates and the operators' client certificates. `nodediag
// certs` is its command line.
//
// Every key is ECDSA P-256, written PKCS#8 ("PRIVATE KEY") with mode 0600.
// The layout of the directory written by Write:
//
//	ca.crt, ca.key                  the authority: ca.crt is --ca of clients and --client-ca of serve;
//	                                ca.key signs more certificates and should be kept offline
//	server.crt, server.key          the collector (serve --tls-cert/--tls-key): server auth,
//	                                DNS and IP subject alternative names as asked
//	agent.crt, agent.key            one certificate shared by every agent (client auth), or
//	agents/NAME.crt, NAME.key       one per node when names are given (CN = node name)
//	operator.crt, operator.key      the operator's CLI: sweep, nodes, node (client auth)
//
// Client certificates say who they are for in their subject, as Kubernetes
// does with O=system:nodes: agents carry O=nodediag:agents and CN the node
// name (or nodediag-agent when shared), operators carry O=nodediag:operators
// and CN the operator's name, so that a collector can tell them apart and
// bind an agent's certificate to the node it reports for.
//
// The same files can come from cert-manager instead: see CertManagerExample.
package certs

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

// Subject organizations of client certificates (see the package comment).
const (
	AgentOrganization    = "nodediag:agents"
	OperatorOrganization = "nodediag:operators"
)

// Default names of certificates that are not named by the caller.
const (
	CAName          = "nodediag-ca"
	SharedAgentName = "nodediag-agent"
	DefaultOperator = "operator"
)

// dnsName is a DNS-1123 subdomain, what Kubernetes node names are (as
// k8s.io/apimachinery's IsDNS1123Subdomain, without its dependencies). It
// also keeps agent names safe as file names: no slash, no "..".
var dnsName = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)

const dnsNameRule = "must be lower-case letters, digits, '-' and '.', start and end with a letter or digit, at most 253 characters"

func isDNSName(s string) bool { return len(s) <= 253 && dnsName.MatchString(s) }

// ErrExists is returned (wrapped) by Write when a file it would write
// exists already and force is false.
var ErrExists = errors.New("file exists")

// Options says what to issue.
type Options struct {
	// ServerNames are the DNS names agents and operators dial the collector
	// by; the first is also the server certificate's common name. At least
	// one name or IP is needed.
	ServerNames []string
	// ServerIPs are the IP addresses they dial it by.
	ServerIPs []net.IP
	// Agents names one client certificate per node (CN = the name, which
	// must be a DNS-1123 subdomain like a Kubernetes node name). Empty: one
	// certificate shared by every agent.
	Agents []string
	// Operator is the common name of the operator's client certificate
	// (DefaultOperator when empty).
	Operator string
	// Validity is how long the server and client certificates are valid
	// for; CAValidity how long the authority is.
	Validity, CAValidity time.Duration
	// Now is the issuing time (time.Now when zero). Certificates are valid
	// from five minutes before it, for clocks a little behind.
	Now time.Time
}

// Pair is one issued certificate and its key, with the file names they are
// written to (relative to the directory given to Write).
type Pair struct {
	// Name is what the certificate is for: the CA's, a server name, a node
	// name, an operator name.
	Name              string
	CertFile, KeyFile string
	Cert              *x509.Certificate
	CertPEM, KeyPEM   []byte
}

// Set is everything Issue produced.
type Set struct {
	CA, Server Pair
	// Agents holds one pair (agent.crt) when the certificate is shared, or
	// one per node (agents/NAME.crt).
	Agents   []Pair
	Operator Pair
	// Shared says that Agents holds the one certificate shared by agents.
	Shared bool
}

// Issue creates a CA and the certificates it signs, in memory.
func Issue(o Options) (*Set, error) {
	if len(o.ServerNames) == 0 && len(o.ServerIPs) == 0 {
		return nil, errors.New("the server certificate needs at least one DNS name or IP address")
	}
	// A server "name" that is an IP address is one: clients dialling an IP
	// verify it against the IP SANs, never the DNS ones.
	var names []string
	ips := append([]net.IP(nil), o.ServerIPs...)
	for _, n := range o.ServerNames {
		if ip := net.ParseIP(n); ip != nil {
			ips = append(ips, ip)
		} else {
			names = append(names, n)
		}
	}
	o.ServerNames, o.ServerIPs = names, ips
	for _, n := range o.ServerNames {
		// Wildcards are allowed in server names ("*.nodediag.svc").
		if !isDNSName(strings.TrimPrefix(n, "*.")) {
			return nil, fmt.Errorf("server name %q: %s", n, dnsNameRule)
		}
	}
	if err := validateAgents(o.Agents); err != nil {
		return nil, err
	}
	if o.Operator == "" {
		o.Operator = DefaultOperator
	}
	if o.Validity <= 0 || o.CAValidity <= 0 {
		return nil, errors.New("validity must be positive")
	}
	if o.CAValidity < o.Validity {
		// A certificate outliving its issuer stops verifying when the
		// issuer expires; say so now rather than on that day.
		return nil, fmt.Errorf("the CA's validity (%s) is shorter than the certificates' (%s)", o.CAValidity, o.Validity)
	}
	if o.Now.IsZero() {
		o.Now = time.Now()
	}
	notBefore := o.Now.Add(-5 * time.Minute).UTC().Truncate(time.Second)

	s := &Set{}
	var caKey *ecdsa.PrivateKey
	var err error
	s.CA, caKey, err = issue(CAName, "ca", nil, nil, &x509.Certificate{
		Subject:               pkix.Name{CommonName: CAName, Organization: []string{"nodediag"}},
		NotBefore:             notBefore,
		NotAfter:              notBefore.Add(o.CAValidity),
		IsCA:                  true,
		BasicConstraintsValid: true,
		// The CA signs leaf certificates only.
		MaxPathLenZero: true,
		KeyUsage:       x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	})
	if err != nil {
		return nil, err
	}
	leaf := func(name, base string, subject pkix.Name, eku x509.ExtKeyUsage, dns []string, ips []net.IP) (Pair, error) {
		p, _, err := issue(name, base, s.CA.Cert, caKey, &x509.Certificate{
			Subject:               subject,
			NotBefore:             notBefore,
			NotAfter:              notBefore.Add(o.Validity),
			BasicConstraintsValid: true,
			// ECDSA keys sign; they do not encipher keys.
			KeyUsage:    x509.KeyUsageDigitalSignature,
			ExtKeyUsage: []x509.ExtKeyUsage{eku},
			DNSNames:    dns,
			IPAddresses: ips,
		})
		return p, err
	}
	serverCN := ""
	if len(o.ServerNames) > 0 {
		serverCN = o.ServerNames[0]
	} else {
		serverCN = o.ServerIPs[0].String()
	}
	if s.Server, err = leaf(serverCN, "server", pkix.Name{CommonName: serverCN}, x509.ExtKeyUsageServerAuth, o.ServerNames, o.ServerIPs); err != nil {
		return nil, err
	}
	if len(o.Agents) == 0 {
		s.Shared = true
		p, err := leaf(SharedAgentName, "agent", pkix.Name{CommonName: SharedAgentName, Organization: []string{AgentOrganization}}, x509.ExtKeyUsageClientAuth, nil, nil)
		if err != nil {
			return nil, err
		}
		s.Agents = []Pair{p}
	}
	for _, n := range o.Agents {
		p, err := agentLeaf(n, s.CA.Cert, caKey, notBefore, o.Validity)
		if err != nil {
			return nil, err
		}
		s.Agents = append(s.Agents, p)
	}
	if s.Operator, err = leaf(o.Operator, "operator", pkix.Name{CommonName: o.Operator, Organization: []string{OperatorOrganization}}, x509.ExtKeyUsageClientAuth, nil, nil); err != nil {
		return nil, err
	}
	return s, nil
}

// validateAgents checks per-node agent names.
func validateAgents(names []string) error {
	seen := map[string]bool{}
	for _, n := range names {
		if !isDNSName(n) {
			return fmt.Errorf("agent name %q: %s", n, dnsNameRule)
		}
		if n == SharedAgentName {
			return fmt.Errorf("agent name %q is the shared agent certificate's: a collector would take a certificate with that name for the shared one, not bound to a node", n)
		}
		if seen[n] {
			return fmt.Errorf("agent name %q given twice", n)
		}
		seen[n] = true
	}
	return nil
}

// agentLeaf issues the certificate of node n (agents/n.crt), signed by ca.
// The node name is also a DNS SAN: verifiers that look only at SANs (as
// Go's VerifyHostname does) see the same identity.
func agentLeaf(n string, ca *x509.Certificate, caKey *ecdsa.PrivateKey, notBefore time.Time, validity time.Duration) (Pair, error) {
	p, _, err := issue(n, filepath.Join("agents", n), ca, caKey, &x509.Certificate{
		Subject:               pkix.Name{CommonName: n, Organization: []string{AgentOrganization}},
		NotBefore:             notBefore,
		NotAfter:              notBefore.Add(validity),
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		DNSNames:              []string{n},
	})
	return p, err
}

// LoadCA reads the authority Write wrote in dir (ca.crt, ca.key), to issue
// more certificates with it.
func LoadCA(dir string) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	pair, err := tls.LoadX509KeyPair(filepath.Join(dir, "ca.crt"), filepath.Join(dir, "ca.key"))
	if err != nil {
		return nil, nil, fmt.Errorf("loading the CA of %s: %w", dir, err)
	}
	cert, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return nil, nil, fmt.Errorf("the CA of %s: %w", dir, err)
	}
	key, ok := pair.PrivateKey.(*ecdsa.PrivateKey)
	if !ok || !cert.IsCA {
		return nil, nil, fmt.Errorf("%s/ca.crt is not a nodediag CA (an ECDSA CA certificate and its key)", dir)
	}
	return cert, key, nil
}

// IssueAgents issues per-node agent certificates with an existing CA (one
// that LoadCA read): a fleet that grows gets certificates for its new nodes
// without replacing the CA every other certificate chains to. A
// certificate never outlives its CA: validity is cut at the CA's end.
func IssueAgents(ca *x509.Certificate, caKey *ecdsa.PrivateKey, names []string, validity time.Duration, now time.Time) ([]Pair, error) {
	if len(names) == 0 {
		return nil, errors.New("no agent name given")
	}
	if err := validateAgents(names); err != nil {
		return nil, err
	}
	if validity <= 0 {
		return nil, errors.New("validity must be positive")
	}
	if now.IsZero() {
		now = time.Now()
	}
	notBefore := now.Add(-5 * time.Minute).UTC().Truncate(time.Second)
	if !notBefore.Add(validity).Before(ca.NotAfter) {
		validity = ca.NotAfter.Sub(notBefore)
	}
	if validity <= 0 {
		return nil, fmt.Errorf("the CA expired on %s", ca.NotAfter.Format(time.RFC3339))
	}
	var out []Pair
	for _, n := range names {
		p, err := agentLeaf(n, ca, caKey, notBefore, validity)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

// issue makes a key and a certificate from tmpl, signed by parent (self-signed
// when parent is nil). base is the file name without extension.
func issue(name, base string, parent *x509.Certificate, parentKey *ecdsa.PrivateKey, tmpl *x509.Certificate) (Pair, *ecdsa.PrivateKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return Pair{}, nil, fmt.Errorf("generating the key of %s: %w", name, err)
	}
	// 128 random bits: unique without a serial-number database.
	tmpl.SerialNumber, err = rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return Pair{}, nil, fmt.Errorf("serial number of %s: %w", name, err)
	}
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		return Pair{}, nil, fmt.Errorf("signing the certificate of %s: %w", name, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return Pair{}, nil, fmt.Errorf("parsing the certificate of %s: %w", name, err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return Pair{}, nil, fmt.Errorf("encoding the key of %s: %w", name, err)
	}
	return Pair{
		Name:     name,
		CertFile: base + ".crt",
		KeyFile:  base + ".key",
		Cert:     cert,
		CertPEM:  pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:   pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
	}, key, nil
}

// Pairs lists every pair of the set: the CA, the server, the agents, the
// operator.
func (s *Set) Pairs() []Pair {
	out := []Pair{s.CA, s.Server}
	out = append(out, s.Agents...)
	return append(out, s.Operator)
}

// Write writes the set under dir (created 0700 if missing): certificates
// 0644, keys 0600. Without force it writes nothing when any of the files
// exists, and returns an error wrapping ErrExists that names them; with
// force it replaces them. Each file is written to a temporary name and
// renamed (linked, without force) into place, so that a reader never sees a
// half-written key and a replaced key never keeps an old file's mode.
//
// It returns the paths written, in order.
func Write(dir string, s *Set, force bool) ([]string, error) {
	return WritePairs(dir, s.Pairs(), force)
}

// WritePairs writes pairs under dir as Write does.
func WritePairs(dir string, pairs []Pair, force bool) ([]string, error) {
	type file struct {
		path string
		data []byte
		mode os.FileMode
	}
	var files []file
	for _, p := range pairs {
		files = append(files,
			file{filepath.Join(dir, p.CertFile), p.CertPEM, 0o644},
			file{filepath.Join(dir, p.KeyFile), p.KeyPEM, 0o600})
	}
	if !force {
		var exist []string
		for _, f := range files {
			if _, err := os.Lstat(f.path); err == nil {
				exist = append(exist, f.path)
			} else if !errors.Is(err, os.ErrNotExist) {
				return nil, fmt.Errorf("checking %s: %w", f.path, err)
			}
		}
		if len(exist) > 0 {
			return nil, fmt.Errorf("%w: %s (pass --force to replace them)", ErrExists, strings.Join(exist, ", "))
		}
	}
	var written []string
	for _, f := range files {
		if err := os.MkdirAll(filepath.Dir(f.path), 0o700); err != nil {
			return written, fmt.Errorf("creating %s: %w", filepath.Dir(f.path), err)
		}
		if err := writeFile(f.path, f.data, f.mode, force); err != nil {
			return written, err
		}
		written = append(written, f.path)
	}
	return written, nil
}

func writeFile(path string, data []byte, mode os.FileMode, force bool) (err error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	defer func() {
		// After a rename the temporary name is gone; after a link, or on
		// error, it is removed here.
		if rmErr := os.Remove(tmp.Name()); rmErr != nil && !errors.Is(rmErr, os.ErrNotExist) && err == nil {
			err = fmt.Errorf("removing %s: %w", tmp.Name(), rmErr)
		}
	}()
	// CreateTemp makes the file 0600 already: a key is never readable by
	// others, not even while it is being written.
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if force {
		if err := os.Rename(tmp.Name(), path); err != nil {
			return fmt.Errorf("writing %s: %w", path, err)
		}
		return nil
	}
	// Link fails if path appeared since the check: never overwrite.
	if err := os.Link(tmp.Name(), path); err != nil {
		if errors.Is(err, os.ErrExist) {
			return fmt.Errorf("%w: %s (pass --force to replace it)", ErrExists, path)
		}
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}
