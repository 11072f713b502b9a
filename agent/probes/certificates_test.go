package probes

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/nodediag/nodediag/agent/host"
	"github.com/nodediag/nodediag/agent/host/hosttest"
	"github.com/nodediag/nodediag/agent/probe"
	"github.com/nodediag/nodediag/agent/rules"
	nodediagv1 "github.com/nodediag/nodediag/proto/nodediag/v1"
)

// testCert is a certificate made for a test, with its key.
type testCert struct {
	cert   *x509.Certificate
	key    *ecdsa.PrivateKey
	pem    string // the CERTIFICATE block
	keyPEM string // the EC PRIVATE KEY block
}

// day is a date of 2024 or later, at noon UTC, for validity periods around
// hosttest.Now (2024-05-01T12:00:00Z).
func day(y int, m time.Month, d int) time.Time { return time.Date(y, m, d, 12, 0, 0, 0, time.UTC) }

var certSerial int64

// newTestCert makes a certificate valid from notBefore to notAfter, signed by
// parent (self-signed when nil).
func newTestCert(t *testing.T, subject pkix.Name, notBefore, notAfter time.Time, isCA bool, parent *testCert) *testCert {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	certSerial++
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(certSerial),
		Subject:               subject,
		NotBefore:             notBefore,
		NotAfter:              notAfter,
		IsCA:                  isCA,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
	}
	signer, signerKey := tmpl, key
	if parent != nil {
		signer, signerKey = parent.cert, parent.key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signer, &key.PublicKey, signerKey)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return &testCert{
		cert:   cert,
		key:    key,
		pem:    string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})),
		keyPEM: string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})),
	}
}

// want is the evidence expected for c at path.
func (c *testCert) want(path string, index int32) *nodediagv1.Certificate {
	return &nodediagv1.Certificate{
		Path:      path,
		Index:     index,
		Subject:   c.cert.Subject.String(),
		Issuer:    c.cert.Issuer.String(),
		NotBefore: timestamppb.New(c.cert.NotBefore),
		NotAfter:  timestamppb.New(c.cert.NotAfter),
		IsCa:      c.cert.IsCA,
	}
}

// keyMaterial is a piece of the key's base64 that must never appear in
// evidence.
func (c *testCert) keyMaterial() string {
	lines := strings.Split(c.keyPEM, "\n")
	return lines[1][10:40]
}

