package rules

import (
	"regexp"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/version"
)

// TestKubeletFlagTable checks the shape of every row: a kebab-case name
// listed once, versions that parse, a deprecation before the removal, a
// replacement that completes the remediation sentence, a documented source.
func TestKubeletFlagTable(t *testing.T) {
	name := regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*$`)
	minor := regexp.MustCompile(`^1\.[0-9]+$`)
	source := regexp.MustCompile(`^CHANGELOG-1\.[0-9]+\.md, PR #[0-9]+`)
	seen := map[string]bool{}
	for _, r := range kubeletFlagTable {
		if !name.MatchString(r.Flag) {
			t.Errorf("%q: not a kebab-case flag name", r.Flag)
		}
		if seen[r.Flag] {
			t.Errorf("%s: listed twice", r.Flag)
		}
		seen[r.Flag] = true
		if !minor.MatchString(r.Removed) {
			t.Errorf("%s: removed in %q, want 1.N", r.Flag, r.Removed)
		}
		if r.Deprecated != "" {
			if !minor.MatchString(r.Deprecated) {
				t.Errorf("%s: deprecated in %q, want 1.N or empty", r.Flag, r.Deprecated)
			} else if !minorBefore(version.MustParseGeneric(r.Deprecated), version.MustParseGeneric(r.Removed)) {
				t.Errorf("%s: deprecated in %s, not before its removal in %s", r.Flag, r.Deprecated, r.Removed)
			}
		}
		if r.Replacement != "" && (!strings.HasPrefix(r.Replacement, "; ") || strings.HasSuffix(r.Replacement, ".")) {
			t.Errorf("%s: replacement %q must start with \"; \" and not end with a period", r.Flag, r.Replacement)
		}
		if !source.MatchString(r.Source) {
			t.Errorf("%s: source %q, want \"CHANGELOG-1.N.md, PR #N\"", r.Flag, r.Source)
		}
		if !strings.Contains(r.Source, "CHANGELOG-"+r.Removed+".md") {
			t.Errorf("%s: source %q does not name the changelog of %s", r.Flag, r.Source, r.Removed)
		}
	}
	// The flags the project must know (the brief's list).
	for flag, removed := range map[string]string{
		"network-plugin": "1.24", "docker-endpoint": "1.24", "cni-bin-dir": "1.24", "non-masquerade-cidr": "1.24",
		"really-crash-for-testing": "1.24", "experimental-check-node-capabilities-before-mount": "1.24",
		"dynamic-config-dir": "1.24", "experimental-kernel-memcg-notification": "1.25", "log-dir": "1.26",
		"logtostderr": "1.26", "container-runtime": "1.27", "master-service-namespace": "1.27",
		"azure-container-registry-config": "1.30", "keep-terminated-pod-volumes": "1.31",
		"register-schedulable": "1.34", "cloud-config": "1.34", "pod-infra-container-image": "1.35",
		"seccomp-profile-root": "1.23", "chaos-chance": "1.22", "enable-cadvisor-json-endpoints": "1.21",
		"cadvisor-port": "1.12",
	} {
		r := lookupKubeletFlag(flag)
		if r == nil {
			t.Errorf("%s: missing from the table", flag)
			continue
		}
		if r.Removed != removed {
			t.Errorf("%s: removed in %s, want %s", flag, r.Removed, removed)
		}
	}
	// Uncertain removals stay out of the hard errors.
	for _, flag := range []string{"redirect-container-streaming", "docker-root", "containerd", "housekeeping-interval", "container-runtime-endpoint", "cloud-provider"} {
		if lookupKubeletFlag(flag) != nil {
			t.Errorf("%s: must not be in the table", flag)
		}
	}
}

func TestKubeletFlagLifecycle(t *testing.T) {
	pod := lookupKubeletFlag("pod_infra_container_image") // pflag normalises '_'
	if pod == nil {
		t.Fatal("pod-infra-container-image not found through its _ spelling")
	}
	chaos := lookupKubeletFlag("chaos-chance") // deprecation release unknown
	tests := []struct {
		name           string
		lc             *kubeletFlagLifecycle
		version        string
		wantRemoved    bool
		wantDeprecated bool
	}{
		{"before the deprecation", pod, "v1.23.17", false, false},
		{"deprecated", pod, "v1.24.0", false, true},
		{"last release that accepts it", pod, "v1.34.9", false, true},
		{"the removal release", pod, "v1.35.0", true, false},
		{"a pre-release of the removal release", pod, "v1.35.0-alpha.3", true, false},
		{"an LTS patch number", pod, "v1.34.100", false, true},
		{"later", pod, "v1.36.1", true, false},
		{"next major", pod, "v2.0.0", true, false},
		{"unknown deprecation release warns until the removal", chaos, "v1.10.0", false, true},
		{"unknown deprecation release, removed", chaos, "v1.22.0", true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := version.MustParseGeneric(tt.version)
			if got := tt.lc.removedBy(v); got != tt.wantRemoved {
				t.Errorf("removedBy(%s) = %v, want %v", tt.version, got, tt.wantRemoved)
			}
			if got := tt.lc.deprecatedAt(v); got != tt.wantDeprecated {
				t.Errorf("deprecatedAt(%s) = %v, want %v", tt.version, got, tt.wantDeprecated)
			}
		})
	}
}
