package certs

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"
)

var issueTime = time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)

func opts() Options {
	return Options{
		ServerNames: []string{"collector.nodediag.svc", "localhost", "127.0.0.1"},
		ServerIPs:   []net.IP{net.ParseIP("::1")},
		Validity:    24 * time.Hour,
		CAValidity:  48 * time.Hour,
		Now:         issueTime,
	}
}

// writeSet issues o and writes it under a fresh directory.
func writeSet(t *testing.T, o Options) (string, *Set) {
	t.Helper()
	s, err := Issue(o)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "pki")
	if _, err := Write(dir, s, false); err != nil {
		t.Fatal(err)
	}
	return dir, s
}

func readCert(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		t.Fatalf("%s holds no certificate", path)
	}
	pair, err := tls.X509KeyPair(b, mustRead(t, strings.TrimSuffix(path, ".crt")+".key"))
	if err != nil {
		t.Fatalf("%s and its key do not pair: %v", path, err)
	}
	return pair.Leaf
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestLayoutAndModes(t *testing.T) {
	for _, tc := range []struct {
		name   string
		agents []string
		want   []string
	}{
		{
			name: "shared agent certificate",
			want: []string{"agent.crt", "agent.key", "ca.crt", "ca.key", "operator.crt", "operator.key", "server.crt", "server.key"},
		},
		{
			name:   "one certificate per node",
			agents: []string{"node-a", "node-b.example"},
			want: []string{"agents/", "agents/node-a.crt", "agents/node-a.key", "agents/node-b.example.crt", "agents/node-b.example.key",
				"ca.crt", "ca.key", "operator.crt", "operator.key", "server.crt", "server.key"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := opts()
			o.Agents = tc.agents
			dir, _ := writeSet(t, o)
			var got []string
			err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
				if err != nil || p == dir {
					return err
				}
				rel, _ := filepath.Rel(dir, p)
				fi, err := d.Info()
				if err != nil {
					return err
				}
				switch {
				case d.IsDir():
					rel += "/"
					if fi.Mode().Perm() != 0o700 {
						t.Errorf("%s: mode %v, want 0700", rel, fi.Mode().Perm())
					}
				case strings.HasSuffix(p, ".key"):
					if fi.Mode().Perm() != 0o600 {
						t.Errorf("%s: mode %v, want 0600", rel, fi.Mode().Perm())
					}
					block := mustRead(t, p)
					if !bytes.HasPrefix(block, []byte("-----BEGIN PRIVATE KEY-----\n")) {
						t.Errorf("%s is not a PKCS#8 PEM key: %.30q", rel, block)
					}
				default:
					if fi.Mode().Perm() != 0o644 {
						t.Errorf("%s: mode %v, want 0644", rel, fi.Mode().Perm())
					}
				}
				got = append(got, rel)
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("files (-want +got):\n%s", d)
			}
		})
	}
}