func TestCertificatesProbe(t *testing.T) {
	ca := newTestCert(t, pkix.Name{CommonName: "kubernetes"}, day(2024, 1, 1), day(2034, 1, 1), true, nil)
	apiserver := newTestCert(t, pkix.Name{CommonName: "kube-apiserver"}, day(2024, 1, 1), day(2025, 1, 1), false, ca)
	etcdCA := newTestCert(t, pkix.Name{CommonName: "etcd-ca"}, day(2024, 1, 1), day(2034, 1, 1), true, nil)
	etcdServer := newTestCert(t, pkix.Name{CommonName: "node-1"}, day(2024, 1, 1), day(2025, 1, 1), false, etcdCA)
	kubeletServing := newTestCert(t, pkix.Name{CommonName: "node-1@1711972800"}, day(2024, 4, 1), day(2025, 4, 1), false, nil)
	nodeName := pkix.Name{CommonName: "system:node:node-1", Organization: []string{"system:nodes"}}
	kubeletClientOld := newTestCert(t, nodeName, day(2023, 4, 1), day(2024, 4, 1), false, ca)
	kubeletClient := newTestCert(t, nodeName, day(2024, 4, 1), day(2025, 4, 1), false, ca)
	admin := newTestCert(t, pkix.Name{CommonName: "kubernetes-admin", Organization: []string{"kubeadm:cluster-admins"}}, day(2024, 1, 1), day(2024, 5, 10), false, ca)

	const (
		pki         = "/etc/kubernetes/pki"
		kubeletPKI  = "/var/lib/kubelet/pki"
		currentName = "kubelet-client-2024-04-01-12-00-00.pem"
	)
	h := hosttest.Tree(t, map[string]string{
		"etc/kubernetes/pki/ca.crt":        ca.pem,
		"etc/kubernetes/pki/ca.key":        "never opened: if it were, this would be an unreadable PEM\n",
		"etc/kubernetes/pki/apiserver.crt": apiserver.pem,
		"etc/kubernetes/pki/apiserver.key": apiserver.keyPEM,
		"etc/kubernetes/pki/sa.pub":        "-----BEGIN PUBLIC KEY-----\nnot a certificate\n-----END PUBLIC KEY-----\n",
		// A corrupt certificate: reported unreadable, the others still read.
		"etc/kubernetes/pki/front-proxy-ca.crt": "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
		"etc/kubernetes/pki/etcd/ca.crt":        etcdCA.pem,
		"etc/kubernetes/pki/etcd/server.crt":    etcdServer.pem,
		"etc/kubernetes/pki/etcd/server.key":    etcdServer.keyPEM,
		// Deeper than one level: not read.
		"etc/kubernetes/pki/etcd/old/ancient.crt": "garbage",
		"var/lib/kubelet/pki/kubelet.crt":         kubeletServing.pem,
		"var/lib/kubelet/pki/kubelet.key":         kubeletServing.keyPEM,
		// The kubelet's rotated client certificates hold the key too.
		"var/lib/kubelet/pki/kubelet-client-2023-04-01-12-00-00.pem": kubeletClientOld.pem + kubeletClientOld.keyPEM,
		"var/lib/kubelet/pki/" + currentName:                         kubeletClient.pem + kubeletClient.keyPEM,
		"var/lib/kubelet/pki/kubelet-client-current.pem":             "->" + kubeletPKI + "/" + currentName,
		"etc/kubernetes/admin.conf": "apiVersion: v1\nkind: Config\nusers:\n- name: kubernetes-admin\n  user:\n" +
			"    client-certificate-data: " + base64.StdEncoding.EncodeToString([]byte(admin.pem)) + "\n" +
			"    client-key-data: " + base64.StdEncoding.EncodeToString([]byte(admin.keyPEM)) + "\n",
		"etc/kubernetes/kubelet.conf": "users:\n- name: default-auth\n  user:\n" +
			"    client-certificate: /var/lib/kubelet/pki/kubelet-client-current.pem\n" +
			"    client-key: /var/lib/kubelet/pki/kubelet-client-current.pem\n",
	})

	pe := probe.RunAll(context.Background(), h, []probe.Probe{certificates{}}).Probes[0]
	if pe.Status != probe.StatusOK {
		t.Fatalf("status = %q (%s), want ok", pe.Status, pe.Error)
	}

	current := kubeletClient.want(kubeletPKI+"/kubelet-client-current.pem", 0)
	current.ResolvedPath = kubeletPKI + "/" + currentName
	embedded := admin.want("/etc/kubernetes/admin.conf", 0)
	embedded.EmbeddedIn = "/etc/kubernetes/admin.conf"
	want := []*nodediagv1.Certificate{
		apiserver.want(pki+"/apiserver.crt", 0),
		ca.want(pki+"/ca.crt", 0),
		etcdCA.want(pki+"/etcd/ca.crt", 0),
		etcdServer.want(pki+"/etcd/server.crt", 0),
		kubeletClientOld.want(kubeletPKI+"/kubelet-client-2023-04-01-12-00-00.pem", 0),
		current,
		kubeletServing.want(kubeletPKI+"/kubelet.crt", 0),
		embedded,
	}
	if diff := cmp.Diff(want, pe.GetCertificates().GetCertificates(), protocmp.Transform()); diff != "" {
		t.Errorf("certificates (-want +got):\n%s", diff)
	}

	if len(pe.Unreadable) != 1 || pe.Unreadable[0].Source != pki+"/front-proxy-ca.crt" {
		t.Errorf("unreadable = %v, want only the corrupt front-proxy-ca.crt", pe.Unreadable)
	}
	for _, u := range pe.Unreadable {
		if strings.HasSuffix(u.Source, ".key") {
			t.Errorf("a key file was opened: %v", u)
		}
	}

	// No key material anywhere in the evidence.
	js, err := protojson.Marshal(pe)
	if err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{"PRIVATE KEY", kubeletClient.keyMaterial(), kubeletClientOld.keyMaterial(), admin.keyMaterial(), apiserver.keyMaterial(),
		base64.StdEncoding.EncodeToString([]byte(admin.keyPEM))[20:60]} {
		if strings.Contains(string(js), secret) {
			t.Errorf("the evidence holds key material %q:\n%s", secret, js)
		}
	}
}

