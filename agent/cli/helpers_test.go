package cli

import (
	"syscall"
	"time"
)

const timeoutForTests = time.Minute

func mkfifo(p string) error { return syscall.Mkfifo(p, 0o644) }
