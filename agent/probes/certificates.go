package probes

import (
	"bufio"
	"bytes"
	"context"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"sort"
	"strings"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/nodediag/nodediag/agent/host"
	"github.com/nodediag/nodediag/agent/probe"
	nodediagv1 "github.com/nodediag/nodediag/proto/nodediag/v1"
)

// Where a kubeadm node keeps its certificates.
const (
	// kubeadm's certs phase writes the cluster CA, the API server, front
	// proxy and service account files here on control plane nodes, and
	// join writes ca.crt on every node; the etcd CA and etcd's own
	// certificates are in its etcd/ subdirectory.
	certKubernetesPKI = "/etc/kubernetes/pki"
	// The kubelet's --cert-dir: kubelet.crt (its self-signed serving
	// certificate, when serving certificates are not rotated) and
	// kubelet-client-current.pem, a symlink the kubelet's certificate
	// manager points at the newest kubelet-client-<timestamp>.pem it wrote.
	// Those files hold the client certificate AND its private key.
	certKubeletPKI = "/var/lib/kubelet/pki"
)

// certKubeconfigs are the kubeconfigs kubeadm writes with the client
// certificate embedded (client-certificate-data). kubelet.conf embeds it only
// until the kubelet rotates it; afterwards it names kubelet-client-current.pem.
var certKubeconfigs = []string{
	"/etc/kubernetes/kubelet.conf",
	"/etc/kubernetes/admin.conf",
	"/etc/kubernetes/super-admin.conf",
	"/etc/kubernetes/controller-manager.conf",
	"/etc/kubernetes/scheduler.conf",
}

// certificates reports the validity of every certificate in the kubeadm and
// kubelet PKI directories (*.crt and *.pem, one level of subdirectories) and
// embedded in kubeadm's kubeconfigs.
//
// Secrets never leave the probe: *.key files are never opened, only
// CERTIFICATE PEM blocks are decoded (kubelet-client-*.pem holds a private
// key next to the certificate), and the evidence holds subject, issuer and
// dates, never file contents. A symlink and its target are one certificate,
// reported under the symlink's path (the name an operator knows), with the
// target in resolved_path.
type certificates struct{}

func (certificates) Name() string { return "certificates" }

func (certificates) Run(ctx context.Context, h *host.Host) (*nodediagv1.ProbeEvidence, error) {
	pe := &nodediagv1.ProbeEvidence{}
	data := &nodediagv1.Certificates{}
	seen := false

	var files []certFile
	for _, dir := range []string{certKubernetesPKI, certKubeletPKI} {
		found, present := certListDir(h, pe, dir, 1)
		seen = seen || present
		files = append(files, found...)
	}
	for _, f := range certDedupe(files) {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		b, err := h.ReadFile(f.path)
		if err != nil {
			probe.Unreadable(pe, f.path, err)
			continue
		}
		certs, err := parseCertificates(b)
		if err != nil {
			probe.Unreadable(pe, f.path, err)
		}
		for _, c := range certs {
			c.Path = f.path
			if f.resolved != f.path {
				c.ResolvedPath = f.resolved
			}
			data.Certificates = append(data.Certificates, c)
		}
	}

	for _, kc := range certKubeconfigs {
		b, err := h.ReadFile(kc)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		seen = true
		if err != nil {
			probe.Unreadable(pe, kc, err)
			continue
		}
		certs, err := parseKubeconfigCertificates(b)
		if err != nil {
			probe.Unreadable(pe, kc, err)
		}
		for _, c := range certs {
			c.Path, c.EmbeddedIn = kc, kc
			data.Certificates = append(data.Certificates, c)
		}
	}
	if !seen {
		return nil, fmt.Errorf("%w: none of %s, %s or kubeadm's kubeconfigs exists", probe.ErrNotApplicable, certKubernetesPKI, certKubeletPKI)
	}
	pe.Data = &nodediagv1.ProbeEvidence_Certificates{Certificates: data}
	return pe, nil
}

// certFile is a certificate file found in a PKI directory.
type certFile struct {
	// path is the host path as listed; resolved is where it leads.
	path, resolved string
}

// certIsCandidate says whether a file name is one to parse: certificates are
// *.crt and *.pem. Private keys (*.key) are never opened.
func certIsCandidate(name string) bool {
	if strings.HasSuffix(name, ".key") {
		return false
	}
	return strings.HasSuffix(name, ".crt") || strings.HasSuffix(name, ".pem")
}

