package probes

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"path"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nodediag/nodediag/agent/ctdconfig"
	"github.com/nodediag/nodediag/agent/host"
	"github.com/nodediag/nodediag/agent/probe"
	nodediagv1 "github.com/nodediag/nodediag/proto/nodediag/v1"
)

// Bounds of the registries probe. containerd itself waits up to 30 s for a
// connection and 10 s for a TLS handshake; the probe gives each step less,
// so that every configured endpoint is checked within the agent's --timeout
// (60 s by default) and a hung endpoint is reported at the step that hung.
const (
	// regStepTimeout bounds each step of a check (dns, tcp, tls, http).
	regStepTimeout = 5 * time.Second
	// regProbeTimeout bounds the whole probe.
	regProbeTimeout = 30 * time.Second
	// regConcurrency is how many endpoints are checked at once.
	regConcurrency = 4
	// regMaxBody is how much of the /v2/ answer is read (and dropped);
	// regMaxHeader caps its headers.
	regMaxBody   = 4 << 10
	regMaxHeader = 64 << 10
)

// The steps of a check, in order: RegistryCheck.failed_step.
const (
	regStepURL  = "url"
	regStepDNS  = "dns"
	regStepTCP  = "tcp"
	regStepTLS  = "tls"
	regStepHTTP = "http"
)

// RegistryEndpoint.kind values of hosts.toml endpoints; the legacy
// registry.mirrors endpoints of config.toml are "mirrors".
const (
	regKindHost   = "host"   // [host."..."] of a hosts.toml
	regKindServer = "server" // server = of a hosts.toml
)

// regSystemRoots are the CA bundles of the node's distribution, in the
// order Go's crypto/x509 looks for them on Linux: containerd (a Go binary)
// trusts the first one it finds unless a hosts.toml names a ca. They are
// read from the node, never from the agent's own filesystem.
var regSystemRoots = []string{
	"/etc/ssl/certs/ca-certificates.crt",                // Debian, Ubuntu (ca-certificates)
	"/etc/pki/tls/certs/ca-bundle.crt",                  // Fedora, RHEL, Azure Linux
	"/etc/ssl/ca-bundle.pem",                            // openSUSE
	"/etc/pki/tls/cacert.pem",                           // OpenELEC
	"/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem", // CentOS, RHEL 7
	"/etc/ssl/cert.pem",                                 // Alpine
}

// registriesProbe checks, from the node, that each registry and mirror
// containerd is configured with answers: for each endpoint of the
// configuration (legacy registry.mirrors, the [host] tables and server of
// every hosts.toml, as agent/ctdconfig reads them), it resolves the name
// ("dns"), connects ("tcp"), shakes hands with the node's CA bundle plus
// the configured ca files, or skip_verify ("tls"), and sends GET <api
// root>/ ("http": the /v2/ ping), and says which step failed. An endpoint
// that is not a usable URL fails at "url" with the error containerd meets.
//
// Only configured endpoints are tried: never an address found in a log,
// never a redirect (a registry answers /v2/ itself; a redirect is reported,
// not followed), never a proxy, never credentials. Not tried either: the
// upstream registries containerd falls back to without configuration
// (registry-1.docker.io, https://<registry>), and the endpoints of a
// hosts.toml containerd rejects (it never dials them).
//
// Skipped, with the reason: with --offline, reported as Registries.offline
// with no check (nothing was tried); on a copy of a host (the network seen
// from the analyst's machine is not the node's); when containerd's
// configuration does not parse (containerd does not start) or names no
// endpoint.
//
// What containerd does that the checks do not: containerd 2.x tries https
// first for an http endpoint that has TLS settings (HTTPFallback), the
// check tries http; override_path (not in the evidence) is taken as false;
// a hosts.toml without [host] table, which 1.x rejects and 2.x uses, is
// not checked; HTTP(S)_PROXY of containerd's environment is not known and
// not used.
type registriesProbe struct{}

func (registriesProbe) Name() string { return "registries" }

