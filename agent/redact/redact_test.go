package redact

import (
	"strings"
	"testing"

	nodediagv1 "github.com/nodediag/nodediag/proto/nodediag/v1"
)

func TestString(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"kubeadm join token keeps its public ID",
			"kubeadm join 10.0.0.4:6443 --token abcdef.0123456789abcdef --discovery-token-ca-cert-hash sha256:1a2b",
			"kubeadm join 10.0.0.4:6443 --token [REDACTED] --discovery-token-ca-cert-hash sha256:1a2b"},
		{"bare bootstrap token", `token ID "abcdef" in abcdef.0123456789abcdef`, `token ID "abcdef" in abcdef.[REDACTED]`},
		{"yaml token", "  token: abcdef.0123456789abcdef", "  token: [REDACTED]"},
		{"certificate key", "--certificate-key 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08", "--certificate-key [REDACTED]"},
		{"yaml certificateKey", `certificateKey: "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"`, `certificateKey: "[REDACTED]"`},
		{"password flag", "docker login --password hunter2 --username bob", "docker login --password [REDACTED] --username bob"},
		{"docker login -p", "+ docker login registry.example.com -u ci -p Tr0ub4dor&3", "+ docker login registry.example.com -u ci -p [REDACTED]"},
		{"helm registry login -p=", "helm registry login reg.io --username u -p=s3cr3t", "helm registry login reg.io --username u -p=[REDACTED]"},
		{"-p elsewhere is not a password", "mkdir -p /etc/kubernetes/manifests", "mkdir -p /etc/kubernetes/manifests"},
		{"password env", "REGISTRY_PASSWORD=s3cr3t ./seed.sh", "REGISTRY_PASSWORD=[REDACTED] ./seed.sh"},
		{"password with & and ;", "REGISTRY_PASSWORD=Tr0ub4dor&3;x", "REGISTRY_PASSWORD=[REDACTED]"},
		{"json password", `{"username":"bob","password":"s3cr3t"}`, `{"username":"bob","password":"[REDACTED]"}`},
		{"client secret", "AZURE_CLIENT_SECRET: abc~def.ghi", "AZURE_CLIENT_SECRET: [REDACTED]"},
		{"sas url", `curl: (22) The requested URL returned error: 403 https://acct.blob.core.windows.net/bin/kubelet?sv=2022-11-02&se=2024-05-01T00%3A00%3A00Z&sp=r&sig=AbC%2BdEf%3D`,
			`curl: (22) The requested URL returned error: 403 https://acct.blob.core.windows.net/bin/kubelet?sv=2022-11-02&se=2024-05-01T00%3A00%3A00Z&sp=r&sig=[REDACTED]`},
		{"account key", "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=bXlrZXk=;EndpointSuffix=core.windows.net",
			"DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=[REDACTED];EndpointSuffix=core.windows.net"},
		{"url userinfo", "pulling from https://bob:hunter2@registry.example.com/v2/", "pulling from https://bob:[REDACTED]@registry.example.com/v2/"},
		{"bearer", `Authorization: Bearer eyJhbGciOiJSUzI1NiIsImtpZCI6IjEifQ.eyJzdWIiOiJ4In0.sig`, `Authorization: Bearer [REDACTED]`},
		{"kubeconfig key data", "    client-key-data: LS0tLS1CRUdJTiBSU0EgUFJJVkFURSBLRVktLS0tLQo=", "    client-key-data: [REDACTED]"},
		{"private key block", "x\n-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA\n-----END RSA PRIVATE KEY-----\ny", "x\n-----BEGIN RSA PRIVATE KEY-----[REDACTED]-----END RSA PRIVATE KEY-----\ny"},
		{"private key cut by an excerpt", "-----BEGIN EC PRIVATE KEY-----\nMHcCAQEEIB", "-----BEGIN EC PRIVATE KEY-----[REDACTED]-----END EC PRIVATE KEY-----"},
		{"bare base64 line", "MIIEowIBAAKCAQEA0planted0secret0key0material0do0not0leak0xxxxxxxxxxxxx", "[REDACTED]"},
		// What must survive: diagnosis needs it.
		{"a sha256 digest", "8c62b24d4b1f4a4c2f1b0b6e0d8b9a1e6a5b2c3d4e5f60718293a4b5c6d7e8f9", "8c62b24d4b1f4a4c2f1b0b6e0d8b9a1e6a5b2c3d4e5f60718293a4b5c6d7e8f9"},
		{"prose about tokens", "kubeadm join was refused: the bootstrap token is invalid or expired", "kubeadm join was refused: the bootstrap token is invalid or expired"},
		{"kubeadm discovery error", `could not find a JWS signature in the cluster-info ConfigMap for token ID "5xf60f"`, `could not find a JWS signature in the cluster-info ConfigMap for token ID "5xf60f"`},
		{"CA hash is public", "--discovery-token-ca-cert-hash sha256:c7154756e6dfc460f76beca9998c9ae3ce49003b129c6a75752c35571748d91e", "--discovery-token-ca-cert-hash sha256:c7154756e6dfc460f76beca9998c9ae3ce49003b129c6a75752c35571748d91e"},
		{"flag names", "KUBELET_EXTRA_ARGS=--pod-infra-container-image=mcr.microsoft.com/oss/kubernetes/pause:3.6", "KUBELET_EXTRA_ARGS=--pod-infra-container-image=mcr.microsoft.com/oss/kubernetes/pause:3.6"},
		{"certificate", "-----BEGIN CERTIFICATE-----", "-----BEGIN CERTIFICATE-----"},
		{"token file path", "tokenFile: /var/lib/kubelet/token", "tokenFile: /var/lib/kubelet/token"},
		{"versions", "containerd github.com/containerd/containerd v1.7.15 926c9586fe4a6236699318391cd44976a98e31f1", "containerd github.com/containerd/containerd v1.7.15 926c9586fe4a6236699318391cd44976a98e31f1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := String(tt.in); got != tt.want {
				t.Errorf("String(%q)\n got %q\nwant %q", tt.in, got, tt.want)
			}
			if got := String(tt.want); got != tt.want {
				t.Errorf("redacting twice changed %q to %q", tt.want, got)
			}
		})
	}
}