func TestCertificatesProbeNotApplicable(t *testing.T) {
	h := hosttest.Tree(t, map[string]string{"etc/hostname": "node-1\n"})
	pe := probe.RunAll(context.Background(), h, []probe.Probe{certificates{}}).Probes[0]
	if pe.Status != probe.StatusSkipped {
		t.Errorf("status = %q (%s), want skipped", pe.Status, pe.Error)
	}
}

// A dangling kubelet-client-current.pem (its target deleted) is reported, not
// silently skipped.
func TestCertificatesDanglingSymlink(t *testing.T) {
	h := hosttest.Tree(t, map[string]string{
		"var/lib/kubelet/pki/kubelet-client-current.pem": "->/var/lib/kubelet/pki/kubelet-client-2024-01-01-00-00-00.pem",
	})
	pe := probe.RunAll(context.Background(), h, []probe.Probe{certificates{}}).Probes[0]
	if pe.Status != probe.StatusOK {
		t.Fatalf("status = %q (%s), want ok", pe.Status, pe.Error)
	}
	if len(pe.Unreadable) != 1 || pe.Unreadable[0].Source != "/var/lib/kubelet/pki/kubelet-client-current.pem" {
		t.Errorf("unreadable = %v, want the dangling symlink", pe.Unreadable)
	}
}

func TestParseCertificates(t *testing.T) {
	ca := newTestCert(t, pkix.Name{CommonName: "ca"}, day(2024, 1, 1), day(2034, 1, 1), true, nil)
	leaf := newTestCert(t, pkix.Name{CommonName: "leaf", Organization: []string{"o"}}, day(2024, 1, 1), day(2025, 1, 1), false, ca)
	tests := []struct {
		name    string
		in      string
		want    []*nodediagv1.Certificate
		wantErr error
	}{
		{name: "one PEM certificate", in: leaf.pem, want: []*nodediagv1.Certificate{leaf.want("", 0)}},
		{name: "a bundle", in: leaf.pem + ca.pem, want: []*nodediagv1.Certificate{leaf.want("", 0), ca.want("", 1)}},
		{name: "certificate and key: the key is skipped", in: leaf.pem + leaf.keyPEM, want: []*nodediagv1.Certificate{leaf.want("", 0)}},
		{name: "key first, then certificate", in: leaf.keyPEM + leaf.pem, want: []*nodediagv1.Certificate{leaf.want("", 0)}},
		{name: "a key only: nothing, no error", in: leaf.keyPEM},
		{name: "text around the blocks", in: "subject=CN=leaf\n" + leaf.pem + "trailing\n", want: []*nodediagv1.Certificate{leaf.want("", 0)}},
		{name: "DER", in: string(leaf.cert.Raw), want: []*nodediagv1.Certificate{leaf.want("", 0)}},
		{name: "empty", in: "\n", wantErr: errNoCertificate},
		{name: "garbage", in: "hello", wantErr: errNoCertificate},
		{name: "truncated PEM", in: leaf.pem[:len(leaf.pem)/2], wantErr: errNoCertificate},
		{
			name: "a corrupt certificate in a bundle: the others are kept",
			in:   "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n" + ca.pem,
			want: []*nodediagv1.Certificate{ca.want("", 1)},
			// x509's error, wrapped with the index.
			wantErr: errAny,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseCertificates([]byte(tt.in))
			checkErr(t, err, tt.wantErr)
			if diff := cmp.Diff(tt.want, got, protocmp.Transform()); diff != "" {
				t.Errorf("parseCertificates (-want +got):\n%s", diff)
			}
		})
	}
}

// errAny stands for "some error" in tables.
var errAny = errors.New("any error")

func checkErr(t *testing.T, err, want error) {
	t.Helper()
	switch {
	case want == nil && err != nil:
		t.Fatalf("unexpected error: %v", err)
	case want == errAny && err == nil:
		t.Fatal("no error, want one")
	case want != nil && want != errAny && !errors.Is(err, want):
		t.Fatalf("error = %v, want %v", err, want)
	}
}

func FuzzParseCertificates(f *testing.F) {
	f.Add([]byte("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"))
	f.Add([]byte("-----BEGIN CERTIFICATE-----\nMIIB"))
	f.Add([]byte(""))
	f.Add([]byte{0x30, 0x82, 0x01, 0x00})
	f.Fuzz(func(t *testing.T, in []byte) {
		certs, _ := parseCertificates(in)
		for _, c := range certs {
			if c.NotAfter == nil || c.NotBefore == nil {
				t.Errorf("certificate without dates: %v", c)
			}
		}
	})
}

