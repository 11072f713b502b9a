package rules

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/types/known/timestamppb"

	nodediagv1 "github.com/nodediag/nodediag/proto/nodediag/v1"
)

var rtClock = time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)

func rtAgo(d time.Duration) *timestamppb.Timestamp { return timestamppb.New(rtClock.Add(-d)) }

const rtSock = "/run/containerd/containerd.sock"

// rtRuntime is the runtime probe's answer in a state, as the probe words it
// (the texts of the real daemon, agent/probes/runtime_test.go).
func rtRuntime(state string) *nodediagv1.Runtime {
	rt := &nodediagv1.Runtime{Socket: rtSock, SocketFrom: "default", State: state}
	switch state {
	case "absent":
		rt.Error = "no socket at " + rtSock
	case "refused":
		rt.Error = "dial unix " + rtSock + ": connection refused: nothing listens on the socket"
	case "timeout":
		rt.Error = "Version: rpc error: code = DeadlineExceeded desc = context deadline exceeded while waiting for connections to become ready"
	case "no-cri":
		rt.Error = "Version: rpc error: code = Unimplemented desc = unknown service runtime.v1.RuntimeService"
	case "ok":
		rt.RuntimeName, rt.RuntimeVersion, rt.RuntimeApiVersion = "containerd", "1.6.20~ds1", "v1"
		rt.Conditions = []*nodediagv1.RuntimeCondition{
			{Type: "RuntimeReady", Status: true},
			{Type: "NetworkReady", Status: true},
		}
	}
	return rt
}

// rtNetworkNotReady is containerd 1.6.20's answer without a CNI config.
func rtNetworkNotReady(rt *nodediagv1.Runtime) *nodediagv1.Runtime {
	rt.Conditions[1] = &nodediagv1.RuntimeCondition{Type: "NetworkReady", Reason: "NetworkPluginNotReady", Message: "Network plugin returns error: cni plugin not initialized"}
	return rt
}

func rtWithImages(rt *nodediagv1.Runtime, tags ...string) *nodediagv1.Runtime {
	for i, t := range tags {
		rt.Images = append(rt.Images, &nodediagv1.RuntimeImage{Id: fmt.Sprintf("sha256:%064d", i), Tags: []string{t}, Size: 1000})
	}
	return rt
}

func rtWithContainers(rt *nodediagv1.Runtime, cs ...*nodediagv1.RuntimeContainer) *nodediagv1.Runtime {
	rt.Containers = cs
	return rt
}

// rtExited is a static pod's container instance that exited.
func rtExited(pod, name string, attempt uint32, code int32, ranFor, endedAgo time.Duration) *nodediagv1.RuntimeContainer {
	return &nodediagv1.RuntimeContainer{
		Id: fmt.Sprintf("%s-%d", name, attempt), Name: name, PodNamespace: "kube-system", PodName: pod, State: "exited",
		Attempt: attempt, ExitCode: code, Reason: map[bool]string{true: "Completed", false: "Error"}[code == 0],
		StartedAt: rtAgo(endedAgo + ranFor), FinishedAt: rtAgo(endedAgo),
	}
}

func rtRunning(pod, name string, attempt uint32, since time.Duration) *nodediagv1.RuntimeContainer {
	return &nodediagv1.RuntimeContainer{
		Id: fmt.Sprintf("%s-%d", name, attempt), Name: name, PodNamespace: "kube-system", PodName: pod, State: "running",
		Attempt: attempt, StartedAt: rtAgo(since),
	}
}

// rtEvidence is the evidence of a case: the runtime's answer and what other
// probes saw.
type rtEvidence struct {
	runtime    *nodediagv1.Runtime
	unreadable []string // calls of the runtime probe that failed
	units      []*nodediagv1.UnitState
	kubelet    *nodediagv1.KubeletConfig
	cloudInit  *nodediagv1.CloudInit
	kubeadm    *nodediagv1.Kubeadm
	containerd *nodediagv1.Containerd
	logs       []*nodediagv1.LogExcerpt
	pods       []*nodediagv1.PodContainer
}

