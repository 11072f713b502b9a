// Command nodediag-agent reads a Kubernetes node and names the most likely
// root cause of what is broken, with the evidence. See agent/cli.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/nodediag/nodediag/agent/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
