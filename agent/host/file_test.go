package host_test

import (
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/nodediag/nodediag/agent/host"
	"github.com/nodediag/nodediag/agent/host/hosttest"
)

func TestOpenReadAt(t *testing.T) {
	h := hosttest.Tree(t, map[string]string{
		"var/log/journal/m/system.journal": "LPKSHHRH0123456789",
		"var/log/journal/link.journal":     "->/var/log/journal/m/system.journal",
	})
	f, err := h.Open("/var/log/journal/link.journal")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.Size() != 18 || f.Name() != "/var/log/journal/link.journal" {
		t.Errorf("size %d name %s", f.Size(), f.Name())
	}
	b := make([]byte, 4)
	if n, err := f.ReadAt(b, 8); n != 4 || err != nil || string(b) != "0123" {
		t.Errorf("ReadAt = %d %v %q", n, err, b)
	}
	if _, err := f.ReadAt(b, 16); err != io.EOF {
		t.Errorf("ReadAt past the end: %v, want io.EOF", err)
	}
	if _, err := h.Open("/var/log/journal/m"); !errors.Is(err, host.ErrNotRegular) || !strings.Contains(err.Error(), "/var/log/journal/m") {
		t.Errorf("Open(dir) = %v, want ErrNotRegular naming the host path", err)
	}
}