func (e rtEvidence) evidence() *nodediagv1.Evidence {
	ev := &nodediagv1.Evidence{CollectedAt: timestamppb.New(rtClock)}
	add := func(name string, pe *nodediagv1.ProbeEvidence) {
		pe.Name, pe.Status = name, "ok"
		ev.Probes = append(ev.Probes, pe)
	}
	if e.runtime != nil {
		pe := &nodediagv1.ProbeEvidence{Data: &nodediagv1.ProbeEvidence_Runtime{Runtime: e.runtime}}
		for _, call := range e.unreadable {
			pe.Unreadable = append(pe.Unreadable, &nodediagv1.Unreadable{Source: "cri:" + e.runtime.GetSocket() + " " + call, Error: call + ": rpc error: code = DeadlineExceeded desc = context deadline exceeded"})
		}
		add("runtime", pe)
	}
	if e.units != nil {
		add("units", &nodediagv1.ProbeEvidence{Data: &nodediagv1.ProbeEvidence_Units{Units: &nodediagv1.Units{Source: "dbus", Units: e.units}}})
	}
	if e.kubelet != nil {
		add("kubelet-config", &nodediagv1.ProbeEvidence{Data: &nodediagv1.ProbeEvidence_KubeletConfig{KubeletConfig: e.kubelet}})
	}
	if e.cloudInit != nil {
		add("cloud-init", &nodediagv1.ProbeEvidence{Data: &nodediagv1.ProbeEvidence_CloudInit{CloudInit: e.cloudInit}})
	}
	if e.kubeadm != nil {
		add("kubeadm", &nodediagv1.ProbeEvidence{Data: &nodediagv1.ProbeEvidence_Kubeadm{Kubeadm: e.kubeadm}})
	}
	if e.containerd != nil {
		add("containerd", &nodediagv1.ProbeEvidence{Data: &nodediagv1.ProbeEvidence_Containerd{Containerd: e.containerd}})
	}
	if e.logs != nil {
		add("logs", &nodediagv1.ProbeEvidence{Data: &nodediagv1.ProbeEvidence_Logs{Logs: &nodediagv1.Logs{Sources: e.logs}}})
	}
	if e.pods != nil {
		add("pods", &nodediagv1.ProbeEvidence{Data: &nodediagv1.ProbeEvidence_Pods{Pods: &nodediagv1.Pods{Containers: e.pods}}})
	}
	return ev
}

func (e rtEvidence) input() *Input {
	return newInput(e.evidence(), Context{SinceAgo: 24 * time.Hour})
}

// rtJournal is a journal-style excerpt of kind with lines written at the
// given times before the clock.
func rtJournal(kind string, lines ...rtLine) *nodediagv1.LogExcerpt {
	ex := &nodediagv1.LogExcerpt{Source: "journal:" + kind + ".service", Kind: kind}
	for i, l := range lines {
		ex.Lines = append(ex.Lines, &nodediagv1.LogLine{N: int32(i + 1), Text: l.text, Time: rtAgo(l.ago)})
	}
	if n := len(ex.Lines); n > 0 {
		ex.FirstTime, ex.LastTime = ex.Lines[0].Time, ex.Lines[n-1].Time
	}
	return ex
}

type rtLine struct {
	ago  time.Duration
	text string
}

// rtRepeat is the same line every step from first to last before the clock.
func rtRepeat(text string, first, last, step time.Duration) []rtLine {
	var out []rtLine
	for d := first; d >= last; d -= step {
		out = append(out, rtLine{d, text})
	}
	return out
}

// A joined node: the kubelet has its kubeconfig.
var rtJoined = &nodediagv1.Kubeadm{KubeletConf: &nodediagv1.KubeconfigFile{Path: "/etc/kubernetes/kubelet.conf", Present: true}}

// rtControlPlane is a joined control plane node's static pods.
func rtControlPlane(version string) *nodediagv1.Kubeadm {
	k := &nodediagv1.Kubeadm{KubeletConf: rtJoined.KubeletConf, ControlPlane: true}
	for _, c := range []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler"} {
		path := "/etc/kubernetes/manifests/" + c + ".yaml"
		ref := "registry.k8s.io/" + c + ":" + version
		k.StaticPods = append(k.StaticPods, &nodediagv1.StaticPod{Path: path, Name: c, Images: []string{ref},
			ImageLine: &nodediagv1.SourceLine{Path: path, Line: 20, Text: "    image: " + ref}})
	}
	k.StaticPods = append(k.StaticPods, &nodediagv1.StaticPod{Path: "/etc/kubernetes/manifests/etcd.yaml", Name: "etcd", Images: []string{"registry.k8s.io/etcd:3.5.12-0"},
		ImageLine: &nodediagv1.SourceLine{Path: "/etc/kubernetes/manifests/etcd.yaml", Line: 31, Text: "    image: registry.k8s.io/etcd:3.5.12-0"}})
	return k
}

var rtControlPlaneImages = []string{
	"registry.k8s.io/kube-apiserver:v1.30.0", "registry.k8s.io/kube-controller-manager:v1.30.0",
	"registry.k8s.io/kube-scheduler:v1.30.0", "registry.k8s.io/etcd:3.5.12-0", "registry.k8s.io/pause:3.9",
}

