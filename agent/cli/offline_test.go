package cli

import (
	"io"
	"net"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"golang.org/x/sys/unix"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/nodediag/nodediag/agent/host/hosttest"
	"github.com/nodediag/nodediag/agent/probe"
	"github.com/nodediag/nodediag/agent/probes"
	"github.com/nodediag/nodediag/internal/testenv"
	nodediagv1 "github.com/nodediag/nodediag/proto/nodediag/v1"
)

func TestOfflineFlagIsDocumented(t *testing.T) {
	_, stderr, code := run(t, "check", "-h")
	if code != ExitOK {
		t.Fatalf("check -h: exit %d", code)
	}
	if !strings.Contains(stderr, "-offline") || !strings.Contains(stderr, "never touch the network: skip registry reachability") {
		t.Errorf("check -h does not document --offline:\n%s", stderr)
	}
}

// --offline keeps the agent off the network: on a live node whose
// containerd has a mirror, the mirror sees no connection and the report
// says the registries were not checked. The same run without --offline
// connects to it.
func TestOffline(t *testing.T) {
	wired := false
	for _, p := range probes.All() {
		wired = wired || p.Name() == "registries"
	}
	if !wired {
		t.Skip("the registries probe is not in probes.All() yet (agent/probes/all.go)")
	}
	testenv.RequireRoot(t, "mounting a procfs into the test tree makes it a live node")

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	var accepts atomic.Int64
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			accepts.Add(1)
			go func() {
				defer c.Close()
				c.Read(make([]byte, 4096))
				io.WriteString(c, "not a registry\r\n")
			}()
		}
	}()
	h := hosttest.Tree(t, map[string]string{
		"proc/": "",
		"etc/containerd/config.toml": `version = 2
[plugins."io.containerd.grpc.v1.cri".registry.mirrors."registry.k8s.io"]
  endpoint = ["http://` + l.Addr().String() + `"]
`,
	})
	procDir := filepath.Join(h.Root, "proc")
	if err := unix.Mount("proc", procDir, "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		t.Fatalf("mount proc on %s: %v", procDir, err)
	}
	t.Cleanup(func() { unix.Unmount(procDir, unix.MNT_DETACH) })

	check := func(args ...string) *nodediagv1.Report {
		t.Helper()
		out, stderr, code := run(t, append([]string{"check", "--root", h.Root, "--probe", "registries", "--output", "json"}, args...)...)
		if code == ExitUsage {
			t.Fatalf("exit 2: %s", stderr)
		}
		var r nodediagv1.Report
		if err := protojson.Unmarshal([]byte(out), &r); err != nil {
			t.Fatalf("report: %v\n%s", err, out)
		}
		return &r
	}
	mirror := "net:http://" + l.Addr().String() + "/v2/"

	r := check("--offline")
	if ps := r.GetProbes(); len(ps) != 1 || ps[0].GetStatus() != probe.StatusSkipped || !strings.Contains(ps[0].GetError(), "--offline") {
		t.Errorf("--offline: probes = %v, want registries skipped for --offline", ps)
	}
	if n := accepts.Load(); n != 0 {
		t.Fatalf("--offline: the mirror saw %d connections", n)
	}
	if len(r.GetFindings()) != 0 {
		t.Errorf("--offline: findings %v", r.GetFindings())
	}

	r = check()
	if accepts.Load() == 0 {
		t.Fatal("without --offline the mirror saw no connection: the test proves nothing")
	}
	found := false
	for _, f := range r.GetFindings() {
		for _, q := range f.GetEvidence() {
			found = found || f.GetId() == "RegistryUnreachable" && q.GetSource() == mirror && strings.HasPrefix(q.GetExcerpt(), "http: ")
		}
	}
	if !found {
		t.Errorf("without --offline: want RegistryUnreachable quoting %s, got %v", mirror, r.GetFindings())
	}
}