func (registriesProbe) Run(ctx context.Context, h *host.Host) (*nodediagv1.ProbeEvidence, error) {
	pe := &nodediagv1.ProbeEvidence{}
	if h.Offline() {
		pe.Data = &nodediagv1.ProbeEvidence_Registries{Registries: &nodediagv1.Registries{Offline: true}}
		return pe, fmt.Errorf("%w: --offline: no registry was contacted", probe.ErrNotApplicable)
	}
	if !h.Live() {
		return nil, fmt.Errorf("%w: a copy of a host: the network seen from here is not the node's", probe.ErrNotApplicable)
	}
	cfg, unreadable := ctdconfig.Read(h)
	pe.Unreadable = append(pe.Unreadable, unreadable...)
	if cfg.GetParseError() != "" {
		return pe, fmt.Errorf("%w: containerd's configuration does not parse, containerd does not start: %s", probe.ErrNotApplicable, cfg.GetParseError())
	}
	eps := regEndpoints(cfg)
	switch {
	case len(eps) == 0 && len(ctdconfig.Endpoints(cfg)) > 0:
		return pe, fmt.Errorf("%w: containerd ignores the hosts.toml files that name endpoints (they do not decode)", probe.ErrNotApplicable)
	case len(eps) == 0:
		return pe, fmt.Errorf("%w: containerd's configuration names no registry mirror or hosts.toml endpoint", probe.ErrNotApplicable)
	}
	ctx, cancel := context.WithTimeout(ctx, regProbeTimeout)
	defer cancel()
	c := &regChecker{net: h.Network(), readFile: h.ReadFile, step: regStepTimeout}
	pe.Data = &nodediagv1.ProbeEvidence_Registries{Registries: &nodediagv1.Registries{Checks: c.checkAll(ctx, eps)}}
	return pe, nil
}

// regEndpoints are the endpoints containerd pulls from: those of cfg but
// the ones of a hosts.toml containerd rejects (it logs "failed to decode
// hosts.toml" and never dials them; the containerd rules report the file).
func regEndpoints(cfg *nodediagv1.Containerd) []*nodediagv1.RegistryEndpoint {
	ignored := map[*nodediagv1.RegistryEndpoint]bool{}
	for _, hf := range cfg.GetHostsFiles() {
		if hf.GetError() != "" {
			for _, ep := range hf.GetEndpoints() {
				ignored[ep] = true
			}
		}
	}
	var out []*nodediagv1.RegistryEndpoint
	for _, ep := range ctdconfig.Endpoints(cfg) {
		if !ignored[ep] {
			out = append(out, ep)
		}
	}
	return out
}

// regTarget is an endpoint as containerd dials it.
type regTarget struct {
	// base is scheme://host[:port]/<api root> ("/v2"), without userinfo.
	base *url.URL
	// skipVerify and ca (absolute host paths) are the endpoint's TLS settings.
	skipVerify bool
	ca         []string
}

// ping is the URL of the /v2/ ping: the API root with a trailing slash.
func (t regTarget) ping() string {
	u := *t.base
	u.Path = strings.TrimSuffix(u.Path, "/") + "/"
	return u.String()
}

// key identifies what a check measures: endpoints with the same key (one
// mirror configured for several registries) are checked once.
func (t regTarget) key() string {
	return strings.Join(append([]string{t.ping(), strconv.FormatBool(t.skipVerify)}, t.ca...), "\x00")
}

