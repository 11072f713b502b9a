package deploy

import (
	"context"
	"errors"
	"os/exec"
	"path"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/nodediag/nodediag/internal/testenv"
)

// creatingHostPathTypes are the hostPath types with which the kubelet
// creates what is missing on the node; the unset type skips every check.
// Neither is allowed: the DaemonSet names what must exist and never creates.
var creatingHostPathTypes = []corev1.HostPathType{corev1.HostPathDirectoryOrCreate, corev1.HostPathFileOrCreate, corev1.HostPathUnset}

// TestDaemonSetWritesNothingOfTheHost holds the agent's DaemonSet to what
// docs/daemonset.md promises, in every build: nothing of the node is mounted
// writable, no hostPath may create anything, the node's procfs and sysfs are
// not writable through /host, no privileged container, no privilege
// escalation, no capability, a read-only root filesystem, RuntimeDefault
// seccomp, no host PID or IPC namespace, no API token, and every taint
// tolerated.
func TestDaemonSetWritesNothingOfTheHost(t *testing.T) {
	for _, b := range builds(t) {
		t.Run(b.name, func(t *testing.T) {
			r := typed(t, render(t, b.dir))
			if len(r.daemonSets) == 0 {
				t.Fatal("no DaemonSet")
			}
			for _, ds := range r.daemonSets {
				checkDaemonSet(t, ds.Name, &ds.Spec.Template.Spec)
			}
		})
	}
}

func checkDaemonSet(t *testing.T, name string, spec *corev1.PodSpec) {
	t.Helper()
	fail := func(format string, args ...any) {
		t.Helper()
		t.Errorf("DaemonSet %s: "+format, append([]any{name}, args...)...)
	}
	if spec.HostPID || spec.HostIPC {
		fail("hostPID %v, hostIPC %v: no probe looks at the host's processes", spec.HostPID, spec.HostIPC)
	}
	if spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken {
		fail("automountServiceAccountToken must be false: the agent never calls the API server")
	}
	if !slices.ContainsFunc(spec.Tolerations, func(tol corev1.Toleration) bool {
		return tol.Operator == corev1.TolerationOpExists && tol.Key == "" && tol.Effect == "" && tol.TolerationSeconds == nil
	}) {
		fail("tolerations %+v: want {operator: Exists} (every taint: NotReady, control-plane, ...)", spec.Tolerations)
	}
	if spec.PriorityClassName == "" {
		fail("no priorityClassName")
	}

	vols := map[string]corev1.Volume{}
	for _, v := range spec.Volumes {
		vols[v.Name] = v
		if hp := v.HostPath; hp != nil {
			if hp.Type == nil || slices.Contains(creatingHostPathTypes, *hp.Type) {
				typ := "unset"
				if hp.Type != nil {
					typ = string(*hp.Type)
				}
				fail("hostPath volume %s (%s) has type %s: want one that never creates anything on the node (Directory, File, Socket)", v.Name, hp.Path, typ)
			}
		}
	}

	podSC := spec.SecurityContext
	containers := append(slices.Clone(spec.InitContainers), spec.Containers...)
	for _, c := range containers {
		cfail := func(format string, args ...any) {
			t.Helper()
			fail("container %s: "+format, append([]any{c.Name}, args...)...)
		}
		sc := c.SecurityContext
		if sc == nil {
			cfail("no securityContext")
			continue
		}
		if sc.Privileged != nil && *sc.Privileged {
			cfail("privileged")
		}
		if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
			cfail("allowPrivilegeEscalation must be false")
		}
		if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
			cfail("readOnlyRootFilesystem must be true")
		}
		if sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") || len(sc.Capabilities.Add) > 0 {
			cfail("capabilities %+v: want drop [ALL] and nothing added", sc.Capabilities)
		}
		if sc.ProcMount != nil && *sc.ProcMount != corev1.DefaultProcMount {
			cfail("procMount %s", *sc.ProcMount)
		}
		seccomp := sc.SeccompProfile
		if seccomp == nil && podSC != nil {
			seccomp = podSC.SeccompProfile
		}
		if seccomp == nil || seccomp.Type != corev1.SeccompProfileTypeRuntimeDefault {
			cfail("seccompProfile %+v: want RuntimeDefault", seccomp)
		}

		mounts := map[string]corev1.VolumeMount{}
		for _, m := range c.VolumeMounts {
			mounts[m.MountPath] = m
			v, ok := vols[m.Name]
			if !ok {
				cfail("mount %s of an undefined volume %s", m.MountPath, m.Name)
				continue
			}
			if m.MountPropagation != nil && *m.MountPropagation == corev1.MountPropagationBidirectional {
				cfail("mount %s is Bidirectional: the container's mounts would reach the node", m.MountPath)
			}
			underHost := m.MountPath == "/host" || strings.HasPrefix(m.MountPath, "/host/")
			if (v.HostPath != nil || underHost) && !m.ReadOnly {
				cfail("mount %s (volume %s) is writable: everything of the node, and everything at or under /host, must be readOnly", m.MountPath, m.Name)
			}
			if v.HostPath == nil && v.EmptyDir == nil && v.Secret == nil && v.ConfigMap == nil && v.Projected == nil {
				cfail("mount %s: volume %s is of a kind this test does not know is harmless", m.MountPath, m.Name)
			}
			if !m.ReadOnly && v.EmptyDir == nil {
				cfail("mount %s is writable and not an emptyDir: the only writable place is the pod's own", m.MountPath)
			}
		}
		// The node's / is read-only only at its top: what is mounted under it
		// on the node (procfs, sysfs) must be covered again, read-only.
		if root, ok := mounts["/host"]; ok {
			if v := vols[root.Name]; v.HostPath == nil || v.HostPath.Path != "/" {
				cfail("/host is not the node's /")
			}
			if root.MountPropagation == nil || *root.MountPropagation != corev1.MountPropagationHostToContainer {
				cfail("/host must have mountPropagation HostToContainer: a private copy of the node's mounts pins filesystems the node unmounts")
			}
			proc, ok := mounts["/host/proc"]
			switch {
			case !ok:
				cfail("no read-only mount over /host/proc: uid 0 could write the node's /proc/sys through /host")
			case vols[proc.Name].HostPath == nil || vols[proc.Name].HostPath.Path != "/proc":
				cfail("/host/proc must be the node's /proc (the agent reads it), mounted read-only")
			}
			if _, ok := mounts["/host/sys"]; !ok {
				cfail("no read-only mount over /host/sys: uid 0 could write the node's sysfs through /host")
			}
		}

		if _, ok := flagValue(c.Args, "root"); ok {
			checkAgentContainer(t, name, &c)
		}
	}
}

