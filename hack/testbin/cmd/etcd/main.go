// Command etcd is the etcd server that envtest starts beside kube-apiserver.
// It is built from go.etcd.io/etcd/server/v3 at the version that
// k8s.io/kubernetes's own module graph selects, so the API server talks to
// the etcd it was tested with.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
