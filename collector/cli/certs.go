package cli

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/nodediag/nodediag/collector/certs"
)

const certsLong = `Issue the certificates of the collector's mutual TLS into --dir: a CA, the
collector's server certificate, the agents' client certificate(s) and an
operator's client certificate. Keys are ECDSA P-256, written with mode 0600.

  ca.crt, ca.key               ca.crt is serve's --client-ca and every client's --ca;
                               ca.key only signs: keep it offline
  server.crt, server.key       serve --tls-cert/--tls-key; valid for the --server-name's
  agent.crt, agent.key         one certificate shared by every agent (the default), or
  agents/NAME.crt, NAME.key    one per node with --agent NAME (repeatable): such a
                               certificate may only report for node NAME
  operator.crt, operator.key   sweep, nodes and node (--tls-cert/--tls-key/--ca)

The collector tells the roles apart by the certificates' organization: an
agent's (O=nodediag:agents) cannot read the fleet or start sweeps, an
operator's (O=nodediag:operators) cannot report as a node.

Names: --server-name lists the names and addresses agents and operators dial
the collector by (a Service's DNS names in a cluster); an IP address becomes an
IP subject alternative name.

Existing files are never replaced without --force.

cert-manager: --cert-manager prints the cert-manager resources (Issuers and
Certificates) that give the same files as Secrets (tls.crt, tls.key, ca.crt for
--tls-cert, --tls-key, --ca/--client-ca), and writes nothing.`

// Defaults of certs' flags.
const (
	DefaultCertValidity = 365 * 24 * time.Hour
	DefaultCAValidity   = 10 * 365 * 24 * time.Hour
	// collectorAddrExample is the --collector of the printed command
	// lines; HOST becomes the server certificate's first name.
	collectorAddrExample = "HOST:7443"
)

// DefaultServerNames are the collector's names when --server-name is not
// given: a collector on this machine, dialled over loopback.
var DefaultServerNames = []string{"localhost", "127.0.0.1"}

type certsOptions struct {
	dir         string
	serverNames []string
	agents      []string
	operator    string
	validity    time.Duration
	caValidity  time.Duration
	force       bool
	add         bool
	certManager bool
	now         func() time.Time
}

func newCertsCommand() *cobra.Command {
	o := &certsOptions{now: time.Now}
	cmd := &cobra.Command{
		Use:   "certs --dir DIR [--server-name NAME]... [--agent NODE]... [--force] | --cert-manager",
		Short: "Issue the CA and certificates of the collector's mutual TLS",
		Long:  certsLong,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runCerts(cmd, o)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&o.dir, "dir", "", "`DIR` to write the files to (created 0700)")
	fs.StringSliceVar(&o.serverNames, "server-name", DefaultServerNames, "DNS `NAME` or IP address clients dial the collector by (repeatable, or comma-separated); the first is the certificate's common name")
	fs.StringArrayVar(&o.agents, "agent", nil, "issue a certificate for node `NAME`, bound to that node (repeatable); without it, one certificate shared by every agent")
	fs.StringVar(&o.operator, "operator", certs.DefaultOperator, "common `NAME` of the operator's certificate")
	fs.DurationVar(&o.validity, "validity", DefaultCertValidity, "how long the server, agent and operator certificates are valid")
	fs.DurationVar(&o.caValidity, "ca-validity", DefaultCAValidity, "how long the CA is valid (at least --validity)")
	fs.BoolVar(&o.force, "force", false, "replace existing files")
	fs.BoolVar(&o.add, "add", false, "issue only the --agent certificates, with the CA already in --dir (ca.crt, ca.key): for new nodes of a fleet, without replacing anything else")
	fs.BoolVar(&o.certManager, "cert-manager", false, "print cert-manager resources that issue the same certificates, and write nothing")
	return cmd
}

func runCerts(cmd *cobra.Command, o *certsOptions) error {
	out := cmd.OutOrStdout()
	if o.certManager {
		if o.dir != "" || len(o.agents) > 0 || o.force {
			return exitf(ExitUsage, "--cert-manager prints resources and writes nothing: it takes no --dir, --agent or --force")
		}
		_, err := io.WriteString(out, certs.CertManagerExample)
		return err
	}
	if o.dir == "" {
		return exitf(ExitUsage, "--dir DIR is required (where to write the certificates), or --cert-manager to print cert-manager resources")
	}
	if o.add {
		return addAgentCerts(out, o)
	}
	var names []string
	for _, n := range o.serverNames {
		if n = strings.TrimSpace(n); n != "" {
			names = append(names, n)
		}
	}
	if len(names) == 0 {
		return exitf(ExitUsage, "--server-name: at least one DNS name or IP address of the collector is needed")
	}
	set, err := certs.Issue(certs.Options{
		ServerNames: names,
		Agents:      o.agents,
		Operator:    o.operator,
		Validity:    o.validity,
		CAValidity:  o.caValidity,
		Now:         o.now(),
	})
	if err != nil {
		return exitf(ExitUsage, "%v", err)
	}
	written, err := certs.Write(o.dir, set, o.force)
	if err != nil {
		if errors.Is(err, certs.ErrExists) {
			return exitf(ExitUsage, "%v", err)
		}
		if len(written) > 0 {
			return exitf(ExitUsage, "%v (written before the failure: %s)", err, strings.Join(written, ", "))
		}
		return exitf(ExitUsage, "%v", err)
	}
	return writeCertsGuide(out, o.dir, set, len(written))
}

