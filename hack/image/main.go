// Command image builds the container images of nodediag's two binaries,
// with no Docker engine and no registry: from the static binaries that
// `make build` leaves in bin/ (CGO_ENABLED=0), one OCI image-layout tarball
// per binary, which `ctr images import` and `skopeo copy oci-archive:PATH`
// read. `make image` runs it:
//
//	go run ./hack/image -bin bin -out bin/images -repo ghcr.io/nodediag \
//	  -version VERSION -revision REVISION -source-date-epoch SECONDS
//
// Each image is FROM scratch with one layer:
//
//	/usr/local/bin/NAME                 the binary (0755), the entrypoint
//	/etc/passwd, /etc/group             root and nonroot (65532), so that
//	                                    USER 65532:65532 has a name
//	/home/nonroot/                      nonroot's home (0700, 65532)
//	/etc/ssl/certs/ca-certificates.crt  nodediag only: see caBundle
//
// and runs as USER 65532:65532: the collector needs no privilege; the
// agent's DaemonSet sets runAsUser 0 itself, because reading a node's files
// needs root. Nothing in the image needs to be writable (readOnlyRootFilesystem):
// the agent's spool and the collector's database are volumes.
//
// The build is reproducible: every time in the image (the layer's file
// times, the config's created, its history) is -source-date-epoch (the
// Makefile gives the commit's time, or $SOURCE_DATE_EPOCH), file owners and
// modes are fixed, and the archive itself is written with fixed metadata,
// so the same binaries and flags give the same digests and the same bytes.
//
// With one -bin directory the archive holds one image for the platform of
// its binaries (read from their ELF headers, which must be static). With
// several (-bin bin -bin bin/linux_arm64) it holds an image index with one
// image per platform.
//
// It prints one line per archive: the file, the image's name, its digest
// (the manifest's, or the index's), its platforms and the archive's size.
package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/x509"
	"debug/elf"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// NonRootUID is the user (and group) both images run as: distroless's
// "nonroot", the same number so that policies written for distroless
// images (runAsUser: 65532) fit.
const NonRootUID = 65532

// binDir is where the binary sits in the image; it is on the image's PATH.
const binDir = "/usr/local/bin"

// caBundlePath is where Go's crypto/x509 looks first for the system roots
// on Linux.
const caBundlePath = "/etc/ssl/certs/ca-certificates.crt"

// A binary is one image to build.
type binary struct {
	name        string
	description string
	// caBundle: the image carries the build machine's CA bundle. The
	// collector needs it: client-go trusts the system roots when a
	// kubeconfig names no certificate authority (an API server behind a
	// publicly trusted certificate). The agent does not: it trusts the
	// collector through --ca only, and checks registries with the NODE's
	// bundle, read under --root, never its own (agent/probes/registries.go).
	caBundle bool
}

var binaries = []binary{
	{name: "nodediag-agent", description: "nodediag's node agent: reads a Kubernetes node's host root read-only and says why the node is broken, quoting the evidence"},
	{name: "nodediag", description: "nodediag's collector and operator CLI: serve, sweep, nodes, diagnose, analyze", caBundle: true},
}

// options are the command line.
type options struct {
	binDirs  []string
	out      string
	repo     string
	version  string
	revision string
	tag      string
	epoch    time.Time
	source   string
	licenses string
	caBundle string
	names    []string
}

