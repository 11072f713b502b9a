package probes

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"regexp"
	"strings"
	"sync"

	"github.com/nodediag/nodediag/agent/host"
	nodediagv1 "github.com/nodediag/nodediag/proto/nodediag/v1"
)

// ---- package databases: the last fallback, nothing executed ----------------
//
// On a copy of a host the binaries are not run, and official Kubernetes
// release binaries (built with -trimpath) record no version in their Go build
// info. What the package manager recorded is then the only source of a
// version left: dpkg's database is text and is read here. rpm's
// (/var/lib/rpm/rpmdb.sqlite on Azure Linux 3 and RHEL 9, Berkeley DB before)
// would need a reader the agent does not have: its presence is only named.

const (
	dpkgStatusPath = "/var/lib/dpkg/status"
	dpkgInfoDir    = "/var/lib/dpkg/info"
	// A server's status file is about 1 MiB, a desktop's a few: a larger
	// one is not read at all (cutting it could cut a Version line short).
	dpkgStatusMaxBytes = 16 << 20
	// The .list of a package the probe asks about is a few lines; a
	// kernel's modules package, the largest, is well under 1 MiB.
	dpkgListMaxBytes = 4 << 20
	rpmDBDir         = "/var/lib/rpm"
)

// dpkgInstalledStates are the package states in which the package's files,
// at its Version, are on disk: installed, and the states of a package
// unpacked whose configuration failed or is under way (what a broken
// upgrade leaves). half-installed, config-files and not-installed are not.
var dpkgInstalledStates = map[string]bool{
	"installed":        true,
	"triggers-pending": true,
	"triggers-awaited": true,
	"half-configured":  true,
	"unpacked":         true,
}

// dpkgArch is what an Architecture field may hold for it to be used in the
// name of a .list file.
var dpkgArch = regexp.MustCompile(`^[a-z0-9][a-z0-9-]*$`)

// dpkgStanza is one package's stanza of /var/lib/dpkg/status, as far as the
// probe reads it.
type dpkgStanza struct {
	pkg, status, version, arch string
	// The Package, Status and Version lines, verbatim: what a finding quotes.
	pkgLine, statusLine, versionLine, archLine string
}

// installed says whether the package's files are on disk: the Status is
// "<want> ok <state>" with a state in dpkgInstalledStates ("install ok
// installed", "hold ok installed" after apt-mark hold; never "deinstall ok
// config-files").
func (s *dpkgStanza) installed() bool {
	f := strings.Fields(s.status)
	return len(f) == 3 && f[1] == "ok" && dpkgInstalledStates[f[2]]
}

// parseDpkgStatus reads the stanzas of a dpkg status file (deb822: stanzas
// separated by empty lines, "Field: value" lines, continuation lines starting
// with a space or a tab) whose Package want accepts, in file order. A
// malformed stanza is skipped whole and the rest is still read: a line that
// is neither a field nor a continuation, a continuation with no field before
// it, one of Package, Status, Version or Architecture given twice or
// continued on another line, or no Package.
func parseDpkgStatus(data []byte, want func(pkg string) bool) []dpkgStanza {
	var (
		out     []dpkgStanza
		cur     dpkgStanza
		started bool   // a field line was seen in this stanza
		bad     bool   // the stanza is malformed
		last    string // the field the previous line belongs to, when one of ours
	)
	flush := func() {
		if started && !bad && cur.pkg != "" && want(cur.pkg) {
			out = append(out, cur)
		}
		cur, started, bad, last = dpkgStanza{}, false, false, ""
	}
	set := func(value, line *string, v, l string) {
		if *line != "" {
			bad = true // given twice: which one dpkg meant is unknown
			return
		}
		*value, *line = v, l
	}
	for len(data) > 0 {
		var line []byte
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			line, data = data[:i], data[i+1:]
		} else {
			line, data = data, nil
		}
		line = bytes.TrimSuffix(line, []byte("\r"))
		if len(bytes.Trim(line, " \t")) == 0 {
			flush()
			continue
		}
		if line[0] == ' ' || line[0] == '\t' {
			// A continuation: fine for Description or Conffiles, not for
			// the one-line fields read here.
			if !started || last != "" {
				bad = true
			}
			continue
		}
		started = true
		colon := bytes.IndexByte(line, ':')
		if colon <= 0 || bytes.ContainsAny(line[:colon], " \t") {
			bad, last = true, ""
			continue
		}
		name := string(line[:colon])
		value := strings.Trim(string(line[colon+1:]), " \t")
		last = ""
		switch {
		case strings.EqualFold(name, "Package"):
			set(&cur.pkg, &cur.pkgLine, value, string(line))
			last = "Package"
		case strings.EqualFold(name, "Status"):
			set(&cur.status, &cur.statusLine, value, string(line))
			last = "Status"
		case strings.EqualFold(name, "Version"):
			set(&cur.version, &cur.versionLine, value, string(line))
			last = "Version"
		case strings.EqualFold(name, "Architecture"):
			set(&cur.arch, &cur.archLine, value, string(line))
			last = "Architecture"
		}
	}
	flush()
	return out
}