// certListDir lists the certificate files of dir, and of its subdirectories
// down to depth levels. present is false when dir does not exist; other
// failures are recorded in pe.
func certListDir(h *host.Host, pe *nodediagv1.ProbeEvidence, dir string, depth int) (files []certFile, present bool) {
	ents, err := h.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false
	}
	if err != nil {
		probe.Unreadable(pe, dir, err)
		return nil, true
	}
	for _, e := range ents {
		name := path.Join(dir, e.Name())
		isDir := e.IsDir()
		if e.Type()&fs.ModeSymlink != 0 {
			fi, err := h.Stat(name)
			if err != nil {
				// A dangling symlink named like a certificate is worth
				// reporting: kubelet-client-current.pem pointing nowhere.
				if certIsCandidate(e.Name()) {
					probe.Unreadable(pe, name, err)
				}
				continue
			}
			isDir = fi.IsDir()
		}
		if isDir {
			if depth > 0 {
				sub, _ := certListDir(h, pe, name, depth-1)
				files = append(files, sub...)
			}
			continue
		}
		if !certIsCandidate(e.Name()) {
			continue
		}
		// Resolve, not Path: Path leaves symlinks to the kernel when Root is
		// "/" (a VM, az vm run-command), and a symlink and its target would
		// then be two certificates.
		resolved, err := h.Resolve(name)
		if err != nil {
			probe.Unreadable(pe, name, err)
			continue
		}
		files = append(files, certFile{path: name, resolved: path.Clean(resolved)})
	}
	return files, true
}

// certDedupe keeps one file per resolved path: a symlink in preference to
// its target (kubelet-client-current.pem rather than the
// kubelet-client-<timestamp>.pem it points to), the first listed among
// several symlinks. The result is sorted by path.
func certDedupe(files []certFile) []certFile {
	byResolved := map[string]int{}
	var out []certFile
	for _, f := range files {
		i, ok := byResolved[f.resolved]
		if !ok {
			byResolved[f.resolved] = len(out)
			out = append(out, f)
			continue
		}
		if out[i].path == out[i].resolved && f.path != f.resolved {
			out[i] = f
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].path < out[j].path })
	return out
}

// errNoCertificate is wrapped by parseCertificates when the data holds
// neither PEM nor DER.
var errNoCertificate = errors.New("no certificate")

// parseCertificates decodes the CERTIFICATE blocks of PEM data (any other
// block, a private key included, is skipped unread) or, failing PEM, DER
// data. Index is the position among the certificates of the data. Data with
// PEM blocks but no certificate (a key file named *.pem) gives nothing and no
// error; a certificate that does not parse gives an error naming its index
// while the others are returned. Errors never quote the data.
func parseCertificates(b []byte) ([]*nodediagv1.Certificate, error) {
	var out []*nodediagv1.Certificate
	var errs []error
	rest := b
	pemBlocks, index := 0, 0
	for {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		pemBlocks++
		if block.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			errs = append(errs, fmt.Errorf("certificate #%d: %w", index, err))
		} else {
			out = append(out, certificateOf(c, index))
		}
		index++
	}
	if pemBlocks > 0 {
		return out, errors.Join(errs...)
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return nil, fmt.Errorf("%w: empty file", errNoCertificate)
	}
	// Not PEM: a DER certificate (or a DER sequence of them)?
	certs, err := x509.ParseCertificates(b)
	if err != nil {
		if bytes.Contains(b, []byte("-----BEGIN")) {
			return nil, fmt.Errorf("%w: truncated PEM (a BEGIN line without its END)", errNoCertificate)
		}
		return nil, fmt.Errorf("%w: neither PEM nor DER (%v)", errNoCertificate, err)
	}
	for i, c := range certs {
		out = append(out, certificateOf(c, i))
	}
	return out, nil
}

func certificateOf(c *x509.Certificate, index int) *nodediagv1.Certificate {
	return &nodediagv1.Certificate{
		Index:     int32(index),
		Subject:   c.Subject.String(),
		Issuer:    c.Issuer.String(),
		NotBefore: timestamppb.New(c.NotBefore),
		NotAfter:  timestamppb.New(c.NotAfter),
		IsCa:      c.IsCA,
	}
}

// kubeconfigCertData matches the client-certificate-data line of a
// kubeconfig as client-go and kubeadm write it (one line of base64).
var kubeconfigCertData = regexp.MustCompile(`^\s*client-certificate-data:\s*["']?([A-Za-z0-9+/=]+)["']?\s*$`)

// parseKubeconfigCertificates decodes the certificates of every
// client-certificate-data of a kubeconfig. Only those lines are looked at:
// client-key-data and tokens are never decoded. Index runs over all the
// certificates of the file.
func parseKubeconfigCertificates(b []byte) ([]*nodediagv1.Certificate, error) {
	var out []*nodediagv1.Certificate
	var errs []error
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 64*1024), 4<<20)
	n := 0
	for sc.Scan() {
		n++
		m := kubeconfigCertData.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		der, err := base64.StdEncoding.DecodeString(m[1])
		if err != nil {
			errs = append(errs, fmt.Errorf("line %d: client-certificate-data is not base64: %w", n, err))
			continue
		}
		certs, err := parseCertificates(der)
		if err != nil {
			errs = append(errs, fmt.Errorf("line %d: client-certificate-data: %w", n, err))
		}
		for _, c := range certs {
			c.Index = int32(len(out))
			out = append(out, c)
		}
	}
	if err := sc.Err(); err != nil {
		errs = append(errs, err)
	}
	return out, errors.Join(errs...)
}