// A result is one archive written.
type result struct {
	Archive   string
	Ref       string
	Digest    string
	Platforms []string
	Size      int64
}

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }
func (l *listFlag) Set(s string) error {
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			*l = append(*l, v)
		}
	}
	return nil
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("image", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o options
	var bins, names listFlag
	var epoch string
	fs.Var(&bins, "bin", "`DIR` holding the static binaries of one platform (repeatable: several make an image index); default bin")
	fs.StringVar(&o.out, "out", filepath.Join("bin", "images"), "`DIR` the archives are written to (NAME.oci.tar)")
	fs.StringVar(&o.repo, "repo", "ghcr.io/nodediag", "the images are named REPO/NAME:TAG")
	fs.StringVar(&o.version, "version", "dev", "the version label (the Makefile's VERSION)")
	fs.StringVar(&o.revision, "revision", "", "the revision label (the Makefile's REVISION: the commit)")
	fs.StringVar(&o.tag, "tag", "", "the images' tag (default: -version)")
	fs.StringVar(&epoch, "source-date-epoch", os.Getenv("SOURCE_DATE_EPOCH"), "every time in the image, in seconds since 1970 (default $SOURCE_DATE_EPOCH, else 0)")
	fs.StringVar(&o.source, "source", "https://github.com/nodediag/nodediag", "the source label")
	// The repository carries no LICENSE file yet: NOASSERTION is SPDX's
	// word for "not stated".
	fs.StringVar(&o.licenses, "licenses", "NOASSERTION", "the licenses label (an SPDX expression)")
	fs.StringVar(&o.caBundle, "ca-bundle", caBundlePath, "the CA bundle (PEM) copied into the images that need one (nodediag); empty: none")
	fs.Var(&names, "only", "build only these images (comma-separated names); default: "+allNames())
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "image: unexpected arguments %q\n", fs.Args())
		return 2
	}
	o.binDirs, o.names = bins, names
	if len(o.binDirs) == 0 {
		o.binDirs = []string{"bin"}
	}
	if o.tag == "" {
		o.tag = o.version
	}
	secs := int64(0)
	if epoch != "" {
		var err error
		if secs, err = strconv.ParseInt(epoch, 10, 64); err != nil || secs < 0 {
			fmt.Fprintf(stderr, "image: -source-date-epoch %q: want seconds since 1970\n", epoch)
			return 2
		}
	}
	o.epoch = time.Unix(secs, 0).UTC()
	results, err := build(o)
	if err != nil {
		fmt.Fprintf(stderr, "image: %v\n", err)
		return 1
	}
	for _, r := range results {
		fmt.Fprintf(stdout, "%s  %s  %s  %s  %d bytes\n", r.Archive, r.Ref, r.Digest, strings.Join(r.Platforms, ","), r.Size)
	}
	return 0
}

func allNames() string {
	var n []string
	for _, b := range binaries {
		n = append(n, b.name)
	}
	return strings.Join(n, ",")
}

// build writes one archive per binary and returns what it wrote.
func build(o options) ([]result, error) {
	todo := binaries
	if len(o.names) > 0 {
		todo = nil
		for _, n := range o.names {
			i := -1
			for j, b := range binaries {
				if b.name == n {
					i = j
				}
			}
			if i < 0 {
				return nil, fmt.Errorf("-only %s: no such image (known: %s)", n, allNames())
			}
			todo = append(todo, binaries[i])
		}
	}
	var ca []byte
	if o.caBundle != "" {
		for _, b := range todo {
			if !b.caBundle {
				continue
			}
			var err error
			if ca, err = readCABundle(o.caBundle); err != nil {
				return nil, err
			}
			break
		}
	}
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return nil, err
	}
	var results []result
	for _, b := range todo {
		ref, err := name.NewTag(o.repo + "/" + b.name + ":" + o.tag)
		if err != nil {
			return nil, fmt.Errorf("image name %s/%s:%s: %w (give -repo or -tag)", o.repo, b.name, o.tag, err)
		}
		type platImage struct {
			plat v1.Platform
			img  v1.Image
		}
		var imgs []platImage
		seen := map[string]string{}
		for _, dir := range o.binDirs {
			path := filepath.Join(dir, b.name)
			plat, err := binaryPlatform(path)
			if err != nil {
				return nil, err
			}
			if prev, ok := seen[plat.String()]; ok {
				return nil, fmt.Errorf("%s and %s are both %s: one -bin directory per platform", prev, path, plat)
			}
			seen[plat.String()] = path
			var bundle []byte
			if b.caBundle {
				bundle = ca
			}
			img, err := buildImage(b, path, plat, bundle, o)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", path, err)
			}
			imgs = append(imgs, platImage{plat, img})
		}
		sort.Slice(imgs, func(i, j int) bool { return imgs[i].plat.String() < imgs[j].plat.String() })
		var top appendable
		if len(imgs) == 1 {
			top = imgs[0].img
		} else {
			idx := &plainIndex{images: map[v1.Hash]v1.Image{}}
			for _, pi := range imgs {
				if err := idx.add(pi.img, pi.plat); err != nil {
					return nil, err
				}
			}
			if err := idx.seal(); err != nil {
				return nil, err
			}
			top = idx
		}
		digest, err := top.Digest()
		if err != nil {
			return nil, err
		}
		var plats []string
		for _, pi := range imgs {
			plats = append(plats, pi.plat.String())
		}
		archive := filepath.Join(o.out, b.name+".oci.tar")
		if err := writeArchive(archive, ref, top, o.epoch); err != nil {
			return nil, fmt.Errorf("writing %s: %w", archive, err)
		}
		fi, err := os.Stat(archive)
		if err != nil {
			return nil, err
		}
		results = append(results, result{Archive: archive, Ref: ref.String(), Digest: digest.String(), Platforms: plats, Size: fi.Size()})
	}
	return results, nil
}