func TestParseKubeconfigCertificates(t *testing.T) {
	ca := newTestCert(t, pkix.Name{CommonName: "ca"}, day(2024, 1, 1), day(2034, 1, 1), true, nil)
	a := newTestCert(t, pkix.Name{CommonName: "a"}, day(2024, 1, 1), day(2025, 1, 1), false, ca)
	b := newTestCert(t, pkix.Name{CommonName: "b"}, day(2024, 1, 1), day(2025, 1, 1), false, ca)
	enc := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	tests := []struct {
		name    string
		in      string
		want    []*nodediagv1.Certificate
		wantErr error
	}{
		{
			name: "kubeadm's admin.conf",
			in: "apiVersion: v1\nclusters:\n- cluster:\n    certificate-authority-data: " + enc(ca.pem) + "\n    server: https://10.0.0.4:6443\n" +
				"users:\n- name: kubernetes-admin\n  user:\n    client-certificate-data: " + enc(a.pem) + "\n    client-key-data: " + enc(a.keyPEM) + "\n",
			want: []*nodediagv1.Certificate{a.want("", 0)},
		},
		{
			name: "two users, quoted",
			in:   "users:\n- user:\n    client-certificate-data: \"" + enc(a.pem) + "\"\n- user:\n    client-certificate-data: '" + enc(b.pem) + "'\n",
			want: []*nodediagv1.Certificate{a.want("", 0), b.want("", 1)},
		},
		{name: "a path, not data", in: "users:\n- user:\n    client-certificate: /var/lib/kubelet/pki/kubelet-client-current.pem\n"},
		{name: "not base64", in: "    client-certificate-data: abc=def\n", wantErr: errAny},
		{name: "base64 of garbage", in: "    client-certificate-data: " + enc("garbage") + "\n", wantErr: errNoCertificate},
		{
			name: "one bad, one good",
			in:   "    client-certificate-data: " + enc("garbage") + "\n    client-certificate-data: " + enc(b.pem) + "\n",
			want: []*nodediagv1.Certificate{b.want("", 0)}, wantErr: errNoCertificate,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseKubeconfigCertificates([]byte(tt.in))
			checkErr(t, err, tt.wantErr)
			if diff := cmp.Diff(tt.want, got, protocmp.Transform()); diff != "" {
				t.Errorf("parseKubeconfigCertificates (-want +got):\n%s", diff)
			}
		})
	}
}

func FuzzParseKubeconfigCertificates(f *testing.F) {
	f.Add("users:\n- user:\n    client-certificate-data: AAAA\n")
	f.Add("    client-certificate-data: abc=def\n")
	f.Add("client-certificate-data: 'LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0t'")
	f.Fuzz(func(t *testing.T, in string) {
		_, _ = parseKubeconfigCertificates([]byte(in))
	})
}

// From an expired kubelet client certificate to the finding.
func TestCertificatesExpiredFinding(t *testing.T) {
	ca := newTestCert(t, pkix.Name{CommonName: "kubernetes"}, day(2023, 1, 1), day(2033, 1, 1), true, nil)
	nodeName := pkix.Name{CommonName: "system:node:node-1", Organization: []string{"system:nodes"}}
	old := newTestCert(t, nodeName, day(2023, 3, 1), day(2024, 3, 1), false, ca)
	cur := newTestCert(t, nodeName, day(2023, 4, 1), day(2024, 4, 1), false, ca)
	h := hosttest.Tree(t, map[string]string{
		"etc/kubernetes/pki/ca.crt":                                  ca.pem,
		"var/lib/kubelet/pki/kubelet-client-2023-03-01-12-00-00.pem": old.pem + old.keyPEM,
		"var/lib/kubelet/pki/kubelet-client-2023-04-01-12-00-00.pem": cur.pem + cur.keyPEM,
		"var/lib/kubelet/pki/kubelet-client-current.pem":             "->kubelet-client-2023-04-01-12-00-00.pem",
	})
	ev := probe.RunAll(context.Background(), h, []probe.Probe{certificates{}})
	eng, err := rules.NewEngine()
	if err != nil {
		t.Fatal(err)
	}
	res := eng.Analyze(ev, rules.Context{Now: hosttest.Now})
	var got []string
	for _, f := range res.Findings {
		got = append(got, f.Id+": "+f.Title)
	}
	want := []string{"CertificateExpired: certificate /var/lib/kubelet/pki/kubelet-client-current.pem expired on 2024-04-01T12:00:00Z"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("findings (-want +got):\n%s", diff)
	}
}

