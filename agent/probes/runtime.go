package probes

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"sort"
	"strings"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"
	criv1 "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodediag/nodediag/agent/ctdconfig"
	"github.com/nodediag/nodediag/agent/host"
	"github.com/nodediag/nodediag/agent/probe"
	nodediagv1 "github.com/nodediag/nodediag/proto/nodediag/v1"
)

// runtimeAddressEnv names a containerd socket that replaces the one of the
// node's configuration: the variable ctr and containerd's client read. It
// is the agent's own configuration (a DaemonSet may set it), so it is read
// from the agent's environment; its value is a host path like the others.
const runtimeAddressEnv = "CONTAINERD_ADDRESS"

// Where Runtime.socket came from.
const (
	runtimeFromEnv     = "env"
	runtimeFromConfig  = "config"
	runtimeFromDefault = "default"
)

// Runtime.state values (see the proto).
const (
	runtimeOK      = "ok"
	runtimeAbsent  = "absent"
	runtimeRefused = "refused"
	runtimeTimeout = "timeout"
	runtimeNoCRI   = "no-cri"
	runtimeError   = "error"
)

// Bounds. A runtime that accepts connections and never answers (a hung
// containerd, a socket some other program holds) must not hold the agent:
// each call gets runtimeCallTimeout, the whole probe runtimeProbeTimeout, and
// after a call times out no other is made.
const (
	runtimeCallTimeout  = 3 * time.Second
	runtimeProbeTimeout = 15 * time.Second
	// runtimeMaxStatus bounds the ContainerStatus calls (one per
	// container: the exit code, reason and times are only there).
	runtimeMaxStatus = 64
	// runtimeMaxMsg bounds a response: ListImages and ListContainers of a
	// busy node are well below it.
	runtimeMaxMsg = 16 << 20
)

// runtimeProbe asks the container runtime over its CRI socket (gRPC,
// k8s.io/cri-api runtime.v1) what it is and what it holds: its version, its
// status conditions (RuntimeReady, NetworkReady), its images (containerd's
// k8s.io namespace) and its containers, exited ones with their exit code.
//
// It only reads: Version, Status, ListImages, ListPodSandbox,
// ListContainers and ContainerStatus. It never pulls, removes, creates,
// starts or stops anything.
//
// The socket is a host path resolved inside the root: $CONTAINERD_ADDRESS of
// the agent's environment when set, else the [grpc] address of containerd's
// configuration, else containerd's default /run/containerd/containerd.sock.
// A copy of a host has no runtime to ask (a socket file in it is not the
// node's), so the probe is then skipped without dialling anything.
//
// Whether the runtime answers is data: Runtime.state says "absent" (no
// socket file), "refused" (a socket nobody listens on: containerd is down
// and left its socket), "timeout" (accepts, never answers), "no-cri"
// (containerd answers but its CRI plugin is disabled or failed to load),
// "ok" or "error".
type runtimeProbe struct{}

func (runtimeProbe) Name() string { return "runtime" }