// readCABundle reads a PEM bundle and checks that it holds certificates.
func readCABundle(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("CA bundle: %w (Debian package ca-certificates; or -ca-bundle FILE, or -ca-bundle '' for none)", err)
	}
	if !x509.NewCertPool().AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("CA bundle %s holds no PEM certificate", path)
	}
	return b, nil
}

// binaryPlatform reads the platform of a binary from its ELF header and
// refuses one that is not static: a scratch image has no dynamic loader
// and no libc.
func binaryPlatform(path string) (v1.Platform, error) {
	f, err := elf.Open(path)
	if err != nil {
		return v1.Platform{}, fmt.Errorf("%s: %w (run make build first)", path, err)
	}
	defer f.Close()
	archs := map[elf.Machine]string{
		elf.EM_X86_64:  "amd64",
		elf.EM_AARCH64: "arm64",
		elf.EM_386:     "386",
		elf.EM_ARM:     "arm",
		elf.EM_S390:    "s390x",
		elf.EM_RISCV:   "riscv64",
	}
	arch, ok := archs[f.Machine]
	if f.Machine == elf.EM_PPC64 && f.ByteOrder.String() == "LittleEndian" {
		arch, ok = "ppc64le", true
	}
	if !ok {
		return v1.Platform{}, fmt.Errorf("%s: ELF machine %v is not a platform this builder knows", path, f.Machine)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return v1.Platform{}, fmt.Errorf("%s is dynamically linked (it names a program interpreter): build it with CGO_ENABLED=0 (make build)", path)
		}
	}
	if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
		return v1.Platform{}, fmt.Errorf("%s needs shared libraries %v: build it with CGO_ENABLED=0 (make build)", path, libs)
	}
	return v1.Platform{OS: "linux", Architecture: arch}, nil
}

// buildImage makes the image of one binary for one platform.
func buildImage(b binary, path string, plat v1.Platform, caBundle []byte, o options) (v1.Image, error) {
	bin, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	layer, err := rootfsLayer(b.name, bin, caBundle, o.epoch)
	if err != nil {
		return nil, err
	}
	created := v1.Time{Time: o.epoch}
	labels := map[string]string{
		"org.opencontainers.image.title":       b.name,
		"org.opencontainers.image.description": b.description,
		"org.opencontainers.image.version":     o.version,
		"org.opencontainers.image.revision":    o.revision,
		"org.opencontainers.image.source":      o.source,
		"org.opencontainers.image.licenses":    o.licenses,
		"org.opencontainers.image.created":     o.epoch.Format(time.RFC3339),
	}
	cf := &v1.ConfigFile{
		Architecture: plat.Architecture,
		OS:           plat.OS,
		Variant:      plat.Variant,
		Created:      created,
		Config: v1.Config{
			Entrypoint: []string{binDir + "/" + b.name},
			User:       fmt.Sprintf("%d:%d", NonRootUID, NonRootUID),
			Env:        []string{"PATH=" + binDir + ":/usr/bin:/bin"},
			WorkingDir: "/",
			Labels:     labels,
		},
		RootFS: v1.RootFS{Type: "layers"},
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		return nil, err
	}
	return mutate.Append(img, mutate.Addendum{
		Layer:     layer,
		MediaType: types.OCILayer,
		History: v1.History{
			Created:   created,
			CreatedBy: "hack/image: " + b.name + " " + o.version + " at " + binDir + "/" + b.name,
			Comment:   "static binary (CGO_ENABLED=0), passwd and group for " + strconv.Itoa(NonRootUID),
		},
	})
}

