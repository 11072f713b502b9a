// Package kubeenv starts a real kube-apiserver and etcd (built by `make
// testbin` from hack/testbin) with the Cluster API CRDs and the stand-ins of
// hack/testbin/crds, for the collector's Cluster API tests. It is apart
// from internal/testenv so that the agent's test binaries do not link
// client-go.
package kubeenv

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/nodediag/nodediag/internal/testenv"
)

// Where the API server's pieces live, relative to the repository root.
const (
	// testbinDefault is where `make testbin` (hack/testbin/build.sh) puts
	// kube-apiserver and etcd unless TESTBIN_DIR says otherwise; git-ignored.
	testbinDefault = ".testbin"
	// testbinModule is the throwaway module that pins the versions of
	// kube-apiserver and etcd; its files make up the stamp's source hash.
	testbinModule = "hack/testbin"
	// CAPICRDDir holds the Cluster API CRDs, copied verbatim from the
	// sigs.k8s.io/cluster-api module by hack/testbin/update-crds.sh.
	CAPICRDDir = "hack/testbin/crds/capi"
	// StandInCRDDir holds hand-written stand-ins for provider CRDs the module
	// proxy does not serve (CAPZ, the Helm addon provider): see its README.md.
	StandInCRDDir = "hack/testbin/crds/standins"
)

// buildHint is what a developer runs when the binaries are missing or stale.
const buildHint = "run `make testbin` (builds kube-apiserver and etcd from the Go module proxy into .testbin/: several minutes the first time, seconds with a warm Go build cache)"

// APIServer is a real kube-apiserver with its etcd, started for one test by
// controller-runtime's envtest, with the Cluster API CRDs and the provider
// stand-ins installed and Established. The test's cleanup stops both
// processes and removes their directories.
type APIServer struct {
	// Config is an admin (system:masters) client configuration.
	Config *rest.Config
	// Kubeconfig is the path of a kubeconfig file for the admin user, for
	// commands under test that take --kubeconfig.
	Kubeconfig string
	// CRDs are the names of the installed CRDs, sorted.
	CRDs []string

	env    *envtest.Environment
	output *lockedBuffer
}

// Output is what kube-apiserver and etcd wrote so far.
func (s *APIServer) Output() string { return s.output.String() }

// Assets are the files an API server for the tests is made of.
type Assets struct {
	// Bin holds kube-apiserver and etcd.
	Bin string
	// CRDDirs are the folders of CRD YAML to install.
	CRDDirs []string
}

// LocateAssets finds the binaries and CRDs from the repository root that
// contains dir. KUBEBUILDER_ASSETS, if set, names the binaries' folder and is
// taken as is; otherwise the binaries are in $TESTBIN_DIR/bin (default
// <root>/.testbin/bin) and must carry the stamp of the current sources of
// hack/testbin, so a version bump without a rebuild is an error rather than
// a test against the old server.
func LocateAssets(dir string) (Assets, error) {
	root, err := repoRoot(dir)
	if err != nil {
		return Assets{}, err
	}
	a := Assets{CRDDirs: []string{filepath.Join(root, CAPICRDDir), filepath.Join(root, StandInCRDDir)}}
	if a.Bin = os.Getenv("KUBEBUILDER_ASSETS"); a.Bin != "" {
		return a, checkBinaries(a.Bin)
	}
	out := os.Getenv("TESTBIN_DIR")
	if out == "" {
		out = filepath.Join(root, testbinDefault)
	}
	a.Bin = filepath.Join(out, "bin")
	if err := checkBinaries(a.Bin); err != nil {
		return a, err
	}
	return a, checkStamp(filepath.Join(root, testbinModule), filepath.Join(out, ".stamp"))
}

func checkBinaries(bin string) error {
	for _, name := range []string{"kube-apiserver", "etcd"} {
		p := filepath.Join(bin, name)
		st, err := os.Stat(p)
		if err != nil {
			return fmt.Errorf("test API server binary: %w", err)
		}
		if st.IsDir() || st.Mode()&0o111 == 0 {
			return fmt.Errorf("test API server binary %s is not an executable file", p)
		}
	}
	return nil
}

// checkStamp compares the "src=" field that hack/testbin/build.sh writes
// with the hash of the same files now (first 16 hex digits of the SHA-256 of
// go.mod, go.sum, tools.go, cmd/etcd/main.go and build.sh, concatenated).
func checkStamp(module, stampPath string) error {
	b, err := os.ReadFile(stampPath)
	if err != nil {
		return fmt.Errorf("test API server stamp: %w", err)
	}
	h := sha256.New()
	for _, f := range []string{"go.mod", "go.sum", "tools.go", "cmd/etcd/main.go", "build.sh"} {
		src, err := os.ReadFile(filepath.Join(module, f))
		if err != nil {
			return fmt.Errorf("test API server sources: %w", err)
		}
		h.Write(src)
	}
	want := "src=" + hex.EncodeToString(h.Sum(nil))[:16]
	if !slices.Contains(strings.Fields(string(b)), want) {
		return fmt.Errorf("test API server binaries are stale: %s says %q, sources of %s hash to %s",
			stampPath, strings.TrimSpace(string(b)), module, want)
	}
	return nil
}

