package main

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/types"
	criv1 "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodediag/nodediag/internal/testenv"
)

// hello builds a tiny Go program with env (CGO_ENABLED=0 unless env says
// otherwise) and returns its path.
func hello(t *testing.T, env ...string) string {
	t.Helper()
	dir := t.TempDir()
	src := filepath.Join(dir, "hello.go")
	if err := os.WriteFile(src, []byte("package main\n\nfunc main() { println(\"hello\") }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "hello")
	cmd := exec.Command("go", "build", "-trimpath", "-o", bin, src)
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), "CGO_ENABLED=0"), env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// The platform comes from the binary's ELF header; what a scratch image
// cannot run is refused with the reason.
func TestBinaryPlatform(t *testing.T) {
	text := filepath.Join(t.TempDir(), "script")
	os.WriteFile(text, []byte("#!/bin/sh\necho hi\n"), 0o755)
	tests := []struct {
		name    string
		path    string
		want    v1.Platform
		wantErr string
	}{
		{name: "static Go binary", path: hello(t), want: v1.Platform{OS: "linux", Architecture: runtime.GOARCH}},
		{name: "a shell script", path: text, wantErr: "bad magic number"},
		{name: "absent", path: filepath.Join(t.TempDir(), "nodediag-agent"), wantErr: "run make build first"},
	}
	// /bin/sh, when ldd (Debian's libc-bin) says it is dynamically linked,
	// as Debian's dash is.
	if out, err := exec.Command("ldd", "/bin/sh").Output(); err == nil && strings.Contains(string(out), "libc.so") {
		tests = append(tests, struct {
			name    string
			path    string
			want    v1.Platform
			wantErr string
		}{name: "dynamically linked /bin/sh", path: "/bin/sh", wantErr: "is dynamically linked"})
	} else {
		t.Logf("ldd /bin/sh: %v %s: no dynamically linked binary to refuse", err, out)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := binaryPlatform(tt.path)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err %v, want one saying %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("platform (-want +got):\n%s", diff)
			}
		})
	}
}

// A layer entry as the tests compare it.
type layerEntry struct {
	Name     string
	Type     byte
	Mode     int64
	UID, GID int
	ModTime  time.Time
	Size     int64
}

func readLayer(t testing.TB, r io.Reader) ([]layerEntry, map[string][]byte) {
	t.Helper()
	var entries []layerEntry
	files := map[string][]byte{}
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		entries = append(entries, layerEntry{Name: hdr.Name, Type: hdr.Typeflag, Mode: hdr.Mode, UID: hdr.Uid, GID: hdr.Gid, ModTime: hdr.ModTime.UTC(), Size: hdr.Size})
		if hdr.Typeflag == tar.TypeReg {
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			files[hdr.Name] = b
		}
	}
	return entries, files
}