var rtContainerdConfig = &nodediagv1.Containerd{
	ConfigFile: "/etc/containerd/config.toml", ConfigPresent: true, Version: 2,
	SandboxImage:     "registry.k8s.io/pause:3.9",
	SandboxImageLine: &nodediagv1.SourceLine{Path: "/etc/containerd/config.toml", Line: 12, Text: `  sandbox_image = "registry.k8s.io/pause:3.9"`},
}

// rtProblems are the problems the runtime rules raise.
var rtProblems = map[string]bool{
	RuntimeNotRunning.ID: true, RuntimeCRIDisabled.ID: true, CNINotInitialized.ID: true,
	ImageNotFound.ID: true, ImagePullAuthFailed.ID: true, ImagePullFailed.ID: true,
	StaticPodCrashLoop.ID: true, ControllerCrashLoop.ID: true,
}

// rtFindings runs every Go rule, so that a problem another domain already
// raises from other evidence is seen not to come twice, and keeps the
// findings of the runtime rules' problems.
func rtFindings(in *Input) []*nodediagv1.Finding {
	var out []*nodediagv1.Finding
	for _, r := range goRules() {
		for _, f := range r.Fn(in) {
			if rtProblems[f.Id] {
				out = append(out, f)
			}
		}
	}
	return out
}