func (runtimeProbe) Run(ctx context.Context, h *host.Host) (*nodediagv1.ProbeEvidence, error) {
	if !h.Live() {
		return nil, fmt.Errorf("%w: a copy of a host: its runtime socket is not the node's", probe.ErrNotApplicable)
	}
	ctx, cancel := context.WithTimeout(ctx, runtimeProbeTimeout)
	defer cancel()
	callTimeout := runtimeCallTimeout
	pe := &nodediagv1.ProbeEvidence{}
	rt := &nodediagv1.Runtime{}
	pe.Data = &nodediagv1.ProbeEvidence_Runtime{Runtime: rt}
	rt.Socket, rt.SocketFrom = runtimeSocket(h, os.Getenv(runtimeAddressEnv))

	state, err := runtimeDial(ctx, h, rt.Socket, callTimeout)
	if err != nil {
		rt.State, rt.Error = state, err.Error()
		return pe, nil
	}
	conn, err := grpc.NewClient("passthrough:///runtime",
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
			return h.DialUnix(ctx, rt.Socket)
		}),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(runtimeMaxMsg)),
	)
	if err != nil {
		rt.State, rt.Error = runtimeError, err.Error()
		return pe, nil
	}
	defer conn.Close()
	c := &runtimeClient{rs: criv1.NewRuntimeServiceClient(conn), is: criv1.NewImageServiceClient(conn), timeout: callTimeout, source: "cri:" + rt.Socket, pe: pe}

	// Version first: it tells whether anything answers, and what.
	var v *criv1.VersionResponse
	err = c.call(ctx, "Version", func(ctx context.Context) (err error) {
		v, err = c.rs.Version(ctx, &criv1.VersionRequest{Version: "v1"})
		return err
	})
	if err != nil {
		rt.State, rt.Error = runtimeCallState(err), err.Error()
		return pe, nil
	}
	rt.State = runtimeOK
	rt.RuntimeName, rt.RuntimeVersion, rt.RuntimeApiVersion = v.GetRuntimeName(), v.GetRuntimeVersion(), v.GetRuntimeApiVersion()

	c.read(ctx, "Status", func(ctx context.Context) error {
		st, err := c.rs.Status(ctx, &criv1.StatusRequest{})
		for _, cond := range st.GetStatus().GetConditions() {
			rt.Conditions = append(rt.Conditions, &nodediagv1.RuntimeCondition{
				Type: cond.GetType(), Status: cond.GetStatus(), Reason: cond.GetReason(), Message: cond.GetMessage(),
			})
		}
		return err
	})
	imageNames := map[string]string{} // image ID → its first tag
	c.read(ctx, "ListImages", func(ctx context.Context) error {
		resp, err := c.is.ListImages(ctx, &criv1.ListImagesRequest{})
		for _, im := range resp.GetImages() {
			rt.Images = append(rt.Images, &nodediagv1.RuntimeImage{
				Id: im.GetId(), Tags: im.GetRepoTags(), Digests: im.GetRepoDigests(), Size: im.GetSize(),
			})
			if len(im.GetRepoTags()) > 0 {
				imageNames[im.GetId()] = im.GetRepoTags()[0]
			}
		}
		sort.Slice(rt.Images, func(i, j int) bool { return runtimeImageKey(rt.Images[i]) < runtimeImageKey(rt.Images[j]) })
		return err
	})
	pods := map[string]*criv1.PodSandboxMetadata{}
	c.read(ctx, "ListPodSandbox", func(ctx context.Context) error {
		resp, err := c.rs.ListPodSandbox(ctx, &criv1.ListPodSandboxRequest{})
		for _, s := range resp.GetItems() {
			pods[s.GetId()] = s.GetMetadata()
		}
		return err
	})
	var containers []*criv1.Container
	c.read(ctx, "ListContainers", func(ctx context.Context) error {
		resp, err := c.rs.ListContainers(ctx, &criv1.ListContainersRequest{})
		containers = resp.GetContainers()
		return err
	})
	rt.Containers = runtimeContainers(containers, pods, imageNames)
	// The exit code, reason and times: exited containers first (why they
	// stopped), then running ones (since when), newest first, bounded.
	byID := map[string]*nodediagv1.RuntimeContainer{}
	for _, rc := range rt.Containers {
		byID[rc.Id] = rc
	}
	order := append([]*criv1.Container(nil), containers...)
	sort.SliceStable(order, func(i, j int) bool {
		ei, ej := order[i].GetState() == criv1.ContainerState_CONTAINER_EXITED, order[j].GetState() == criv1.ContainerState_CONTAINER_EXITED
		if ei != ej {
			return ei
		}
		return order[i].GetCreatedAt() > order[j].GetCreatedAt()
	})
	for i, ctr := range order {
		if i == runtimeMaxStatus {
			probe.Unreadable(pe, c.source+" ContainerStatus", fmt.Errorf("status of %d more containers not read (at most %d)", len(order)-i, runtimeMaxStatus))
			break
		}
		rc := byID[ctr.GetId()]
		c.read(ctx, "ContainerStatus "+ctr.GetId(), func(ctx context.Context) error {
			resp, err := c.rs.ContainerStatus(ctx, &criv1.ContainerStatusRequest{ContainerId: ctr.GetId()})
			if s := resp.GetStatus(); s != nil {
				rc.ExitCode, rc.Reason, rc.Message = s.GetExitCode(), s.GetReason(), s.GetMessage()
				rc.StartedAt, rc.FinishedAt = runtimeTime(s.GetStartedAt()), runtimeTime(s.GetFinishedAt())
				rc.State = runtimeContainerState(s.GetState())
			}
			return err
		})
		if c.timedOut {
			break
		}
	}
	return pe, nil
}

