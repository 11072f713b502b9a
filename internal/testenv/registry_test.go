package testenv

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"net/http"
	"syscall"
	"testing"
	"time"
)

// get asks GET /v2/ of r, trusting only ca (nil: plain http).
func get(t *testing.T, r *Registry, ca *CA) *http.Response {
	t.Helper()
	tr := &http.Transport{Proxy: nil}
	if ca != nil {
		tr.TLSClientConfig = &tls.Config{RootCAs: ca.Pool()}
	}
	c := &http.Client{Timeout: 5 * time.Second, Transport: tr}
	resp, err := c.Get(r.URL + "/v2/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp
}

func TestStartRegistry(t *testing.T) {
	ca := NewCA(t, "nodediag test CA")
	for _, tc := range []struct {
		name       string
		opts       RegistryOptions
		wantStatus int
		wantAuth   bool
	}{
		{name: "plain http", wantStatus: http.StatusOK},
		{name: "tls", opts: RegistryOptions{TLS: ca}, wantStatus: http.StatusOK},
		{name: "auth", opts: RegistryOptions{Auth: true}, wantStatus: http.StatusUnauthorized, wantAuth: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := StartRegistry(t, tc.opts)
			resp := get(t, r, tc.opts.TLS)
			if resp.StatusCode != tc.wantStatus {
				t.Errorf("GET /v2/ = %s, want %d", resp.Status, tc.wantStatus)
			}
			if v := resp.Header.Get("Docker-Distribution-Api-Version"); v != "registry/2.0" {
				t.Errorf("Docker-Distribution-Api-Version = %q, want registry/2.0", v)
			}
			if got := resp.Header.Get("WWW-Authenticate") != ""; got != tc.wantAuth {
				t.Errorf("WWW-Authenticate present = %v, want %v", got, tc.wantAuth)
			}

			r.Stop()
			_, err := net.DialTimeout("tcp", r.Addr, time.Second)
			if !errors.Is(err, syscall.ECONNREFUSED) {
				t.Errorf("dial after Stop: %v, want connection refused", err)
			}
		})
	}
}

// The registry's certificate is for 127.0.0.1 and issued by its CA only.
func TestRegistryTLSCertificate(t *testing.T) {
	ca := NewCA(t, "right CA")
	r := StartRegistry(t, RegistryOptions{TLS: ca})
	dial := func(pool *CA) error {
		c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", r.Addr, &tls.Config{RootCAs: pool.Pool()})
		if err == nil {
			c.Close()
		}
		return err
	}
	if err := dial(ca); err != nil {
		t.Errorf("with the registry's CA: %v", err)
	}
	var unknown x509.UnknownAuthorityError
	if err := dial(NewCA(t, "wrong CA")); !errors.As(err, &unknown) {
		t.Errorf("with another CA: %v, want x509.UnknownAuthorityError", err)
	}
}

func TestNXDomainResolver(t *testing.T) {
	r, queries := NXDomainResolver(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := r.LookupHost(ctx, "registry.nodediag-test.invalid")
	var de *net.DNSError
	if !errors.As(err, &de) || !de.IsNotFound {
		t.Fatalf("LookupHost = %v, want a not-found DNSError", err)
	}
	if queries.Load() == 0 {
		t.Error("the stub got no query: the answer came from elsewhere")
	}
}
