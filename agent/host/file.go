package host

import (
	"io"
	"os"
)

// File is a regular file of the host opened for random access reads (the
// journal reader seeks through journal files instead of reading them
// whole). Errors name the host path.
type File struct {
	f    *os.File
	name string
	size int64
	h    *Host
}

var _ io.ReaderAt = (*File)(nil)

// Open opens a regular file read-only for ReadAt, with the safety of every
// read of this package (resolved inside Root, regular files only, checked
// after opening).
func (h *Host) Open(name string) (*File, error) {
	f, err := h.open(name)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, h.hostErr("stat", name, err)
	}
	return &File{f: f, name: name, size: fi.Size(), h: h}, nil
}

// Name is the file's host path.
func (f *File) Name() string { return f.name }

// Size is the file's size when it was opened.
func (f *File) Size() int64 { return f.size }

// Stat returns the open file's current information.
func (f *File) Stat() (os.FileInfo, error) {
	fi, err := f.f.Stat()
	if err != nil {
		return nil, f.h.hostErr("stat", f.name, err)
	}
	return fi, nil
}

// ReadAt implements io.ReaderAt. At the end of the file it returns io.EOF
// unwrapped, as io.ReaderAt requires.
func (f *File) ReadAt(p []byte, off int64) (int, error) {
	n, err := f.f.ReadAt(p, off)
	if err != nil && err != io.EOF {
		return n, f.h.hostErr("read", f.name, err)
	}
	return n, err
}

// Close closes the file.
func (f *File) Close() error { return f.f.Close() }