func TestMessageWalksEveryString(t *testing.T) {
	r := &nodediagv1.Report{
		Findings: []*nodediagv1.Finding{{
			Title:    "join failed with --token abcdef.0123456789abcdef",
			Evidence: []*nodediagv1.Quote{{Source: "/var/log/cloud-init-output.log", Excerpt: "kubeadm join --token abcdef.0123456789abcdef"}},
		}},
		Gaps: []string{"password=hunter2"},
		Evidence: &nodediagv1.Evidence{Probes: []*nodediagv1.ProbeEvidence{{
			Data: &nodediagv1.ProbeEvidence_KubeletConfig{KubeletConfig: &nodediagv1.KubeletConfig{
				Config: &nodediagv1.KubeletConfigFile{EvictionHard: map[string]string{"x": "secret=hunter2"}},
			}},
		}}},
	}
	Message(r)
	s := r.String()
	for _, secret := range []string{"0123456789abcdef", "hunter2"} {
		if strings.Contains(s, secret) {
			t.Errorf("secret %q survived Message: %s", secret, s)
		}
	}
}

func FuzzString(f *testing.F) {
	for _, s := range []string{"--token abcdef.0123456789abcdef", "password: x", "-----BEGIN PRIVATE KEY-----\nabc", "https://u:p@h/"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		once := String(s)
		if String(once) != once {
			t.Errorf("not idempotent: %q → %q → %q", s, once, String(once))
		}
	})
}

func TestKeyBlock(t *testing.T) {
	lines := []string{
		"+ cat /tmp/key.pem",
		"-----BEGIN RSA PRIVATE KEY-----",
		"MIIEowIBAAKCAQEA0planted0secret0key0material",
		"yMhD2k9ZL6Bv1vYk2c8Zs9S7Xo4nBnJ5O6w==",
		"-----END RSA PRIVATE KEY-----",
		"after the key",
		"-----BEGIN CERTIFICATE-----",
		"MIIBszCCAVmgAwIBAgIBATAKBggqhkjOPQQDAjAVMRMwEQYDVQQDEwprdWJlcm5ldGVz",
	}
	var kb KeyBlock
	var got []string
	for _, l := range lines {
		got = append(got, String(kb.Line(l)))
	}
	want := []string{
		"+ cat /tmp/key.pem",
		"-----BEGIN RSA PRIVATE KEY-----[REDACTED]-----END RSA PRIVATE KEY-----",
		"[REDACTED]",
		"[REDACTED]",
		"-----END RSA PRIVATE KEY-----",
		"after the key",
		"-----BEGIN CERTIFICATE-----",
		"[REDACTED]",
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("line %d: got %q, want %q", i, got[i], want[i])
		}
	}
}