// Symlinks are followed the way the kernel follows them (relative, absolute
// inside the root, chained, through a symlinked directory): each file is
// reported once, under a symlink's name, with where it leads.
func TestCertificatesSymlinks(t *testing.T) {
	ca := newTestCert(t, pkix.Name{CommonName: "kubernetes"}, day(2024, 1, 1), day(2034, 1, 1), true, nil)
	etcdCA := newTestCert(t, pkix.Name{CommonName: "etcd-ca"}, day(2024, 1, 1), day(2034, 1, 1), true, nil)
	client := newTestCert(t, pkix.Name{CommonName: "system:node:node-1"}, day(2024, 4, 1), day(2025, 4, 1), false, ca)
	const target = "kubelet-client-2024-04-01-12-00-00.pem"
	h := hosttest.Tree(t, map[string]string{
		"etc/kubernetes/pki/ca.crt": ca.pem,
		// Absolute, to a file of the same directory: one certificate.
		"etc/kubernetes/pki/cluster-ca.crt": "->/etc/kubernetes/pki/ca.crt",
		// A symlinked subdirectory.
		"etc/kubernetes/pki/etcd":        "->../etcd-pki",
		"etc/kubernetes/etcd-pki/ca.crt": etcdCA.pem,
		// Relative, and a chain of two symlinks to the same file.
		"var/lib/kubelet/pki/" + target:                  client.pem + client.keyPEM,
		"var/lib/kubelet/pki/kubelet-client-current.pem": "->" + target,
		"var/lib/kubelet/pki/kubelet-client-latest.pem":  "->kubelet-client-current.pem",
	})
	pe := probe.RunAll(context.Background(), h, []probe.Probe{certificates{}}).Probes[0]
	if pe.Status != probe.StatusOK || len(pe.Unreadable) > 0 {
		t.Fatalf("status = %q (%s), unreadable %v; want ok and nothing unreadable", pe.Status, pe.Error, pe.Unreadable)
	}
	withResolved := func(c *nodediagv1.Certificate, resolved string) *nodediagv1.Certificate {
		c.ResolvedPath = resolved
		return c
	}
	want := []*nodediagv1.Certificate{
		withResolved(ca.want("/etc/kubernetes/pki/cluster-ca.crt", 0), "/etc/kubernetes/pki/ca.crt"),
		withResolved(etcdCA.want("/etc/kubernetes/pki/etcd/ca.crt", 0), "/etc/kubernetes/etcd-pki/ca.crt"),
		withResolved(client.want("/var/lib/kubelet/pki/kubelet-client-current.pem", 0), "/var/lib/kubelet/pki/"+target),
	}
	if diff := cmp.Diff(want, pe.GetCertificates().GetCertificates(), protocmp.Transform()); diff != "" {
		t.Errorf("certificates (-want +got):\n%s", diff)
	}
}

// With Root "/" (a VM, az vm run-command) symlinks are resolved too, so that
// a symlink and its target are one certificate. The directory listed is a
// temporary one: the test machine's own PKI is not touched.
func TestCertificatesSymlinksRootSlash(t *testing.T) {
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ca := newTestCert(t, pkix.Name{CommonName: "kubernetes"}, day(2024, 1, 1), day(2034, 1, 1), true, nil)
	if err := os.WriteFile(filepath.Join(dir, "ca.crt"), []byte(ca.pem), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(dir, "ca.crt"), filepath.Join(dir, "cluster-ca.crt")); err != nil {
		t.Fatal(err)
	}
	h, err := host.New("/", host.NoExec{})
	if err != nil {
		t.Fatal(err)
	}
	pe := &nodediagv1.ProbeEvidence{}
	files, present := certListDir(h, pe, dir, 1)
	if !present || len(pe.Unreadable) > 0 {
		t.Fatalf("certListDir(%s): present %v, unreadable %v", dir, present, pe.Unreadable)
	}
	got := certDedupe(files)
	want := []certFile{{path: filepath.Join(dir, "cluster-ca.crt"), resolved: filepath.Join(dir, "ca.crt")}}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(certFile{})); diff != "" {
		t.Errorf("certificate files (-want +got):\n%s", diff)
	}
}
