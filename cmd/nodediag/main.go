// Command nodediag is the collector and CLI of nodediag. See collector/cli.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/nodediag/nodediag/collector/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// After the first signal, a second one kills the process at once
	// (a shutdown that hangs can still be interrupted).
	context.AfterFunc(ctx, stop)
	err := cli.NewRootCommand().ExecuteContext(ctx)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "nodediag:", err)
	}
	os.Exit(cli.ExitCode(err))
}