func TestRuntimeRules(t *testing.T) {
	containerdOK := utUnit("containerd.service", "loaded", "active", "running", "success", 0, 0, 0)
	containerdFailed := utUnit("containerd.service", "loaded", "failed", "failed", "exit-code", 0, cldExited, 1)
	crio := &nodediagv1.KubeletConfig{Config: &nodediagv1.KubeletConfigFile{Path: "/var/lib/kubelet/config.yaml", Present: true,
		ContainerRuntimeEndpoint: "unix:///var/run/crio/crio.sock"}}
	fromConfig := rtRuntime("refused")
	fromConfig.Socket, fromConfig.SocketFrom = "/run/k8s/containerd.sock", "config"
	fromConfig.Error = "dial unix /run/k8s/containerd.sock: connection refused: nothing listens on the socket"
	runtimeNotReady := rtRuntime("ok")
	runtimeNotReady.Conditions[0] = &nodediagv1.RuntimeCondition{Type: "RuntimeReady", Reason: "RuntimeNotReady", Message: "runc not found"}

	notFoundLine := `time="2024-05-01T11:50:00Z" level=error msg="PullImage \"registry.k8s.io/kube-apiserver:v1.30.100\" failed" error="rpc error: code = NotFound desc = failed to pull and unpack image \"registry.k8s.io/kube-apiserver:v1.30.100\": failed to resolve reference \"registry.k8s.io/kube-apiserver:v1.30.100\": registry.k8s.io/kube-apiserver:v1.30.100: not found"`
	schemeLine := `E0501 11:55:00.000000    1876 remote_image.go:180] "PullImage from image service failed" err="rpc error: code = Unknown desc = failed to pull and unpack image \"registry.k8s.io/pause:3.9\": failed to resolve reference \"registry.k8s.io/pause:3.9\": get registry endpoints: parse endpoint url: parse \"://10.0.0.4:5000\": missing protocol scheme" image="registry.k8s.io/pause:3.9"`

	tests := []struct {
		name string
		ev   rtEvidence
		want []utGot
	}{
		{name: "no runtime evidence (a copy of a host)"},
		{name: "healthy", ev: rtEvidence{runtime: rtWithImages(rtRuntime("ok"), rtControlPlaneImages...), units: []*nodediagv1.UnitState{containerdOK},
			kubeadm: rtControlPlane("v1.30.0"), containerd: rtContainerdConfig}},

		// Not running.
		{
			name: "no socket, nothing else known",
			ev:   rtEvidence{runtime: rtRuntime("absent")},
			want: []utGot{{ID: "RuntimeNotRunning", Confidence: High,
				Title:  "the container runtime is not running: no socket at /run/containerd/containerd.sock",
				Quotes: []string{"cri:/run/containerd/containerd.sock: absent: no socket at /run/containerd/containerd.sock"}}},
		},
		{
			name: "stale socket from the config, containerd's last errors",
			ev: rtEvidence{runtime: fromConfig,
				containerd: &nodediagv1.Containerd{ConfigFile: "/etc/containerd/config.toml", ConfigPresent: true, Version: 2, GrpcAddress: "/run/k8s/containerd.sock",
					GrpcAddressLine: &nodediagv1.SourceLine{Path: "/etc/containerd/config.toml", Line: 4, Text: `  address = "/run/k8s/containerd.sock"`}},
				logs: []*nodediagv1.LogExcerpt{rtJournal("containerd",
					rtLine{40 * time.Minute, `time="2024-05-01T11:20:00Z" level=error msg="failed to load cni during init, please check CRI plugin status before setting up network for pods" error="cni config load failed: no network config found in /etc/cni/net.d: cni plugin not initialized: failed to load cni config"`},
					rtLine{35 * time.Minute, `time="2024-05-01T11:25:00Z" level=info msg="containerd successfully booted in 0.03s"`},
					rtLine{31 * time.Minute, `time="2024-05-01T11:29:00Z" level=error msg="failed to handle container TaskExit event" error="failed to stop container: context deadline exceeded"`},
					rtLine{30 * time.Minute, `time="2024-05-01T11:30:00Z" level=fatal msg="failed to create shim task" error="out of memory"`},
				)}},
			want: []utGot{{ID: "RuntimeNotRunning", Confidence: High,
				Title: "the container runtime is not running: nothing listens on /run/k8s/containerd.sock (a stale socket: containerd stopped or was killed)",
				Quotes: []string{
					"cri:/run/k8s/containerd.sock: refused: dial unix /run/k8s/containerd.sock: connection refused: nothing listens on the socket",
					`/etc/containerd/config.toml:   address = "/run/k8s/containerd.sock"`,
					`journal:containerd.service: time="2024-05-01T11:29:00Z" level=error msg="failed to handle container TaskExit event" error="failed to stop container: context deadline exceeded"`,
					`journal:containerd.service: time="2024-05-01T11:30:00Z" level=fatal msg="failed to create shim task" error="out of memory"`,
				}}},
		},
		{
			name: "hung: active unit, socket does not answer",
			ev:   rtEvidence{runtime: rtRuntime("timeout"), units: []*nodediagv1.UnitState{containerdOK}},
			want: []utGot{{ID: "RuntimeNotRunning", Confidence: High,
				Title: "the container runtime is not running: /run/containerd/containerd.sock accepts connections but containerd does not answer",
				Quotes: []string{
					"cri:/run/containerd/containerd.sock: timeout: Version: rpc error: code = DeadlineExceeded desc = context deadline exceeded while waiting for connections to become ready",
					"dbus:containerd.service: ActiveState=active SubState=running Result=success",
				}}},
		},
		{
			name: "answers, RuntimeReady=false",
			ev:   rtEvidence{runtime: runtimeNotReady},
			want: []utGot{{ID: "RuntimeNotRunning", Confidence: High,
				Title:  "the container runtime is not running: containerd reports RuntimeReady=false (RuntimeNotReady: runc not found)",
				Quotes: []string{"cri:/run/containerd/containerd.sock: containerd 1.6.20~ds1 (CRI v1)"}}},
		},
		{
			name: "failed unit: the unit rule's finding, once",
			ev:   rtEvidence{runtime: rtRuntime("refused"), units: []*nodediagv1.UnitState{containerdFailed}},
			want: []utGot{{ID: "RuntimeNotRunning", Confidence: High,
				Title:  "the container runtime is not running: containerd.service is failed (Result=exit-code, status 1)",
				Quotes: []string{"dbus:containerd.service: ActiveState=failed SubState=failed Result=exit-code"}}},
		},
		{
			name: "no socket while cloud-init runs: containerd may come",
			ev:   rtEvidence{runtime: rtRuntime("absent"), cloudInit: &nodediagv1.CloudInit{Status: "running"}},
		},
		{
			name: "the kubelet uses CRI-O",
			ev:   rtEvidence{runtime: rtRuntime("absent"), kubelet: crio},
		},

		// CRI.
		{
			name: "no CRI, configuration unknown",
			ev:   rtEvidence{runtime: rtRuntime("no-cri")},
			want: []utGot{{ID: "RuntimeCRIDisabled", Confidence: High,
				Title:  "containerd runs but does not serve the CRI",
				Quotes: []string{"cri:/run/containerd/containerd.sock: no-cri: Version: rpc error: code = Unimplemented desc = unknown service runtime.v1.RuntimeService"}}},
		},
		{
			name: "no CRI, disabled in the configuration: the containerd rule's finding, once",
			ev: rtEvidence{runtime: rtRuntime("no-cri"), containerd: &nodediagv1.Containerd{ConfigFile: "/etc/containerd/config.toml", ConfigPresent: true, Version: 1,
				DisabledPlugins:     []string{"cri"},
				DisabledPluginsLine: &nodediagv1.SourceLine{Path: "/etc/containerd/config.toml", Line: 15, Text: `disabled_plugins = ["cri"]`}}},
			want: []utGot{{ID: "RuntimeCRIDisabled", Confidence: High,
				Title:  "containerd runs but does not serve the CRI",
				Quotes: []string{`/etc/containerd/config.toml: disabled_plugins = ["cri"]`}}},
		},

		// Network.
		{
			name: "NetworkReady=false on a joined node, no log",
			ev:   rtEvidence{runtime: rtNetworkNotReady(rtRuntime("ok")), kubeadm: rtJoined},
			want: []utGot{{ID: "CNINotInitialized", Confidence: Medium,
				Title:  "the network plugin has not been ready for a while",
				Quotes: []string{"cri:/run/containerd/containerd.sock: NetworkReady=false reason=NetworkPluginNotReady message=Network plugin returns error: cni plugin not initialized"}}},
		},
		{
			name: "NetworkReady=false, the kubelet says so for 40 minutes",
			ev: rtEvidence{runtime: rtNetworkNotReady(rtRuntime("ok")), kubeadm: rtJoined,
				logs: []*nodediagv1.LogExcerpt{rtJournal("kubelet", rtRepeat(`E0501 11:20:00.000000    1876 kubelet.go:2900] "Container runtime network not ready" networkReady="NetworkReady=false reason:NetworkPluginNotReady message:Network plugin returns error: cni plugin not initialized"`, 40*time.Minute, 0, 5*time.Minute)...)}},
			want: []utGot{{ID: "CNINotInitialized", Confidence: High,
				Title:  "the network plugin has not been ready for 40m",
				Quotes: []string{"cri:/run/containerd/containerd.sock: NetworkReady=false reason=NetworkPluginNotReady message=Network plugin returns error: cni plugin not initialized"}}},
		},
		{
			name: "NetworkReady=false before the node joined",
			ev:   rtEvidence{runtime: rtNetworkNotReady(rtRuntime("ok")), kubeadm: &nodediagv1.Kubeadm{}},
		},

		// Images.
		{
			name: "an image that does not exist, still missing",
			ev: rtEvidence{
				runtime:    rtWithImages(rtRuntime("ok"), "registry.k8s.io/kube-controller-manager:v1.30.100", "registry.k8s.io/kube-scheduler:v1.30.100", "registry.k8s.io/etcd:3.5.12-0", "registry.k8s.io/pause:3.9"),
				kubeadm:    rtControlPlane("v1.30.100"),
				containerd: rtContainerdConfig,
				logs:       []*nodediagv1.LogExcerpt{rtJournal("containerd", rtLine{10 * time.Minute, notFoundLine})},
			},
			want: []utGot{{ID: "ImageNotFound", Confidence: High,
				Title: "image registry.k8s.io/kube-apiserver:v1.30.100 does not exist in its registry",
				Quotes: []string{
					"cri:/run/containerd/containerd.sock: registry.k8s.io/kube-apiserver:v1.30.100, needed by kube-apiserver (static pod /etc/kubernetes/manifests/kube-apiserver.yaml), is not among the runtime's 4 images",
					"/etc/kubernetes/manifests/kube-apiserver.yaml:     image: registry.k8s.io/kube-apiserver:v1.30.100",
					"journal:containerd.service: " + notFoundLine,
				}}},
		},
		{
			name: "the pause image behind a malformed mirror",
			ev: rtEvidence{
				runtime:    rtWithImages(rtRuntime("ok"), rtControlPlaneImages[:4]...),
				kubeadm:    rtControlPlane("v1.30.0"),
				containerd: rtContainerdConfig,
				logs:       []*nodediagv1.LogExcerpt{rtJournal("kubelet", rtLine{5 * time.Minute, schemeLine})},
			},
			want: []utGot{{ID: "ImagePullFailed", Confidence: Medium,
				Title: "image pulls fail: registry.k8s.io/pause:3.9",
				Quotes: []string{
					"cri:/run/containerd/containerd.sock: registry.k8s.io/pause:3.9, needed by the pause image (sandbox_image), is not among the runtime's 4 images",
					`/etc/containerd/config.toml:   sandbox_image = "registry.k8s.io/pause:3.9"`,
					"journal:kubelet.service: " + schemeLine,
				}}},
		},
		{
			name: "missing, pulls not seen failing: not a cause",
			ev:   rtEvidence{runtime: rtWithImages(rtRuntime("ok"), "registry.k8s.io/pause:3.9"), kubeadm: rtControlPlane("v1.30.0"), containerd: rtContainerdConfig},
		},
		{
			name: "a failed pull of an image that is there now: transient",
			ev: rtEvidence{runtime: rtWithImages(rtRuntime("ok"), "registry.k8s.io/kube-apiserver:v1.30.100"),
				kubeadm: &nodediagv1.Kubeadm{StaticPods: rtControlPlane("v1.30.100").StaticPods[:1]},
				logs:    []*nodediagv1.LogExcerpt{rtJournal("containerd", rtLine{10 * time.Minute, notFoundLine})}},
		},
		{
			name: "the image list was not read",
			ev: rtEvidence{runtime: rtRuntime("ok"), unreadable: []string{"ListImages"}, kubeadm: rtControlPlane("v1.30.100"),
				logs: []*nodediagv1.LogExcerpt{rtJournal("containerd", rtLine{10 * time.Minute, notFoundLine})}},
		},

		// Static pods.
		{
			name: "etcd exits 1 on its 5th attempt",
			ev: rtEvidence{runtime: rtWithContainers(rtRuntime("ok"),
				rtExited("etcd-node-1", "etcd", 5, 1, 3*time.Second, 2*time.Minute),
				rtRunning("kube-apiserver-node-1", "kube-apiserver", 0, time.Hour))},
			want: []utGot{{ID: "StaticPodCrashLoop", Confidence: Medium,
				Title:  "etcd (etcd-node-1) is crash-looping: 5 restarts, and this node's API server is down with it",
				Quotes: []string{"cri:/run/containerd/containerd.sock: container etcd of kube-system/etcd-node-1, attempt 5: exited with code 1 (Error) at 2024-05-01T11:58:00Z after 3s"}}},
		},
		{
			name: "etcd and, after it, the API server",
			ev: rtEvidence{runtime: rtWithContainers(rtRuntime("ok"),
				rtExited("kube-apiserver-node-1", "kube-apiserver", 7, 1, 20*time.Second, time.Minute),
				rtExited("etcd-node-1", "etcd", 5, 2, 3*time.Second, 2*time.Minute))},
			want: []utGot{
				{ID: "StaticPodCrashLoop", Confidence: Medium,
					Title:  "etcd (etcd-node-1) is crash-looping: 5 restarts, and this node's API server is down with it",
					Quotes: []string{"cri:/run/containerd/containerd.sock: container etcd of kube-system/etcd-node-1, attempt 5: exited with code 2 (Error) at 2024-05-01T11:58:00Z after 3s"}},
				{ID: "StaticPodCrashLoop", Confidence: Low,
					Title:  "kube-apiserver (kube-apiserver-node-1) is crash-looping: 7 restarts, and this node's API server is down with it",
					Quotes: []string{"cri:/run/containerd/containerd.sock: container kube-apiserver of kube-system/kube-apiserver-node-1, attempt 7: exited with code 1 (Error) at 2024-05-01T11:59:00Z after 20s"}},
			},
		},
		{
			name: "the scheduler runs again a minute after exiting 1",
			ev: rtEvidence{runtime: rtWithContainers(rtRuntime("ok"),
				rtExited("kube-scheduler-node-1", "kube-scheduler", 3, 1, 30*time.Second, 90*time.Second),
				rtRunning("kube-scheduler-node-1", "kube-scheduler", 4, time.Minute))},
			want: []utGot{{ID: "ControllerCrashLoop", Confidence: Medium,
				Title: "kube-scheduler (kube-scheduler-node-1) is crash-looping: 4 restarts",
				Quotes: []string{
					"cri:/run/containerd/containerd.sock: container kube-scheduler of kube-system/kube-scheduler-node-1, attempt 4: running since 2024-05-01T11:59:00Z (1m)",
					"cri:/run/containerd/containerd.sock: container kube-scheduler of kube-system/kube-scheduler-node-1, attempt 3: exited with code 1 (Error) at 2024-05-01T11:58:30Z after 30s",
				}}},
		},
		{
			name: "running for 20 minutes since the last exit: recovered",
			ev: rtEvidence{runtime: rtWithContainers(rtRuntime("ok"),
				rtExited("kube-scheduler-node-1", "kube-scheduler", 3, 1, 30*time.Second, 21*time.Minute),
				rtRunning("kube-scheduler-node-1", "kube-scheduler", 4, 20*time.Minute))},
		},
		{
			name: "two attempts only",
			ev:   rtEvidence{runtime: rtWithContainers(rtRuntime("ok"), rtExited("etcd-node-1", "etcd", 2, 1, 3*time.Second, time.Minute))},
		},
		{
			name: "exit 0",
			ev:   rtEvidence{runtime: rtWithContainers(rtRuntime("ok"), rtExited("etcd-node-1", "etcd", 6, 0, 3*time.Second, time.Minute))},
		},
		{
			name: "not a control plane pod",
			ev: rtEvidence{runtime: rtWithContainers(rtRuntime("ok"), &nodediagv1.RuntimeContainer{Name: "app", PodNamespace: "default", PodName: "etcd-app",
				State: "exited", Attempt: 9, ExitCode: 1, FinishedAt: rtAgo(time.Minute)})},
		},
		{
			name: "crash loop the pods rule finds in the logs: its finding, once, with the log's exit line",
			ev: rtEvidence{
				runtime: rtWithContainers(rtRuntime("ok"), rtExited("etcd-node-1", "etcd", 5, 1, 3*time.Second, 2*time.Minute)),
				pods:    []*nodediagv1.PodContainer{rtEtcdPodLogs()},
			},
			want: []utGot{{ID: "StaticPodCrashLoop", Confidence: High,
				Title: "etcd (etcd-node-1) is crash-looping: 5 restarts, and this node's API server is down with it",
				Quotes: []string{
					"/var/log/pods/kube-system_etcd-node-1_0123/etcd: 5 restarts (0.log .. 5.log, one log per start; present: 4.log, 5.log)",
					"/var/log/pods/kube-system_etcd-node-1_0123/etcd/5.log: 5.log: the run lasted 3s (2024-05-01T11:57:57Z to 2024-05-01T11:58:00Z); 4.log: the run before lasted 3s (2024-05-01T11:55:57Z to 2024-05-01T11:56:00Z), and the next began 1m after it",
					`/var/log/pods/kube-system_etcd-node-1_0123/etcd/5.log: {"level":"fatal","ts":"2024-05-01T11:58:00Z","msg":"member 1 has already been bootstrapped"}`,
				}}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := utSummary(rtFindings(tt.ev.input()))
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("findings (-want +got):\n%s", diff)
			}
		})
	}
}

