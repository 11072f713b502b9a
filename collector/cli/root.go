// Package cli is the command line of nodediag, the collector: cobra commands
// built by constructors (no package-level command state), each printing to
// cmd.OutOrStdout().
//
// The commands (docs/CONTRACTS.md): serve runs the collector
// (collector/server, with the store of collector/store); certs issues the
// certificates of its mutual TLS (collector/certs); sweep, nodes and node
// are the operator's side, clients of the collector's Fleet service;
// version. diagnose, describe and analyze arrive with later issues.
//
// Errors carry their exit code (ExitError, ExitCode): cmd/nodediag prints
// "nodediag: " and the error, and exits with ExitCode(err).
package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/nodediag/nodediag/internal/version"
)

// NewRootCommand returns the nodediag command tree.
func NewRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:           "nodediag",
		Short:         "Collects node diagnoses from nodediag agents and joins them with Cluster API state",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(
		newServeCommand(),
		newCertsCommand(),
		newSweepCommand(),
		newNodesCommand(),
		newNodeCommand(),
		newDiagnoseCommand(),
		newDescribeCommand(),
		newAnalyzeCommand(),
		newVersionCommand(),
	)
	return root
}

func newVersionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintf(cmd.OutOrStdout(), "nodediag %s\n", version.Get())
			return err
		},
	}
}
