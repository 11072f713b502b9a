package bundle

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"

	"filippo.io/age"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/nodediag/nodediag/agent/redact"
	nodediagv1 "github.com/nodediag/nodediag/proto/nodediag/v1"
)

// Bundle is a bundle as read: whatever could be read of it, and what could
// not.
type Bundle struct {
	// Manifest is nil when the bundle has none (or it did not decode).
	Manifest *Manifest
	// Report is nil when report.json is missing or broken: Problems say so.
	Report *nodediagv1.Report
	// Files are the files/ members by host path ("/etc/sysconfig/kubelet").
	Files map[string][]byte
	// Problems are what was wrong with the bundle, as sentences; reading
	// goes on past each of them when it can.
	Problems []string
}

// Reading budgets: a bundle is untrusted input, and analyze must stay small
// whatever it is given (a gzip bomb, a million empty members).
const (
	// MaxMemberBytes bounds one member as read (a report with its evidence
	// is a few MiB; a member larger than this is not of a bundle this agent
	// wrote).
	MaxMemberBytes = 64 << 20
	// MaxKeptBytes bounds the members kept in memory, together: the report
	// and the files (collect's --max-bytes is 64 MiB by default).
	MaxKeptBytes = 128 << 20
	// MaxStreamBytes bounds the decompressed stream as a whole, the members
	// skipped and whatever follows the last one included.
	MaxStreamBytes = 1 << 30
	// MaxMembers bounds the tar's members.
	MaxMembers = 100_000
)

// streamBudget is MaxStreamBytes; tests lower it.
var streamBudget int64 = MaxStreamBytes

// errStreamBudget ends a stream that decompresses past streamBudget.
var errStreamBudget = errors.New("it decompresses to more than the reading budget")

// budgetReader fails once more than left bytes were read.
type budgetReader struct {
	r    io.Reader
	left int64
}

func (b *budgetReader) Read(p []byte) (int, error) {
	if b.left <= 0 {
		return 0, errStreamBudget
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.r.Read(p)
	b.left -= int64(n)
	return n, err
}

// ErrNotBundle is returned (wrapped) for input that is not a bundle at all:
// not gzip, not an age file, not a tar.
var ErrNotBundle = errors.New("not a nodediag bundle")

// ErrNeedIdentity is returned (wrapped) for an encrypted bundle read
// without an identity that opens it.
var ErrNeedIdentity = errors.New("the bundle is encrypted")

// ageMagic starts every age file.
const ageMagic = "age-encryption.org/"

// Read reads a bundle from r, decrypting it with identities when it is
// encrypted. It returns an error only when nothing of the bundle can be
// used (not a bundle; encrypted without a fitting identity; no report);
// every other defect (truncation, a member that fails its hash, a member
// that is not a regular file or whose name leaves the bundle, a manifest of
// a newer format) is one of Bundle.Problems.
func Read(r io.Reader, identities ...age.Identity) (*Bundle, error) {
	br := bufio.NewReader(r)
	if head, _ := br.Peek(len(ageMagic)); string(head) == ageMagic {
		if len(identities) == 0 {
			return nil, fmt.Errorf("%w to an age recipient: give the identity that opens it (--identity FILE)", ErrNeedIdentity)
		}
		dr, err := age.Decrypt(br, identities...)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrNeedIdentity, err)
		}
		br = bufio.NewReader(dr)
	}
	zr, err := gzip.NewReader(br)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNotBundle, err)
	}
	b := &Bundle{Files: map[string][]byte{}}
	data := map[string][]byte{}
	stream := &budgetReader{r: zr, left: streamBudget}
	tr := tar.NewReader(stream)
	var reportBytes []byte
	var kept int64
	n := 0
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if errors.Is(err, errStreamBudget) {
			b.Problems = append(b.Problems, fmt.Sprintf("reading stopped after %d members: %v (%d bytes)", n, err, streamBudget))
			break
		}
		if err != nil {
			if n == 0 {
				return nil, fmt.Errorf("%w: %v", ErrNotBundle, err)
			}
			b.Problems = append(b.Problems, fmt.Sprintf("the bundle is cut short after %d members (%v): what came before is used", n, err))
			break
		}
		n++
		if n > MaxMembers {
			b.Problems = append(b.Problems, fmt.Sprintf("reading stopped: more than %d members", MaxMembers))
			break
		}
		name, ok := memberName(hdr.Name)
		switch {
		case !ok:
			b.Problems = append(b.Problems, fmt.Sprintf("member %q ignored: its name leaves the bundle", hdr.Name))
			continue
		case hdr.Typeflag != tar.TypeReg:
			b.Problems = append(b.Problems, fmt.Sprintf("member %q ignored: a %s, not a regular file (never followed)", hdr.Name, typeName(hdr.Typeflag)))
			continue
		case hdr.Size > MaxMemberBytes:
			b.Problems = append(b.Problems, fmt.Sprintf("member %q ignored: %d bytes, more than %d", hdr.Name, hdr.Size, MaxMemberBytes))
			continue
		case kept+hdr.Size > MaxKeptBytes:
			b.Problems = append(b.Problems, fmt.Sprintf("member %q ignored: with it the members read would pass %d bytes, the reading budget", hdr.Name, MaxKeptBytes))
			continue
		}
		body, err := io.ReadAll(io.LimitReader(tr, MaxMemberBytes))
		if errors.Is(err, errStreamBudget) {
			b.Problems = append(b.Problems, fmt.Sprintf("member %q is not read whole: %v (%d bytes)", name, err, streamBudget))
			break
		}
		if err != nil {
			b.Problems = append(b.Problems, fmt.Sprintf("member %q is cut short (%v): the bundle ends there", name, err))
			break
		}
		kept += int64(len(body))
		data[name] = body
		switch {
		case name == ManifestName:
			m := &Manifest{}
			if err := json.Unmarshal(body, m); err != nil {
				b.Problems = append(b.Problems, fmt.Sprintf("%s does not decode (%v): members are not checked against it", ManifestName, err))
				continue
			}
			b.Manifest = m
		case name == ReportName:
			reportBytes = body
		case strings.HasPrefix(name, FilesDir):
			b.Files["/"+strings.TrimPrefix(name, FilesDir)] = body
		}
	}
	if _, err := io.Copy(io.Discard, stream); err != nil && len(b.Problems) == 0 {
		if errors.Is(err, errStreamBudget) {
			b.Problems = append(b.Problems, fmt.Sprintf("what follows the last member was not read: %v (%d bytes)", err, streamBudget))
		} else {
			b.Problems = append(b.Problems, fmt.Sprintf("the compressed stream is damaged after the last member (%v)", err))
		}
	}
	b.checkManifest(data)
	if reportBytes == nil {
		return b, fmt.Errorf("%w: it has no %s%s", ErrNotBundle, ReportName, problemsSuffix(b.Problems))
	}
	rep := &nodediagv1.Report{}
	// Huge strings are cut before decoding, not after: decoded, a 60 MiB
	// node name would be held twice more.
	reportBytes = redact.ClipJSON(reportBytes, 4*redact.MaxUntrusted)
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(reportBytes, rep); err != nil {
		return b, fmt.Errorf("%s of the bundle does not decode: %v%s", ReportName, err, problemsSuffix(b.Problems))
	}
	b.Report = rep
	return b, nil
}

