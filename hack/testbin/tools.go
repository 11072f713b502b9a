//go:build tools

// Package tools pins k8s.io/kubernetes/cmd/kube-apiserver in this module's
// go.mod, so `go mod tidy` keeps it and build.sh can build it by path.
package tools

import _ "k8s.io/kubernetes/cmd/kube-apiserver"
