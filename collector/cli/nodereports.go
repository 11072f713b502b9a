package cli

import (
	"context"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/nodediag/nodediag/collector/incident"
	"github.com/nodediag/nodediag/collector/reports"
	nodediagv1 "github.com/nodediag/nodediag/proto/nodediag/v1"
)

// nodeReports gathers node reports for diagnose and describe: the latest
// report of every node the collector knows (when --collector is given), and
// the reports of --reports paths (report files, node records, host roots).
// A path that cannot be read is an error: the operator named it.
func nodeReports(ctx context.Context, client *clientFlags, paths []string) ([]incident.NodeReport, error) {
	var out []incident.NodeReport
	for _, p := range paths {
		r, err := reports.Load(ctx, p)
		if err != nil {
			return nil, exitf(ExitUsage, "--reports %s: %v", p, err)
		}
		out = append(out, incident.NodeReport{Report: r})
	}
	if client.collector == "" {
		return out, nil
	}
	c, err := client.dial()
	if err != nil {
		return nil, err
	}
	defer c.Close()
	rctx, cancel := client.contextFor(ctx)
	defer cancel()
	list, err := c.fleet.ListNodes(rctx, &nodediagv1.ListNodesRequest{})
	if err != nil {
		return nil, c.explain(err)
	}
	for _, n := range list.GetNodes() {
		rec, err := c.fleet.GetNode(rctx, &nodediagv1.GetNodeRequest{NodeName: n.GetNodeName()})
		if status.Code(err) == codes.NotFound {
			continue // connected, not reported yet
		}
		if err != nil {
			return nil, c.explain(err)
		}
		r := rec.GetReport()
		if r == nil {
			continue
		}
		if r.Host == nil {
			r.Host = &nodediagv1.HostInfo{}
		}
		// The collector's name for the node (the Hello's) is the one
		// the join uses, with the Hello's provider ID in the summary.
		r.Host.NodeName = n.GetNodeName()
		out = append(out, incident.NodeReport{Report: r, Summary: n})
	}
	return out, nil
}
