// Package deploy holds the Kubernetes manifests of nodediag (daemonset/: a
// kustomize base of the agents' DaemonSet, the collector, overlays for a
// management and a workload cluster; workload-reader/: the read-only
// identity the collector uses in a workload cluster and the
// ClusterResourceSet that installs it) and their tests, which render every
// overlay with kustomize's own library (krusty, what `kubectl apply -k`
// runs), check the DaemonSet's privileges, run the binaries' flag parsing
// on the arguments the manifests pass, and apply the manifests and the
// commands of docs/daemonset.md to a real kube-apiserver. It has no code of
// its own.
package deploy
