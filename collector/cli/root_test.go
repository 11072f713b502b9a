package cli

import (
	"bytes"
	"strings"
	"testing"
)

func TestVersion(t *testing.T) {
	cmd := NewRootCommand()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetArgs([]string{"version"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out.String(), "nodediag ") {
		t.Errorf("version printed %q", out.String())
	}
	cmd = NewRootCommand()
	cmd.SetArgs([]string{"nosuch"})
	if err := cmd.Execute(); err == nil {
		t.Error("an unknown command must be an error")
	}
}
