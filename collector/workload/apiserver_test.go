package workload

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"

	"github.com/nodediag/nodediag/internal/testenv/kubeenv"
)

// readerManifest is the identity deploy/workload-reader ships.
const readerManifest = "../../deploy/workload-reader/reader.yaml"

// apply creates every object of a multi-document manifest.
func apply(t *testing.T, cs kubernetes.Interface, path string) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	dec := yaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(raw)))
	for {
		doc, err := dec.Read()
		if err != nil {
			break
		}
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(doc, nil, nil)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		switch o := obj.(type) {
		case *corev1.ServiceAccount:
			_, err = cs.CoreV1().ServiceAccounts(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		case *corev1.Secret:
			_, err = cs.CoreV1().Secrets(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.ClusterRole:
			_, err = cs.RbacV1().ClusterRoles().Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.ClusterRoleBinding:
			_, err = cs.RbacV1().ClusterRoleBindings().Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.RoleBinding:
			_, err = cs.RbacV1().RoleBindings(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		default:
			t.Fatalf("%s: a %T the test does not apply", path, obj)
		}
		if err != nil {
			t.Fatalf("%s: creating %T: %v", path, obj, err)
		}
	}
}

// kubeconfigFor is a kubeconfig with inline credentials for server cfg and
// a bearer token, as the operator stores it in the management cluster.
func kubeconfigFor(t *testing.T, cfg *rest.Config, token string) []byte {
	t.Helper()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["workload"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["nodediag-reader"] = &clientcmdapi.AuthInfo{Token: token}
	kc.Contexts["workload"] = &clientcmdapi.Context{Cluster: "workload", AuthInfo: "nodediag-reader"}
	kc.CurrentContext = "workload"
	raw, err := clientcmd.Write(*kc)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

func readerToken(t *testing.T, cs kubernetes.Interface) string {
	t.Helper()
	tr, err := cs.CoreV1().ServiceAccounts("kube-system").CreateToken(context.Background(), "nodediag-reader",
		&authnv1.TokenRequest{Spec: authnv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("token for nodediag-reader: %v", err)
	}
	return tr.Status.Token
}

// The objects below reproduce what public failure reports show, quoted:
//   - kube-proxy ImagePullBackOff on a tag the registry does not have
//     (https://github.com/labring/sealos/issues/1035: "kube-proxy-8sd57
//     0/1 ImagePullBackOff"; the not-found message in the containerd form
//     of https://github.com/kubernetes/kops/pull/18529);
//   - calico-node's install-cni unable to reach the Service IP
//     (https://github.com/projectcalico/calico/issues/7122: "dial tcp
//     10.96.0.1:443: i/o timeout");
//   - the Node Ready condition without a CNI
//     (https://github.com/Azure/karpenter-provider-azure/issues/1639);
//   - CoreDNS Pending on the not-ready taint
//     (https://github.com/vexxhost/ansible-collection-kubernetes/pull/65);
//   - the Node keeping node.cloudprovider.kubernetes.io/uninitialized
//     (https://github.com/kubernetes-sigs/cluster-api/issues/9151).
const (
	kubeProxyPull = `Back-off pulling image "registry.k8s.io/kube-proxy:v1.31.100": ErrImagePull: rpc error: code = NotFound desc = failed to pull and unpack image "registry.k8s.io/kube-proxy:v1.31.100": failed to resolve reference "registry.k8s.io/kube-proxy:v1.31.100": registry.k8s.io/kube-proxy:v1.31.100: not found`
	installCNI    = `2022-12-22 10:29:47.681 [FATAL][1] cni-installer/<nil> <nil>: Unable to create token for CNI kubeconfig error=Post "https://10.96.0.1:443/api/v1/namespaces/kube-system/serviceaccounts/calico-node/token": dial tcp 10.96.0.1:443: i/o timeout`
	cniNotReady   = `container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady message:Network plugin returns error: cni plugin not initialized`
	corednsTaint  = `0/1 nodes are available: 1 node(s) had untolerated taint {node.kubernetes.io/not-ready: }. preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling..`
)

// seed creates a workload cluster whose kube-proxy cannot pull its image,
// with what follows from it.
func seed(t *testing.T, cs kubernetes.Interface) {
	t.Helper()
	ctx := context.Background()
	old := metav1.NewTime(time.Now().Add(-time.Hour))
	mk := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"capz-cp-0", "capz-md-0-a"} {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.NodeSpec{Taints: []corev1.Taint{
			{Key: "node.cloudprovider.kubernetes.io/uninitialized", Value: "true", Effect: corev1.TaintEffectNoSchedule},
			{Key: "node.kubernetes.io/not-ready", Effect: corev1.TaintEffectNoSchedule},
		}}}
		n, err := cs.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{})
		mk(err)
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionFalse, Reason: "KubeletNotReady", Message: cniNotReady, LastTransitionTime: old, LastHeartbeatTime: old}}
		n.Status.NodeInfo.KubeletVersion = "v1.31.100"
		_, err = cs.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
		mk(err)
	}
	_, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "calico-system"}}, metav1.CreateOptions{})
	mk(err)
	ds := func(ns, name, image string, desired, ready int32) {
		t.Helper()
		labels := map[string]string{"k8s-app": name}
		d := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: name, Image: image}}}},
		}}
		d, err := cs.AppsV1().DaemonSets(ns).Create(ctx, d, metav1.CreateOptions{})
		mk(err)
		d.Status = appsv1.DaemonSetStatus{DesiredNumberScheduled: desired, NumberReady: ready, CurrentNumberScheduled: desired}
		_, err = cs.AppsV1().DaemonSets(ns).UpdateStatus(ctx, d, metav1.UpdateOptions{})
		mk(err)
	}
	deploy := func(ns, name, app, image string, replicas, ready int32) {
		t.Helper()
		labels := map[string]string{"k8s-app": app}
		d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: name, Image: image}}}},
		}}
		d, err := cs.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{})
		mk(err)
		d.Status = appsv1.DeploymentStatus{Replicas: replicas, ReadyReplicas: ready}
		_, err = cs.AppsV1().Deployments(ns).UpdateStatus(ctx, d, metav1.UpdateOptions{})
		mk(err)
	}
	pod := func(ns, name, app, node string, st corev1.PodStatus) {
		t.Helper()
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"k8s-app": app}},
			Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: app, Image: "img"}}}}
		p, err := cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
		mk(err)
		p.Status = st
		_, err = cs.CoreV1().Pods(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{})
		mk(err)
	}
	ds("kube-system", "kube-proxy", "registry.k8s.io/kube-proxy:v1.31.100", 2, 0)
	for _, n := range []string{"capz-cp-0", "capz-md-0-a"} {
		pod("kube-system", "kube-proxy-"+n, "kube-proxy", n, corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: []corev1.ContainerStatus{{
			Name: "kube-proxy", Image: "registry.k8s.io/kube-proxy:v1.31.100",
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: kubeProxyPull}},
		}}})
	}
	ds("calico-system", "calico-node", "docker.io/calico/node:v3.29.1", 2, 0)
	pod("calico-system", "calico-node-x", "calico-node", "capz-md-0-a", corev1.PodStatus{Phase: corev1.PodPending, InitContainerStatuses: []corev1.ContainerStatus{{
		Name: "install-cni", Image: "docker.io/calico/cni:v3.29.1", RestartCount: 4,
		State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: "back-off 1m20s restarting failed container=install-cni"}},
		LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Error", ExitCode: 1, Message: installCNI}},
	}}})
	deploy("kube-system", "coredns", "kube-dns", "registry.k8s.io/coredns/coredns:v1.11.3", 2, 0)
	pod("kube-system", "coredns-66f779496c-89vm2", "kube-dns", "", corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{
		Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable", Message: corednsTaint,
	}}})
	// Something that is no link of the chain: never reported.
	deploy("kube-system", "metrics-server", "metrics-server", "registry.k8s.io/metrics-server:v0.7.2", 1, 0)
}