// writeCertsGuide tells what was written and which flag takes which file.
func writeCertsGuide(w io.Writer, dir string, set *certs.Set, n int) error {
	p := func(name string) string { return filepath.Join(dir, name) }
	var b strings.Builder
	until := set.Server.Cert.NotAfter.UTC().Format(time.RFC3339)
	fmt.Fprintf(&b, "Wrote %d files in %s (keys 0600):\n", n, dir)
	var rows [][2]string
	row := func(file, what string) { rows = append(rows, [2]string{p(file), what}) }
	row(set.CA.CertFile, "the CA: serve --client-ca, and --ca of agents and operators")
	row(set.CA.KeyFile, "the CA's key: signs more certificates; keep it offline")
	var sans []string
	sans = append(sans, set.Server.Cert.DNSNames...)
	for _, ip := range set.Server.Cert.IPAddresses {
		sans = append(sans, ip.String())
	}
	row(set.Server.CertFile, fmt.Sprintf("the collector: serve --tls-cert (for %s; until %s)", strings.Join(sans, ", "), until))
	row(set.Server.KeyFile, "the collector: serve --tls-key")
	for _, a := range set.Agents {
		who := "every agent (shared)"
		if !set.Shared {
			who = "the agent of node " + a.Name + " only"
		}
		row(a.CertFile, who+": nodediag-agent run --tls-cert")
		row(a.KeyFile, who+": nodediag-agent run --tls-key")
	}
	row(set.Operator.CertFile, fmt.Sprintf("operator %q: sweep, nodes, node --tls-cert", set.Operator.Name))
	row(set.Operator.KeyFile, fmt.Sprintf("operator %q: sweep, nodes, node --tls-key", set.Operator.Name))
	width := 0
	for _, r := range rows {
		width = max(width, len(r[0]))
	}
	for _, r := range rows {
		fmt.Fprintf(&b, "  %-*s  %s\n", width, r[0], r[1])
	}

	addr := collectorAddrExample
	if len(sans) > 0 {
		host := sans[0]
		if strings.Contains(host, ":") {
			host = "[" + host + "]"
		}
		addr = strings.Replace(collectorAddrExample, "HOST", strings.TrimPrefix(host, "*."), 1)
	}
	b.WriteString("\nCollector:\n")
	fmt.Fprintf(&b, "  nodediag serve --tls-cert %s --tls-key %s --client-ca %s\n", p(set.Server.CertFile), p(set.Server.KeyFile), p(set.CA.CertFile))
	b.WriteString("Agents:\n")
	for _, a := range set.Agents {
		node := ""
		if !set.Shared {
			node = " --node-name " + a.Name
		}
		fmt.Fprintf(&b, "  nodediag-agent run --collector %s%s --tls-cert %s --tls-key %s --ca %s\n", addr, node, p(a.CertFile), p(a.KeyFile), p(set.CA.CertFile))
	}
	b.WriteString("Operators (sweep, nodes, node):\n")
	fmt.Fprintf(&b, "  nodediag sweep --collector %s --tls-cert %s --tls-key %s --ca %s\n", addr, p(set.Operator.CertFile), p(set.Operator.KeyFile), p(set.CA.CertFile))
	_, err := io.WriteString(w, b.String())
	return err
}

// addAgentCerts issues --agent certificates with the CA of --dir and writes
// only them (certs --add).
func addAgentCerts(w io.Writer, o *certsOptions) error {
	if len(o.agents) == 0 {
		return exitf(ExitUsage, "--add issues the --agent NAME certificates: give at least one --agent")
	}
	ca, key, err := certs.LoadCA(o.dir)
	if err != nil {
		return exitf(ExitUsage, "%v (run `nodediag certs --dir %s` first to create the CA)", err, o.dir)
	}
	pairs, err := certs.IssueAgents(ca, key, o.agents, o.validity, o.now())
	if err != nil {
		return exitf(ExitUsage, "%v", err)
	}
	written, err := certs.WritePairs(o.dir, pairs, o.force)
	if err != nil {
		return exitf(ExitUsage, "%v", err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Wrote %d files in %s with its CA (keys 0600):\n", len(written), o.dir)
	for _, pr := range pairs {
		fmt.Fprintf(&b, "  %s  the agent of node %s only: nodediag-agent run --tls-cert (until %s)\n",
			filepath.Join(o.dir, pr.CertFile), pr.Name, pr.Cert.NotAfter.UTC().Format(time.RFC3339))
		fmt.Fprintf(&b, "  %s  its key: nodediag-agent run --tls-key\n", filepath.Join(o.dir, pr.KeyFile))
	}
	_, err = io.WriteString(w, b.String())
	return err
}
