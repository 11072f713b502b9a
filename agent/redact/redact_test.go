package redact

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/nodediag/nodediag/agent/redact/redacttest"
	nodediagv1 "github.com/nodediag/nodediag/proto/nodediag/v1"
)

// stringCases are the table of TestString, and the seeds of FuzzString and
// of TestHintsAreSound.
var stringCases = []struct {
	name, in, want string
}{
	{"kubeadm join token keeps its public ID",
		"kubeadm join 10.0.0.4:6443 --token abcdef.0123456789abcdef --discovery-token-ca-cert-hash sha256:1a2b",
		"kubeadm join 10.0.0.4:6443 --token [REDACTED] --discovery-token-ca-cert-hash sha256:1a2b"},
	{"hosts.toml header as a TOML list", `  authorization = ["Basic dXNlcjpwYXNzd29yZA=="]`, `  authorization = ["Basic [REDACTED]"]`},
	{"hosts.toml api key header as a TOML list", `  x-api-key = ["abcd1234efgh5678"]`, `  x-api-key = [REDACTED]`},
	{"sas signature after a JSON-escaped &", `{"url":"https://acct.blob.core.windows.net/bin/kubelet?sv=2022-11-02\u0026sp=r\u0026sig=AbC%2BdEf%3D\u0026se=x"}`,
		`{"url":"https://acct.blob.core.windows.net/bin/kubelet?sv=2022-11-02\u0026sp=r\u0026sig=[REDACTED]\u0026se=x"}`},
	{"sas signature URL-encoded inside another URL", `https://proxy.example/fetch?u=https%3A%2F%2Facct.blob.core.windows.net%2Fbin%3Fsv%3D2022-11-02%26sig%3DAbC%252BdEf%26sp%3Dr`,
		`https://proxy.example/fetch?u=https%3A%2F%2Facct.blob.core.windows.net%2Fbin%3Fsv%3D2022-11-02%26sig%3D[REDACTED]%26sp%3Dr`},
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
	// Escaped quotes: klog and logrus quote a value holding JSON.
	{"escaped JSON in a klog value", `E0501 00:01:00.000000 1876 x.go:1] "Failed to post" err="400: {\"user\":\"bob\",\"password\":\"Hunter2\"}"`,
		`E0501 00:01:00.000000 1876 x.go:1] "Failed to post" err="400: {\"user\":\"bob\",\"password\":\"[REDACTED]\"}"`},
	{"escaped quoted value", `level=error msg="login failed: password=\"Hunter2\" user=bob"`, `level=error msg="login failed: password=\"[REDACTED]\" user=bob"`},
	{"escaped quoted value with blanks", `msg="token=\"abc def\" rest"`, `msg="token=\"[REDACTED]\" rest"`},
	// Quoted values run to their closing quote.
	{"double-quoted value with blanks", `password: "my secret pass"`, `password: "[REDACTED]"`},
	{"single-quoted value with blanks", `password: 'my secret pass' # comment`, `password: '[REDACTED]' # comment`},
	{"quoted value with an escaped quote", `{"password":"a \"b\" c","user":"bob"}`, `{"password":"[REDACTED]","user":"bob"}`},
	{"quote left open by an excerpt cut", `password: "my secret pa`, `password: "[REDACTED]`},
	{"quote left open, multi-line", "password: \"my secret\nnext line", "password: \"[REDACTED]\nnext line"},
	// curl user:password and Python argv lists (cloud-init.log).
	{"curl -u", "+ curl -fsSL -u admin:Hunter2Secret https://repo.example.com/kubelet", "+ curl -fsSL -u admin:[REDACTED] https://repo.example.com/kubelet"},
	{"curl --user", "curl --user admin:Hunter2Secret -o /tmp/x https://x", "curl --user admin:[REDACTED] -o /tmp/x https://x"},
	{"curl --user=", "curl --user=admin:Hunter2Secret https://x", "curl --user=admin:[REDACTED] https://x"},
	{"curl -u quoted with blanks", `curl -u "admin:Hunter 2" https://x`, `curl -u "admin:[REDACTED]" https://x`},
	{"curl -U proxy user", "curl -U proxy:Hunter2 https://x", "curl -U proxy:[REDACTED] https://x"},
	{"argv curl -u", `Running command ['curl', '-u', 'admin:Hunter2', '-o', '/tmp/x', 'https://x'] with allowed return codes [0]`,
		`Running command ['curl', '-u', 'admin:[REDACTED]', '-o', '/tmp/x', 'https://x'] with allowed return codes [0]`},
	{"argv docker login -p", `Running command ['docker', 'login', '-u', 'ci', '-p', 'Tr0ub4dor&3', 'registry.example.com']`,
		`Running command ['docker', 'login', '-u', 'ci', '-p', '[REDACTED]', 'registry.example.com']`},
	{"argv --password", `['helm', 'registry', 'login', '--password', 'Hunter2', 'reg.io']`, `['helm', 'registry', 'login', '--password', '[REDACTED]', 'reg.io']`},
	{"argv --token", `['kubeadm', 'join', '--token', 'abcdef.0123456789abcdef']`, `['kubeadm', 'join', '--token', '[REDACTED]']`},
	{"docker login -p quoted", `docker login -u ci -p "my pass" reg.io`, `docker login -u ci -p "[REDACTED]" reg.io`},
	// Registry credentials.
	{"docker config.json auth", `{"auths":{"registry.example.com":{"auth":"YWRtaW46SHVudGVyMg=="}}}`, `{"auths":{"registry.example.com":{"auth":"[REDACTED]"}}}`},
	{"docker config.json indented", `        "auth": "YWRtaW46SHVudGVyMg==",`, `        "auth": "[REDACTED]",`},
	{"containerd toml auth", `  auth = "YWRtaW46SHVudGVyMg=="`, `  auth = "[REDACTED]"`},
	{"unquoted auth", `auth: YWRtaW46SHVudGVyMlNlY3JldA==`, `auth: [REDACTED]`},
	{"identitytoken", `"identitytoken": "eyJhbGciOiJSUzI1NiJ9.Zm9v.YmFy"`, `"identitytoken": "[REDACTED]"`},
	{"containerd identitytoken", `  identitytoken = "Zm9vYmFy"`, `  identitytoken = "[REDACTED]"`},
	// PASS and PWD forms.
	{"PASS=", "PASS=Hunter2 ./seed.sh", "PASS=[REDACTED] ./seed.sh"},
	{"DB_PASS=", "export DB_PASS=Hunter2", "export DB_PASS=[REDACTED]"},
	{"FOO_PWD=", "FOO_PWD='my pwd' run", "FOO_PWD='[REDACTED]' run"},
	{"yaml _pass:", "  smtp_pass: Hunter2", "  smtp_pass: [REDACTED]"},
	{"--db-pass flag", "seed --db-pass Hunter2 --db-user bob", "seed --db-pass [REDACTED] --db-user bob"},
	// Bootstrap tokens after a non-alphanumeric character.
	{"token after _", "TOKEN_abcdef.0123456789abcdef", "TOKEN_abcdef.[REDACTED]"},
	{"tokens one _ apart", "abcdef.0123456789abcdef_ghijkl.0123456789abcdef x", "abcdef.[REDACTED]_ghijkl.[REDACTED] x"},
	{"token after uppercase", "JOINabcdef.0123456789abcdef", "JOINabcdef.[REDACTED]"},
	// URL user info with a "/" in the password.
	{"url password with /", "https://bob:pa/ss@registry.example.com/v2/", "https://bob:[REDACTED]@registry.example.com/v2/"},
	{"url without user", "redis://:Hunter2@cache:6379/0", "redis://:[REDACTED]@cache:6379/0"},
	// PGP private key blocks.
	{"pgp private key block", "-----BEGIN PGP PRIVATE KEY BLOCK-----\n\nlQOYBGYx\n=abcd\n-----END PGP PRIVATE KEY BLOCK-----",
		"-----BEGIN PGP PRIVATE KEY BLOCK-----[REDACTED]-----END PGP PRIVATE KEY BLOCK-----"},
	{"pgp private key cut", "-----BEGIN PGP PRIVATE KEY BLOCK-----\nlQOYBGYx", "-----BEGIN PGP PRIVATE KEY BLOCK-----[REDACTED]-----END PGP PRIVATE KEY BLOCK-----"},
	// Shapes issue 15 found leaking.
	{"azure --account-key", "+ az storage blob upload --account-key bXlTdG9yYWdlS2V5MTIzNDU2Nzg5MA== -c logs", "+ az storage blob upload --account-key [REDACTED] -c logs"},
	{"azure storageAccountKey", `"storageAccountKey": "bXlTdG9yYWdlS2V5"`, `"storageAccountKey": "[REDACTED]"`},
	{"AZURE_STORAGE_KEY", "AZURE_STORAGE_KEY=bXlTdG9yYWdlS2V5", "AZURE_STORAGE_KEY=[REDACTED]"},
	{"bare JWT", "projected token eyJhbGciOiJSUzI1NiIsImtpZCI6IjEifQ.eyJpc3MiOiJrdWJlcm5ldGVzIn0.c2lnbmF0dXJl rejected", "projected token [REDACTED] rejected"},
	{".dockerconfigjson", "  .dockerconfigjson: eyJhdXRocyI6eyJyZWcuaW8iOnsiYXV0aCI6IllXUnRhVzQ2U0hWdWRHVnlNZz09In19fQ==", "  .dockerconfigjson: [REDACTED]"},
	{"aws configure set", "+ aws configure set aws_secret_access_key wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "+ aws configure set aws_secret_access_key [REDACTED]"},
	{"sshpass -p", "+ sshpass -p 'Hunter2ssh' ssh capi@10.0.0.4", "+ sshpass -p '[REDACTED]' ssh capi@10.0.0.4"},
	{"XML password", "<UserPassword>Hunter2xml</UserPassword>", "<UserPassword>[REDACTED]</UserPassword>"},
	{"token as the user of a URL", "git clone https://ghp_abcdefghijklmnopqrstuvwxyz0123456789@github.com/org/repo.git", "git clone https://ghp_[REDACTED]@github.com/org/repo.git"},
	{"JSON private_key", `"private_key": "MIIEvQIBADANBgkqhkiG9w0BAQEFAASC"`, `"private_key": "[REDACTED]"`},
	{"password URL-encoded in a query", "GET https://proxy.example/r?line=registry_password%3D%22Hunter2url%22 failed", "GET https://proxy.example/r?line=registry_password%3D%22%5BREDACTED%5D%22 failed"},
	{"password in base64", "echo cmVnaXN0cnlfcGFzc3dvcmQgPSAiSHVudGVyMmJhc2U2NCI= | base64 -d", "echo [REDACTED] | base64 -d"},
	{"XML JSON-escaped", `{"msg":"\u003cpassword\u003eHunter2xml\u003c/password\u003e"}`, `{"msg":"\u003cpassword\u003e[REDACTED]\u003c/password\u003e"}`},
	{"a certificate in base64 is evidence", "certificate-authority-data: LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUM=", "certificate-authority-data: LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUM="},
	// What must survive: diagnosis needs it.
	{"go error chain", "error downloading certs: error downloading the secret: etcdserver: leader changed", "error downloading certs: error downloading the secret: etcdserver: leader changed"},
	{"go error chain, then a secret", "get token: failed: password: Hunter2", "get token: failed: password: [REDACTED]"},
	{"a password ending in a colon", "password: Hunter2:", "password: [REDACTED]"},
	{"after = a word ending in a colon is a value", "PASSWORD=Hunter2: next", "PASSWORD=[REDACTED] next"},
	{"pass in prose", "pass the flag --fail-swap-on=false to the kubelet", "pass the flag --fail-swap-on=false to the kubelet"},
	{"test output PASS:", "--- PASS: TestJoin (0.01s)", "--- PASS: TestJoin (0.01s)"},
	{"PWD is a directory", "PWD=/root OLDPWD=/home/azureuser", "PWD=/root OLDPWD=/home/azureuser"},
	{"bypass", "bypass=true", "bypass=true"},
	{"kubeadm join endpoint", "kubeadm join 10.0.0.4:6443", "kubeadm join 10.0.0.4:6443"},
	{"token ID", `token ID "5xf60f"`, `token ID "5xf60f"`},
	{"image reference with digest", "registry.k8s.io/pause:3.10@sha256:ee6521f290b2168b6e0935a181d4cff9be1ac3f505666ef0e3c98fae8199917a",
		"registry.k8s.io/pause:3.10@sha256:ee6521f290b2168b6e0935a181d4cff9be1ac3f505666ef0e3c98fae8199917a"},
	{"image reference", "mcr.microsoft.com/oss/kubernetes/pause:3.6", "mcr.microsoft.com/oss/kubernetes/pause:3.6"},
	{"url with port, path and @", "https://registry.example.com:5000/v2/library/pause@sha256:ee65", "https://registry.example.com:5000/v2/library/pause@sha256:ee65"},
	{"url without user info", "curl: (22) The requested URL returned error: 404 https://dl.k8s.io/release/v1.32.3/bin/linux/amd64/kubelet", "curl: (22) The requested URL returned error: 404 https://dl.k8s.io/release/v1.32.3/bin/linux/amd64/kubelet"},
	{"an e-mail address", "maintainer: Kubernetes Authors <dev@kubernetes.io>", "maintainer: Kubernetes Authors <dev@kubernetes.io>"},
	{"secret in prose", `secret "bootstrap-token-5xf60f" not found`, `secret "bootstrap-token-5xf60f" not found`},
	{"user without password", "curl -u admin https://x", "curl -u admin https://x"},
	{"systemctl --user", "systemctl --user start foo.service", "systemctl --user start foo.service"},
	{"mkdir -p in argv", `Running command ['mkdir', '-p', '/etc/kubernetes'] with allowed return codes [0]`, `Running command ['mkdir', '-p', '/etc/kubernetes'] with allowed return codes [0]`},
	{"auth in prose", "x509: auth: unauthorized", "x509: auth: unauthorized"},
	{"empty password is evidence", `{"password":""}`, `{"password":""}`},
	{"password-file flag", "--password-file /etc/registry/pw", "--password-file /etc/registry/pw"},
	{"discovery token ca cert hash flag", "--discovery-token-ca-cert-hash sha256:c7154756e6dfc460f76beca9998c9ae3ce49003b129c6a75752c35571748d91e", "--discovery-token-ca-cert-hash sha256:c7154756e6dfc460f76beca9998c9ae3ce49003b129c6a75752c35571748d91e"},

	{"a sha256 digest", "8c62b24d4b1f4a4c2f1b0b6e0d8b9a1e6a5b2c3d4e5f60718293a4b5c6d7e8f9", "8c62b24d4b1f4a4c2f1b0b6e0d8b9a1e6a5b2c3d4e5f60718293a4b5c6d7e8f9"},
	{"prose about tokens", "kubeadm join was refused: the bootstrap token is invalid or expired", "kubeadm join was refused: the bootstrap token is invalid or expired"},
	{"kubeadm discovery error", `could not find a JWS signature in the cluster-info ConfigMap for token ID "5xf60f"`, `could not find a JWS signature in the cluster-info ConfigMap for token ID "5xf60f"`},
	{"CA hash is public", "--discovery-token-ca-cert-hash sha256:c7154756e6dfc460f76beca9998c9ae3ce49003b129c6a75752c35571748d91e", "--discovery-token-ca-cert-hash sha256:c7154756e6dfc460f76beca9998c9ae3ce49003b129c6a75752c35571748d91e"},
	{"flag names", "KUBELET_EXTRA_ARGS=--pod-infra-container-image=mcr.microsoft.com/oss/kubernetes/pause:3.6", "KUBELET_EXTRA_ARGS=--pod-infra-container-image=mcr.microsoft.com/oss/kubernetes/pause:3.6"},
	{"certificate", "-----BEGIN CERTIFICATE-----", "-----BEGIN CERTIFICATE-----"},
	{"token file path", "tokenFile: /var/lib/kubelet/token", "tokenFile: /var/lib/kubelet/token"},
	{"versions", "containerd github.com/containerd/containerd v1.7.15 926c9586fe4a6236699318391cd44976a98e31f1", "containerd github.com/containerd/containerd v1.7.15 926c9586fe4a6236699318391cd44976a98e31f1"},
}

func TestString(t *testing.T) {
	for _, tt := range stringCases {
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

// TestHintsAreSound: a rule skipped for lack of a hint must be a rule that
// would not have matched.
func TestHintsAreSound(t *testing.T) {
	cases := stringCases
	for _, sh := range redacttest.Shapes() {
		for _, f := range redacttest.Forms {
			cases = append(cases, struct{ name, in, want string }{sh.String() + " " + f.String(), f.In(sh.Text), ""})
		}
	}
	for _, tt := range cases {
		for _, in := range []string{tt.in, strings.ToUpper(tt.in)} {
			lower := strings.ToLower(in)
			for _, r := range rules {
				if len(r.hints) == 0 {
					t.Fatalf("rule %s has no hints", r.re)
				}
				if !containsAny(lower, r.hints) && r.apply(in) != in {
					t.Errorf("%s: rule %s matches %q, which holds none of its hints %q", tt.name, r.re, in, r.hints)
				}
				if r.pre != nil && !r.pre(lower) && r.apply(in) != in {
					t.Errorf("%s: rule %s matches %q, which its pre-test refuses", tt.name, r.re, in)
				}
			}
		}
	}
}

func TestMessageWalksEveryString(t *testing.T) {
	r := &nodediagv1.Report{
		Host: &nodediagv1.HostInfo{Hostname: "node-\xff\xfe", Os: "Ubuntu caf\xe9"},
		Findings: []*nodediagv1.Finding{{
			Title:    "join failed with --token abcdef.0123456789abcdef",
			Explains: []string{"x", "curl -u admin:Hunter2curl"},
			Evidence: []*nodediagv1.Quote{
				{Source: "/var/log/cloud-init-output.log", Excerpt: "kubeadm join --token abcdef.0123456789abcdef"},
				{Source: "/var/log/cloud-init.log", Excerpt: `Running command ['docker', 'login', '-p', 'Hunter2argv']`},
				{Source: "/var/log/syslog", Excerpt: `err="{\"password\":\"Hunter2escaped\"}"`},
				{Source: "/etc/default/kubelet", Excerpt: "KUBELET_EXTRA_ARGS=\"--node-labels=caf\xe9\""},
			},
		}},
		Gaps: []string{"password=hunter2", "DB_PASS=Hunter2env", "/etc/\xff"},
		Evidence: &nodediagv1.Evidence{Probes: []*nodediagv1.ProbeEvidence{{
			Data: &nodediagv1.ProbeEvidence_KubeletConfig{KubeletConfig: &nodediagv1.KubeletConfig{
				Config: &nodediagv1.KubeletConfigFile{EvictionHard: map[string]string{
					"x":                              "secret=hunter2",
					"password=Hunter2key":            "5%",
					"nodefs.available\xff":           "10%\xfe",
					`"auth": "YWRtaW46SHVudGVyMg=="`: "1",
					"imagefs.available":              "15%",
				}},
			}},
		}}},
	}
	if _, err := proto.Marshal(r); err == nil {
		t.Fatal("the test's report is valid UTF-8: it proves nothing")
	}
	Message(r)
	s := r.String()
	for _, secret := range []string{"0123456789abcdef", "hunter2", "Hunter2curl", "Hunter2argv", "Hunter2escaped", "Hunter2env", "Hunter2key", "YWRtaW46SHVudGVyMg"} {
		if strings.Contains(s, secret) {
			t.Errorf("secret %q survived Message: %s", secret, s)
		}
	}
	if _, err := proto.Marshal(r); err != nil {
		t.Errorf("proto.Marshal after Message: %v", err)
	}
	if _, err := protojson.Marshal(r); err != nil {
		t.Errorf("protojson.Marshal after Message: %v", err)
	}
	wantMap := map[string]string{
		"x":                      "secret=[REDACTED]",
		"password=[REDACTED]":    "5%",
		"nodefs.available\uFFFD": "10%\uFFFD",
		`"auth": "[REDACTED]"`:   "1",
		"imagefs.available":      "15%",
	}
	gotMap := r.GetEvidence().GetProbes()[0].GetKubeletConfig().GetConfig().GetEvictionHard()
	if diff := cmp.Diff(wantMap, gotMap); diff != "" {
		t.Errorf("map after Message (-want +got):\n%s", diff)
	}
	if got, want := r.GetHost().GetHostname(), "node-\uFFFD"; got != want {
		t.Errorf("hostname %q, want %q (a run of invalid bytes is one U+FFFD)", got, want)
	}
	if got, want := r.GetFindings()[0].GetEvidence()[3].GetExcerpt(), "KUBELET_EXTRA_ARGS=\"--node-labels=caf\uFFFD\""; got != want {
		t.Errorf("excerpt %q, want %q", got, want)
	}
	// Message is idempotent: a second pass changes nothing.
	again := proto.Clone(r)
	Message(again)
	if diff := cmp.Diff(r, again, protocmp.Transform()); diff != "" {
		t.Errorf("a second Message changed the report (-first +second):\n%s", diff)
	}
}

// TestMessageValidUTF8 checks every kind of string Message reaches: a report
// full of invalid UTF-8 always marshals afterwards.
func TestMessageValidUTF8(t *testing.T) {
	bad := "a\xffb\xc3(\xe9\x80"
	r := &nodediagv1.Report{
		Host:     &nodediagv1.HostInfo{Hostname: bad, Os: bad, Kernel: bad, MachineId: bad},
		Gaps:     []string{bad, bad},
		Findings: []*nodediagv1.Finding{{Title: bad, Explains: []string{bad}, Evidence: []*nodediagv1.Quote{{Source: bad, Excerpt: bad}}}},
		Evidence: &nodediagv1.Evidence{Probes: []*nodediagv1.ProbeEvidence{
			{Name: bad, Data: &nodediagv1.ProbeEvidence_KubeletConfig{KubeletConfig: &nodediagv1.KubeletConfig{
				UnitFiles: []string{bad},
				Config:    &nodediagv1.KubeletConfigFile{EvictionHard: map[string]string{bad: bad, bad + "x": "ok"}},
			}}},
			{Data: &nodediagv1.ProbeEvidence_Swap{Swap: &nodediagv1.Swap{Devices: []*nodediagv1.SwapDevice{{Filename: bad}}}}},
		}},
	}
	Message(r)
	if _, err := proto.Marshal(r); err != nil {
		t.Fatalf("proto.Marshal after Message: %v", err)
	}
	if h := r.GetHost().GetHostname(); !utf8.ValidString(h) {
		t.Errorf("hostname %q is not valid UTF-8", h)
	}
	if _, err := protojson.Marshal(r); err != nil {
		t.Errorf("protojson.Marshal after Message: %v", err)
	}
	if n := len(r.GetEvidence().GetProbes()[0].GetKubeletConfig().GetConfig().GetEvictionHard()); n != 2 {
		t.Errorf("the map has %d entries after Message, want 2", n)
	}
}

func FuzzString(f *testing.F) {
	for _, s := range []string{"--token abcdef.0123456789abcdef", "password: x", "-----BEGIN PRIVATE KEY-----\nabc", "https://u:p@h/"} {
		f.Add(s)
	}
	for _, tt := range stringCases {
		f.Add(tt.in)
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
		"-----END CERTIFICATE-----",
		"+ gpg --armor --export-secret-keys ops@example.com",
		"-----BEGIN PGP PRIVATE KEY BLOCK-----",
		"",
		"lQOYBGYxAAABCADplanted0pgp0secret",
		"Zm9v",
		"=Ab3d",
		"-----END PGP PRIVATE KEY BLOCK-----",
		"gpg: done",
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
		"-----END CERTIFICATE-----",
		"+ gpg --armor --export-secret-keys ops@example.com",
		"-----BEGIN PGP PRIVATE KEY BLOCK-----[REDACTED]-----END PGP PRIVATE KEY BLOCK-----",
		"[REDACTED]",
		"[REDACTED]",
		"[REDACTED]", // the short last line of the body: inside the block
		"[REDACTED]",
		"-----END PGP PRIVATE KEY BLOCK-----",
		"gpg: done",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("KeyBlock + String (-want +got):\n%s", diff)
	}
}
