// Command democluster is the management cluster of `make demo`'s Cluster
// API part (scripts/demo-cluster.sh): it starts the test API server of the
// collector's tests (kube-apiserver and etcd built by `make testbin`, started
// by controller-runtime's envtest, with the Cluster API CRDs and the provider
// stand-ins installed and Established), loads a YAML file of Cluster API
// objects with their status, writes an admin kubeconfig, prints
// "democluster: ready" on stdout, and serves until SIGTERM or SIGINT. Then it
// stops both processes, and envtest removes their directories.
//
//	go run ./hack/democluster --kubeconfig-out FILE --load hack/democluster/cluster.yaml
//
// Run it from the repository (LocateAssets finds .testbin and the CRDs from
// the working directory). Exit codes: 0 stopped by a signal; 2 any failure;
// 3 the API server's binaries are not built (or stale): `make testbin`.
//
// It is a demo and a developer's tool, not part of nodediag: the API server
// listens on loopback only, with certificates envtest makes for this run.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/nodediag/nodediag/internal/testenv/kubeenv"
)

// Exit codes.
const (
	exitFailure   = 2
	exitNoTestbin = 3
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("democluster", flag.ContinueOnError)
	fs.SetOutput(stderr)
	kubeconfigOut := fs.String("kubeconfig-out", "", "write the admin kubeconfig to this `FILE` (required)")
	var loads []string
	fs.Func("load", "create the objects of this YAML `FILE` with their status (repeatable)", func(s string) error {
		loads = append(loads, s)
		return nil
	})
	startTimeout := fs.Duration("start-timeout", time.Minute, "bound on starting kube-apiserver and etcd")
	if err := fs.Parse(args); err != nil {
		return exitFailure
	}
	if *kubeconfigOut == "" || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "democluster: usage: democluster --kubeconfig-out FILE [--load FILE.yaml]...")
		return exitFailure
	}

	wd, err := os.Getwd()
	if err != nil {
		fmt.Fprintf(stderr, "democluster: %v\n", err)
		return exitFailure
	}
	assets, err := kubeenv.LocateAssets(wd)
	if err != nil {
		fmt.Fprintf(stderr, "democluster: no test API server: %v\n"+
			"democluster: `make testbin` builds kube-apiserver and etcd into .testbin/ from the Go module proxy (a few minutes the first time)\n", err)
		return exitNoTestbin
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	// envtest logs through controller-runtime's logger, which otherwise
	// prints a stack trace when it was never set; its errors come back as
	// errors anyway.
	ctrllog.SetLogger(logr.Discard())
	out := &lockedBuffer{}
	noExisting := false
	env := &envtest.Environment{
		UseExistingCluster:       &noExisting,
		BinaryAssetsDirectory:    assets.Bin,
		CRDDirectoryPaths:        assets.CRDDirs,
		ErrorIfCRDPathMissing:    true,
		ControlPlaneStartTimeout: *startTimeout,
		ControlPlaneStopTimeout:  30 * time.Second,
		CRDInstallOptions:        envtest.CRDInstallOptions{MaxTime: time.Minute},
	}
	api := env.ControlPlane.GetAPIServer()
	api.Path = filepath.Join(assets.Bin, "kube-apiserver")
	api.Out, api.Err = out, out
	env.ControlPlane.Etcd = &envtest.Etcd{Path: filepath.Join(assets.Bin, "etcd"), Out: out, Err: out}

	code := serve(ctx, env, loads, *kubeconfigOut, stdout, stderr)
	// Stopped whatever happened: a failed Start may have left processes.
	if err := env.Stop(); err != nil {
		fmt.Fprintf(stderr, "democluster: stopping kube-apiserver and etcd: %v\n", err)
		code = exitFailure
	}
	if code != 0 {
		fmt.Fprintf(stderr, "democluster: kube-apiserver and etcd output (end):\n%s\n", tail(out.String(), 30))
	}
	return code
}

// serve starts env, loads the files, writes the kubeconfig, says ready and
// waits for ctx to end. It returns the exit code; the caller stops env.
func serve(ctx context.Context, env *envtest.Environment, loads []string, kubeconfigOut string, stdout, stderr io.Writer) int {
	start := time.Now()
	cfg, err := env.Start()
	if err != nil {
		fmt.Fprintf(stderr, "democluster: starting kube-apiserver and etcd from %s: %v\n", env.BinaryAssetsDirectory, err)
		return exitFailure
	}
	var names []string
	for _, c := range env.CRDs {
		names = append(names, c.Name)
	}
	if len(names) == 0 {
		fmt.Fprintf(stderr, "democluster: no CRD installed from %v\n", env.CRDDirectoryPaths)
		return exitFailure
	}
	if err := waitEstablished(ctx, cfg, names, time.Minute); err != nil {
		if ctx.Err() != nil {
			return 0 // stopped before it was ready: nothing went wrong
		}
		fmt.Fprintf(stderr, "democluster: %v\n", err)
		return exitFailure
	}
	for _, f := range loads {
		if err := kubeenv.LoadFile(ctx, cfg, f); err != nil {
			if ctx.Err() != nil {
				return 0
			}
			fmt.Fprintf(stderr, "democluster: loading %v\n", err)
			return exitFailure
		}
	}
	if err := os.WriteFile(kubeconfigOut, env.KubeConfig, 0o600); err != nil {
		fmt.Fprintf(stderr, "democluster: %v\n", err)
		return exitFailure
	}
	fmt.Fprintf(stderr, "democluster: kube-apiserver %s, %d CRDs Established, %d file(s) loaded, in %v\n",
		cfg.Host, len(names), len(loads), time.Since(start).Round(time.Millisecond))
	fmt.Fprintln(stdout, "democluster: ready")
	<-ctx.Done()
	return 0
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
		last := "not read yet"
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
				return fmt.Errorf("interrupted while waiting for CRD %s", n)
			}
			return fmt.Errorf("CRD %s not Established after %v (%s): %w", n, timeout, last, err)
		}
	}
	return nil
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// keepOutput bounds what lockedBuffer keeps of the processes' output: its
// end is all that is ever shown, and the server may run for hours.
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
