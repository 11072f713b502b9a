package capi

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const kubeconfigYAML = `apiVersion: v1
kind: Config
clusters:
- name: mgmt
  cluster: {server: "https://127.0.0.1:6443"}
- name: other
  cluster: {server: "https://127.0.0.2:6443"}
users:
- name: admin
  user: {token: not-a-real-token}
contexts:
- name: mgmt-admin
  context: {cluster: mgmt, user: admin}
- name: other-admin
  context: {cluster: other, user: admin}
current-context: mgmt-admin
`

func TestRESTConfig(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "config")
	if err := os.WriteFile(file, []byte(kubeconfigYAML), 0o600); err != nil {
		t.Fatal(err)
	}
	env := filepath.Join(dir, "env-config")
	if err := os.WriteFile(env, []byte(strings.ReplaceAll(kubeconfigYAML, "current-context: mgmt-admin", "current-context: other-admin")), 0o600); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name             string
		kubeconfig, ctx  string
		envKubeconfig    string
		wantHost         string
		wantErrSubstring []string
	}{
		{name: "--kubeconfig, current context", kubeconfig: file, wantHost: "https://127.0.0.1:6443"},
		{name: "--kubeconfig and --context", kubeconfig: file, ctx: "other-admin", wantHost: "https://127.0.0.2:6443"},
		{name: "--kubeconfig wins over $KUBECONFIG", kubeconfig: file, envKubeconfig: env, wantHost: "https://127.0.0.1:6443"},
		{name: "$KUBECONFIG", envKubeconfig: env, wantHost: "https://127.0.0.2:6443"},
		{name: "$KUBECONFIG and --context", envKubeconfig: env, ctx: "mgmt-admin", wantHost: "https://127.0.0.1:6443"},
		{
			name: "unknown context", kubeconfig: file, ctx: "prod",
			wantErrSubstring: []string{file + " (--kubeconfig)", `context "prod"`},
		},
		{
			name: "missing file", kubeconfig: filepath.Join(dir, "nope"),
			wantErrSubstring: []string{filepath.Join(dir, "nope") + " (--kubeconfig)", "no such file"},
		},
		{
			name: "unknown context in $KUBECONFIG", envKubeconfig: env, ctx: "prod",
			wantErrSubstring: []string{env, "$KUBECONFIG", `context "prod"`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("KUBECONFIG", tt.envKubeconfig)
			cfg, err := RESTConfig(tt.kubeconfig, tt.ctx)
			if tt.wantErrSubstring != nil {
				if err == nil {
					t.Fatalf("got config for %s, want an error", cfg.Host)
				}
				for _, s := range tt.wantErrSubstring {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("error %q does not contain %q", err, s)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Host != tt.wantHost {
				t.Errorf("Host = %s, want %s", cfg.Host, tt.wantHost)
			}
		})
	}
}
