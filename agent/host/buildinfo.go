package host

import (
	"debug/buildinfo"
	"fmt"
	"io/fs"
	"runtime/debug"
)

// BuildInfo reads the Go build information embedded in the binary at the
// host path name, without running it: the fallback for learning a version
// when running the node's binaries is disabled (a copy of a host examined
// elsewhere) or impossible (no execute bit, another architecture).
//
// Only regular files are opened (a FIFO or a device is never opened, see
// open); symlinks are followed inside Root. A file that is not a Go executable is an
// error. Errors name the host path.
func (h *Host) BuildInfo(name string) (*debug.BuildInfo, error) {
	f, err := h.open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	bi, err := buildinfo.Read(f)
	if err != nil {
		return nil, &fs.PathError{Op: "buildinfo", Path: name, Err: fmt.Errorf("reading Go build info: %w", err)}
	}
	return bi, nil
}