func TestReadAgainstAPIServers(t *testing.T) {
	mgmtCfg, _ := kubeenv.StartAPIServer(t)
	wlCfg, _ := kubeenv.StartWorkloadAPIServer(t)
	wl := kubernetes.NewForConfigOrDie(wlCfg)
	mgmt := kubernetes.NewForConfigOrDie(mgmtCfg)
	ctx := context.Background()
	apply(t, wl, readerManifest)
	seed(t, wl)
	token := readerToken(t, wl)

	_, err := mgmt.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "capz"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	putSecret := func(name string, value []byte) {
		t.Helper()
		_ = mgmt.CoreV1().Secrets("capz").Delete(ctx, name, metav1.DeleteOptions{})
		if _, err := mgmt.CoreV1().Secrets("capz").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string][]byte{"value": value}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("the shipped reader identity reads the chain", func(t *testing.T) {
		// Calico of the Tigera operator runs in calico-system: the
		// documented extra grant.
		apply(t, wl, "../../deploy/workload-reader/calico-system.yaml")
		putSecret("wl1-nodediag-kubeconfig", kubeconfigFor(t, wlCfg, token))
		cfg, where, err := FromSecret(ctx, mgmtCfg, "capz", "wl1", AccessReader)
		if err != nil {
			t.Fatal(err)
		}
		if where != "Secret capz/wl1-nodediag-kubeconfig" {
			t.Errorf("where = %q", where)
		}
		s := Read(ctx, cfg, where, 0)
		if !s.Reached {
			t.Fatalf("not reached: %+v", s.Problems)
		}
		for _, p := range s.Problems {
			// kube-flannel and calico-system are not granted by reader.yaml.
			if !p.Optional {
				t.Errorf("problem %+v", p)
			}
		}
		if len(s.Nodes) != 2 || s.Nodes[0].Name != "capz-cp-0" {
			t.Fatalf("nodes %+v", s.Nodes)
		}
		if _, ok := s.Nodes[1].Tainted("node.cloudprovider.kubernetes.io/uninitialized"); !ok {
			t.Errorf("node %s: the uninitialized taint was not read: %+v", s.Nodes[1].Name, s.Nodes[1].Taints)
		}
		if c, _ := s.Nodes[0].Condition("Ready"); c.Message != cniNotReady {
			t.Errorf("Ready message %q", c.Message)
		}
		var got []string
		for _, w := range s.Workloads {
			got = append(got, w.Link+"="+w.Kind+"/"+w.Namespace+"/"+w.Name)
		}
		want := "kube-proxy=DaemonSet/kube-system/kube-proxy CNI=DaemonSet/calico-system/calico-node CoreDNS=Deployment/kube-system/coredns"
		if strings.Join(got, " ") != want {
			t.Errorf("workloads\n got %v\nwant %s", got, want)
		}
		kp := s.LinkWorkloads(LinkKubeProxy)[0]
		if len(kp.Pods) != 2 || kp.Pods[0].Containers[0].Reason != "ImagePullBackOff" || kp.Pods[0].Containers[0].Message != kubeProxyPull {
			t.Errorf("kube-proxy pods %+v", kp.Pods)
		}
		cni := s.LinkWorkloads(LinkCNI)[0]
		if c := cni.Pods[0].Containers[0]; !c.Init || c.Last == nil || c.Last.Message != installCNI || c.Restarts != 4 {
			t.Errorf("calico-node's install-cni: %+v", c)
		}
		dns := s.LinkWorkloads(LinkCoreDNS)[0]
		if len(dns.Pods) != 1 || len(dns.Pods[0].Conditions) != 1 || dns.Pods[0].Conditions[0].Message != corednsTaint {
			t.Errorf("coredns pods %+v", dns.Pods)
		}
	})

	t.Run("calico-system not granted is a gap naming the identity", func(t *testing.T) {
		// The reader.yaml grant covers kube-system only: calico-system
		// needs calico-system.yaml.
		cfg, err := Config(kubeconfigFor(t, wlCfg, token))
		if err != nil {
			t.Fatal(err)
		}
		// Without the calico-system grant.
		_ = wl.RbacV1().RoleBindings("calico-system").Delete(ctx, "nodediag-workload-reader", metav1.DeleteOptions{})
		s := Read(ctx, cfg, "test", 0)
		var forbidden []string
		for _, p := range s.Problems {
			if p.Forbidden && p.Optional && strings.HasSuffix(p.Resource, " in calico-system") {
				forbidden = append(forbidden, p.Resource+" by "+p.Identity)
			}
		}
		want := `daemonsets.apps in calico-system by user "system:serviceaccount:kube-system:nodediag-reader"`
		if len(forbidden) != 3 || !strings.Contains(strings.Join(forbidden, "; "), want) {
			t.Errorf("forbidden: %v, want the three kinds of calico-system, e.g. %s", forbidden, want)
		}
		apply(t, wl, "../../deploy/workload-reader/calico-system.yaml")
		s = Read(ctx, cfg, "test", 0)
		for _, p := range s.Problems {
			if strings.HasSuffix(p.Resource, " in calico-system") {
				t.Errorf("with calico-system.yaml applied: %+v", p)
			}
		}
	})

	t.Run("the Cluster API admin Secret, opt-in", func(t *testing.T) {
		admin := kubeconfigFor(t, wlCfg, "")
		// envtest's admin is a client certificate: inline it.
		kc, _ := clientcmd.Load(admin)
		kc.AuthInfos["nodediag-reader"] = &clientcmdapi.AuthInfo{ClientCertificateData: wlCfg.CertData, ClientKeyData: wlCfg.KeyData}
		admin, _ = clientcmd.Write(*kc)
		putSecret("wl1-kubeconfig", admin)
		cfg, where, err := FromSecret(ctx, mgmtCfg, "capz", "wl1", AccessCAPI)
		if err != nil || where != "Secret capz/wl1-kubeconfig" {
			t.Fatalf("%q: %v", where, err)
		}
		if s := Read(ctx, cfg, where, 0); !s.Reached || len(s.Problems) > 0 {
			t.Errorf("reached %v problems %+v", s.Reached, s.Problems)
		}
	})

	t.Run("no Secret says how to make one", func(t *testing.T) {
		_, _, err := FromSecret(ctx, mgmtCfg, "capz", "nosuch", AccessReader)
		if !errors.Is(err, ErrNoSecret) || !strings.Contains(err.Error(), "Secret capz/nosuch-nodediag-kubeconfig not found") || !strings.Contains(err.Error(), "deploy/workload-reader") {
			t.Errorf("err = %v", err)
		}
	})

	t.Run("an API server that does not answer is a gap within the timeout", func(t *testing.T) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close() // accepts nothing: connections hang in the backlog
		dead := rest.CopyConfig(wlCfg)
		dead.Host = "https://" + l.Addr().String()
		start := time.Now()
		s := Read(ctx, dead, "dead", 2*time.Second)
		if s.Reached || len(s.Problems) != 1 || s.Problems[0].Resource != "the API server" {
			t.Errorf("reached %v problems %+v", s.Reached, s.Problems)
		}
		if d := time.Since(start); d > 30*time.Second {
			t.Errorf("Read took %v with a 2s timeout", d)
		}
	})
}

