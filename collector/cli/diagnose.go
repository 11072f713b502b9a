package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/nodediag/nodediag/collector/capi"
	"github.com/nodediag/nodediag/collector/incident"
)

const diagnoseLong = `Diagnose a Cluster API cluster: read its objects from the management
cluster (Cluster, Machines, MachineSets, MachineDeployments, MachinePools,
MachineHealthChecks, the KubeadmControlPlane, the infrastructure objects each
Machine references, HelmChartProxies; get, list and watch only), join each
Machine with its node's report (by provider ID, nodeRef, or VM name), judge
every node again with what its Machine expects, and write the incident
report: symptom and impact, evidence, failure domain, root cause with its
evidence, confidence, remediation, escalation.

Node reports come from a running collector (--collector, the latest report of
every node it knows) and/or from files (--reports: agent JSON reports,
` + "`nodediag node -o json`" + ` records, host roots checked here read-only). Without
any, the report says which node evidence is missing and how to get it.

Access: the kubeconfig is resolved as kubectl does (--kubeconfig, $KUBECONFIG,
~/.kube/config; --context). A resource the identity may not read is reported
with the identity, the verb and the least role needed, never as absent.

Exit codes: 0 no finding at error or above; 1 at least one; 2 usage, the
cluster not found or not readable, a --reports path that is not a report.`

type clusterOptions struct {
	client     clientFlags
	kubeconfig string
	kubeCtx    string
	reports    []string
	output     string
}

func (o *clusterOptions) add(cmd *cobra.Command, outputs string) {
	o.client.add(cmd)
	fs := cmd.Flags()
	fs.Lookup("collector").Usage = "a running collector, HOST:PORT, whose stored node reports are joined (optional)"
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "the management cluster's kubeconfig `FILE` (default: $KUBECONFIG, else ~/.kube/config)")
	fs.StringVar(&o.kubeCtx, "context", "", "the kubeconfig context (default: its current context)")
	fs.StringSliceVar(&o.reports, "reports", nil, "node reports: agent JSON reports, node records, host roots (repeatable, comma-separated)")
	if outputs != "" {
		fs.StringVarP(&o.output, "output", "o", "markdown", "output format: "+outputs)
	}
}

func newDiagnoseCommand() *cobra.Command {
	diagnose := &cobra.Command{
		Use:   "diagnose",
		Short: "Diagnose a Cluster API cluster with its nodes' evidence; write the incident report",
	}
	o := &clusterOptions{}
	cluster := &cobra.Command{
		Use:   "cluster NAMESPACE/NAME [--kubeconfig FILE] [--collector ADDR] [--reports PATH...] [-o markdown|json|html]",
		Short: "Write the incident report of one cluster",
		Long:  diagnoseLong,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runDiagnose(contextOf(cmd), cmd.OutOrStdout(), o, args[0])
		},
	}
	o.add(cluster, "markdown, json or html")
	diagnose.AddCommand(cluster)
	return diagnose
}

func newDescribeCommand() *cobra.Command {
	describe := &cobra.Command{
		Use:   "describe",
		Short: "Show a Cluster API cluster's objects as a tree, each Machine with its node's finding",
	}
	o := &clusterOptions{}
	cluster := &cobra.Command{
		Use:   "cluster NAMESPACE/NAME [--kubeconfig FILE] [--collector ADDR] [--reports PATH...]",
		Short: "The cluster's objects as clusterctl describe shows them, with each Machine's node finding",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runDescribe(contextOf(cmd), cmd.OutOrStdout(), o, args[0])
		},
	}
	o.add(cluster, "")
	describe.AddCommand(cluster)
	return describe
}

func contextOf(cmd *cobra.Command) context.Context {
	if ctx := cmd.Context(); ctx != nil {
		return ctx
	}
	return context.Background()
}

// splitName parses NAMESPACE/NAME.
func splitName(arg string) (string, string, error) {
	ns, name, ok := strings.Cut(arg, "/")
	if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
		return "", "", exitf(ExitUsage, "%q: want NAMESPACE/NAME (the Cluster object's namespace and name)", arg)
	}
	return ns, name, nil
}

// readCluster reads the Cluster and the node reports to join with it.
func readCluster(ctx context.Context, o *clusterOptions, arg string) (*capi.Cluster, []incident.NodeReport, error) {
	ns, name, err := splitName(arg)
	if err != nil {
		return nil, nil, err
	}
	cfg, err := capi.RESTConfig(o.kubeconfig, o.kubeCtx)
	if err != nil {
		return nil, nil, exitf(ExitUsage, "%v", err)
	}
	r, err := capi.NewReader(cfg)
	if err != nil {
		return nil, nil, exitf(ExitUsage, "%v", err)
	}
	c, err := r.Cluster(ctx, ns, name)
	if err != nil {
		var fe *capi.ForbiddenError
		switch {
		case errors.Is(err, capi.ErrClusterNotFound):
			return nil, nil, exitf(ExitUsage, "cluster %s/%s not found in the management cluster (kubectl get clusters -A lists them)", ns, name)
		case errors.As(err, &fe):
			return nil, nil, exitf(ExitUsage, "%v", err)
		}
		return nil, nil, exitf(ExitUsage, "reading cluster %s/%s: %v", ns, name, err)
	}
	reps, err := nodeReports(ctx, &o.client, o.reports)
	if err != nil {
		return nil, nil, err
	}
	return c, reps, nil
}

func runDiagnose(ctx context.Context, w io.Writer, o *clusterOptions, arg string) error {
	switch o.output {
	case "markdown", "json", "html":
	default:
		return exitf(ExitUsage, "--output %q: want markdown, json or html", o.output)
	}
	c, reps, err := readCluster(ctx, o, arg)
	if err != nil {
		return err
	}
	inc, err := incident.Diagnose(c, reps, incident.Options{})
	if err != nil {
		return exitf(ExitUsage, "diagnosing %s: %v", arg, err)
	}
	if err := incident.RenderTo(w, inc, o.output); err != nil {
		return err
	}
	if incidentHasErrors(inc) {
		return &ExitError{Code: ExitFindings, Err: fmt.Errorf("cluster %s has a finding at error or above", arg)}
	}
	return nil
}

func runDescribe(ctx context.Context, w io.Writer, o *clusterOptions, arg string) error {
	c, reps, err := readCluster(ctx, o, arg)
	if err != nil {
		return err
	}
	inc, err := incident.Diagnose(c, reps, incident.Options{})
	if err != nil {
		return exitf(ExitUsage, "diagnosing %s: %v", arg, err)
	}
	width, _ := terminalWidth(w) // 0 unless a terminal: then nothing is cut
	if err := writeTree(w, clusterTree(c, inc), width); err != nil {
		return err
	}
	for _, p := range c.Problems {
		fmt.Fprintf(w, "could not read: %s\n", oneLine(p.String()))
	}
	return nil
}

// incidentHasErrors says whether a finding of inc is at error or above.
func incidentHasErrors(inc *incident.Incident) bool {
	for _, f := range inc.Findings {
		if f.Severity == "error" || f.Severity == "critical" {
			return true
		}
	}
	return false
}