// repoRoot walks up from dir to the go.mod of the main module.
func repoRoot(dir string) (string, error) {
	d, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	for {
		f, err := os.Open(filepath.Join(d, "go.mod"))
		if err == nil {
			line, _ := bufio.NewReader(f).ReadString('\n')
			f.Close()
			if strings.TrimSpace(line) == "module github.com/nodediag/nodediag" {
				return d, nil
			}
		} else if !errors.Is(err, fs.ErrNotExist) {
			return "", err
		}
		parent := filepath.Dir(d)
		if parent == d {
			return "", fmt.Errorf("no go.mod of github.com/nodediag/nodediag above %s", dir)
		}
		d = parent
	}
}

var quietControllerRuntime sync.Once

// StartAPIServer starts kube-apiserver and etcd (envtest), installs every
// CRD of LocateAssets's folders, waits until each is Established, and
// returns an admin client configuration. Cleanup stops both processes; if the
// test failed, the end of their output is logged.
//
// Missing or stale binaries fail the test under CI=true and skip it
// otherwise, naming the command that builds them (Require). envtest never
// downloads anything here and never uses an existing cluster, whatever
// USE_EXISTING_CLUSTER says.
//
// Each call starts its own server (about 4 s; kube-apiserver takes about
// 0.5 GB): tests that can share one should.
func StartAPIServer(t testing.TB) (*rest.Config, *APIServer) {
	t.Helper()
	return startAPIServer(t, true)
}

// StartWorkloadAPIServer is StartAPIServer without any CRD: a workload
// cluster's API server (Nodes, Pods, DaemonSets, Deployments, RBAC,
// ServiceAccount tokens), beside a management cluster's.
func StartWorkloadAPIServer(t testing.TB) (*rest.Config, *APIServer) {
	t.Helper()
	return startAPIServer(t, false)
}

