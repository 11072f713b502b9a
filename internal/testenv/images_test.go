package testenv

import (
	"archive/tar"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/v1/layout"
)

// The archive is an OCI image layout whose one image carries its reference,
// its files and its command, for this machine's architecture.
func TestWriteOCIArchive(t *testing.T) {
	src := filepath.Join(t.TempDir(), "tool")
	if err := os.WriteFile(src, []byte("#!/bin/sh\necho hi\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	img := Image{Ref: "registry.k8s.io/kube-proxy:v1.30.0", Files: map[string]string{"/usr/local/bin/tool": src}, Cmd: []string{"/usr/local/bin/tool"}}
	archive := filepath.Join(t.TempDir(), "kp.oci.tar")
	digest := img.WriteOCIArchive(t, archive)

	dir := t.TempDir()
	untar(t, archive, dir)
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(im.Manifests) != 1 {
		t.Fatalf("%d manifests, want 1", len(im.Manifests))
	}
	desc := im.Manifests[0]
	if desc.Digest.String() != digest {
		t.Errorf("digest %s, WriteOCIArchive said %s", desc.Digest, digest)
	}
	for _, k := range []string{"org.opencontainers.image.ref.name", "io.containerd.image.name"} {
		if desc.Annotations[k] != img.Ref {
			t.Errorf("annotation %s = %q, want %q", k, desc.Annotations[k], img.Ref)
		}
	}
	built, err := idx.Image(desc.Digest)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := built.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.OS != "linux" || cf.Architecture != runtime.GOARCH || !cmp.Equal(cf.Config.Cmd, img.Cmd) {
		t.Errorf("config %s/%s cmd %v", cf.OS, cf.Architecture, cf.Config.Cmd)
	}
	layers, err := built.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("layers %v %v, want one", layers, err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	got := map[string]int64{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got[h.Name] = h.Mode
	}
	want := map[string]int64{"etc/nodediag-test": 0o644, "usr/local/bin/tool": 0o755}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("layer files (-want +got):\n%s", diff)
	}
}

func untar(t *testing.T, archive, dir string) {
	t.Helper()
	f, err := os.Open(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, filepath.FromSlash(h.Name))
		if h.Typeflag == tar.TypeDir {
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