// regTargetOf is where containerd would send a registry request for ep.
// dialled is the URL after containerd's default scheme is added, also when
// it does not parse. The error is the "url" step's.
//
// The scheme rules are containerd's (1.6 to 2.x):
//   - legacy mirrors (pkg/cri/server/image_pull.go, addDefaultScheme): an
//     endpoint without "://" gets http:// for localhost, 127.0.0.0/8 and
//     ::1, https:// otherwise; the path is the API root, "/v2" when empty.
//   - hosts.toml (remotes/docker/config/hosts.go, parseHostConfig): an
//     endpoint that does not start with "http" gets https://; "/v2" is
//     appended to a path that does not end with it (override_path unset).
//
// plain_http, when set, makes the default scheme http.
func regTargetOf(ep *nodediagv1.RegistryEndpoint) (t regTarget, dialled string, err error) {
	raw := ctdconfig.StripUserinfo(ep.GetUrl())
	dialled = raw
	hosts := ep.GetKind() == regKindHost || ep.GetKind() == regKindServer
	switch {
	case hosts && !strings.HasPrefix(raw, "http"):
		dialled = "https://" + raw
		if ep.GetPlainHttp() {
			dialled = "http://" + raw
		}
	case !hosts && !strings.Contains(raw, "://"):
		u, err := url.Parse("dummy://" + raw)
		if err != nil {
			return t, raw, err
		}
		scheme := "https"
		if ep.GetPlainHttp() || regIsLocalhost(u.Host) {
			scheme = "http"
		}
		dialled = scheme + "://" + raw
	}
	u, err := url.Parse(dialled)
	if err != nil {
		return t, dialled, err
	}
	dialled = u.String()
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		// net/http's words, which containerd's log repeats.
		return t, dialled, fmt.Errorf("unsupported protocol scheme %q", u.Scheme)
	case u.Host == "":
		return t, dialled, errors.New("http: no Host in request URL")
	case u.Hostname() == "":
		return t, dialled, fmt.Errorf("no host name in %q", dialled)
	}
	if hosts {
		if u.Path != "" {
			u.Path = path.Clean(u.Path)
			if !strings.HasSuffix(u.Path, "/v2") {
				u.Path += "/v2"
			}
		} else {
			u.Path = "/v2"
		}
	} else if u.Path == "" {
		u.Path = "/v2"
	}
	u.RawPath, u.RawQuery, u.Fragment, u.ForceQuery = "", "", "", false
	t = regTarget{base: u, skipVerify: ep.GetSkipVerify()}
	// containerd reads a relative ca of a hosts.toml from the file's
	// directory (makeAbsPath), one of config.toml from its own "/".
	dir := "/"
	if hosts && ep.GetLine().GetPath() != "" {
		dir = path.Dir(ep.GetLine().GetPath())
	}
	for _, ca := range ep.GetCa() {
		if !path.IsAbs(ca) {
			ca = path.Join(dir, ca)
		}
		t.ca = append(t.ca, ca)
	}
	return t, dialled, nil
}

// regIsLocalhost is containerd's isLocalHost: "localhost" or a loopback
// address, with or without a port.
func regIsLocalhost(hostport string) bool {
	h := hostport
	if hh, _, err := net.SplitHostPort(hostport); err == nil {
		h = hh
	}
	if h == "localhost" {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// regChecker checks endpoints over a Network.
type regChecker struct {
	net host.Network
	// readFile reads a host path (CA files, the node's CA bundle).
	readFile func(name string) ([]byte, error)
	// step bounds each step.
	step time.Duration

	rootsOnce sync.Once
	roots     *x509.CertPool
}

// checkAll checks eps, at most regConcurrency at once, each distinct target
// once, and returns one check per endpoint in the order of eps.
func (c *regChecker) checkAll(ctx context.Context, eps []*nodediagv1.RegistryEndpoint) []*nodediagv1.RegistryCheck {
	out := make([]*nodediagv1.RegistryCheck, len(eps))
	type job struct {
		t   regTarget
		idx []int
	}
	jobs := map[string]*job{}
	var order []*job
	for i, ep := range eps {
		rc := &nodediagv1.RegistryCheck{Registry: ep.GetRegistry(), Endpoint: ep.GetUrl(), Line: ep.GetLine(), Kind: ep.GetKind()}
		out[i] = rc
		t, dialled, err := regTargetOf(ep)
		if err != nil {
			rc.Url, rc.FailedStep, rc.Error = dialled, regStepURL, err.Error()
			continue
		}
		j := jobs[t.key()]
		if j == nil {
			j = &job{t: t}
			jobs[t.key()] = j
			order = append(order, j)
		}
		j.idx = append(j.idx, i)
	}
	sem := make(chan struct{}, regConcurrency)
	var wg sync.WaitGroup
	for _, j := range order {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			res := c.check(ctx, j.t)
			for _, i := range j.idx {
				rc := out[i]
				rc.Url, rc.FailedStep, rc.Error = res.Url, res.FailedStep, res.Error
				rc.Addresses = append([]string(nil), res.Addresses...)
				rc.HttpStatus, rc.DurationMs = res.HttpStatus, res.DurationMs
			}
		}()
	}
	wg.Wait()
	return out
}

// check runs the steps against t and stops at the first that fails.
func (c *regChecker) check(ctx context.Context, t regTarget) (rc *nodediagv1.RegistryCheck) {
	start := time.Now()
	rc = &nodediagv1.RegistryCheck{Url: t.ping()}
	defer func() { rc.DurationMs = int32(min(time.Since(start).Milliseconds(), math.MaxInt32)) }()
	fail := func(step string, err error) *nodediagv1.RegistryCheck {
		rc.FailedStep, rc.Error = step, err.Error()
		return rc
	}
	hostname, port := t.base.Hostname(), t.base.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[t.base.Scheme]
	}

	if net.ParseIP(hostname) != nil {
		rc.Addresses = []string{hostname}
	} else {
		addrs, err := c.lookup(ctx, hostname)
		if err != nil {
			return fail(regStepDNS, err)
		}
		rc.Addresses = addrs
	}

	conn, err := c.dial(ctx, rc.Addresses, port)
	if err != nil {
		return fail(regStepTCP, err)
	}
	defer conn.Close()

	if t.base.Scheme == "https" {
		tc, err := c.handshake(ctx, conn, hostname, t)
		if err != nil {
			return fail(regStepTLS, err)
		}
		conn = tc
	}

	status, err := c.get(ctx, conn, t)
	rc.HttpStatus = status
	if err != nil {
		return fail(regStepHTTP, err)
	}
	return rc
}