func TestChainVerifies(t *testing.T) {
	o := opts()
	o.Agents = []string{"node-a"}
	o.Operator = "alice"
	dir, _ := writeSet(t, o)
	ca := readCert(t, filepath.Join(dir, "ca.crt"))
	if !ca.IsCA || ca.MaxPathLen != 0 || !ca.MaxPathLenZero || ca.KeyUsage&x509.KeyUsageCertSign == 0 {
		t.Errorf("CA: IsCA %v MaxPathLen %d zero %v KeyUsage %v", ca.IsCA, ca.MaxPathLen, ca.MaxPathLenZero, ca.KeyUsage)
	}
	if got, want := ca.NotAfter.Sub(ca.NotBefore), 48*time.Hour; got != want {
		t.Errorf("CA validity %s, want %s", got, want)
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	at := issueTime.Add(time.Hour)

	for _, tc := range []struct {
		name     string
		file     string
		usage    x509.ExtKeyUsage
		wrong    x509.ExtKeyUsage
		cn       string
		org      []string
		dns      []string
		ips      []string
		hostname string
	}{
		{name: "server", file: "server.crt", usage: x509.ExtKeyUsageServerAuth, wrong: x509.ExtKeyUsageClientAuth,
			cn: "collector.nodediag.svc", dns: []string{"collector.nodediag.svc", "localhost"}, ips: []string{"::1", "127.0.0.1"},
			hostname: "127.0.0.1"},
		{name: "agent", file: "agents/node-a.crt", usage: x509.ExtKeyUsageClientAuth, wrong: x509.ExtKeyUsageServerAuth,
			cn: "node-a", org: []string{AgentOrganization}, dns: []string{"node-a"}},
		{name: "operator", file: "operator.crt", usage: x509.ExtKeyUsageClientAuth, wrong: x509.ExtKeyUsageServerAuth,
			cn: "alice", org: []string{OperatorOrganization}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := readCert(t, filepath.Join(dir, tc.file))
			if _, ok := c.PublicKey.(*ecdsa.PublicKey); !ok || c.PublicKey.(*ecdsa.PublicKey).Curve != elliptic.P256() {
				t.Errorf("key is %T, want ECDSA P-256", c.PublicKey)
			}
			if _, err := c.Verify(x509.VerifyOptions{Roots: roots, CurrentTime: at, KeyUsages: []x509.ExtKeyUsage{tc.usage}}); err != nil {
				t.Errorf("does not verify for its use: %v", err)
			}
			if _, err := c.Verify(x509.VerifyOptions{Roots: roots, CurrentTime: at, KeyUsages: []x509.ExtKeyUsage{tc.wrong}}); err == nil {
				t.Errorf("verifies for the other use (%v) too", tc.wrong)
			}
			if _, err := c.Verify(x509.VerifyOptions{Roots: roots, CurrentTime: issueTime.Add(25 * time.Hour), KeyUsages: []x509.ExtKeyUsage{tc.usage}}); err == nil {
				t.Error("verifies after its validity")
			}
			if tc.hostname != "" {
				if err := c.VerifyHostname(tc.hostname); err != nil {
					t.Error(err)
				}
			}
			var ips []string
			for _, ip := range c.IPAddresses {
				ips = append(ips, ip.String())
			}
			got := struct {
				CN            string
				Org, DNS, IPs []string
			}{c.Subject.CommonName, c.Subject.Organization, c.DNSNames, ips}
			want := struct {
				CN            string
				Org, DNS, IPs []string
			}{tc.cn, tc.org, tc.dns, tc.ips}
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("identity (-want +got):\n%s", d)
			}
			if c.IsCA || c.KeyUsage != x509.KeyUsageDigitalSignature {
				t.Errorf("leaf: IsCA %v KeyUsage %v", c.IsCA, c.KeyUsage)
			}
		})
	}
}

