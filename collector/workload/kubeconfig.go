package workload

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Access is how the collector reaches a workload cluster's API server.
type Access string

const (
	// AccessReader (the default) uses the kubeconfig the operator stores
	// in the Secret <cluster>-nodediag-kubeconfig, for the read-only
	// ServiceAccount that deploy/workload-reader installs in the workload
	// cluster.
	AccessReader Access = "reader"
	// AccessCAPI uses Cluster API's own Secret <cluster>-kubeconfig: the
	// workload cluster's cluster-admin. Opt-in; the collector still only
	// reads.
	AccessCAPI Access = "capi"
	// AccessNone reads nothing of the workload cluster.
	AccessNone Access = "none"
)

// ParseAccess parses --workload-access.
func ParseAccess(s string) (Access, error) {
	switch a := Access(s); a {
	case AccessReader, AccessCAPI, AccessNone:
		return a, nil
	case "":
		return AccessReader, nil
	}
	return "", fmt.Errorf("--workload-access %q: want reader, capi or none", s)
}

// SecretName is the Secret in the Cluster's namespace that holds the
// workload kubeconfig for access a.
func SecretName(cluster string, a Access) string {
	if a == AccessCAPI {
		return cluster + "-kubeconfig"
	}
	return cluster + "-nodediag-kubeconfig"
}

// ErrNoSecret: the workload kubeconfig Secret does not exist, or the
// management identity may not get it (access not set up for this cluster).
var ErrNoSecret = errors.New("no workload kubeconfig Secret")

// secretKey is the key of the kubeconfig in both Secrets (Cluster API's
// format, so that `clusterctl get kubeconfig`-style tools read either).
const secretKey = "value"

// maxKubeconfig bounds the Secret's value.
const maxKubeconfig = 1 << 20

// FromSecret reads the workload kubeconfig of cluster namespace/cluster from
// the management cluster (cfg) and returns its client configuration and a
// description of where it came from. The management identity needs get on
// that one Secret.
func FromSecret(ctx context.Context, mgmt *rest.Config, namespace, cluster string, a Access) (*rest.Config, string, error) {
	name := SecretName(cluster, a)
	where := fmt.Sprintf("Secret %s/%s", namespace, name)
	cs, err := kubernetes.NewForConfig(mgmt)
	if err != nil {
		return nil, where, err
	}
	sec, err := cs.CoreV1().Secrets(namespace).Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		if a == AccessCAPI {
			return nil, where, fmt.Errorf("%w: %s not found: Cluster API writes it once the control plane is initialised", ErrNoSecret, where)
		}
		return nil, where, fmt.Errorf("%w: %s not found: create it with the kubeconfig of the read-only ServiceAccount of deploy/workload-reader (docs/workload.md), or use --workload-access capi (Cluster API's admin kubeconfig) or --workload-kubeconfig FILE", ErrNoSecret, where)
	case apierrors.IsForbidden(err):
		// Not set up either: a gap only when the access was asked for.
		return nil, where, fmt.Errorf("%w: may not get %s (Forbidden): grant get on secrets named %s in namespace %s (docs/workload.md): %v", ErrNoSecret, where, name, namespace, err)
	case err != nil:
		return nil, where, fmt.Errorf("reading %s: %v", where, err)
	}
	raw := sec.Data[secretKey]
	if len(raw) == 0 {
		return nil, where, fmt.Errorf("%s has no data key %q (the kubeconfig)", where, secretKey)
	}
	cfg, err := Config(raw)
	if err != nil {
		return nil, where, fmt.Errorf("%s: %w", where, err)
	}
	return cfg, where, nil
}

// Config parses a workload kubeconfig that came from a Secret. Everything
// it needs must be inline: a kubeconfig that names a file (a token file, a
// certificate or key path), runs a command (exec, auth provider) or has no
// current context is refused, because whoever can write the Secret would
// otherwise make the collector run a program or send one of its own files
// to a server of their choice.
func Config(raw []byte) (*rest.Config, error) {
	if len(raw) > maxKubeconfig {
		return nil, fmt.Errorf("the kubeconfig is %d bytes, more than %d", len(raw), maxKubeconfig)
	}
	kc, err := clientcmd.Load(raw)
	if err != nil {
		return nil, fmt.Errorf("not a kubeconfig: %v", err)
	}
	if err := inlineOnly(kc); err != nil {
		return nil, err
	}
	cfg, err := clientcmd.NewDefaultClientConfig(*kc, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("the kubeconfig does not give a client configuration: %v", err)
	}
	return cfg, nil
}

func inlineOnly(kc *clientcmdapi.Config) error {
	ctx, ok := kc.Contexts[kc.CurrentContext]
	if kc.CurrentContext == "" || !ok {
		return fmt.Errorf("the kubeconfig has no current context")
	}
	var bad []string
	if c, ok := kc.Clusters[ctx.Cluster]; ok {
		if c.CertificateAuthority != "" {
			bad = append(bad, "certificate-authority (a file)")
		}
		if c.ProxyURL != "" {
			bad = append(bad, "proxy-url")
		}
	}
	if u, ok := kc.AuthInfos[ctx.AuthInfo]; ok {
		if u.ClientCertificate != "" || u.ClientKey != "" {
			bad = append(bad, "client-certificate/client-key (files)")
		}
		if u.TokenFile != "" {
			bad = append(bad, "tokenFile")
		}
		if u.Exec != nil {
			bad = append(bad, "exec (runs a command)")
		}
		if u.AuthProvider != nil {
			bad = append(bad, "auth-provider")
		}
		if u.Impersonate != "" || len(u.ImpersonateGroups) > 0 {
			bad = append(bad, "impersonation")
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("the kubeconfig uses %s: a workload kubeconfig from a Secret must carry its credentials inline (certificate-authority-data, client-certificate-data/client-key-data or token)", strings.Join(bad, ", "))
	}
	return nil
}

// ReadCluster reads the workload cluster of the Cluster namespace/name with
// access a through its Secret in the management cluster (mgmt). It
// returns nil for AccessNone, and nil with an error wrapping ErrNoSecret
// when the Secret does not exist (access not set up: not a gap); any
// other failure is a State that was not reached, a gap in the report.
func ReadCluster(ctx context.Context, mgmt *rest.Config, namespace, name string, a Access) (*State, error) {
	if a == AccessNone {
		return nil, nil
	}
	cfg, where, err := FromSecret(ctx, mgmt, namespace, name, a)
	switch {
	case errors.Is(err, ErrNoSecret):
		return nil, err
	case err != nil:
		return &State{Source: where, ReadAt: time.Now().UTC(), Problems: []Problem{{Resource: "the API server", Verb: "get", Err: err.Error()}}}, nil
	}
	return Read(ctx, cfg, "the workload API server "+cfg.Host+" (kubeconfig of "+where+")", 0), nil
}