// runtimeSocket chooses the socket: env, else the configuration's [grpc]
// address, else containerd's default. A "unix://" prefix (the form of the
// kubelet's containerRuntimeEndpoint) is dropped.
func runtimeSocket(h *host.Host, env string) (socket, from string) {
	if env != "" {
		return strings.TrimPrefix(env, "unix://"), runtimeFromEnv
	}
	// The containerd probe reports what is wrong with the configuration;
	// only the address matters here.
	cfg, _ := ctdconfig.Read(h)
	if a := cfg.GetGrpcAddress(); a != "" && cfg.GetGrpcAddressLine() != nil {
		return strings.TrimPrefix(a, "unix://"), runtimeFromConfig
	}
	return ctdconfig.DefaultGRPCAddress, runtimeFromDefault
}

// runtimeDial connects to the socket once and says, when it cannot be
// dialled, in which state that leaves the runtime. A socket file
// that refuses connections is "refused" (containerd stopped without
// removing it, or was killed): told from the kernel's ECONNREFUSED on a
// first plain connect, not from gRPC's text.
func runtimeDial(ctx context.Context, h *host.Host, socket string, timeout time.Duration) (state string, err error) {
	if !strings.HasPrefix(socket, "/") {
		return runtimeError, fmt.Errorf("socket %q is not an absolute path", socket)
	}
	fi, err := h.Stat(socket)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return runtimeAbsent, fmt.Errorf("no socket at %s", socket)
	case err != nil:
		return runtimeError, err
	case fi.Mode().Type() != fs.ModeSocket:
		return runtimeError, fmt.Errorf("%s is not a socket but %s", socket, runtimeFileType(fi.Mode()))
	}
	dctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	conn, err := h.DialUnix(dctx, socket)
	switch {
	case err == nil:
		conn.Close()
		return "", nil
	case errors.Is(err, syscall.ECONNREFUSED):
		return runtimeRefused, fmt.Errorf("dial unix %s: connection refused: nothing listens on the socket", socket)
	case errors.Is(err, syscall.ENOENT):
		return runtimeAbsent, fmt.Errorf("no socket at %s", socket)
	case errors.Is(err, os.ErrDeadlineExceeded), errors.Is(err, syscall.EAGAIN):
		// A listener whose backlog is full.
		return runtimeTimeout, fmt.Errorf("dial unix %s: %w", socket, err)
	default:
		return runtimeError, fmt.Errorf("dial unix %s: %w", socket, err)
	}
}

// runtimeFileType names the type of a file that is not a socket.
func runtimeFileType(m fs.FileMode) string {
	switch {
	case m.IsRegular():
		return "a regular file"
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case m&fs.ModeDevice != 0:
		return "a device"
	}
	return "a file of mode " + m.String()
}

// runtimeCallState classifies the error of the first call.
func runtimeCallState(err error) string {
	switch status.Code(err) {
	case codes.Unimplemented:
		// "unknown service runtime.v1.RuntimeService": a gRPC server (the
		// dial proved it) without the CRI.
		return runtimeNoCRI
	case codes.DeadlineExceeded:
		return runtimeTimeout
	}
	return runtimeError
}

// runtimeClient makes the bounded calls of one run.
type runtimeClient struct {
	rs       criv1.RuntimeServiceClient
	is       criv1.ImageServiceClient
	timeout  time.Duration
	source   string
	pe       *nodediagv1.ProbeEvidence
	timedOut bool
}

