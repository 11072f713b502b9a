package cli

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/nodediag/nodediag/agent/report"
	nodediagv1 "github.com/nodediag/nodediag/proto/nodediag/v1"
)

const nodeLong = `Print the latest report the collector stored for node NAME.

Output:
  text  one line of what the collector knows (connected, last seen, when the
        report was received), then the report exactly as ` + "`nodediag-agent check`" + `
        prints it: findings with their evidence, gaps, probes, and the SUMMARY
        line last
  json  the report as ` + "`nodediag-agent check --output json`" + ` writes it (the Report
        of nodediag.v1, protojson, proto field names, without raw evidence)

Exit codes (as the agent's check): 0 the report has no finding at error or
above, 1 it has one; 2 usage error, a node the collector has no report of, or
the collector could not be reached or refused this client.`

type nodeOptions struct {
	client clientFlags
	output string
	now    func() time.Time
}

func newNodeCommand() *cobra.Command {
	return newNodeCmd(&nodeOptions{now: time.Now})
}

func newNodeCmd(o *nodeOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "node NAME --collector ADDR [-o text|json]",
		Short: "A node's latest report, as its agent wrote it",
		Long:  nodeLong,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runNode(cmd.Context(), cmd, o, args[0])
		},
	}
	o.client.add(cmd)
	cmd.Flags().StringVarP(&o.output, "output", "o", "text", "output format: text or json")
	return cmd
}

func runNode(ctx context.Context, cmd *cobra.Command, o *nodeOptions, name string) error {
	if o.output != "text" && o.output != "json" {
		return exitf(ExitUsage, "--output %q: want text or json", o.output)
	}
	if name == "" {
		return exitf(ExitUsage, "the node name is empty")
	}
	if ctx == nil {
		ctx = context.Background()
	}
	c, err := o.client.dial()
	if err != nil {
		return err
	}
	defer c.Close()
	ctx, cancel := o.client.contextFor(ctx)
	defer cancel()
	rec, err := c.fleet.GetNode(ctx, &nodediagv1.GetNodeRequest{NodeName: name})
	if status.Code(err) == codes.NotFound {
		return exitf(ExitUsage, "the collector at %s has no report of node %q (`nodediag nodes` lists the nodes it knows)", c.addr, name)
	}
	if err != nil {
		return c.explain(err)
	}
	if rec.GetReport() == nil {
		return exitf(ExitUsage, "node %q is known to the collector at %s but has not reported yet", name, c.addr)
	}
	out := cmd.OutOrStdout()
	if o.output == "json" {
		err = report.WriteJSON(out, rec.GetReport())
	} else {
		err = writeNodeText(out, name, rec, o.now())
	}
	if err != nil {
		return err
	}
	if report.ExitCode(rec.GetReport()) != 0 {
		return exitf(ExitFindings, "node %s has a finding at error or above", safe(name))
	}
	return nil
}

// writeNodeText writes what the collector knows of the node on one line,
// then the agent's own text rendering of the report (its SUMMARY line
// stays last).
func writeNodeText(w io.Writer, name string, rec *nodediagv1.NodeRecord, now time.Time) error {
	s := rec.GetSummary()
	if s.GetNodeName() != "" {
		name = s.GetNodeName()
	}
	state := "agent disconnected"
	if s.GetConnected() {
		state = "agent connected"
	}
	line := fmt.Sprintf("collector: node %s, %s, last seen %s", safe(name), state, ago(now, tsTime(s.GetLastSeen())))
	if at := s.GetReportedAt(); at != nil {
		line += fmt.Sprintf(", report received %s (%s)", at.AsTime().UTC().Format(time.RFC3339), ago(now, at.AsTime()))
	}
	if id := s.GetRequestId(); id != "" {
		line += ", answering sweep " + safe(id)
	}
	if _, err := fmt.Fprintln(w, line); err != nil {
		return err
	}
	return report.WriteText(w, rec.GetReport())
}
