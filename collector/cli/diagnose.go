package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/client-go/rest"

	"github.com/nodediag/nodediag/agent/rules"
	"github.com/nodediag/nodediag/collector/capi"
	"github.com/nodediag/nodediag/collector/incident"
	"github.com/nodediag/nodediag/collector/server"
	"github.com/nodediag/nodediag/collector/workload"
	"github.com/nodediag/nodediag/internal/version"
	nodediagv1 "github.com/nodediag/nodediag/proto/nodediag/v1"
)

const diagnoseLong = `Diagnose a Cluster API cluster: read its objects from the management
cluster (Cluster, Machines, MachineSets, MachineDeployments, MachinePools,
MachineHealthChecks, the KubeadmControlPlane, the infrastructure objects each
Machine references, HelmChartProxies; get, list and watch only), join each
Machine with its node's report (by provider ID, nodeRef, or VM name), judge
every node again with what its Machine expects, and write the incident
report: symptom and impact, evidence, failure domain, root cause with its
evidence, confidence, remediation, escalation.

Given only --collector, and a collector that reads the management cluster
itself (serve --kubeconfig), the collector makes the report from its
informers and stored reports: no kubeconfig is needed here. Otherwise the
cluster is read here and node reports come from the collector (--collector,
the latest report of every node it knows) and/or from files (--reports: agent JSON reports,
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
	// The workload cluster: how to reach it (--workload-access) or its
	// kubeconfig file (--workload-kubeconfig).
	workloadAccess     string
	workloadKubeconfig string
}

func (o *clusterOptions) add(cmd *cobra.Command, outputs string) {
	o.client.add(cmd)
	fs := cmd.Flags()
	fs.Lookup("collector").Usage = "a running collector, HOST:PORT, whose stored node reports are joined (optional)"
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "the management cluster's kubeconfig `FILE` (default: $KUBECONFIG, else ~/.kube/config)")
	fs.StringVar(&o.kubeCtx, "context", "", "the kubeconfig context (default: its current context)")
	fs.StringSliceVar(&o.reports, "reports", nil, "node reports: agent JSON reports, node records, host roots (repeatable, comma-separated)")
	fs.StringVar(&o.workloadAccess, "workload-access", "reader", "how to read the workload cluster's Nodes and kube-system: reader (Secret CLUSTER-nodediag-kubeconfig, the read-only identity of deploy/workload-reader), capi (Secret CLUSTER-kubeconfig, Cluster API's admin kubeconfig), none")
	fs.StringVar(&o.workloadKubeconfig, "workload-kubeconfig", "", "the workload cluster's kubeconfig `FILE` (instead of a Secret)")
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
			return runDiagnose(contextOf(cmd), cmd.OutOrStdout(), cmd.ErrOrStderr(), o, args[0])
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
			return runDescribe(contextOf(cmd), cmd.OutOrStdout(), cmd.ErrOrStderr(), o, args[0])
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
func readCluster(ctx context.Context, stderr io.Writer, o *clusterOptions, arg string) (*capi.Cluster, []incident.NodeReport, *workload.State, error) {
	ns, name, err := splitName(arg)
	if err != nil {
		return nil, nil, nil, err
	}
	cfg, err := capi.RESTConfig(o.kubeconfig, o.kubeCtx)
	if err != nil {
		return nil, nil, nil, exitf(ExitUsage, "%v", err)
	}
	r, err := capi.NewReader(cfg)
	if err != nil {
		return nil, nil, nil, exitf(ExitUsage, "%v", err)
	}
	c, err := r.Cluster(ctx, ns, name)
	if err != nil {
		var fe *capi.ForbiddenError
		switch {
		case errors.Is(err, capi.ErrClusterNotFound):
			return nil, nil, nil, exitf(ExitUsage, "cluster %s/%s not found in the management cluster (kubectl get clusters -A lists them)", ns, name)
		case errors.As(err, &fe):
			return nil, nil, nil, exitf(ExitUsage, "%v", err)
		}
		return nil, nil, nil, exitf(ExitUsage, "reading cluster %s/%s: %v", ns, name, err)
	}
	reps, err := nodeReports(ctx, &o.client, o.reports)
	if err != nil {
		return nil, nil, nil, err
	}
	wl, err := readWorkload(ctx, stderr, o, cfg, ns, name)
	if err != nil {
		return nil, nil, nil, err
	}
	return c, reps, wl, nil
}

// readWorkload reads the workload cluster of namespace/name, as
// --workload-access and --workload-kubeconfig say. Nil when it is not to
// be read, or (with the default access) when its Secret was never made:
// then stderr says how to set it up. Any other failure is a State that
// was not reached: a gap in the report.
func readWorkload(ctx context.Context, stderr io.Writer, o *clusterOptions, mgmt *rest.Config, namespace, name string) (*workload.State, error) {
	if o.workloadKubeconfig != "" {
		cfg, err := capi.RESTConfig(o.workloadKubeconfig, "")
		if err != nil {
			return nil, exitf(ExitUsage, "--workload-kubeconfig: %v", err)
		}
		return workload.Read(ctx, cfg, o.workloadKubeconfig+" (--workload-kubeconfig)", 0), nil
	}
	a, err := workload.ParseAccess(o.workloadAccess)
	if err != nil {
		return nil, exitf(ExitUsage, "%v", err)
	}
	st, err := workload.ReadCluster(ctx, mgmt, namespace, name, a)
	if errors.Is(err, workload.ErrNoSecret) {
		if a == workload.AccessReader {
			fmt.Fprintf(stderr, "nodediag: the workload cluster was not read (the dependency chain is judged from the management side only): %v\n", err)
			return nil, nil
		}
		return &workload.State{Source: workload.SecretName(name, a), Problems: []workload.Problem{{Resource: "the API server", Verb: "get", Err: err.Error()}}}, nil
	}
	return st, nil
}

// clusterIncident is the cluster and its incident report: made by the
// collector when only --collector is given and the collector reads the
// management cluster (serve --kubeconfig), else here, from the kubeconfig
// and the node reports (nodeReports).
func clusterIncident(ctx context.Context, stderr io.Writer, o *clusterOptions, arg string) (*capi.Cluster, *incident.Incident, error) {
	if o.client.collector != "" && o.kubeconfig == "" && o.kubeCtx == "" && len(o.reports) == 0 {
		c, inc, err := collectorIncident(ctx, o, arg)
		if !errors.Is(err, errNoClusterAPI) {
			return c, inc, err
		}
	}
	c, reps, wl, err := readCluster(ctx, stderr, o, arg)
	if err != nil {
		return nil, nil, err
	}
	inc, err := incident.Diagnose(c, reps, incident.Options{Workload: wl})
	if err != nil {
		return nil, nil, exitf(ExitUsage, "diagnosing %s: %v", arg, err)
	}
	return c, inc, nil
}

// errNoClusterAPI: the collector reads no management cluster; diagnose
// here instead.
var errNoClusterAPI = errors.New("the collector reads no management cluster")

// collectorIncident asks the collector to diagnose the cluster with its
// informers and stored reports.
func collectorIncident(ctx context.Context, o *clusterOptions, arg string) (*capi.Cluster, *incident.Incident, error) {
	ns, name, err := splitName(arg)
	if err != nil {
		return nil, nil, err
	}
	cl, err := o.client.dial()
	if err != nil {
		return nil, nil, err
	}
	defer cl.Close()
	rctx, cancel := o.client.contextFor(ctx)
	defer cancel()
	resp, err := cl.fleet.DiagnoseCluster(rctx, &nodediagv1.DiagnoseClusterRequest{Namespace: ns, Name: name})
	switch status.Code(err) {
	case codes.OK:
	case codes.FailedPrecondition, codes.Unimplemented:
		return nil, nil, errNoClusterAPI
	case codes.NotFound:
		return nil, nil, exitf(ExitUsage, "cluster %s/%s not found in the management cluster the collector reads (kubectl get clusters -A lists them)", ns, name)
	case codes.PermissionDenied:
		st := status.Convert(err)
		for _, d := range st.Details() {
			if ei, ok := d.(*errdetails.ErrorInfo); ok && ei.GetReason() == server.ReasonClusterAPIForbidden {
				return nil, nil, exitf(ExitUsage, "the collector at %s cannot read cluster %s/%s: %s", o.client.collector, ns, name, st.Message())
			}
		}
		return nil, nil, cl.explain(err)
	default:
		return nil, nil, cl.explain(err)
	}
	inc := &incident.Incident{}
	if err := json.Unmarshal(resp.GetIncidentJson(), inc); err != nil {
		return nil, nil, exitf(ExitUsage, "the collector's incident report does not decode: %v", err)
	}
	c := &capi.Cluster{}
	if err := json.Unmarshal(resp.GetClusterJson(), c); err != nil {
		return nil, nil, exitf(ExitUsage, "the collector's cluster state does not decode (collector %s, this nodediag %s): %v", resp.GetCollectorVersion(), version.Get().Version, err)
	}
	return c, inc, nil
}

func runDiagnose(ctx context.Context, w, stderr io.Writer, o *clusterOptions, arg string) error {
	switch o.output {
	case "markdown", "json", "html":
	default:
		return exitf(ExitUsage, "--output %q: want markdown, json or html", o.output)
	}
	_, inc, err := clusterIncident(ctx, stderr, o, arg)
	if err != nil {
		return err
	}
	if err := incident.RenderTo(w, inc, o.output); err != nil {
		return err
	}
	if incidentHasErrors(inc) {
		return &ExitError{Code: ExitFindings, Err: fmt.Errorf("cluster %s has a finding at error or above", arg)}
	}
	return nil
}

func runDescribe(ctx context.Context, w, stderr io.Writer, o *clusterOptions, arg string) error {
	c, inc, err := clusterIncident(ctx, stderr, o, arg)
	if err != nil {
		return err
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
		if rules.SeverityAtLeast(f.Severity, rules.Error) {
			return true
		}
	}
	return false
}
