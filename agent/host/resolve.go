package host

import (
	"errors"
	"io/fs"
	"path"

	securejoin "github.com/cyphar/filepath-securejoin"
)

// Resolve returns the host path that name designates once every symlink in
// it is followed, inside Root: on a merged-/usr host Resolve("/bin/kubelet")
// is "/usr/bin/kubelet". Two host paths name the same file when they resolve
// to the same path. Components that do not exist are kept as they are
// written, so a dangling symlink resolves to its target. Errors name the host
// path.
//
// Unlike Path, Resolve follows symlinks when Root is "/" too: it answers
// "which file is this", not "what do I open".
func (h *Host) Resolve(name string) (string, error) {
	if !path.IsAbs(name) {
		return "", &fs.PathError{Op: "resolve", Path: name, Err: errors.New("not an absolute host path")}
	}
	p, err := securejoin.SecureJoin(h.Root, name)
	if err != nil {
		return "", h.hostErr("resolve", name, err)
	}
	return h.HostPath(p), nil
}