// handshake runs a TLS handshake on loopback between a server built from
// server files and a client built from client files, both as the collector
// and the CLI do: mutual TLS, each side trusting its CA file.
func handshake(t *testing.T, serverDir, clientDir, serverName string) (serverErr, clientErr error) {
	t.Helper()
	srvPair, err := tls.LoadX509KeyPair(filepath.Join(serverDir, "server.crt"), filepath.Join(serverDir, "server.key"))
	if err != nil {
		t.Fatal(err)
	}
	cliPair, err := tls.LoadX509KeyPair(filepath.Join(clientDir, "operator.crt"), filepath.Join(clientDir, "operator.key"))
	if err != nil {
		t.Fatal(err)
	}
	pool := func(dir string) *x509.CertPool {
		p := x509.NewCertPool()
		if !p.AppendCertsFromPEM(mustRead(t, filepath.Join(dir, "ca.crt"))) {
			t.Fatal("no CA")
		}
		return p
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	done := make(chan error, 1)
	go func() {
		c, err := l.Accept()
		if err != nil {
			done <- err
			return
		}
		defer c.Close()
		s := tls.Server(c, &tls.Config{
			Certificates: []tls.Certificate{srvPair},
			ClientCAs:    pool(serverDir),
			ClientAuth:   tls.RequireAndVerifyClientCert,
			MinVersion:   tls.VersionTLS12,
		})
		err = s.Handshake()
		if err == nil {
			// The client reads this byte: with TLS 1.3 the client's side of
			// the handshake ends before the server has judged the client's
			// certificate, and a refusal arrives on the first read.
			_, err = s.Write([]byte{1})
		}
		done <- err
	}()
	c, err := tls.Dial("tcp", l.Addr().String(), &tls.Config{
		Certificates: []tls.Certificate{cliPair},
		RootCAs:      pool(clientDir),
		ServerName:   serverName,
		MinVersion:   tls.VersionTLS12,
	})
	if err == nil {
		_, err = io.ReadFull(c, make([]byte, 1))
		c.Close()
	}
	return <-done, err
}

func TestMutualTLS(t *testing.T) {
	// Handshakes check validity against the real clock.
	o := opts()
	o.Now = time.Time{}
	dir, _ := writeSet(t, o)
	other, _ := writeSet(t, o)
	t.Run("same CA", func(t *testing.T) {
		for _, name := range []string{"localhost", "collector.nodediag.svc", "127.0.0.1"} {
			srvErr, cliErr := handshake(t, dir, dir, name)
			if srvErr != nil || cliErr != nil {
				t.Errorf("dialling %s: server: %v, client: %v", name, srvErr, cliErr)
			}
		}
	})
	t.Run("client certificate of another CA", func(t *testing.T) {
		// The client trusts the right CA but presents a certificate of
		// another: the server refuses it.
		mixed := t.TempDir()
		for _, f := range []string{"operator.crt", "operator.key"} {
			if err := os.WriteFile(filepath.Join(mixed, f), mustRead(t, filepath.Join(other, f)), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(filepath.Join(mixed, "ca.crt"), mustRead(t, filepath.Join(dir, "ca.crt")), 0o600); err != nil {
			t.Fatal(err)
		}
		srvErr, cliErr := handshake(t, dir, mixed, "localhost")
		var unknown x509.UnknownAuthorityError
		if !errors.As(srvErr, &unknown) {
			t.Errorf("server: %v, want an unknown-authority refusal", srvErr)
		}
		if cliErr == nil {
			t.Error("client: the connection worked")
		}
	})
	t.Run("server of another CA", func(t *testing.T) {
		_, cliErr := handshake(t, other, dir, "localhost")
		var unknown x509.UnknownAuthorityError
		if !errors.As(cliErr, &unknown) {
			t.Errorf("client: %v, want an unknown-authority refusal", cliErr)
		}
	})
	t.Run("name not in the certificate", func(t *testing.T) {
		_, cliErr := handshake(t, dir, dir, "elsewhere.example")
		var host x509.HostnameError
		if !errors.As(cliErr, &host) {
			t.Errorf("client: %v, want a hostname error", cliErr)
		}
	})
}

func TestWriteRefusesToOverwrite(t *testing.T) {
	dir, first := writeSet(t, opts())
	second, err := Issue(opts())
	if err != nil {
		t.Fatal(err)
	}
	// One file of the set exists: nothing at all is written.
	if err := os.Remove(filepath.Join(dir, "server.key")); err != nil {
		t.Fatal(err)
	}
	if _, err := Write(dir, second, false); !errors.Is(err, ErrExists) || !strings.Contains(err.Error(), filepath.Join(dir, "ca.key")) {
		t.Fatalf("Write over existing files: %v, want ErrExists naming them", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "server.key")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused Write wrote server.key: %v", err)
	}
	if !bytes.Equal(mustRead(t, filepath.Join(dir, "ca.crt")), first.CA.CertPEM) {
		t.Error("a refused Write replaced ca.crt")
	}

	// With force, every file is replaced, and a key loosened by hand gets
	// its 0600 back.
	if err := os.Chmod(filepath.Join(dir, "ca.key"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Write(dir, second, true); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(mustRead(t, filepath.Join(dir, "ca.key")), second.CA.KeyPEM) {
		t.Error("forced Write did not replace ca.key")
	}
	if fi, err := os.Stat(filepath.Join(dir, "ca.key")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("ca.key after a forced Write: %v %v", fi.Mode(), err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.Contains(e.Name(), ".tmp") {
			t.Errorf("temporary file left: %s", e.Name())
		}
	}
}

func TestIssueRejects(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*Options)
		want string
	}{
		{"no server name", func(o *Options) { o.ServerNames, o.ServerIPs = nil, nil }, "at least one DNS name or IP"},
		{"bad server name", func(o *Options) { o.ServerNames = []string{"Not_A_Name"} }, `server name "Not_A_Name"`},
		{"agent name with a slash", func(o *Options) { o.Agents = []string{"../etc"} }, `agent name "../etc"`},
		{"agent name twice", func(o *Options) { o.Agents = []string{"a", "a"} }, `agent name "a" given twice`},
		{"agent named as the shared certificate", func(o *Options) { o.Agents = []string{SharedAgentName} }, "shared agent certificate"},
		{"CA shorter than leaves", func(o *Options) { o.CAValidity = time.Hour }, "CA's validity (1h0m0s) is shorter"},
		{"no validity", func(o *Options) { o.Validity = 0 }, "validity must be positive"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := opts()
			tc.edit(&o)
			_, err := Issue(o)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Issue: %v, want an error with %q", err, tc.want)
			}
		})
	}
	o := opts()
	o.ServerNames = []string{"*.nodediag.svc"}
	if _, err := Issue(o); err != nil {
		t.Errorf("wildcard server name: %v", err)
	}
}

// TestCertManagerExample checks that the documented manifests are YAML
// objects of cert-manager with the fields the flags rely on.
func TestCertManagerExample(t *testing.T) {
	var kinds []string
	for _, doc := range strings.Split(CertManagerExample, "\n---\n") {
		var obj struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
			Metadata   struct {
				Name string `json:"name"`
			} `json:"metadata"`
			Spec struct {
				Usages  []string `json:"usages"`
				Subject struct {
					Organizations []string `json:"organizations"`
				} `json:"subject"`
				PrivateKey struct {
					Algorithm string `json:"algorithm"`
					Size      int    `json:"size"`
				} `json:"privateKey"`
			} `json:"spec"`
		}
		if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
			t.Fatalf("%s: %v", doc, err)
		}
		if obj.APIVersion != "cert-manager.io/v1" {
			t.Errorf("%s: apiVersion %q", obj.Metadata.Name, obj.APIVersion)
		}
		kinds = append(kinds, obj.Kind+"/"+obj.Metadata.Name)
		if obj.Kind == "Certificate" && (obj.Spec.PrivateKey.Algorithm != "ECDSA" || obj.Spec.PrivateKey.Size != 256) {
			t.Errorf("%s: key %+v", obj.Metadata.Name, obj.Spec.PrivateKey)
		}
		switch obj.Metadata.Name {
		case "nodediag-collector":
			if !cmp.Equal(obj.Spec.Usages, []string{"digital signature", "server auth"}) {
				t.Errorf("collector usages %q", obj.Spec.Usages)
			}
		case "nodediag-agent":
			if !cmp.Equal(obj.Spec.Usages, []string{"digital signature", "client auth"}) || !cmp.Equal(obj.Spec.Subject.Organizations, []string{AgentOrganization}) {
				t.Errorf("agent usages %q, organizations %q", obj.Spec.Usages, obj.Spec.Subject.Organizations)
			}
		}
	}
	want := []string{"Issuer/nodediag-selfsigned", "Certificate/nodediag-ca", "Issuer/nodediag-ca", "Certificate/nodediag-collector", "Certificate/nodediag-agent"}
	if d := cmp.Diff(want, kinds); d != "" {
		t.Errorf("objects (-want +got):\n%s", d)
	}
}