// A layer entry; a directory when data is nil and dir is set.
type entry struct {
	path     string
	mode     int64
	uid, gid int
	dir      bool
	data     []byte
}

// rootfsLayer is the image's one layer, gzip'd at the default level (the
// best level makes the collector's layer 1% smaller in three times the
// time).
func rootfsLayer(name string, bin, caBundle []byte, epoch time.Time) (v1.Layer, error) {
	passwd := fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:%d:%d:nonroot:/home/nonroot:/sbin/nologin\n", NonRootUID, NonRootUID)
	group := fmt.Sprintf("root:x:0:\nnonroot:x:%d:\n", NonRootUID)
	entries := []entry{
		{path: "etc/", mode: 0o755, dir: true},
		{path: "etc/group", mode: 0o644, data: []byte(group)},
		{path: "etc/passwd", mode: 0o644, data: []byte(passwd)},
	}
	if caBundle != nil {
		entries = append(entries,
			entry{path: "etc/ssl/", mode: 0o755, dir: true},
			entry{path: "etc/ssl/certs/", mode: 0o755, dir: true},
			entry{path: strings.TrimPrefix(caBundlePath, "/"), mode: 0o644, data: caBundle},
		)
	}
	entries = append(entries,
		entry{path: "home/", mode: 0o755, dir: true},
		entry{path: "home/nonroot/", mode: 0o700, uid: NonRootUID, gid: NonRootUID, dir: true},
		entry{path: "usr/", mode: 0o755, dir: true},
		entry{path: "usr/local/", mode: 0o755, dir: true},
		entry{path: "usr/local/bin/", mode: 0o755, dir: true},
		entry{path: "usr/local/bin/" + name, mode: 0o755, data: bin},
	)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		hdr := &tar.Header{
			Name: e.path, Mode: e.mode, Uid: e.uid, Gid: e.gid,
			ModTime: epoch, Format: tar.FormatUSTAR,
		}
		if e.dir {
			hdr.Typeflag = tar.TypeDir
		} else {
			hdr.Typeflag, hdr.Size = tar.TypeReg, int64(len(e.data))
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, fmt.Errorf("layer entry %s: %w", e.path, err)
		}
		if _, err := tw.Write(e.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	data := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(data)), nil
	}, tarball.WithMediaType(types.OCILayer), tarball.WithCompressionLevel(gzip.DefaultCompression))
}

// An appendable is an image or an index: what an archive holds.
type appendable interface {
	MediaType() (types.MediaType, error)
	Digest() (v1.Hash, error)
	Size() (int64, error)
}