// stepCtx bounds one step.
func (c *regChecker) stepCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, c.step)
}

// annotate says why a step that ran out of time stopped: its own bound, or
// the probe's (ctx).
func (c *regChecker) annotate(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		return fmt.Errorf("%w (the probe's time ran out)", err)
	}
	var ne net.Error
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()) {
		return fmt.Errorf("%w (no answer within %v)", err, c.step)
	}
	return err
}

func (c *regChecker) lookup(ctx context.Context, name string) ([]string, error) {
	sctx, cancel := c.stepCtx(ctx)
	defer cancel()
	addrs, err := c.net.LookupHost(sctx, name)
	if err == nil && len(addrs) == 0 {
		err = fmt.Errorf("lookup %s: no address", name)
	}
	return addrs, c.annotate(ctx, err)
}

// dial connects to the first address that accepts, each address given an
// equal share of what is left of the step (as Go's dialer does), and
// returns the first address's error when none accepts.
func (c *regChecker) dial(ctx context.Context, addrs []string, port string) (net.Conn, error) {
	sctx, cancel := c.stepCtx(ctx)
	defer cancel()
	var first error
	for i, a := range addrs {
		dctx, dcancel := sctx, context.CancelFunc(func() {})
		if dl, ok := sctx.Deadline(); ok {
			dctx, dcancel = context.WithTimeout(sctx, time.Until(dl)/time.Duration(len(addrs)-i))
		}
		conn, err := c.net.DialContext(dctx, "tcp", net.JoinHostPort(a, port))
		dcancel()
		if err == nil {
			return conn, nil
		}
		if first == nil {
			first = err
		}
	}
	return nil, c.annotate(ctx, first)
}

// handshake does TLS as containerd would for t: the node's CA bundle plus
// the configured ca files, or no verification with skip_verify.
func (c *regChecker) handshake(ctx context.Context, conn net.Conn, hostname string, t regTarget) (*tls.Conn, error) {
	pool := c.nodeRoots().Clone()
	for _, ca := range t.ca {
		// containerd's words (remotes/docker/config/hosts.go).
		b, err := c.readFile(ca)
		if err != nil {
			return nil, fmt.Errorf("unable to read CA cert %q: %w", ca, err)
		}
		if !pool.AppendCertsFromPEM(b) {
			return nil, fmt.Errorf("unable to load CA cert %q", ca)
		}
	}
	tc := tls.Client(conn, &tls.Config{ServerName: hostname, RootCAs: pool, InsecureSkipVerify: t.skipVerify})
	sctx, cancel := c.stepCtx(ctx)
	defer cancel()
	err := tc.HandshakeContext(sctx)
	var rhe tls.RecordHeaderError
	if errors.As(err, &rhe) && string(rhe.RecordHeader[:]) == "HTTP/" {
		// What net/http, and so containerd, says of the same answer.
		err = errors.New("http: server gave HTTP response to HTTPS client")
	}
	if err != nil && sctx.Err() != nil {
		// crypto/tls says only "context deadline exceeded".
		err = fmt.Errorf("TLS handshake: %w", err)
	}
	if err != nil {
		return nil, c.annotate(ctx, err)
	}
	return tc, nil
}

