package version

import (
	"runtime/debug"
	"testing"
)

func TestGet(t *testing.T) {
	bi := &debug.BuildInfo{
		Main: debug.Module{Version: "v0.3.0"},
		Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "abc123"},
			{Key: "vcs.modified", Value: "true"},
		},
	}
	withBI := func() (*debug.BuildInfo, bool) { return bi, true }
	without := func() (*debug.BuildInfo, bool) { return nil, false }
	devel := func() (*debug.BuildInfo, bool) {
		return &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, true
	}
	tests := []struct {
		name   string
		v, r   string
		read   func() (*debug.BuildInfo, bool)
		want   Info
		wantSt string
	}{
		{"stamped wins", "v1.0.0", "deadbeef", withBI, Info{"v1.0.0", "deadbeef"}, "v1.0.0 (deadbeef)"},
		{"build info fallback", "", "", withBI, Info{"v0.3.0", "abc123-dirty"}, "v0.3.0 (abc123-dirty)"},
		{"stamped version, revision from build info", "v1.0.0", "", withBI, Info{"v1.0.0", "abc123-dirty"}, "v1.0.0 (abc123-dirty)"},
		{"devel is dev", "", "", devel, Info{"dev", ""}, "dev"},
		{"nothing known", "", "", without, Info{"dev", ""}, "dev"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := get(tt.v, tt.r, tt.read)
			if got != tt.want {
				t.Errorf("get() = %+v, want %+v", got, tt.want)
			}
			if got.String() != tt.wantSt {
				t.Errorf("String() = %q, want %q", got.String(), tt.wantSt)
			}
		})
	}
}