// call makes one call with its own deadline; none is made once a call has
// timed out.
func (c *runtimeClient) call(ctx context.Context, what string, fn func(context.Context) error) error {
	if c.timedOut {
		return fmt.Errorf("%s: not called: an earlier call timed out", what)
	}
	cctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	err := fn(cctx)
	if status.Code(err) == codes.DeadlineExceeded || errors.Is(err, context.DeadlineExceeded) {
		c.timedOut = true
	}
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// read makes a call whose failure leaves the rest of the evidence standing.
func (c *runtimeClient) read(ctx context.Context, what string, fn func(context.Context) error) {
	if c.timedOut {
		return
	}
	if err := c.call(ctx, what, fn); err != nil {
		probe.Unreadable(c.pe, c.source+" "+what, err)
	}
}

// Labels the kubelet puts on every container it creates
// (pkg/kubelet/types/labels.go), used when the container's sandbox is gone.
const (
	runtimeLabelPodName      = "io.kubernetes.pod.name"
	runtimeLabelPodNamespace = "io.kubernetes.pod.namespace"
)

// runtimeContainers converts the CRI's containers, in a stable order (pod
// namespace, pod, container name, attempt, ID).
func runtimeContainers(cs []*criv1.Container, pods map[string]*criv1.PodSandboxMetadata, imageNames map[string]string) []*nodediagv1.RuntimeContainer {
	var out []*nodediagv1.RuntimeContainer
	for _, c := range cs {
		rc := &nodediagv1.RuntimeContainer{
			Id:      c.GetId(),
			Name:    c.GetMetadata().GetName(),
			Attempt: c.GetMetadata().GetAttempt(),
			State:   runtimeContainerState(c.GetState()),
			Image:   runtimeContainerImage(c.GetImage(), imageNames),
		}
		if m := pods[c.GetPodSandboxId()]; m != nil {
			rc.PodNamespace, rc.PodName = m.GetNamespace(), m.GetName()
		} else {
			rc.PodNamespace, rc.PodName = c.GetLabels()[runtimeLabelPodNamespace], c.GetLabels()[runtimeLabelPodName]
		}
		out = append(out, rc)
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.PodNamespace != b.PodNamespace {
			return a.PodNamespace < b.PodNamespace
		}
		if a.PodName != b.PodName {
			return a.PodName < b.PodName
		}
		if a.Name != b.Name {
			return a.Name < b.Name
		}
		if a.Attempt != b.Attempt {
			return a.Attempt < b.Attempt
		}
		return a.Id < b.Id
	})
	return out
}

// runtimeContainerImage names a container's image: the kubelet asks for
// the image by its ID ("sha256:...") and keeps the name the pod spec used
// in user_specified_image (kubelet 1.29+); an ID is otherwise replaced by
// the image's first tag when the image is known.
func runtimeContainerImage(spec *criv1.ImageSpec, imageNames map[string]string) string {
	if u := spec.GetUserSpecifiedImage(); u != "" {
		return u
	}
	if n, ok := imageNames[spec.GetImage()]; ok {
		return n
	}
	return spec.GetImage()
}

func runtimeContainerState(s criv1.ContainerState) string {
	switch s {
	case criv1.ContainerState_CONTAINER_RUNNING:
		return "running"
	case criv1.ContainerState_CONTAINER_EXITED:
		return "exited"
	case criv1.ContainerState_CONTAINER_CREATED:
		return "created"
	}
	return "unknown"
}

// runtimeTime converts the CRI's nanoseconds since the epoch; zero is unset.
func runtimeTime(ns int64) *timestamppb.Timestamp {
	if ns <= 0 {
		return nil
	}
	return timestamppb.New(time.Unix(0, ns).UTC())
}

func runtimeImageKey(im *nodediagv1.RuntimeImage) string {
	if len(im.GetTags()) > 0 {
		return im.GetTags()[0]
	}
	return "~" + im.GetId() // untagged images last
}