// nodeRoots is the node's CA bundle: the first of regSystemRoots that can
// be read. A node without any trusts nothing, as containerd on it does.
func (c *regChecker) nodeRoots() *x509.CertPool {
	c.rootsOnce.Do(func() {
		c.roots = x509.NewCertPool()
		for _, p := range regSystemRoots {
			if b, err := c.readFile(p); err == nil {
				c.roots.AppendCertsFromPEM(b)
				return
			}
		}
	})
	return c.roots
}

// get sends GET <api root>/ over conn, without credentials and without
// following redirects, and returns the status. A registry answers 200, or
// 401 with a WWW-Authenticate challenge or its Docker-Distribution-API-
// Version header; anything else is an error, but for a registry (its
// Docker-Distribution-API-Version header) redirecting to a path of its own
// host: distribution answers "//v2/", which a hosts.toml URL ending in "/"
// makes containerd ask for, with 301 to "/v2/", and containerd follows it.
func (c *regChecker) get(ctx context.Context, conn net.Conn, t regTarget) (int32, error) {
	var used atomic.Bool
	once := func(context.Context, string, string) (net.Conn, error) {
		if used.Swap(true) {
			return nil, errors.New("the connection of the check is already used")
		}
		return conn, nil
	}
	tr := &http.Transport{
		Proxy:                  nil,
		DialContext:            once,
		DialTLSContext:         once, // conn is past the TLS handshake
		DisableKeepAlives:      true,
		DisableCompression:     true,
		MaxResponseHeaderBytes: regMaxHeader,
		// HTTP/1.1 only: a non-nil empty map turns HTTP/2 off.
		TLSNextProto: map[string]func(string, *tls.Conn) http.RoundTripper{},
	}
	defer tr.CloseIdleConnections()
	client := &http.Client{
		Transport:     tr,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	sctx, cancel := c.stepCtx(ctx)
	defer cancel()
	ping := t.ping()
	req, err := http.NewRequestWithContext(sctx, http.MethodGet, ping, nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("User-Agent", "nodediag-agent")
	resp, err := client.Do(req)
	if err != nil {
		return 0, c.annotate(ctx, err)
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, io.LimitReader(resp.Body, regMaxBody))
	status := int32(resp.StatusCode)
	distribution := resp.Header.Get("Docker-Distribution-API-Version") != ""
	challenge := resp.Header.Get("WWW-Authenticate") != ""
	switch {
	case resp.StatusCode == http.StatusOK,
		resp.StatusCode == http.StatusUnauthorized && (distribution || challenge),
		distribution && regSameHostRedirect(resp):
		return status, nil
	}
	msg := fmt.Sprintf("unexpected status from GET request to %s: %s", ping, resp.Status)
	switch loc := resp.Header.Get("Location"); {
	case resp.StatusCode == http.StatusUnauthorized:
		msg += " (no WWW-Authenticate or Docker-Distribution-API-Version header: not a registry)"
	case resp.StatusCode >= 300 && resp.StatusCode < 400 && loc != "":
		msg += fmt.Sprintf(" (redirect to %s, not followed)", regRedirectTarget(loc))
	}
	return status, errors.New(msg)
}

// regRedirectTarget is where a redirect points, without its query, fragment
// or user info: a presigned URL's signature must not reach the evidence.
func regRedirectTarget(loc string) string {
	u, err := url.Parse(loc)
	if err != nil {
		return "an unparsable location"
	}
	return (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path}).String()
}

// regSameHostRedirect says whether resp redirects to the scheme and host
// that were asked.
func regSameHostRedirect(resp *http.Response) bool {
	if resp.StatusCode < 300 || resp.StatusCode >= 400 {
		return false
	}
	loc, err := resp.Location()
	return err == nil && loc.Scheme == resp.Request.URL.Scheme && loc.Host == resp.Request.URL.Host
}