// checkAgentContainer: the node's name from the downward API, and resources
// consistent with the Go runtime's soft limit.
func checkAgentContainer(t *testing.T, ds string, c *corev1.Container) {
	t.Helper()
	if !slices.ContainsFunc(c.Env, func(e corev1.EnvVar) bool {
		return e.Name == "NODE_NAME" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "spec.nodeName"
	}) {
		t.Errorf("DaemonSet %s: no NODE_NAME from spec.nodeName: reports would carry the host name, which need not be the node's", ds)
	}
	if root, _ := flagValue(c.Args, "root"); root != "/host" {
		t.Errorf("DaemonSet %s: --root %q, want /host (the node's / mount)", ds, root)
	}
	limit, ok := c.Resources.Limits[corev1.ResourceMemory]
	if !ok {
		t.Fatalf("DaemonSet %s: no memory limit", ds)
	}
	if _, ok := c.Resources.Requests[corev1.ResourceMemory]; !ok {
		t.Errorf("DaemonSet %s: no memory request", ds)
	}
	soft, ok := flagValue(c.Args, "memory-limit")
	if !ok {
		t.Fatalf("DaemonSet %s: no --memory-limit: the agent's default soft limit (256MiB) is not below the container's %s", ds, limit.String())
	}
	// --memory-limit takes MiB/GiB; a Kubernetes quantity says Mi/Gi.
	q, err := resource.ParseQuantity(strings.TrimSuffix(soft, "B"))
	if err != nil {
		t.Fatalf("DaemonSet %s: --memory-limit %q: %v", ds, soft, err)
	}
	if q.Cmp(limit) >= 0 {
		t.Errorf("DaemonSet %s: --memory-limit %s is not below the container's memory limit %s: the kernel would kill before the garbage collector works harder", ds, soft, limit.String())
	}
}

