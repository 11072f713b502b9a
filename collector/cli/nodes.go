package cli

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/proto"
	"sigs.k8s.io/yaml"

	"github.com/nodediag/nodediag/agent/report"
	nodediagv1 "github.com/nodediag/nodediag/proto/nodediag/v1"
)

const nodesLong = `List the nodes the collector knows: every node with a stored report, and
every agent connected now.

Output:
  (default)  NODE, CONNECTED, LAST SEEN, SEVERITY, TOP FINDING; the worst nodes
             first (critical, error, warning, unknown, info, ok, no report yet),
             then by name; the finding is cut to the terminal's width (80 off a
             terminal)
  wide       adds ERRORS, WARNINGS, REPORTED AT, AGENT, MACHINE ID, PROVIDER ID,
             and the whole finding
  json       the ListNodesResponse of nodediag.v1 (protojson, proto field names),
             sorted by node name
  yaml       the same document as YAML

SEVERITY is the worst severity of the node's latest report ("ok": no finding,
"-": the agent is connected but has not reported yet); TOP FINDING is its most
likely root cause, which is not always the worst finding.

Exit codes: 0 listed (whatever the nodes' state), 2 usage error or the
collector could not be reached or refused this client.`

type nodesOptions struct {
	client clientFlags
	output string
	now    func() time.Time
}

func newNodesCommand() *cobra.Command {
	return newNodesCmd(&nodesOptions{now: time.Now})
}

func newNodesCmd(o *nodesOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "nodes --collector ADDR [-o wide|json|yaml]",
		Short: "The fleet: each node's last report, top finding and severity",
		Long:  nodesLong,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runNodes(cmd.Context(), cmd, o)
		},
	}
	o.client.add(cmd)
	cmd.Flags().StringVarP(&o.output, "output", "o", "", "output format: wide, json or yaml (default: a table)")
	return cmd
}

func runNodes(ctx context.Context, cmd *cobra.Command, o *nodesOptions) error {
	switch o.output {
	case "", "wide", "json", "yaml":
	default:
		return exitf(ExitUsage, "--output %q: want wide, json or yaml", o.output)
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
	resp, err := c.fleet.ListNodes(ctx, &nodediagv1.ListNodesRequest{})
	if err != nil {
		return c.explain(err)
	}
	out := cmd.OutOrStdout()
	switch o.output {
	case "json":
		return writeNodesJSON(out, resp)
	case "yaml":
		return writeNodesYAML(out, resp)
	}
	if len(resp.GetNodes()) == 0 {
		_, err := fmt.Fprintf(cmd.ErrOrStderr(), "No node has reported to or is connected to the collector at %s.\n", c.addr)
		return err
	}
	return writeNodesTable(out, resp.GetNodes(), o.now(), tableWidth(out), o.output == "wide")
}

// sortedByName returns a copy of resp with its nodes sorted by name: the
// json and yaml documents are stable from one run to the next.
func sortedByName(resp *nodediagv1.ListNodesResponse) *nodediagv1.ListNodesResponse {
	c := proto.Clone(resp).(*nodediagv1.ListNodesResponse)
	sort.SliceStable(c.Nodes, func(i, j int) bool { return c.Nodes[i].GetNodeName() < c.Nodes[j].GetNodeName() })
	return c
}

func writeNodesJSON(w io.Writer, resp *nodediagv1.ListNodesResponse) error {
	b, err := report.MarshalJSON(sortedByName(resp))
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}

// writeNodesYAML writes the JSON document as YAML (sigs.k8s.io/yaml: the
// same keys, so that one jq/yq path works on both).
func writeNodesYAML(w io.Writer, resp *nodediagv1.ListNodesResponse) error {
	j, err := report.MarshalJSON(sortedByName(resp))
	if err != nil {
		return err
	}
	y, err := yaml.JSONToYAML(j)
	if err != nil {
		return fmt.Errorf("rendering YAML: %w", err)
	}
	_, err = w.Write(y)
	return err
}

// writeNodesTable writes the fleet table, worst nodes first, then by name.
// Without wide, the last column (the top finding) is cut so that lines fit
// width.
func writeNodesTable(w io.Writer, nodes []*nodediagv1.NodeSummary, now time.Time, width int, wide bool) error {
	sorted := append([]*nodediagv1.NodeSummary(nil), nodes...)
	sort.SliceStable(sorted, func(i, j int) bool {
		ri, rj := severityRank(nodeSeverity(sorted[i])), severityRank(nodeSeverity(sorted[j]))
		if ri != rj {
			return ri < rj
		}
		return sorted[i].GetNodeName() < sorted[j].GetNodeName()
	})
	header := []string{"NODE", "CONNECTED", "LAST SEEN", "SEVERITY"}
	if wide {
		header = append(header, "ERRORS", "WARNINGS", "REPORTED AT", "AGENT", "MACHINE ID", "PROVIDER ID")
	}
	header = append(header, "TOP FINDING")
	rows := [][]string{header}
	for _, n := range sorted {
		connected := "no"
		if n.GetConnected() {
			connected = "yes"
		}
		row := []string{safe(n.GetNodeName()), connected, ago(now, tsTime(n.GetLastSeen())), nodeSeverity(n)}
		if wide {
			reportedAt := "-"
			if n.GetReportedAt() != nil {
				reportedAt = n.GetReportedAt().AsTime().UTC().Format(time.RFC3339)
			}
			row = append(row,
				fmt.Sprint(n.GetErrors()), fmt.Sprint(n.GetWarnings()), reportedAt,
				orDash(safe(n.GetAgent().GetVersion())), orDash(safe(n.GetMachineId())), orDash(safe(n.GetProviderId())))
		}
		row = append(row, orDash(safe(topFinding(n))))
		rows = append(rows, row)
	}
	const gap = "   "
	widths := make([]int, len(header))
	for _, r := range rows {
		for i, cell := range r[:len(r)-1] {
			widths[i] = max(widths[i], len([]rune(cell)))
		}
	}
	var b strings.Builder
	for _, r := range rows {
		used := 0
		for i, cell := range r[:len(r)-1] {
			b.WriteString(pad(cell, widths[i]))
			b.WriteString(gap)
			used += widths[i] + len(gap)
		}
		last := r[len(r)-1]
		if !wide {
			last = clip(last, max(width-used, minFindingWidth))
		}
		b.WriteString(last)
		b.WriteByte('\n')
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
