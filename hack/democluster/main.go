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
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

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

	start := time.Now()
	srv, err := kubeenv.Start(ctx, assets, *startTimeout)
	code := 0
	switch {
	case err != nil && ctx.Err() != nil:
		// stopped before it was ready: nothing went wrong
	case err != nil:
		fmt.Fprintf(stderr, "democluster: %v\n", err)
		code = exitFailure
	default:
		code = serve(ctx, srv, loads, *kubeconfigOut, start, stdout, stderr)
	}
	// Stopped whatever happened: a failed Start may have left processes.
	if srv != nil {
		if err := srv.Stop(); err != nil {
			fmt.Fprintf(stderr, "democluster: stopping kube-apiserver and etcd: %v\n", err)
			code = exitFailure
		}
		if code != 0 {
			fmt.Fprintf(stderr, "democluster: kube-apiserver and etcd output (end):\n%s\n", kubeenv.Tail(srv.Output(), 30))
		}
	}
	return code
}

// serve loads the files into the started server, writes the kubeconfig,
// says ready and waits for ctx to end. It returns the exit code; the caller
// stops the server.
func serve(ctx context.Context, srv *kubeenv.APIServer, loads []string, kubeconfigOut string, start time.Time, stdout, stderr io.Writer) int {
	for _, f := range loads {
		if err := kubeenv.LoadFile(ctx, srv.Config, f); err != nil {
			if ctx.Err() != nil {
				return 0
			}
			fmt.Fprintf(stderr, "democluster: loading %v\n", err)
			return exitFailure
		}
	}
	if err := os.WriteFile(kubeconfigOut, srv.KubeConfig(), 0o600); err != nil {
		fmt.Fprintf(stderr, "democluster: %v\n", err)
		return exitFailure
	}
	fmt.Fprintf(stderr, "democluster: kube-apiserver %s, %d CRDs Established, %d file(s) loaded, in %v\n",
		srv.Config.Host, len(srv.CRDs), len(loads), time.Since(start).Round(time.Millisecond))
	fmt.Fprintln(stdout, "democluster: ready")
	<-ctx.Done()
	return 0
}