// rtEtcdPodLogs is etcd's logs under /var/log/pods: two short runs two
// minutes apart, each ending with a fatal line.
func rtEtcdPodLogs() *nodediagv1.PodContainer {
	dir := "/var/log/pods/kube-system_etcd-node-1_0123/etcd"
	run := func(n int, end time.Duration) *nodediagv1.LogExcerpt {
		start := end + 3*time.Second
		fatal := fmt.Sprintf(`{"level":"fatal","ts":"%s","msg":"member 1 has already been bootstrapped"}`, rtClock.Add(-end).Format(time.RFC3339))
		return &nodediagv1.LogExcerpt{Source: fmt.Sprintf("%s/%d.log", dir, n), Kind: "pod",
			Lines: []*nodediagv1.LogLine{
				{N: 1, Text: `{"level":"info","msg":"starting etcd"}`, Time: rtAgo(start)},
				{N: 2, Text: fatal, Time: rtAgo(end)},
			},
			FirstTime: rtAgo(start), LastTime: rtAgo(end)}
	}
	return &nodediagv1.PodContainer{Namespace: "kube-system", Pod: "etcd-node-1", PodUid: "0123", Container: "etcd", Dir: dir,
		Files: []string{"4.log", "5.log"}, Restarts: 5, Static: true, Log: run(5, 2*time.Minute), PreviousLog: run(4, 4*time.Minute), LastTime: rtAgo(2 * time.Minute)}
}