// A kubeconfig in a Secret is written by whoever may write Secrets there:
// it must not make the collector run a program or send its own files.
func TestConfigRefusesWhatIsNotInline(t *testing.T) {
	canary := filepath.Join(t.TempDir(), "ran")
	base := func() *clientcmdapi.Config {
		kc := clientcmdapi.NewConfig()
		kc.Clusters["c"] = &clientcmdapi.Cluster{Server: "https://127.0.0.1:1"}
		kc.AuthInfos["u"] = &clientcmdapi.AuthInfo{Token: "t"}
		kc.Contexts["x"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "u"}
		kc.CurrentContext = "x"
		return kc
	}
	for name, mutate := range map[string]func(*clientcmdapi.Config){
		"exec": func(kc *clientcmdapi.Config) {
			kc.AuthInfos["u"].Exec = &clientcmdapi.ExecConfig{Command: "/bin/sh", Args: []string{"-c", "touch " + canary}, APIVersion: "client.authentication.k8s.io/v1"}
		},
		"token file": func(kc *clientcmdapi.Config) {
			kc.AuthInfos["u"].TokenFile = "/var/run/secrets/kubernetes.io/serviceaccount/token"
		},
		"client key file": func(kc *clientcmdapi.Config) { kc.AuthInfos["u"].ClientKey = "/etc/nodediag/tls.key" },
		"CA file":         func(kc *clientcmdapi.Config) { kc.Clusters["c"].CertificateAuthority = "/etc/passwd" },
		"auth provider": func(kc *clientcmdapi.Config) {
			kc.AuthInfos["u"].AuthProvider = &clientcmdapi.AuthProviderConfig{Name: "oidc"}
		},
		"no context": func(kc *clientcmdapi.Config) { kc.CurrentContext = "" },
	} {
		t.Run(name, func(t *testing.T) {
			kc := base()
			mutate(kc)
			raw, err := clientcmd.Write(*kc)
			if err != nil {
				t.Fatal(err)
			}
			cfg, err := Config(raw)
			if err == nil {
				s := Read(context.Background(), cfg, "x", time.Second)
				t.Errorf("accepted (read: %+v)", s.Problems)
			}
			if _, err := os.Stat(canary); err == nil {
				t.Fatal("the kubeconfig's exec command ran")
			}
		})
	}
	if _, err := Config([]byte("not: [a kubeconfig")); err == nil || !strings.Contains(err.Error(), "not a kubeconfig") {
		t.Errorf("garbage: %v", err)
	}
	if _, err := Config(base2(t)); err != nil {
		t.Errorf("an inline kubeconfig refused: %v", err)
	}
}

func base2(t *testing.T) []byte {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["c"] = &clientcmdapi.Cluster{Server: "https://127.0.0.1:1", CertificateAuthorityData: []byte("x")}
	kc.AuthInfos["u"] = &clientcmdapi.AuthInfo{Token: "t"}
	kc.Contexts["x"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "u"}
	kc.CurrentContext = "x"
	raw, err := clientcmd.Write(*kc)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}
