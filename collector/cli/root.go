// Package cli is the command line of nodediag, the collector: cobra commands
// built by constructors (no package-level command state), each printing to
// cmd.OutOrStdout().
//
// This version has only `version`; serve, sweep, nodes, node, diagnose,
// describe and analyze arrive with the collector (see docs/CONTRACTS.md).
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
	root.AddCommand(newVersionCommand())
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