// The layer: the binary at /usr/local/bin, passwd and group naming 65532,
// nonroot's home, the CA bundle only when asked; every entry dated epoch.
func TestRootfsLayer(t *testing.T) {
	epoch := time.Unix(testEpoch, 0).UTC()
	dir := func(name string, mode int64) layerEntry {
		return layerEntry{Name: name, Type: tar.TypeDir, Mode: mode, ModTime: epoch}
	}
	file := func(name string, mode, size int64) layerEntry {
		return layerEntry{Name: name, Type: tar.TypeReg, Mode: mode, ModTime: epoch, Size: size}
	}
	const passwd = "root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"
	const group = "root:x:0:\nnonroot:x:65532:\n"
	home := dir("home/nonroot/", 0o700)
	home.UID, home.GID = NonRootUID, NonRootUID
	bin := []byte("\x7fELF not really")
	ca := []byte("-----BEGIN CERTIFICATE-----\n...\n")
	tests := []struct {
		name string
		ca   []byte
		want []layerEntry
	}{
		{name: "no CA bundle", want: []layerEntry{
			dir("etc/", 0o755), file("etc/group", 0o644, int64(len(group))), file("etc/passwd", 0o644, int64(len(passwd))),
			dir("home/", 0o755), home, dir("usr/", 0o755), dir("usr/local/", 0o755), dir("usr/local/bin/", 0o755),
			file("usr/local/bin/tool", 0o755, int64(len(bin))),
		}},
		{name: "with the CA bundle", ca: ca, want: []layerEntry{
			dir("etc/", 0o755), file("etc/group", 0o644, int64(len(group))), file("etc/passwd", 0o644, int64(len(passwd))),
			dir("etc/ssl/", 0o755), dir("etc/ssl/certs/", 0o755), file("etc/ssl/certs/ca-certificates.crt", 0o644, int64(len(ca))),
			dir("home/", 0o755), home, dir("usr/", 0o755), dir("usr/local/", 0o755), dir("usr/local/bin/", 0o755),
			file("usr/local/bin/tool", 0o755, int64(len(bin))),
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := rootfsLayer("tool", bin, tt.ca, epoch)
			if err != nil {
				t.Fatal(err)
			}
			rc, err := l.Uncompressed()
			if err != nil {
				t.Fatal(err)
			}
			defer rc.Close()
			got, files := readLayer(t, rc)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("entries (-want +got):\n%s", diff)
			}
			if string(files["etc/passwd"]) != passwd || string(files["etc/group"]) != group || !bytes.Equal(files["usr/local/bin/tool"], bin) {
				t.Errorf("contents: passwd %q group %q binary %q", files["etc/passwd"], files["etc/group"], files["usr/local/bin/tool"])
			}
			if tt.ca != nil && !bytes.Equal(files["etc/ssl/certs/ca-certificates.crt"], ca) {
				t.Errorf("CA bundle %q", files["etc/ssl/certs/ca-certificates.crt"])
			}
			if mt, _ := l.MediaType(); mt != types.OCILayer {
				t.Errorf("media type %s", mt)
			}
		})
	}
}

// Bad command lines and bad inputs are refused with the reason, and
// nothing is written.
func TestRunRefuses(t *testing.T) {
	static := hello(t)
	good := t.TempDir()
	for _, n := range []string{"nodediag-agent", "nodediag"} {
		if err := copyFile(static, filepath.Join(good, n), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	noPEM := filepath.Join(t.TempDir(), "ca.crt")
	os.WriteFile(noPEM, []byte("not a certificate\n"), 0o644)
	tests := []struct {
		name string
		args []string
		code int
		want string
	}{
		{name: "epoch not a number", args: []string{"-bin", good, "-source-date-epoch", "yesterday"}, code: 2, want: "want seconds since 1970"},
		{name: "an argument", args: []string{"-bin", good, "extra"}, code: 2, want: "unexpected arguments"},
		{name: "unknown image", args: []string{"-bin", good, "-only", "kubectl"}, code: 1, want: "-only kubectl: no such image"},
		{name: "no binaries", args: []string{"-bin", t.TempDir()}, code: 1, want: "run make build first"},
		{name: "a tag that is no tag", args: []string{"-bin", good, "-version", "v1.0.0+build.1", "-ca-bundle", ""}, code: 1, want: "give -repo or -tag"},
		{name: "a CA bundle without certificates", args: []string{"-bin", good, "-ca-bundle", noPEM}, code: 1, want: "holds no PEM certificate"},
		{name: "the same platform twice", args: []string{"-bin", good, "-bin", good, "-ca-bundle", ""}, code: 1, want: "one -bin directory per platform"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := t.TempDir()
			var stdout, stderr strings.Builder
			code := run(append(tt.args, "-out", out), &stdout, &stderr)
			if code != tt.code || !strings.Contains(stderr.String(), tt.want) {
				t.Errorf("exit %d, stderr %q; want exit %d saying %q", code, stderr.String(), tt.code, tt.want)
			}
			if entries, _ := os.ReadDir(out); len(entries) > 0 {
				t.Errorf("wrote %v", entries)
			}
		})
	}
}

// readArchive unpacks an OCI layout tarball and returns the descriptor of
// its one image (or index) and the layout's index.
func readArchive(t testing.TB, archive string) (v1.Descriptor, v1.ImageIndex) {
	t.Helper()
	dir := t.TempDir()
	f, err := os.Open(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		// The archive's own metadata is fixed: what makes its bytes reproducible.
		if !hdr.ModTime.Equal(time.Unix(testEpoch, 0)) || hdr.Uid != 0 || hdr.Gid != 0 || hdr.Uname != "" || (hdr.Mode != 0o644 && hdr.Mode != 0o755) {
			t.Errorf("%s: member %s: time %v, owner %d:%d %q, mode %o", archive, hdr.Name, hdr.ModTime, hdr.Uid, hdr.Gid, hdr.Uname, hdr.Mode)
		}
		p := filepath.Join(dir, filepath.FromSlash(hdr.Name))
		if !strings.HasPrefix(p, dir+string(filepath.Separator)) {
			t.Fatalf("archive member %q escapes", hdr.Name)
		}
		switch hdr.Typeflag {
		case tar.TypeDir:
			os.MkdirAll(p, 0o755)
		case tar.TypeReg:
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			os.MkdirAll(filepath.Dir(p), 0o755)
			if err := os.WriteFile(p, b, 0o644); err != nil {
				t.Fatal(err)
			}
		default:
			t.Errorf("archive member %q of type %c", hdr.Name, hdr.Typeflag)
		}
	}
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		t.Fatalf("%s is no OCI layout: %v", archive, err)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Manifests) != 1 {
		t.Fatalf("%s: index.json holds %d descriptors, want 1", archive, len(m.Manifests))
	}
	return m.Manifests[0], idx
}

