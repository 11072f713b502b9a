package host

import "path"

// mapped returns the file that serves the host path name, if Files maps it.
//
// A mapped file is opened like every other file under a root that is not
// "/": with O_NOFOLLOW, and only when it is a regular file. A symlink put in
// place of an artifact is refused, never followed out of its tree.
func (h *Host) mapped(name string) (string, bool) {
	if len(h.Files) == 0 {
		return "", false
	}
	p, ok := h.Files[path.Clean(name)]
	return p, ok
}