func startAPIServer(t testing.TB, crds bool) (*rest.Config, *APIServer) {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	assets, err := LocateAssets(wd)
	testenv.Require(t, err == nil, "no test API server: %v; %s", err, buildHint)
	if !crds {
		assets.CRDDirs = nil
	}
	start := time.Now()
	s, err := Start(context.Background(), assets, time.Minute)
	if s != nil {
		// Registered even after a failed Start: it may have left processes.
		t.Cleanup(func() {
			if err := s.Stop(); err != nil {
				t.Errorf("stopping the test API server: %v", err)
			}
			if t.Failed() {
				t.Logf("kube-apiserver and etcd output (end):\n%s", Tail(s.Output(), 60))
			}
		})
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("kube-apiserver and etcd of %s started, %d CRDs Established, in %v", assets.Bin, len(s.CRDs), time.Since(start).Round(time.Millisecond))
	s.Kubeconfig = filepath.Join(t.TempDir(), "admin.kubeconfig")
	if err := os.WriteFile(s.Kubeconfig, s.env.KubeConfig, 0o600); err != nil {
		t.Fatal(err)
	}
	return s.Config, s
}

// Start starts kube-apiserver and etcd from assets with envtest, installs
// the CRDs of assets.CRDDirs and waits until every one is Established (each
// YAML file must give one: envtest skips what it cannot parse silently).
// startTimeout bounds the processes' start. The returned server, also on an
// error, must be stopped (a failed start may have left processes).
func Start(ctx context.Context, assets Assets, startTimeout time.Duration) (*APIServer, error) {
	for _, d := range assets.CRDDirs {
		if _, err := os.Stat(d); err != nil {
			return nil, fmt.Errorf("CRD folder: %w", err)
		}
	}
	// envtest logs through controller-runtime's logger, which otherwise
	// prints a stack trace when it was never set; its errors come back as
	// errors anyway.
	quietControllerRuntime.Do(func() { ctrllog.SetLogger(logr.Discard()) })

	out := &lockedBuffer{}
	noExisting := false
	env := &envtest.Environment{
		UseExistingCluster:    &noExisting,
		BinaryAssetsDirectory: assets.Bin,
		CRDDirectoryPaths:     assets.CRDDirs,
		ErrorIfCRDPathMissing: true,
		// A 2-core machine running other test packages beside this one
		// needs more than envtest's 20 s default now and then.
		ControlPlaneStartTimeout: startTimeout,
		ControlPlaneStopTimeout:  30 * time.Second,
		CRDInstallOptions:        envtest.CRDInstallOptions{MaxTime: time.Minute},
	}
	api := env.ControlPlane.GetAPIServer()
	api.Path = filepath.Join(assets.Bin, "kube-apiserver")
	api.Out, api.Err = out, out
	env.ControlPlane.Etcd = &envtest.Etcd{Path: filepath.Join(assets.Bin, "etcd"), Out: out, Err: out}

	s := &APIServer{env: env, output: out}
	cfg, err := env.Start()
	if err != nil {
		return s, fmt.Errorf("starting kube-apiserver and etcd from %s: %w", assets.Bin, err)
	}
	s.Config = cfg
	want, err := countCRDFiles(assets.CRDDirs)
	if err != nil {
		return s, err
	}
	for _, c := range env.CRDs {
		s.CRDs = append(s.CRDs, c.Name)
	}
	slices.Sort(s.CRDs)
	if len(s.CRDs) != want {
		return s, fmt.Errorf("installed %d CRDs from %v, but the folders hold %d YAML files: %v", len(s.CRDs), assets.CRDDirs, want, s.CRDs)
	}
	if err := waitEstablished(ctx, cfg, s.CRDs, time.Minute); err != nil {
		return s, err
	}
	return s, nil
}

// Stop stops kube-apiserver and etcd; envtest removes their directories.
func (s *APIServer) Stop() error { return s.env.Stop() }

// KubeConfig is an admin kubeconfig for the server.
func (s *APIServer) KubeConfig() []byte { return s.env.KubeConfig }

// User provisions a client certificate for name in groups and returns its
// client configuration and the path of a kubeconfig file. The server
// authorizes with RBAC: a user outside system:masters may do nothing until a
// test grants it a role, which is how tests reach Forbidden.
func (s *APIServer) User(t testing.TB, name string, groups ...string) (*rest.Config, string) {
	t.Helper()
	u, err := s.env.AddUser(envtest.User{Name: name, Groups: groups}, &rest.Config{QPS: s.Config.QPS, Burst: s.Config.Burst})
	if err != nil {
		t.Fatalf("adding user %s: %v", name, err)
	}
	kc, err := u.KubeConfig()
	if err != nil {
		t.Fatalf("kubeconfig of user %s: %v", name, err)
	}
	p := filepath.Join(t.TempDir(), name+".kubeconfig")
	if err := os.WriteFile(p, kc, 0o600); err != nil {
		t.Fatal(err)
	}
	return u.Config(), p
}

// countCRDFiles counts the files envtest reads as CRDs in dirs.
func countCRDFiles(dirs []string) (int, error) {
	n := 0
	for _, d := range dirs {
		es, err := os.ReadDir(d)
		if err != nil {
			return 0, err
		}
		for _, e := range es {
			switch filepath.Ext(e.Name()) {
			case ".yaml", ".yml", ".json":
				if !e.IsDir() {
					n++
				}
			}
		}
	}
	return n, nil
}

// waitEstablished waits until each named CRD has condition Established=True.
func waitEstablished(ctx context.Context, cfg *rest.Config, names []string, timeout time.Duration) error {
	cs, err := apiextensionsclient.NewForConfig(cfg)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for _, n := range names {
		var last string
		err := wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			crd, err := cs.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, n, metav1.GetOptions{})
			if err != nil {
				last = err.Error()
				return false, nil
			}
			for _, c := range crd.Status.Conditions {
				if c.Type == apiextensionsv1.Established {
					last = fmt.Sprintf("Established=%s %s: %s", c.Status, c.Reason, c.Message)
					return c.Status == apiextensionsv1.ConditionTrue, nil
				}
			}
			last = "no Established condition"
			return false, nil
		})
		if err != nil {
			if errors.Is(err, context.Canceled) {
				return fmt.Errorf("interrupted while waiting for CRD %s: %w", n, err)
			}
			return fmt.Errorf("CRD %s not Established after %v (%s): %w", n, timeout, last, err)
		}
	}
	return nil
}

// Tail returns the last n lines of s.
func Tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// keepOutput bounds what lockedBuffer keeps of the processes' output: its
// end is all that is ever shown, and a server may run for hours.
const keepOutput = 256 << 10

// lockedBuffer collects the output of the API server's processes, written
// by several goroutines, keeping about the last keepOutput bytes.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.b.Len()+len(p) > 2*keepOutput {
		rest := append([]byte(nil), l.b.Bytes()[max(0, l.b.Len()-keepOutput):]...)
		l.b.Reset()
		l.b.Write(rest)
	}
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