// A fleet that grows gets per-node certificates from the CA it has: they
// chain to it, are bound to their node, never outlive the CA, and nothing
// else in the directory is rewritten.
func TestIssueAgentsWithExistingCA(t *testing.T) {
	dir := t.TempDir()
	set, err := Issue(Options{ServerNames: []string{"localhost"}, Validity: time.Hour, CAValidity: 2 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Write(dir, set, false); err != nil {
		t.Fatal(err)
	}
	before, err := os.ReadFile(filepath.Join(dir, "server.crt"))
	if err != nil {
		t.Fatal(err)
	}
	ca, key, err := LoadCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	pairs, err := IssueAgents(ca, key, []string{"node-b"}, 24*time.Hour, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	written, err := WritePairs(dir, pairs, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(written) != 2 || !strings.HasSuffix(written[0], "agents/node-b.crt") {
		t.Errorf("written: %v", written)
	}
	c := pairs[0].Cert
	pool := x509.NewCertPool()
	pool.AddCert(set.CA.Cert)
	if _, err := c.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("the new agent certificate does not chain to the existing CA: %v", err)
	}
	if c.Subject.CommonName != "node-b" || len(c.Subject.Organization) != 1 || c.Subject.Organization[0] != AgentOrganization {
		t.Errorf("subject %v: want CN=node-b, O=%s", c.Subject, AgentOrganization)
	}
	if c.NotAfter.After(set.CA.Cert.NotAfter) {
		t.Errorf("valid until %v, after its CA (%v)", c.NotAfter, set.CA.Cert.NotAfter)
	}
	after, _ := os.ReadFile(filepath.Join(dir, "server.crt"))
	if string(before) != string(after) {
		t.Error("issuing an agent certificate rewrote server.crt")
	}
	if _, err := WritePairs(dir, pairs, false); !errors.Is(err, ErrExists) {
		t.Errorf("writing node-b again without force: %v, want ErrExists", err)
	}
	if _, err := IssueAgents(ca, key, []string{SharedAgentName}, time.Hour, time.Time{}); err == nil {
		t.Error("the shared certificate's name accepted as a node name")
	}
	if err := os.Remove(filepath.Join(dir, "ca.key")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := LoadCA(dir); err == nil || !strings.Contains(err.Error(), dir) {
		t.Errorf("LoadCA without ca.key: %v, want an error naming the directory", err)
	}
}
