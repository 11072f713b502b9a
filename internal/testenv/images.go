package testenv

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Image is a tiny single-layer OCI image, built in Go with no registry and
// no network: one layer holding /etc/nodediag-test (naming the image) and
// Files, and a config for this machine's architecture.
type Image struct {
	// Ref names the image: "registry.k8s.io/pause:3.9".
	Ref string
	// Files are copied into the layer: path in the image → file on this
	// machine (its mode is kept).
	Files map[string]string
	// Cmd is the image's default command.
	Cmd []string
}

// BusyboxStatic is the binary of Debian's busybox-static.
const BusyboxStatic = "/bin/busybox"

// BusyboxImage is an image that can run: /bin/busybox (busybox-static) and
// cmd as its command ("/bin/busybox", "sleep", "3600"). It fails the test
// (CI=true) or skips it when busybox-static is not installed.
func BusyboxImage(t testing.TB, ref string, cmd ...string) Image {
	t.Helper()
	fi, err := os.Stat(BusyboxStatic)
	Require(t, err == nil && fi.Mode().IsRegular(), "%s not found (Debian package busybox-static): %v", BusyboxStatic, err)
	return Image{Ref: ref, Files: map[string]string{BusyboxStatic: BusyboxStatic}, Cmd: cmd}
}

// Build builds the image.
func (img Image) Build(t testing.TB) v1.Image {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	epoch := time.Unix(0, 0)
	add := func(p string, mode int64, data []byte) {
		hdr := &tar.Header{Name: strings.TrimPrefix(p, "/"), Mode: mode, Size: int64(len(data)), ModTime: epoch, Typeflag: tar.TypeReg}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(data); err != nil {
			t.Fatal(err)
		}
	}
	add("/etc/nodediag-test", 0o644, []byte("image "+img.Ref+"\n"))
	for in, src := range img.Files {
		data, err := os.ReadFile(src)
		if err != nil {
			t.Fatalf("image %s: %v", img.Ref, err)
		}
		fi, err := os.Stat(src)
		if err != nil {
			t.Fatal(err)
		}
		add(in, int64(fi.Mode().Perm()), data)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	layerBytes := buf.Bytes()
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerBytes)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		t.Fatal(err)
	}
	out := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	out = mutate.ConfigMediaType(out, types.OCIConfigJSON)
	if out, err = mutate.AppendLayers(out, layer); err != nil {
		t.Fatal(err)
	}
	cf, err := out.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", runtime.GOARCH
	cf.Config.Cmd = img.Cmd
	cf.Created = v1.Time{Time: epoch}
	if out, err = mutate.ConfigFile(out, cf); err != nil {
		t.Fatal(err)
	}
	return out
}

// WriteOCIArchive builds the image and writes it to path as an OCI
// image-layout tarball, annotated with its reference
// (org.opencontainers.image.ref.name and io.containerd.image.name): what
// `ctr images import` names the image from, and what skopeo reads as
// oci-archive:PATH. It returns the manifest digest ("sha256:...").
func (img Image) WriteOCIArchive(t testing.TB, path string) string {
	t.Helper()
	tag, err := name.NewTag(img.Ref)
	if err != nil {
		t.Fatalf("image reference %q: %v", img.Ref, err)
	}
	built := img.Build(t)
	dir := t.TempDir()
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.AppendImage(built, layout.WithAnnotations(map[string]string{
		"org.opencontainers.image.ref.name": tag.String(),
		"io.containerd.image.name":          tag.String(),
	})); err != nil {
		t.Fatal(err)
	}
	if err := tarDir(dir, path); err != nil {
		t.Fatalf("writing %s: %v", path, err)
	}
	d, err := built.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d.String()
}

// Import writes each image as an OCI archive and imports it into the
// daemon's k8s.io namespace (the CRI's) with `ctr images import`, which also
// unpacks it for the overlayfs snapshotter so that the CRI can run it.
func (c *Containerd) Import(t testing.TB, imgs ...Image) {
	t.Helper()
	for i, img := range imgs {
		archive := filepath.Join(c.Dir, fmt.Sprintf("import-%d.oci.tar", i))
		img.WriteOCIArchive(t, archive)
		c.Ctr(t, "images", "import", archive)
		os.Remove(archive)
	}
}

// tarDir writes the tree under dir as a tar file at out.
func tarDir(dir, out string) error {
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	defer f.Close()
	tw := tar.NewWriter(f)
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil || rel == "." {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		hdr, err := tar.FileInfoHeader(info, "")
		if err != nil {
			return err
		}
		hdr.Name = filepath.ToSlash(rel)
		if info.IsDir() {
			hdr.Name += "/"
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if info.Mode().IsRegular() {
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			if _, err := tw.Write(data); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return f.Close()
}