// Through the engine, a runtime finding takes the log lines of its
// signatures: one finding per problem.
func TestRuntimeRulesThroughEngine(t *testing.T) {
	e, err := NewEngine()
	if err != nil {
		t.Fatal(err)
	}
	cniLine := `E0501 11:20:00.000000    1876 kubelet.go:2900] "Container runtime network not ready" networkReady="NetworkReady=false reason:NetworkPluginNotReady message:Network plugin returns error: cni plugin not initialized"`
	criLine := "time=\"2024-05-01T11:00:00Z\" level=warning msg=\"failed to load plugin io.containerd.grpc.v1.cri\" error=\"failed to create CRI service: failed to find snapshotter \\\"zfs\\\"\""
	tests := []struct {
		name       string
		ev         rtEvidence
		id         string
		wantQuotes []string
	}{
		{
			name: "CNI: the runtime's condition and the kubelet's lines",
			ev: rtEvidence{runtime: rtNetworkNotReady(rtRuntime("ok")), kubeadm: rtJoined,
				logs: []*nodediagv1.LogExcerpt{rtJournal("kubelet", rtRepeat(cniLine, 40*time.Minute, 0, 5*time.Minute)...)}},
			id: "CNINotInitialized",
			wantQuotes: []string{
				"cri:/run/containerd/containerd.sock: NetworkReady=false reason=NetworkPluginNotReady message=Network plugin returns error: cni plugin not initialized",
				"journal:kubelet.service: " + cniLine, "journal:kubelet.service: " + cniLine, "journal:kubelet.service: " + cniLine,
			},
		},
		{
			name: "no CRI: the runtime's answer and containerd's plugin error",
			ev:   rtEvidence{runtime: rtRuntime("no-cri"), logs: []*nodediagv1.LogExcerpt{rtJournal("containerd", rtLine{time.Hour, criLine})}},
			id:   "RuntimeCRIDisabled",
			wantQuotes: []string{
				"cri:/run/containerd/containerd.sock: no-cri: Version: rpc error: code = Unimplemented desc = unknown service runtime.v1.RuntimeService",
				"journal:containerd.service: " + criLine,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := e.Analyze(tt.ev.evidence(), Context{SinceAgo: 24 * time.Hour})
			var found []utGot
			for _, g := range utSummary(res.Findings) {
				if g.ID == tt.id {
					found = append(found, g)
				}
			}
			if len(found) != 1 {
				t.Fatalf("%d %s findings, want 1: %v", len(found), tt.id, utSummary(res.Findings))
			}
			if diff := cmp.Diff(tt.wantQuotes, found[0].Quotes); diff != "" {
				t.Errorf("quotes (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRuntimeNormalizeRef(t *testing.T) {
	tests := []struct{ in, want string }{
		{"registry.k8s.io/pause:3.9", "registry.k8s.io/pause:3.9"},
		{"busybox", "docker.io/library/busybox:latest"},
		{"nginx:1.25", "docker.io/library/nginx:1.25"},
		{"calico/node:v3.27.0", "docker.io/calico/node:v3.27.0"},
		{"docker.io/library/busybox:1", "docker.io/library/busybox:1"},
		{"localhost/img", "localhost/img:latest"},
		{"127.0.0.1:5000/dkp/kube-proxy:v1.30.0", "127.0.0.1:5000/dkp/kube-proxy:v1.30.0"},
		{"127.0.0.1:5000/dkp/kube-proxy", "127.0.0.1:5000/dkp/kube-proxy:latest"},
		{"registry.k8s.io/pause@sha256:abc", "registry.k8s.io/pause@sha256:abc"},
		{" registry.k8s.io/pause:3.9 ", "registry.k8s.io/pause:3.9"},
	}
	for _, tt := range tests {
		if got := runtimeNormalizeRef(tt.in); got != tt.want {
			t.Errorf("runtimeNormalizeRef(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestPullImageFact: the pull-image fact reads the image a pull line names,
// whole: pause:3.9 is not pause:3.9.1.
func TestPullImageFact(t *testing.T) {
	tests := []struct{ text, want string }{
		{`E0501 00:01:40.1 1876 remote_image.go:180] "PullImage from image service failed" err="rpc error" image="registry.k8s.io/pause:3.9"`, "registry.k8s.io/pause:3.9"},
		{`level=error msg="PullImage \"registry.k8s.io/pause:3.9.1\" failed" error="not found"`, "registry.k8s.io/pause:3.9.1"},
		{`Failed to pull image "registry.k8s.io/pause:3.90": rpc error`, "registry.k8s.io/pause:3.90"},
		{"\t[ERROR ImagePull]: failed to pull image registry.k8s.io/kube-apiserver:v1.31.100: output: E0501", "registry.k8s.io/kube-apiserver:v1.31.100"},
	}
	for _, tt := range tests {
		ex := &nodediagv1.LogExcerpt{Source: "journal:kubelet.service", Kind: "kubelet", Lines: []*nodediagv1.LogLine{{N: 1, Text: tt.text}}}
		in := &Input{Ev: &nodediagv1.Evidence{Probes: []*nodediagv1.ProbeEvidence{{Name: "logs", Data: &nodediagv1.ProbeEvidence_Logs{Logs: &nodediagv1.Logs{Sources: []*nodediagv1.LogExcerpt{ex}}}}}}}
		ms := in.MatchedIn(ex, "pull-image")
		if len(ms) != 1 || strings.TrimRight(ms[0].Group("image"), ":") != tt.want {
			t.Errorf("%s: matches %v, want the image %s", tt.text, ms, tt.want)
		}
	}
}