// checkManifest compares the members read with the manifest's list.
func (b *Bundle) checkManifest(data map[string][]byte) {
	m := b.Manifest
	if m == nil {
		if _, ok := data[ManifestName]; !ok {
			b.Problems = append(b.Problems, "the bundle has no "+ManifestName+": its members are not checked")
		}
		return
	}
	if m.Format != Format {
		b.Problems = append(b.Problems, fmt.Sprintf("the bundle's format is %q (agent %s), this nodediag reads %q: what it knows of it is used, the rest ignored", m.Format, m.Agent.Version, Format))
	}
	for _, mb := range m.Members {
		body, ok := data[mb.Name]
		if !ok {
			b.Problems = append(b.Problems, fmt.Sprintf("member %s listed in the manifest is missing", mb.Name))
			continue
		}
		sum := sha256.Sum256(body)
		if hex.EncodeToString(sum[:]) != mb.SHA256 {
			b.Problems = append(b.Problems, fmt.Sprintf("member %s does not match the manifest's SHA-256: changed or damaged since it was collected", mb.Name))
		}
	}
}

// memberName cleans a member's name; false when it is absolute or leaves
// the bundle ("../x").
func memberName(n string) (string, bool) {
	if n == "" || strings.HasPrefix(n, "/") || strings.Contains(n, "\\") {
		return "", false
	}
	c := path.Clean(n)
	if c == ".." || strings.HasPrefix(c, "../") || c == "." {
		return "", false
	}
	return c, true
}

func typeName(t byte) string {
	switch t {
	case tar.TypeSymlink:
		return "symbolic link"
	case tar.TypeLink:
		return "hard link"
	case tar.TypeDir:
		return "directory"
	case tar.TypeChar, tar.TypeBlock:
		return "device"
	case tar.TypeFifo:
		return "FIFO"
	}
	return fmt.Sprintf("member of type %q", t)
}

func problemsSuffix(ps []string) string {
	if len(ps) == 0 {
		return ""
	}
	return " (" + strings.Join(ps, "; ") + ")"
}

// IsBundle says whether b starts like a bundle (gzip or age).
func IsBundle(b []byte) bool {
	return bytes.HasPrefix(b, []byte{0x1f, 0x8b}) || bytes.HasPrefix(b, []byte(ageMagic))
}