// writeArchive writes an OCI image layout holding top (an image or an
// index), annotated with the image's name (org.opencontainers.image.ref.name,
// read by skopeo, and io.containerd.image.name, read by ctr import), as a
// tar file at path: entries in name order, owned by root, 0644 and 0755,
// dated epoch. It replaces path only once the archive is complete.
//
// The descriptor in index.json is written here rather than by
// layout.AppendImage, which gives an image's descriptor an artifactType
// (the config's media type) that images do not carry.
func writeArchive(path string, ref name.Tag, top appendable, epoch time.Time) error {
	dir, err := os.MkdirTemp(filepath.Dir(path), ".layout-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	switch t := top.(type) {
	case v1.Image:
		err = p.WriteImage(t)
	case v1.ImageIndex:
		err = p.WriteIndex(t)
	default:
		err = fmt.Errorf("cannot write a %T", top)
	}
	if err != nil {
		return err
	}
	desc := v1.Descriptor{Annotations: map[string]string{
		"org.opencontainers.image.ref.name": ref.String(),
		"io.containerd.image.name":          ref.String(),
	}}
	if desc.MediaType, err = top.MediaType(); err != nil {
		return err
	}
	if desc.Digest, err = top.Digest(); err != nil {
		return err
	}
	if desc.Size, err = top.Size(); err != nil {
		return err
	}
	if err := p.AppendDescriptor(desc); err != nil {
		return err
	}
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer os.Remove(tmp)
	if err := tarTree(f, dir, epoch); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// tarTree writes the tree under dir as a tar stream with fixed metadata.
// WalkDir visits entries in lexical order.
func tarTree(w io.Writer, dir string, epoch time.Time) error {
	tw := tar.NewWriter(w)
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil || rel == "." {
			return err
		}
		hdr := &tar.Header{Name: filepath.ToSlash(rel), ModTime: epoch, Format: tar.FormatUSTAR}
		switch {
		case d.IsDir():
			hdr.Name += "/"
			hdr.Typeflag, hdr.Mode = tar.TypeDir, 0o755
		case d.Type().IsRegular():
			fi, err := d.Info()
			if err != nil {
				return err
			}
			hdr.Typeflag, hdr.Mode, hdr.Size = tar.TypeReg, 0o644, fi.Size()
		default:
			return fmt.Errorf("%s: not a file or directory", p)
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if hdr.Typeflag != tar.TypeReg {
			return nil
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		n, err := io.Copy(tw, f)
		if err == nil && n != hdr.Size {
			err = errors.New("changed while archived")
		}
		return err
	})
	if err != nil {
		return err
	}
	return tw.Close()
}

// plainIndex is an OCI image index of one image per platform, whose
// descriptors say media type, size, digest and platform, and nothing else.
// (mutate.AppendManifests also gives each an artifactType, which images do
// not carry and which skopeo 1.9 drops when it copies the index, changing
// its digest on the way into a registry.)
type plainIndex struct {
	manifest v1.IndexManifest
	images   map[v1.Hash]v1.Image
	raw      []byte
}

var _ v1.ImageIndex = (*plainIndex)(nil)

func (x *plainIndex) add(img v1.Image, plat v1.Platform) error {
	d := v1.Descriptor{Platform: &plat}
	var err error
	if d.MediaType, err = img.MediaType(); err != nil {
		return err
	}
	if d.Digest, err = img.Digest(); err != nil {
		return err
	}
	if d.Size, err = img.Size(); err != nil {
		return err
	}
	x.manifest.Manifests = append(x.manifest.Manifests, d)
	x.images[d.Digest] = img
	return nil
}

// seal fixes the index's bytes once every image is added.
func (x *plainIndex) seal() error {
	x.manifest.SchemaVersion, x.manifest.MediaType = 2, types.OCIImageIndex
	var err error
	x.raw, err = json.Marshal(x.manifest)
	return err
}

func (x *plainIndex) MediaType() (types.MediaType, error) { return types.OCIImageIndex, nil }
func (x *plainIndex) RawManifest() ([]byte, error)        { return x.raw, nil }
func (x *plainIndex) Size() (int64, error)                { return int64(len(x.raw)), nil }
func (x *plainIndex) Digest() (v1.Hash, error) {
	h, _, err := v1.SHA256(bytes.NewReader(x.raw))
	return h, err
}
func (x *plainIndex) IndexManifest() (*v1.IndexManifest, error) { return x.manifest.DeepCopy(), nil }
func (x *plainIndex) Image(h v1.Hash) (v1.Image, error) {
	if img, ok := x.images[h]; ok {
		return img, nil
	}
	return nil, fmt.Errorf("no image %s in the index", h)
}
func (x *plainIndex) ImageIndex(h v1.Hash) (v1.ImageIndex, error) {
	return nil, fmt.Errorf("no index %s in the index", h)
}
