package artifacts

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// CAPZ's log collector (test/e2e/azure_logcollector.go, linuxLogs) does not
// copy cloud-init's logs as they are: it runs
//
//	echo 'Waiting for cloud-init to complete before collecting output log...' &&
//	timeout 60 cloud-init status --wait || echo 'Cloud-init wait timed out, proceeding with log collection...' &&
//	if [ -f /var/log/cloud-init-output.log ]; then echo 'Found cloud-init-output.log, reading contents:' &&
//	sudo cat /var/log/cloud-init-output.log; else echo 'cloud-init-output.log not found'; fi
//
// and, for cloud-init.log, the same test without the wait. So the file
// starts with a preamble whose "status: ..." line is cloud-init's own
// verdict, and a log the node did not have is the line "... not found".
const (
	collectedWaiting  = "Waiting for cloud-init to complete before collecting output log..."
	collectedTimedOut = "Cloud-init wait timed out, proceeding with log collection..."
	collectedFoundFmt = "Found %s, reading contents:"
	collectedNotFound = "%s not found"
	// collectedPreamble bounds the preamble read: cloud-init status
	// --wait prints a dot every few seconds for at most 60 s.
	collectedPreamble = 64 << 10
)

// collected is what a collector's file of a cloud-init log holds.
type collected struct {
	// absent: the collector found no such log on the node.
	absent bool
	// offset is where the log itself starts in the file (after the
	// preamble); status is the "status: ..." line of cloud-init status
	// --wait, timedOut whether the wait gave up.
	offset   int64
	status   string
	timedOut bool
}

// readCollected reads the preamble of the collector's file p of the log
// name (cloud-init-output.log, cloud-init.log). A file without the
// preamble (another collector, a plain copy) is the log from its start.
func readCollected(p, name string) (collected, error) {
	f, _, err := openRegular(p)
	if err != nil {
		return collected{}, err
	}
	defer f.Close()
	br := bufio.NewReader(io.LimitReader(f, collectedPreamble))
	var c collected
	var off int64
	first := true
	for {
		line, err := br.ReadString('\n')
		text := strings.TrimRight(line, "\r\n")
		switch {
		case text == fmt.Sprintf(collectedNotFound, name) && first:
			c.absent = true
			return c, nil
		case text == fmt.Sprintf(collectedFoundFmt, name):
			c.offset = off + int64(len(line))
			return c, nil
		case first && text != collectedWaiting && text != fmt.Sprintf(collectedFoundFmt, name):
			return collected{}, nil // no preamble: the log itself
		case text == collectedTimedOut:
			c.timedOut = true
		case strings.HasPrefix(strings.TrimLeft(text, "."), "status: "):
			c.status = strings.TrimLeft(text, ".")
		case text == fmt.Sprintf(collectedNotFound, name):
			c.absent = true
			return c, nil
		}
		first = false
		off += int64(len(line))
		if err != nil {
			// A preamble that never reached the log: nothing of the log.
			return collected{absent: true, status: c.status, timedOut: c.timedOut}, nil
		}
	}
}

// placeCollected puts the cloud-init log name of the tree file p at host
// path hp, without the collector's preamble; it says what the preamble
// told. An absent log is not placed.
func (v *view) placeCollected(name, hp, p string) error {
	c, err := readCollected(p, name)
	if err != nil {
		v.problems = append(v.problems, err.Error())
		return nil
	}
	if c.status != "" {
		v.problems = append(v.problems, fmt.Sprintf("%s: the collector's cloud-init status --wait said %q", name, c.status))
	}
	if c.timedOut {
		v.problems = append(v.problems, fmt.Sprintf("%s: the collector's cloud-init status --wait timed out after 60 s: cloud-init was still running", name))
	}
	if c.absent {
		v.problems = append(v.problems, fmt.Sprintf("%s: the collector found no %s on the node", name, hp))
		return nil
	}
	if c.offset == 0 {
		return v.place(hp, p)
	}
	// The log without its preamble, in a scratch directory outside the
	// view's root (never under the tree): line numbers and the first line
	// are the node's.
	f, _, err := openRegular(p)
	if err != nil {
		v.problems = append(v.problems, err.Error())
		return nil
	}
	defer f.Close()
	if _, err := f.Seek(c.offset, io.SeekStart); err != nil {
		return err
	}
	if v.scratch == "" {
		if v.scratch, err = os.MkdirTemp("", "nodediag-collected-"); err != nil {
			return err
		}
	}
	dst := filepath.Join(v.scratch, name)
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, f); err != nil {
		out.Close()
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	return v.place(hp, dst)
}