// TestCollectorAndServices: the collector runs as non-root with nothing of
// the node; its Service's ports name container ports that exist, one of
// them "metrics" (the ServiceMonitor's endpoint), on which the readiness
// and liveness probes ask /readyz and /healthz. The management overlay
// reads the Cluster API (--cluster-api, with a token); the workload overlay
// has no collector and no role at all.
func TestCollectorAndServices(t *testing.T) {
	for _, b := range builds(t) {
		t.Run(b.name, func(t *testing.T) {
			r := typed(t, render(t, b.dir))
			workload := b.name == "workload"
			if workload {
				if len(r.deployments)+len(r.clusterRoles)+len(r.bindings)+len(r.roles)+len(r.roleBindings) > 0 {
					t.Errorf("the workload overlay has a collector or RBAC: %d Deployments, %d ClusterRoles, %d ClusterRoleBindings, %d Roles, %d RoleBindings",
						len(r.deployments), len(r.clusterRoles), len(r.bindings), len(r.roles), len(r.roleBindings))
				}
				return
			}
			if len(r.deployments) != 1 {
				t.Fatalf("want the collector's Deployment, got %d Deployments", len(r.deployments))
			}
			d := r.deployments[0]
			spec := d.Spec.Template.Spec
			if spec.HostNetwork || spec.HostPID || spec.HostIPC {
				t.Error("the collector uses a host namespace")
			}
			for _, v := range spec.Volumes {
				if v.HostPath != nil {
					t.Errorf("the collector mounts the node's %s", v.HostPath.Path)
				}
			}
			psc := spec.SecurityContext
			if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.RunAsUser == nil || *psc.RunAsUser == 0 {
				t.Error("the collector must run as a non-root uid (runAsNonRoot, runAsUser)")
			}
			c := spec.Containers[0]
			if sc := c.SecurityContext; sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
				sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation || sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") {
				t.Errorf("the collector's securityContext %+v: want a read-only root, no privilege escalation, drop ALL", c.SecurityContext)
			}
			if !hasFlag(c.Args, "cluster-api") {
				t.Errorf("the collector of %s does not read the Cluster API (--cluster-api)", b.name)
			}
			if spec.AutomountServiceAccountToken == nil || !*spec.AutomountServiceAccountToken {
				t.Error("--cluster-api uses the pod's ServiceAccount: its token must be mounted")
			}

			ports := map[string]int32{}
			for _, p := range c.Ports {
				ports[p.Name] = p.ContainerPort
			}
			if metrics, _ := flagValue(c.Args, "metrics-listen"); !strings.HasSuffix(metrics, ":9090") || ports["metrics"] != 9090 {
				t.Errorf("--metrics-listen %q and the container port metrics %d disagree", metrics, ports["metrics"])
			}
			if listen, _ := flagValue(c.Args, "listen"); !strings.HasSuffix(listen, ":7443") || ports["grpc"] != 7443 {
				t.Errorf("--listen %q and the container port grpc %d disagree", listen, ports["grpc"])
			}
			for _, p := range []struct {
				name  string
				probe *corev1.Probe
				path  string
			}{{"readiness", c.ReadinessProbe, "/readyz"}, {"liveness", c.LivenessProbe, "/healthz"}} {
				if p.probe == nil || p.probe.HTTPGet == nil || p.probe.HTTPGet.Path != p.path || p.probe.HTTPGet.Port.String() != "metrics" {
					t.Errorf("%s probe: want GET %s on port metrics", p.name, p.path)
				}
			}
			sawMetrics := false
			for _, s := range r.services {
				for _, sp := range s.Spec.Ports {
					if _, ok := ports[sp.TargetPort.String()]; !ok {
						t.Errorf("Service %s port %s targets %q, which the collector does not declare", s.Name, sp.Name, sp.TargetPort.String())
					}
					if sp.Name == "metrics" {
						sawMetrics = true
						if s.Spec.Type != corev1.ServiceTypeClusterIP {
							t.Errorf("Service %s exposes the plain-HTTP metrics port as %s", s.Name, s.Spec.Type)
						}
					}
				}
			}
			if !sawMetrics {
				t.Error("no Service port named metrics for a ServiceMonitor")
			}
		})
	}
}

// TestManifestFlagsExist runs the real binaries' flag parsing on the
// arguments every container of every build passes ($(VAR)s resolved as the
// kubelet does), followed by --help: the binary exits 0 having printed its
// usage only when it knows every flag and each value parses, so a renamed
// or removed flag fails here rather than in a crash-looping pod.
func TestManifestFlagsExist(t *testing.T) {
	bins := map[string]string{
		agentImage:     testenv.Build(t, agentPkg),
		collectorImage: testenv.Build(t, collectorPkg),
	}
	seen := map[string]bool{}
	for _, b := range builds(t) {
		t.Run(b.name, func(t *testing.T) {
			r := typed(t, render(t, b.dir))
			for w, spec := range r.podSpecs() {
				for _, c := range append(slices.Clone(spec.InitContainers), spec.Containers...) {
					repo := imageRepo(c.Image)
					bin, ok := bins[repo]
					if !ok {
						t.Errorf("%s container %s: image %s is not one of nodediag's %v", w, c.Name, c.Image, []string{agentImage, collectorImage})
						continue
					}
					if len(c.Command) > 0 {
						t.Errorf("%s container %s: command %q: the images' entrypoint is the binary, the manifests give only args", w, c.Name, c.Command)
					}
					seen[repo] = true
					args, err := expandArgs(r, &c, "node-a")
					if err != nil {
						t.Errorf("%s container %s: %v", w, c.Name, err)
						continue
					}
					if out, err := parseFlags(bin, args); err != nil {
						t.Errorf("%s container %s: %s %s --help: %v\n%s", w, c.Name, path.Base(bin), strings.Join(args, " "), err, out)
					}
				}
			}
		})
	}
	for repo := range bins {
		if !seen[repo] {
			t.Errorf("no build runs %s", repo)
		}
	}
}

// parseFlags runs bin with args and --help and returns its output and an
// error unless it exited 0 with a usage text.
func parseFlags(bin string, args []string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append(slices.Clone(args), "--help")...)
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=/nonexistent"}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), err
	}
	if !strings.Contains(strings.ToLower(string(out)), "usage") {
		return string(out), errors.New("exited 0 without printing its usage: --help was not reached")
	}
	return string(out), nil
}
