package capi

import (
	"fmt"
	"os"
	"path/filepath"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// RESTConfig resolves the management cluster's client configuration as
// kubectl does: the kubeconfig file named by kubeconfig (--kubeconfig), else
// the files of $KUBECONFIG (merged, first wins), else ~/.kube/config, else
// the in-cluster service account when running in a pod; context
// (--context) overrides the file's current-context. The error names the
// file(s) and the context it tried.
func RESTConfig(kubeconfig, context string) (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = kubeconfig
	overrides := &clientcmd.ConfigOverrides{CurrentContext: context}
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides)
	cfg, err := cc.ClientConfig()
	if err == nil {
		return cfg, nil
	}
	ctx := "the current context"
	if context != "" {
		ctx = fmt.Sprintf("context %q", context)
	} else if raw, rerr := cc.RawConfig(); rerr == nil && raw.CurrentContext != "" {
		ctx = fmt.Sprintf("current context %q", raw.CurrentContext)
	}
	return nil, fmt.Errorf("kubeconfig %s, %s: %w", kubeconfigSource(kubeconfig), ctx, err)
}

// kubeconfigSource says where the kubeconfig came from, as RESTConfig looked for it.
func kubeconfigSource(kubeconfig string) string {
	switch {
	case kubeconfig != "":
		return fmt.Sprintf("%s (--kubeconfig)", kubeconfig)
	case os.Getenv(clientcmd.RecommendedConfigPathEnvVar) != "":
		return fmt.Sprintf("%s ($%s)", filepath.SplitList(os.Getenv(clientcmd.RecommendedConfigPathEnvVar)), clientcmd.RecommendedConfigPathEnvVar)
	}
	return fmt.Sprintf("%s (default; neither --kubeconfig nor $%s set)", clientcmd.RecommendedHomeFile, clientcmd.RecommendedConfigPathEnvVar)
}