// checkImage checks one image of an archive: its config, and its layer
// holding exactly the binary of binPath.
func checkImage(t *testing.T, img v1.Image, name, binPath string, plat v1.Platform) {
	t.Helper()
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	epoch := time.Unix(testEpoch, 0).UTC()
	if cf.OS != plat.OS || cf.Architecture != plat.Architecture || !cf.Created.Time.Equal(epoch) {
		t.Errorf("%s: config %s/%s created %v", name, cf.OS, cf.Architecture, cf.Created)
	}
	wantCfg := v1.Config{
		Entrypoint: []string{"/usr/local/bin/" + name},
		User:       "65532:65532",
		Env:        []string{"PATH=/usr/local/bin:/usr/bin:/bin"},
		WorkingDir: "/",
		Labels: map[string]string{
			"org.opencontainers.image.title":       name,
			"org.opencontainers.image.description": descriptionOf(name),
			"org.opencontainers.image.version":     testVersion,
			"org.opencontainers.image.revision":    testRevision,
			"org.opencontainers.image.source":      "https://github.com/nodediag/nodediag",
			"org.opencontainers.image.licenses":    "NOASSERTION",
			"org.opencontainers.image.created":     "2023-11-14T22:13:20Z",
		},
	}
	if diff := cmp.Diff(wantCfg, cf.Config); diff != "" {
		t.Errorf("%s: config (-want +got):\n%s", name, diff)
	}
	if len(cf.History) != 1 || !cf.History[0].Created.Time.Equal(epoch) {
		t.Errorf("%s: history %+v", name, cf.History)
	}
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("%s: layers %v %v", name, layers, err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	entries, files := readLayer(t, rc)
	want, err := os.ReadFile(binPath)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(files["usr/local/bin/"+name], want) {
		t.Errorf("%s: the layer's binary is not %s", name, binPath)
	}
	_, hasCA := files["etc/ssl/certs/ca-certificates.crt"]
	if hasCA != (name == "nodediag") {
		t.Errorf("%s: CA bundle in the image: %v", name, hasCA)
	}
	for _, e := range entries {
		if !e.ModTime.Equal(epoch) {
			t.Errorf("%s: %s dated %v", name, e.Name, e.ModTime)
		}
	}
}

func descriptionOf(name string) string {
	for _, b := range binaries {
		if b.name == name {
			return b.description
		}
	}
	return ""
}

// `make image` (docs/image.md, docs/air-gapped.md) in a copy of the
// repository writes the two archives with the names, digests and configs
// it prints; skopeo reads them as the docs say.
func TestMakeImage(t *testing.T) {
	m := makeImages(t)
	t.Logf("make image took %v", m.took)
	plat := v1.Platform{OS: "linux", Architecture: runtime.GOARCH}
	for _, name := range []string{"nodediag-agent", "nodediag"} {
		b, ok := m.Built[name]
		if !ok {
			t.Fatalf("make image printed no line for %s:\n%s", name, m.Output)
		}
		if b.Archive != "bin/images/"+name+".oci.tar" || b.Ref != "ghcr.io/nodediag/"+name+":"+testVersion || b.Platforms != plat.String() {
			t.Errorf("%s: printed %+v", name, b)
		}
		archive := filepath.Join(m.Dir, b.Archive)
		fi, err := os.Stat(archive)
		if err != nil || fi.Size() != b.Size {
			t.Errorf("%s: %v %v, printed size %d", archive, fi, err, b.Size)
		}
		desc, idx := readArchive(t, archive)
		if desc.MediaType != types.OCIManifestSchema1 || desc.Digest.String() != b.Digest {
			t.Errorf("%s: top descriptor %s %s, printed digest %s", name, desc.MediaType, desc.Digest, b.Digest)
		}
		wantAnn := map[string]string{"org.opencontainers.image.ref.name": b.Ref, "io.containerd.image.name": b.Ref}
		if diff := cmp.Diff(wantAnn, desc.Annotations); diff != "" {
			t.Errorf("%s: annotations (-want +got):\n%s", name, diff)
		}
		img, err := idx.Image(desc.Digest)
		if err != nil {
			t.Fatal(err)
		}
		checkImage(t, img, name, filepath.Join(m.Dir, "bin", name), plat)
		t.Logf("%s: %s, archive %d bytes, binary %d bytes", b.Ref, b.Digest, b.Size, fileSize(t, filepath.Join(m.Dir, "bin", name)))
	}

	// skopeo inspect, as docs/image.md shows it.
	testenv.RequireBinary(t, "skopeo", "skopeo")
	out, code := runIn(t, m.Dir, nil, cmdInspect)
	if code != 0 {
		t.Fatalf("%s: exit %d\n%s", cmdInspect, code, out)
	}
	var insp struct {
		Digest       string
		Labels       map[string]string
		Architecture string
		Os           string
	}
	if err := json.Unmarshal([]byte(out), &insp); err != nil {
		t.Fatalf("skopeo inspect: %v\n%s", err, out)
	}
	if insp.Digest != m.Built["nodediag-agent"].Digest || insp.Labels["org.opencontainers.image.version"] != testVersion || insp.Os+"/"+insp.Architecture != plat.String() {
		t.Errorf("skopeo inspect: %+v, want digest %s", insp, m.Built["nodediag-agent"].Digest)
	}
}

func fileSize(t testing.TB, p string) int64 {
	t.Helper()
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

func fileSHA(t testing.TB, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// Same inputs, same bytes: a second `make image` (which builds the binaries
// again) gives the same digests and byte-identical archives; another
// SOURCE_DATE_EPOCH gives other digests.
func TestMakeImageIsReproducible(t *testing.T) {
	m := makeImages(t)
	before := map[string]string{}
	for name, b := range m.Built {
		before[name] = fileSHA(t, filepath.Join(m.Dir, b.Archive))
	}
	out, code := runIn(t, m.Dir, nil, cmdMakeImage)
	if code != 0 {
		t.Fatalf("second make image: exit %d\n%s", code, out)
	}
	again, err := parseBuilt(out)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(m.Built, again); diff != "" {
		t.Errorf("second make image printed (-first +second):\n%s", diff)
	}
	for name, b := range again {
		if got := fileSHA(t, filepath.Join(m.Dir, b.Archive)); got != before[name] {
			t.Errorf("%s: archive sha256 %s, first %s", name, got, before[name])
		}
	}

	other := t.TempDir()
	out, code = runIn(t, m.Dir, nil, "go run ./hack/image -out "+other+" -version "+testVersion+" -revision "+testRevision+" -source-date-epoch "+strconv.Itoa(testEpoch+1))
	if code != 0 {
		t.Fatalf("builder: exit %d\n%s", code, out)
	}
	later, err := parseBuilt(out)
	if err != nil {
		t.Fatal(err)
	}
	for name, b := range later {
		if b.Digest == m.Built[name].Digest {
			t.Errorf("%s: the same digest %s with another SOURCE_DATE_EPOCH", name, b.Digest)
		}
	}
}

// cgroupParent is where the containers of a test put their cgroups; they
// are removed when the test ends.
func cgroupParent(t *testing.T, c *testenv.Containerd) string {
	parent := "/nodediag-image-test-" + filepath.Base(c.Dir)
	t.Cleanup(func() {
		roots, _ := filepath.Glob("/sys/fs/cgroup/*")
		for _, r := range append(roots, "/sys/fs/cgroup") {
			var dirs []string
			filepath.WalkDir(filepath.Join(r, parent), func(p string, d os.DirEntry, err error) error {
				if err == nil && d.IsDir() {
					dirs = append(dirs, p)
				}
				return nil
			})
			for i := len(dirs) - 1; i >= 0; i-- {
				if err := os.Remove(dirs[i]); err != nil {
					t.Errorf("removing cgroup %s: %v", dirs[i], err)
				}
			}
		}
	})
	return parent
}

// ctrRun runs a container of ref with `ctr run --rm --read-only` and
// returns its output and exit code. With no args the process is the
// image's entrypoint; args replace it whole (ctr 1.6 sets the process
// arguments to them), so they start with the binary's path.
func ctrRun(t *testing.T, c *testenv.Containerd, cgroups, ref, id string, args ...string) (string, int) {
	t.Helper()
	fifo := filepath.Join(c.Dir, "fifo")
	os.MkdirAll(fifo, 0o700)
	argv := append([]string{"-a", c.Socket, "-n", "k8s.io", "run", "--rm", "--read-only", "--fifo-dir", fifo, "--cgroup", cgroups + "/" + id, ref, id}, args...)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "ctr", argv...).CombinedOutput()
	if ee, ok := err.(*exec.ExitError); ok {
		return string(out), ee.ExitCode()
	}
	if err != nil {
		t.Fatalf("ctr run: %v\n%s", err, out)
	}
	return string(out), 0
}

// imageStatus asks containerd's CRI about an image, as the kubelet does,
// and returns it with the image config containerd parsed (verbose info).
func imageStatus(t *testing.T, c *testenv.Containerd, ref string) (*criv1.Image, v1.ConfigFile) {
	t.Helper()
	conn, err := testenv.DialUnix(c.Socket)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := criv1.NewImageServiceClient(conn).ImageStatus(ctx, &criv1.ImageStatusRequest{Image: &criv1.ImageSpec{Image: ref}, Verbose: true})
	if err != nil || resp.GetImage() == nil {
		t.Fatalf("CRI ImageStatus %s: %v %v\n%s", ref, resp, err, c.Log())
	}
	var info struct {
		ImageSpec v1.ConfigFile `json:"imageSpec"`
	}
	if err := json.Unmarshal([]byte(resp.GetInfo()["info"]), &info); err != nil {
		t.Fatalf("ImageStatus info: %v\n%s", err, resp.GetInfo()["info"])
	}
	return resp.GetImage(), info.ImageSpec
}

// checkCRIImage checks an image as the kubelet sees it through the CRI: a
// numeric user 65532 (what runAsNonRoot needs: a named user would be
// refused), the entrypoint and the labels.
func checkCRIImage(t *testing.T, c *testenv.Containerd, ref, name string) {
	t.Helper()
	img, cf := imageStatus(t, c, ref)
	if img.GetUid().GetValue() != NonRootUID || img.GetUsername() != "" {
		t.Errorf("%s: CRI uid %v username %q, want uid %d", ref, img.GetUid(), img.GetUsername(), NonRootUID)
	}
	if cf.Config.User != "65532:65532" || strings.Join(cf.Config.Entrypoint, " ") != "/usr/local/bin/"+name ||
		cf.Config.Labels["org.opencontainers.image.title"] != name || cf.Config.Labels["org.opencontainers.image.revision"] != testRevision {
		t.Errorf("%s: config as containerd sees it: %+v", ref, cf.Config)
	}
}

// Side-loading (docs/air-gapped.md): `make image IMAGE_REPO=...` and
// `ctr -n k8s.io images import` on a node with no registry; containerd
// sees the image's user, entrypoint and labels; both images run under
// runc, read-only, as 65532.
func TestImagesInContainerd(t *testing.T) {
	m := makeImages(t)
	c := testenv.StartContainerd(t, testenv.ContainerdOptions{})
	const registry = "registry.example.internal:5000"

	// A second checkout of the same source (the fixture's, which the
	// repository's working tree may have moved past): the doc's build with
	// the registry's name.
	dir := t.TempDir()
	copyTree(t, m.Dir, dir)
	out, code := runIn(t, dir, []string{"REGISTRY=" + registry}, cmdMakeImageRepo)
	if code != 0 {
		t.Fatalf("%s: exit %d\n%s", cmdMakeImageRepo, code, out)
	}
	named, err := parseBuilt(out)
	if err != nil {
		t.Fatal(err)
	}
	agentRef := registry + "/nodediag/nodediag-agent:" + testVersion
	if b := named["nodediag-agent"]; b.Ref != agentRef || b.Digest != m.Built["nodediag-agent"].Digest {
		t.Errorf("IMAGE_REPO build: %+v; want %s with the digest of the first build %s (the name is not in the image)", b, agentRef, m.Built["nodediag-agent"].Digest)
	}
	node := t.TempDir()
	if err := copyFile(filepath.Join(dir, "bin", "images", "nodediag-agent.oci.tar"), filepath.Join(node, "nodediag-agent.oci.tar"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, code = runIn(t, node, []string{"CONTAINERD_ADDRESS=" + c.Socket}, cmdImport)
	if code != 0 {
		t.Fatalf("%s: exit %d\n%s", cmdImport, code, out)
	}
	ls := c.Ctr(t, "images", "ls")
	if !strings.Contains(ls, agentRef+" ") || !strings.Contains(ls, m.Built["nodediag-agent"].Digest) {
		t.Errorf("ctr images ls after the import:\n%s", ls)
	}
	checkCRIImage(t, c, agentRef, "nodediag-agent")

	// The collector's image, from the first build.
	c.Ctr(t, "images", "import", filepath.Join(m.Dir, m.Built["nodediag"].Archive))
	collectorRef := m.Built["nodediag"].Ref
	checkCRIImage(t, c, collectorRef, "nodediag")

	// The spec containerd makes from the image: entrypoint and user.
	// (A container without a task: no cgroup, no process.)
	c.Ctr(t, "containers", "create", agentRef, "nodediag-spec")
	var info struct {
		Spec struct {
			Process struct {
				User struct{ UID, GID int }
				Args []string
			}
		}
	}
	if err := json.Unmarshal([]byte(c.Ctr(t, "containers", "info", "nodediag-spec")), &info); err != nil {
		t.Fatal(err)
	}
	c.Ctr(t, "containers", "rm", "nodediag-spec")
	if p := info.Spec.Process; p.User.UID != NonRootUID || p.User.GID != NonRootUID || strings.Join(p.Args, " ") != "/usr/local/bin/nodediag-agent" {
		t.Errorf("container spec: process %+v", p)
	}

	cgroups := cgroupParent(t, c)
	// Run them: the entrypoint alone (the agent's usage, exit 2), and the
	// binaries' version commands.
	out, code = ctrRun(t, c, cgroups, agentRef, "nodediag-usage")
	if code != 2 || !strings.Contains(out, "nodediag-agent check [flags]") {
		t.Errorf("the agent's image with no arguments: exit %d\n%s", code, out)
	}
	for _, tc := range []struct{ ref, name string }{{agentRef, "nodediag-agent"}, {collectorRef, "nodediag"}} {
		out, code = ctrRun(t, c, cgroups, tc.ref, tc.name+"-version", "/usr/local/bin/"+tc.name, "version")
		want := fmt.Sprintf("%s %s (%s)", tc.name, testVersion, testRevision)
		if code != 0 || strings.TrimSpace(out) != want {
			t.Errorf("%s version in a container: exit %d %q, want %q", tc.name, code, out, want)
		}
	}
}

// The private registry (docs/air-gapped.md): skopeo copies both archives
// into a real registry with its own CA, the registry serves the digests
// make image printed, a node's containerd pulls the agent through the
// hosts.toml of the doc over the CRI; a registry address with a scheme
// fails as the doc says.
func TestImagesThroughRegistry(t *testing.T) {
	m := makeImages(t)
	testenv.RequireBinary(t, "skopeo", "skopeo")
	ca := testenv.NewCA(t, "nodediag-test-registry-ca")
	reg := testenv.StartRegistry(t, testenv.RegistryOptions{TLS: ca})
	caDir := t.TempDir()
	if err := os.WriteFile(filepath.Join(caDir, "ca.crt"), ca.PEM, 0o644); err != nil {
		t.Fatal(err)
	}
	env := []string{"REGISTRY=" + reg.Addr, "TAG=" + testVersion, "REGISTRY_CA_DIR=" + caDir}
	for _, line := range []string{cmdCopyAgent, cmdCopyCollector} {
		if out, code := runIn(t, m.Dir, env, line); code != 0 {
			t.Fatalf("%s: exit %d\n%s\nregistry:\n%s", line, code, out, reg.Output())
		}
	}
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{Proxy: nil, TLSClientConfig: tlsConfig(ca)}}
	for _, name := range []string{"nodediag-agent", "nodediag"} {
		if got := registryDigest(t, client, reg.URL, "nodediag/"+name, testVersion); got != m.Built[name].Digest {
			t.Errorf("registry serves %s:%s as %s, make image printed %s", name, testVersion, got, m.Built[name].Digest)
		}
	}

	// The pitfall: a scheme in an image reference.
	out, code := runIn(t, m.Dir, env, cmdCopyWithScheme)
	wantMsg := fmt.Sprintf(schemeError, reg.Addr, testVersion)
	if code == 0 || !strings.Contains(out, wantMsg) {
		t.Errorf("%s: exit %d\n%s\nwant %q", cmdCopyWithScheme, code, out, wantMsg)
	}

	// A node pulls through the doc's hosts.toml, as the kubelet does.
	certs := t.TempDir()
	hostDir := filepath.Join(certs, reg.Addr)
	os.MkdirAll(hostDir, 0o755)
	os.WriteFile(filepath.Join(hostDir, "ca.crt"), ca.PEM, 0o644)
	toml := strings.NewReplacer(docRegistry, reg.Addr, "/etc/containerd/certs.d", certs).Replace(docHostsTOML(t))
	if err := os.WriteFile(filepath.Join(hostDir, "hosts.toml"), []byte(toml), 0o644); err != nil {
		t.Fatal(err)
	}
	c := testenv.StartContainerd(t, testenv.ContainerdOptions{RegistryConfigPath: certs})
	conn, err := testenv.DialUnix(c.Socket)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ref := reg.Addr + "/nodediag/nodediag-agent:" + testVersion
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := criv1.NewImageServiceClient(conn).PullImage(ctx, &criv1.PullImageRequest{Image: &criv1.ImageSpec{Image: ref}}); err != nil {
		t.Fatalf("CRI PullImage %s through %s:\n%s\n%v\n%s", ref, toml, c.Log(), err, reg.Output())
	}
	img, _ := imageStatus(t, c, ref)
	wantRepoDigest := reg.Addr + "/nodediag/nodediag-agent@" + m.Built["nodediag-agent"].Digest
	if !contains(img.GetRepoDigests(), wantRepoDigest) {
		t.Errorf("pulled image: repo digests %v, want %s", img.GetRepoDigests(), wantRepoDigest)
	}
	checkCRIImage(t, c, ref, "nodediag-agent")
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// registryDigest asks the registry for a manifest (OCI image or index) and
// returns the digest it serves it as.
func registryDigest(t *testing.T, client *http.Client, base, repo, tag string) string {
	t.Helper()
	req, err := http.NewRequest(http.MethodHead, base+"/v2/"+repo+"/manifests/"+tag, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", string(types.OCIManifestSchema1)+", "+string(types.OCIImageIndex))
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("HEAD %s: %s", req.URL, resp.Status)
	}
	return resp.Header.Get("Docker-Content-Digest")
}

// An image index: the agent for this machine's architecture and another,
// in one archive (make image IMAGE_ARCHES="amd64 arm64"); the index names
// both platforms, the image of this machine's is the one `make image`
// builds alone (same digest), containerd imports and runs it, skopeo
// copies the whole index into a registry.
func TestImageIndex(t *testing.T) {
	m := makeImages(t)
	otherArch := map[string]string{"amd64": "arm64", "arm64": "amd64"}[runtime.GOARCH]
	if otherArch == "" {
		t.Skipf("no second architecture chosen for %s", runtime.GOARCH)
	}
	otherDir := filepath.Join(t.TempDir(), "linux_"+otherArch)
	ldflags := "-s -w -X github.com/nodediag/nodediag/internal/version.Version=" + testVersion + " -X github.com/nodediag/nodediag/internal/version.Revision=" + testRevision
	out, code := runIn(t, m.Dir, []string{"GOARCH=" + otherArch, "CGO_ENABLED=0"}, "go build -trimpath -ldflags '"+ldflags+"' -o "+otherDir+"/nodediag-agent ./cmd/nodediag-agent")
	if code != 0 {
		t.Fatalf("cross build: exit %d\n%s", code, out)
	}
	outDir := t.TempDir()
	out, code = runIn(t, m.Dir, nil, "go run ./hack/image -only nodediag-agent -bin bin -bin "+otherDir+" -out "+outDir+
		" -version "+testVersion+" -revision "+testRevision+" -source-date-epoch "+strconv.Itoa(testEpoch))
	if code != 0 {
		t.Fatalf("builder: exit %d\n%s", code, out)
	}
	b, err := parseBuilt(out)
	if err != nil {
		t.Fatal(err)
	}
	agent := b["nodediag-agent"]
	plats := []v1.Platform{{OS: "linux", Architecture: "amd64"}, {OS: "linux", Architecture: "arm64"}}
	if agent.Platforms != "linux/amd64,linux/arm64" {
		t.Errorf("printed platforms %q", agent.Platforms)
	}
	desc, layoutIdx := readArchive(t, agent.Archive)
	if desc.MediaType != types.OCIImageIndex || desc.Digest.String() != agent.Digest || desc.Annotations["io.containerd.image.name"] != agent.Ref {
		t.Fatalf("top descriptor %+v, printed %+v", desc, agent)
	}
	idx, err := layoutIdx.ImageIndex(desc.Digest)
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(im.Manifests) != 2 {
		t.Fatalf("index of %d manifests", len(im.Manifests))
	}
	for i, d := range im.Manifests {
		if d.Platform == nil || d.Platform.String() != plats[i].String() || d.MediaType != types.OCIManifestSchema1 {
			t.Errorf("manifest %d: %+v", i, d)
			continue
		}
		img, err := idx.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		bin := filepath.Join(m.Dir, "bin", "nodediag-agent")
		if d.Platform.Architecture == otherArch {
			bin = filepath.Join(otherDir, "nodediag-agent")
		} else if d.Digest.String() != m.Built["nodediag-agent"].Digest {
			t.Errorf("%s image %s, make image built %s", d.Platform, d.Digest, m.Built["nodediag-agent"].Digest)
		}
		checkImage(t, img, "nodediag-agent", bin, *d.Platform)
	}

	// containerd takes the index and runs this machine's image.
	c := testenv.StartContainerd(t, testenv.ContainerdOptions{})
	c.Ctr(t, "images", "import", agent.Archive)
	checkCRIImage(t, c, agent.Ref, "nodediag-agent")
	out, code = ctrRun(t, c, cgroupParent(t, c), agent.Ref, "nodediag-index", "/usr/local/bin/nodediag-agent", "version")
	if code != 0 || !strings.Contains(out, testVersion) {
		t.Errorf("the index's image in a container: exit %d\n%s", code, out)
	}

	// skopeo copies every platform (--all) and the registry serves the index.
	testenv.RequireBinary(t, "skopeo", "skopeo")
	ca := testenv.NewCA(t, "nodediag-test-registry-ca")
	reg := testenv.StartRegistry(t, testenv.RegistryOptions{TLS: ca})
	caDir := t.TempDir()
	os.WriteFile(filepath.Join(caDir, "ca.crt"), ca.PEM, 0o644)
	out, code = runIn(t, m.Dir, nil, "skopeo copy --all --dest-cert-dir "+caDir+" oci-archive:"+agent.Archive+" docker://"+reg.Addr+"/nodediag/nodediag-agent:"+testVersion)
	if code != 0 {
		t.Fatalf("skopeo copy --all: exit %d\n%s", code, out)
	}
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{Proxy: nil, TLSClientConfig: tlsConfig(ca)}}
	if got := registryDigest(t, client, reg.URL, "nodediag/nodediag-agent", testVersion); got != agent.Digest {
		t.Errorf("registry serves the index as %s, built %s", got, agent.Digest)
	}
}
