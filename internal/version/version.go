// Package version says which build of nodediag is running. The Makefile stamps
// Version and Revision with -ldflags; a plain `go build` or `go install` falls
// back to what the Go toolchain recorded in the binary's build info.
package version

import (
	"runtime/debug"
)

// Set by -ldflags "-X github.com/nodediag/nodediag/internal/version.Version=...".
var (
	Version  = ""
	Revision = ""
)

// Info is the version of this build.
type Info struct {
	Version  string `json:"version"`
	Revision string `json:"revision"`
}

// Get returns the stamped version, or the build info's when nothing was stamped.
func Get() Info {
	return get(Version, Revision, debug.ReadBuildInfo)
}

func get(v, r string, read func() (*debug.BuildInfo, bool)) Info {
	info := Info{Version: v, Revision: r}
	if info.Version != "" && info.Revision != "" {
		return info
	}
	bi, ok := read()
	if !ok {
		if info.Version == "" {
			info.Version = "dev"
		}
		return info
	}
	if info.Version == "" {
		info.Version = bi.Main.Version
		if info.Version == "" || info.Version == "(devel)" {
			info.Version = "dev"
		}
	}
	if info.Revision == "" {
		var rev, modified string
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				modified = s.Value
			}
		}
		if rev != "" && modified == "true" {
			rev += "-dirty"
		}
		info.Revision = rev
	}
	return info
}

// String is "v0.1.0 (abc123)" or "v0.1.0".
func (i Info) String() string {
	if i.Revision == "" {
		return i.Version
	}
	return i.Version + " (" + i.Revision + ")"
}