// dpkgUpstreamVersion is the upstream part of a Debian version ([epoch:]
// upstream[-revision]: the epoch and the part after the last "-" dropped),
// normalised as the probe normalises every version ("1.32.3-1.1" → "v1.32.3",
// "1.6.20~ds1-1+b1" → "v1.6.20").
func dpkgUpstreamVersion(raw string) (string, error) {
	s := raw
	if i := strings.IndexByte(s, ':'); i >= 0 {
		if epoch := s[:i]; epoch == "" || strings.Trim(epoch, "0123456789") != "" {
			return "", fmt.Errorf("%q is not a Debian version", binValidUTF8(raw))
		}
		s = s[i+1:]
	}
	if i := strings.LastIndexByte(s, '-'); i >= 0 {
		s = s[:i]
	}
	v, err := normalizeBinaryVersion(s)
	if err != nil {
		return "", fmt.Errorf("%q is not a version", binValidUTF8(raw))
	}
	return v, nil
}

// pkgDBs reads the host's package databases once for a whole run, and only
// when some binary needs them.
type pkgDBs struct {
	h    *host.Host
	want map[string]bool // the packages of versionQueries

	once sync.Once
	// dpkg holds the installed stanzas of the wanted packages, by name.
	dpkg map[string][]dpkgStanza
	// dpkgErr is why the status file, which exists, was not read.
	dpkgErr error
	// rpm: /var/lib/rpm exists (or is there but unreadable).
	rpm bool
}

func newPkgDBs(h *host.Host, qs []versionQuery) *pkgDBs {
	want := map[string]bool{}
	for _, q := range qs {
		for _, p := range q.packages {
			want[p] = true
		}
	}
	return &pkgDBs{h: h, want: want}
}

func (d *pkgDBs) load() {
	d.once.Do(func() {
		ok, err := d.h.Exists(rpmDBDir)
		d.rpm = ok || err != nil
		data, truncated, err := d.h.ReadFileLimit(dpkgStatusPath, dpkgStatusMaxBytes)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return // no dpkg on this host
		case err != nil:
			d.dpkgErr = err
			return
		case truncated:
			d.dpkgErr = fmt.Errorf("%s is larger than %d MiB: not read", dpkgStatusPath, dpkgStatusMaxBytes>>20)
			return
		}
		d.dpkg = map[string][]dpkgStanza{}
		for _, s := range parseDpkgStatus(data, func(p string) bool { return d.want[p] }) {
			if s.installed() {
				d.dpkg[s.pkg] = append(d.dpkg[s.pkg], s)
			}
		}
	})
}

// fill is the last fallback of askVersion: the version of the package that
// owns the binary's file, from dpkg. Found, it sets method "dpkg", the
// version, and the output a finding quotes: the stanza's Package, Status and
// Version lines and the line of the package's .list that names the file.
// Not found, it adds to b.Error only what is worth knowing (a database that
// could not be read, rpm's that is not read); a file no package owns gets
// nothing from dpkg.
func (d *pkgDBs) fill(b *nodediagv1.Binary, c *binCandidate) {
	d.load()
	switch {
	case d.dpkgErr != nil:
		b.Error += "; the dpkg database was not read: " + binValidUTF8(d.dpkgErr.Error())
	case d.dpkg != nil:
		v, out, problem := d.dpkgVersion(c)
		if v != "" {
			b.Method, b.Version, b.Output = "dpkg", v, out
			return
		}
		if problem != "" {
			b.Error += "; " + problem
		}
	}
	if d.rpm {
		b.Error += "; " + rpmDBDir + " exists but the rpm database is not read: the version of a binary rpm installed is not known here"
	}
}

// dpkgVersion finds, among the installed stanzas of c's packages, the one
// whose .list names the file (at its path, where its symlinks lead, or at
// one of its aliases): the file is then the package's, and the package's
// version is the binary's. problem says why a package that may own it could
// not be checked.
func (d *pkgDBs) dpkgVersion(c *binCandidate) (version, output, problem string) {
	paths := map[string]bool{c.path: true, c.resolved: true}
	for _, a := range c.aliases {
		paths[a] = true
	}
	var problems []string
	for _, pkg := range c.q.packages {
		for _, s := range d.dpkg[pkg] {
			line, err := d.ownerLine(&s, paths)
			if err != nil {
				problems = append(problems, binValidUTF8(err.Error()))
				continue
			}
			if line == "" {
				continue
			}
			v, err := dpkgUpstreamVersion(s.version)
			if err != nil {
				problems = append(problems, fmt.Sprintf("the dpkg package %s owns the file but has no usable version: %s", pkg, err))
				continue
			}
			out := binExcerpt([]byte(strings.Join([]string{s.pkgLine, s.statusLine, s.versionLine, line}, "\n")), strings.TrimPrefix(v, "v"))
			return v, out, ""
		}
	}
	return "", "", strings.Join(problems, "; ")
}

// ownerLine is the line of the stanza's .list (<package>:<arch>.list for a
// Multi-Arch: same package, <package>.list otherwise) that is one of paths,
// or "" when the package does not own any of them.
func (d *pkgDBs) ownerLine(s *dpkgStanza, paths map[string]bool) (string, error) {
	var lists []string
	if dpkgArch.MatchString(s.arch) {
		lists = append(lists, dpkgInfoDir+"/"+s.pkg+":"+s.arch+".list")
	}
	lists = append(lists, dpkgInfoDir+"/"+s.pkg+".list")
	for _, l := range lists {
		data, truncated, err := d.h.ReadFileLimit(l, dpkgListMaxBytes)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return "", err
		}
		if truncated {
			return "", fmt.Errorf("%s is larger than %d MiB: not read", l, dpkgListMaxBytes>>20)
		}
		for _, line := range strings.Split(string(data), "\n") {
			if paths[line] {
				return line, nil
			}
		}
	}
	return "", nil
}
