// Package redact removes secrets from text before it leaves the host: private
// keys (PEM and PGP), Kubernetes bootstrap tokens, kubeadm certificate keys,
// passwords and credentials in key=value, key: value, JSON (escaped or not),
// --flag value and argv-list forms, curl -u user:password, registry auth
// values, URL user info, bearer/basic authorization values, and Azure SAS
// signatures and account keys.
//
// It is the single choke point every report passes through (Message), so a
// probe that quotes a line carrying a secret cannot leak it. Message also
// makes every string valid UTF-8, so that bytes from the node can never make
// the report unencodable. Redaction keeps what helps diagnosis: the name of
// the field, a token's public ID, a curl user, the shape of a URL.
package redact

import (
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// Mark replaces a secret value.
const Mark = "[REDACTED]"

// A rule finds secrets with re. Either repl is the replacement of the whole
// match (regexp expansion syntax), or, when repl is empty, every group named
// "s" that took part in a match is the secret: its text is replaced by Mark,
// keeping the quotes around it (see mask), and the rest of the match is kept
// as it is.
type rule struct {
	re   *regexp.Regexp
	repl string
	// hints: the rule only runs on text containing one of these (lower
	// case). Every report string passes here, so most must be cheap no-ops.
	hints []string
	// pre, when set, is a cheaper test than the pattern that every text
	// the pattern matches passes (given the text in lower case): for a
	// rule whose hints are in most lines.
	pre func(lower string) bool
	// repeat: the pattern consumes a delimiter on each side of the secret,
	// so two secrets one character apart need a second pass.
	repeat bool
	// chain: a bare value after ":" that ends in ":" and is followed by a
	// blank is the next link of a Go error chain ("error downloading the secret:
	// etcdserver: leader changed"), kept as it is: it is what diagnosis
	// needs, and no credential format is a word ending in a colon.
	chain bool
	// prose: the key may stand in a sentence or an error chain ("failed
	// to get token: unauthorized", "Using --password via the CLI"), so a
	// value that is plainly no credential (proseValue) is kept.
	prose  bool
	secret []int // indexes of the groups named "s"
}

// credentialWords are the words that name a credential in key=value and
// --flag value forms (lower case; also the hints of those rules).
var credentialWords = []string{"password", "passwd", "passphrase", "secret", "token", "credential", "dockercfg", "dockerconfigjson",
	"licensekey", "license-key", "license_key", "routingkey", "routing-key", "routing_key", "authkey", "auth-key", "auth_key",
	"apikey", "api-key", "api_key", "accesskey", "access-key", "access_key", "accountkey", "account-key", "account_key", "storagekey", "storage-key", "storage_key"}

// value is a credential value after its key and separator: a TOML or JSON
// list (hosts.toml's header values: x-api-key = ["..."]), whole; a double-quoted
// string escaped inside a klog/logrus value (\"…\"), a double- or
// single-quoted string (to its closing quote, blanks included; a quote left
// open runs to the end of the line, as when an excerpt cut it), or a bare
// word (a backslash not before a quote is part of it).
const value = `(?P<s>\[[^\]\n]*(?:\]|(?m:$))` +
	`|\\"(?:[^"\\\n]|\\[^"\n])+(?:\\"|(?m:$))` +
	`|"(?:[^"\\\n]|\\.)+(?:"|(?m:$))` +
	`|'[^'\n]+(?:'|(?m:$))` +
	`|(?:[^\s"'{}\\]|\\[^"'\nntr])(?:[^\s"'}\\]|\\[^"'\nntr])*)`

// flagValue is the value of a --flag or -p: quoted (to its closing quote) or
// a bare word that does not start with a dash (the next flag).
const flagValue = `(?P<s>"[^"\n]+"|'[^'\n]+'|[^\s"'-][^\s"']*)`

// flagSep separates a flag from its value: blanks, "=", or the "', '" of a
// Python argv list as cloud-init logs it (['curl', '-u', 'user:pw']).
const flagSep = `(?:[ \t]+|=|["'],[ \t]*)`

// keySep separates a key from its value: the key's closing quote (escaped
// inside a klog value: \"password\":\"x\"), then ":" or "=".
const keySep = `\\?["']?[ \t]*[:=][ \t]*`

var rules = []rule{
	// PEM private key blocks and PGP private key blocks, whole or cut off by
	// an excerpt boundary.
	{re: regexp.MustCompile(`(?s)-----BEGIN ([A-Z0-9 ]*)PRIVATE KEY( BLOCK)?-----.*?(?:-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|$)`),
		repl: "-----BEGIN ${1}PRIVATE KEY${2}-----" + Mark + "-----END ${1}PRIVATE KEY${2}-----", hints: []string{"private key"}},
	// Base64 key material in kubeconfigs and similar YAML.
	{re: regexp.MustCompile(`(?i)(?:client-key-data|private[-_]?key|key-data)\\?["']?\s*[:=]\s*\\?["']?(?P<s>[A-Za-z0-9+/=_-]{8,})`),
		hints: []string{"key-data", "private-key", "privatekey", "private_key"}},
	// Kubernetes bootstrap tokens: [a-z0-9]{6}.[a-z0-9]{16}. The ID before
	// the dot is public (it names the token in kubeadm token list). Not \b:
	// "_" is a word character, and TOKEN_abcdef.0123456789abcdef is a token.
	{re: regexp.MustCompile(`(?:^|[^a-z0-9])[a-z0-9]{6}\.(?P<s>[a-z0-9]{16})(?:[^a-z0-9]|$)`),
		hints: []string{"."}, pre: tokenShape, repeat: true},
	// kubeadm --certificate-key / certificateKey: decrypts the uploaded
	// control-plane certificates.
	{re: regexp.MustCompile(`(?i)certificate[-_]?key\\?["']?\s*[:= ]\s*\\?["']?(?P<s>[0-9a-f]{32,})`),
		hints: []string{"certificate"}},
	// Authorization headers.
	{re: regexp.MustCompile(`(?i)\bauthorization\\?["']?\s*[:=]\s*\[?\s*\\?["']?(?:bearer|basic)\s+(?P<s>[A-Za-z0-9._~+/=-]+)`),
		hints: []string{"authorization"}},
	{re: regexp.MustCompile(`(?i)\bbearer\s+(?P<s>[A-Za-z0-9._~+/=-]{16,})`), hints: []string{"bearer"}},
	// Azure SAS signature and storage account keys.
	// The separator may be JSON-escaped (\u0026) or URL-encoded (%26, and
	// "=" as %3D) when the URL sits inside a JSON string or another URL; the
	// value ends at the next separator, %26 included.
	{re: regexp.MustCompile(`(?i)(?:[?&]|\\u0026|%26|%3F)(?:sig|signature)(?:=|%3D)(?P<s>(?:[^&\s"'\\%]|%(?:[013-9A-Fa-f][0-9A-Fa-f]|2[0-57-9A-Fa-f]))+)`), hints: []string{"sig=", "signature=", "sig%3d", "signature%3d"}},
	{re: regexp.MustCompile(`(?i)AccountKey=(?P<s>[^;\s"']+)`), hints: []string{"accountkey="}},
	// user:password@ in URLs. The password may hold a "/" (the URL is then
	// malformed, the secret no less real) unless what precedes the first
	// "/" is all digits: host:port/path@digest is no user info.
	{re: regexp.MustCompile(`[a-zA-Z][a-zA-Z0-9+.-]*://[^/\s:@]*:(?P<s>[^@\s/]*[^@\s/0-9][^@\s/]*/[^@\s]*|[^@\s/]+)@`),
		hints: []string{"@"}},
	// key=value, key: value, "key": "value" credentials, on one line.
	{re: regexp.MustCompile(`(?i)\b[a-z0-9_.-]*(?:password|passwd|passphrase|secret|token|api[-_]?key|access[-_]?key|account[-_]?key|storage[-_]?key|license[-_]?key|routing[-_]?key|auth[-_]?key|credentials?|dockerconfigjson|dockercfg)(?:[-_]?(?:key(?:[-_]?base)?|value|data))?` + keySep + value),
		hints: credentialWords, chain: true, prose: true},
	// PASS=, DB_PASS=, FOO_PWD= (environment and shell). The bare word pass
	// needs "=" (prose and test output say "pass:" and "PASS:"), and a bare
	// PWD= is the shell's working directory, not a secret.
	{re: regexp.MustCompile(`(?i)(?:\bpass\\?["']?[ \t]*=|\b[a-z0-9_.-]*[_.-](?:pass|pwd)` + keySep + `)[ \t]*` + value),
		hints: []string{"pass", "pwd"}, chain: true, prose: true},
	// Registry credentials: docker config.json "auth": "<base64 of
	// user:password>", containerd's auth = "...". (identitytoken is a token
	// word of the rule above.)
	{re: regexp.MustCompile(`(?i)(?:^|[^a-z0-9_.-])auth` + keySep + `(?P<s>\\"[A-Za-z0-9+/=]+(?:\\"|(?m:$))|"[A-Za-z0-9+/=]+(?:"|(?m:$))|'[A-Za-z0-9+/=]+(?:'|(?m:$))|[A-Za-z0-9+/]{16,}={0,2})`),
		hints: []string{"auth"}},
	// curl -u/--user user:password (and -U/--proxy-user), shell or argv
	// list, quoted or not: the user stays, the password goes.
	{re: regexp.MustCompile(`(?:^|[\s'"\[,])(?:-[uU]|--(?:proxy-)?user)` + flagSep + `?` +
		`(?:"[^\s:"]+:(?P<s>[^"\n]+)"|'[^\s:']+:(?P<s>[^'\n]+)'|[^\s:"']+:(?P<s>[^\s"']+))`),
		hints: []string{"-u", "--user", "--proxy-user"}},
	// Registry logins with a short -p flag (docker, podman, nerdctl, helm,
	// skopeo, oras login ... -p SECRET), shell or argv list.
	{re: regexp.MustCompile(`(?i)\b(?:login|sshpass)\b[^\n]*?[\s'"]-p` + flagSep + flagValue), hints: []string{"login", "sshpass"}},
	// --flag value credentials (--token, --password, --client-secret,
	// --db-pass), shell or argv list. --flag=value is a key=value.
	{re: regexp.MustCompile(`(?i)--(?:[a-z0-9-]*(?:password|passwd|passphrase|secret|token|api-key|access-key|account-key|storage-key|creds|auth-?key)|auth|(?:[a-z0-9-]*-)?pass|[a-z0-9-]*-pwd)(?:[ \t]+|["'],[ \t]*)` + flagValue),
		hints: append([]string{"pass", "pwd", "creds", "--auth"}, credentialWords...), prose: true},
	// A credential set by a command or a config line with a blank between
	// key and value: aws configure set aws_secret_access_key VALUE, redis'
	// requirepass VALUE, an echo piped into a --password-stdin login,
	// htpasswd -b FILE USER VALUE.
	{re: regexp.MustCompile(`(?i)\b(?:configure\s+set\s+[a-z0-9_.]*(?:secret|password|token|key)[a-z0-9_.]*|requirepass|masterauth)[ \t]+` + flagValue),
		hints: []string{"configure", "requirepass", "masterauth"}},
	{re: regexp.MustCompile(`(?i)\becho\s+(?:-n\s+)?(?P<s>"[^"\n]+"|'[^'\n]+'|[^\s"'|]+)\s*\|[^|\n]*--password-stdin`), hints: []string{"password-stdin"}},
	// (-n writes to stdout: no file argument before the user.)
	{re: regexp.MustCompile(`\bhtpasswd\s+-[A-Za-mo-z]*b[A-Za-mo-z]*\s+\S+\s+\S+\s+` + flagValue), hints: []string{"htpasswd"}},
	{re: regexp.MustCompile(`\bhtpasswd\s+-(?:[A-Za-z]*b[A-Za-z]*n|[A-Za-z]*n[A-Za-z]*b)[A-Za-z]*\s+\S+\s+` + flagValue), hints: []string{"htpasswd"}},
	// XML elements that hold a credential: <password>, <UserPassword>
	// (Azure's ovf-env.xml), <AdminPassword>, <ClientSecret>.
	{re: regexp.MustCompile(`(?i)<(?:[a-z0-9_:-]*(?:password|passwd|secret|token|accountkey|accesskey|apikey|privatekey))>(?P<s>[^<\n]+)</`),
		hints: []string{"password>", "passwd>", "secret>", "token>", "key>"}},
	// JSON Web Tokens (ServiceAccount tokens, OIDC id and access tokens),
	// wherever they stand: the header and the payload both start with eyJ
	// ('{"' in base64).
	{re: regexp.MustCompile(`(?:^|[^A-Za-z0-9_-])(?P<s>eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*)`), hints: []string{"eyj"}},
	// Tokens recognisable by their prefix (GitHub, GitLab, Slack, Vault,
	// Google OAuth and API keys); the prefix stays, it says which token.
	{re: regexp.MustCompile(`(?:^|[^A-Za-z0-9_])(?:gh[pousr]_|github_pat_|glpat-|xox[abposr]-|hvs\.|ya29\.|AIza)(?P<s>[A-Za-z0-9_-]{16,})`),
		hints: []string{"ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", "glpat-", "xox", "hvs.", "ya29.", "aiza"}},
	// Azure AD client secrets: three characters, a digit, "Q~", then 31
	// to 34 more (the format of secrets made since 2021).
	{re: regexp.MustCompile(`(?:^|[^A-Za-z0-9_~.-])(?P<s>[A-Za-z0-9_~.-]{3}[0-9]Q~[A-Za-z0-9_~.-]{31,34})`), hints: []string{"q~"}},
	// _PAT=: a personal access token in the environment (AZURE_DEVOPS_EXT_PAT).
	{re: regexp.MustCompile(`(?i)\b[a-z0-9_]*_pat` + keySep + value), hints: []string{"_pat"}},
	// An ARM or Bicep parameter whose name is a credential: "adminPassword":
	// {"value": "..."}; and the "value" of an Azure storage key listing or
	// a Key Vault secret, which other keys of the object name.
	{re: regexp.MustCompile(`(?i)(?:password|secret|token|key)[a-z0-9_]*\\?"\s*:\s*\{\s*\\?"value\\?"\s*:\s*(?P<s>\\?"(?:[^"\\\n]|\\[^"\n])+\\?")`),
		hints: []string{`value"`, `value\"`}},
	{re: regexp.MustCompile(`(?i)(?:"keyname"|\.vault\.azure\.net/secrets/)[^\n]*?"value"\s*:\s*(?P<s>"(?:[^"\\\n]|\\.)+")`), hints: []string{"keyname", "vault.azure.net/secrets/"}},
	// Multi-line: a Kubernetes env entry whose name is a credential, its
	// value on the next line; kubeadm's certificate key on the line after
	// "Using certificate key:"; the values of a chpasswd list; a <Value>
	// inside an XML password element.
	{re: regexp.MustCompile(`(?i)name:[ \t]*["']?[a-z0-9_]*(?:secret|password|passwd|token|_key|_pass|_pwd|credentials?)["']?[ \t]*\n[ \t]*value:[ \t]*` + value),
		hints: []string{"value:"}},
	{re: regexp.MustCompile(`(?i)certificate key:\s*(?P<s>[0-9a-f]{32,})`), hints: []string{"certificate key:"}},
	{re: regexp.MustCompile(`(?i)password>\s*<value>(?P<s>[^<\n]+)</value>`), hints: []string{"<value>"}},
	{re: regexp.MustCompile(`(?m)^[ \t]+[a-z_][a-z0-9_.-]*:(?P<s>[^\s:]+)[ \t]*$`), hints: []string{"chpasswd"}, pre: func(l string) bool { return strings.Contains(l, "list:") || strings.Contains(l, "users:") }},
	// The base64 lines of a private key cut before its BEGIN line.
	{re: regexp.MustCompile(`(?m)(?:^|[=:\s])(?P<s>[ \t]*[A-Za-z0-9+/]{16,}={0,2}[ \t]*\n(?:[ \t]*[A-Za-z0-9+/=]{16,}[ \t]*\n)*)-----END [A-Z0-9 ]*PRIVATE KEY`), hints: []string{"private key"}},
	// Commands whose argument is a password: mysql -pPASSWORD (glued),
	// ssh-keygen -N, ldapsearch/ldapmodify -w, ipmitool -P, rabbitmqctl
	// add_user USER PW, useradd/usermod -p HASH, net user NAME PW,
	// ConvertTo-SecureString 'PW', an echo piped into sudo -S or chpasswd.
	{re: regexp.MustCompile(`\bmysql(?:dump|admin)?\b[^\n|;]*?\s-p(?P<s>[^\s'"-][^\s'"]*|'[^'\n]+'|"[^"\n]+")`), hints: []string{"mysql"}},
	{re: regexp.MustCompile(`\bssh-keygen\b[^\n|;]*?\s-N` + flagSep + flagValue), hints: []string{"ssh-keygen"}},
	{re: regexp.MustCompile(`\bldap[a-z]*\b[^\n|;]*?\s-w` + flagSep + flagValue), hints: []string{"ldap"}},
	{re: regexp.MustCompile(`\bipmitool\b[^\n|;]*?\s-P` + flagSep + flagValue), hints: []string{"ipmitool"}},
	{re: regexp.MustCompile(`\brabbitmqctl\s+(?:add_user|change_password)\s+\S+\s+` + flagValue), hints: []string{"rabbitmqctl"}},
	{re: regexp.MustCompile(`\buser(?:add|mod)\b[^\n|;]*?\s-p` + flagSep + flagValue), hints: []string{"useradd", "usermod"}},
	{re: regexp.MustCompile(`(?i)\bnet\s+user\s+\S+\s+(?P<s>[^\s/][^\s]*)`), hints: []string{"net user"}},
	{re: regexp.MustCompile(`(?i)ConvertTo-SecureString\s+(?:-String\s+)?` + flagValue), hints: []string{"convertto-securestring"}},
	{re: regexp.MustCompile(`\becho\s+(?:-[ne]+\s+)?(?P<s>"[^"\n]+"|'[^'\n]+'|[^\s"'|]+)\s*\|\s*(?:sudo\s+-S|chpasswd|passwd\s+--stdin)`), hints: []string{"sudo", "chpasswd", "passwd"}},
	// Password hashes (crypt: $1$, $5$, $6$, $y$, bcrypt $2y$): a hash of a
	// password is as good as one for an offline guess.
	{re: regexp.MustCompile(`(?P<s>\$(?:2[aby]?\$[0-9]{2}\$[./A-Za-z0-9]{53}|[156y]\$[^$\s'"]*\$[./A-Za-z0-9]{20,}))`), hints: []string{"$2", "$1$", "$5$", "$6$", "$y$"}},
	// A Go MySQL DSN: user:password@tcp(host:port)/db.
	{re: regexp.MustCompile(`[A-Za-z0-9_.-]+:(?P<s>[^@\s/"']+)@(?:tcp|unix)\(`), hints: []string{"@tcp(", "@unix("}},
	// Webhook URLs whose path is the credential (Slack, Discord, Teams),
	// a Telegram bot token, the X-Amz-Security-Token header.
	{re: regexp.MustCompile(`hooks\.slack\.com/services/[A-Z0-9]+/[A-Z0-9]+/(?P<s>[A-Za-z0-9]+)`), hints: []string{"hooks.slack.com"}},
	{re: regexp.MustCompile(`discord(?:app)?\.com/api/webhooks/[0-9]+/(?P<s>[A-Za-z0-9_-]+)`), hints: []string{"/api/webhooks/"}},
	{re: regexp.MustCompile(`(?i)webhook\.office\.com/webhookb2/\S*?/IncomingWebhook/(?P<s>[0-9a-f]+)/[0-9a-f-]+/(?P<s>[A-Za-z0-9_-]+)`), hints: []string{"incomingwebhook"}},
	{re: regexp.MustCompile(`\bbot[0-9]{6,}:(?P<s>[A-Za-z0-9_-]{30,})`), hints: []string{"bot"}},
	{re: regexp.MustCompile(`(?i)x-amz-security-token['"]?\s*[:=]\s*b?['"]?(?P<s>[A-Za-z0-9+/=]{16,})`), hints: []string{"x-amz-security-token"}},
	// A token as the whole user info of a URL (https://TOKEN@github.com/).
	{re: regexp.MustCompile(`[a-zA-Z][a-zA-Z0-9+.-]*://(?P<s>[A-Za-z0-9_-]{20,})@`), hints: []string{"@"}},
}

func init() {
	for i := range rules {
		for g, name := range rules[i].re.SubexpNames() {
			if name == "s" {
				rules[i].secret = append(rules[i].secret, g)
			}
		}
		if (rules[i].repl == "") == (len(rules[i].secret) == 0) {
			panic("redact: rule " + rules[i].re.String() + " needs exactly one of a replacement or secret groups")
		}
	}
}

// apply runs the rule once over s.
func (r *rule) apply(s string) string {
	if r.repl != "" {
		return r.re.ReplaceAllString(s, r.repl)
	}
	ms := r.re.FindAllStringSubmatchIndex(s, -1)
	if ms == nil {
		return s
	}
	var b strings.Builder
	last := 0
	for _, m := range ms {
		for _, g := range r.secret {
			start, end := m[2*g], m[2*g+1]
			if start < 0 || start < last {
				continue
			}
			if r.chain && chainLink(s, start, end) {
				continue
			}
			if r.prose && proseValue(s[start:end]) {
				continue
			}
			if strings.Trim(s[start:end], `\`) == "" {
				// Only the escapes of a quote deeper in (a JSON string
				// holding \"x\"): the value is past them, for the
				// decoding of nested to find.
				continue
			}
			b.WriteString(s[last:start])
			b.WriteString(mask(s[start:end]))
			last = end
		}
	}
	b.WriteString(s[last:])
	return b.String()
}

// notCredentials are words that follow a credential's key in prose and
// errors, never as its value.
var notCredentials = map[string]bool{
	"true": true, "false": true, "null": true, "nil": true, "none": true, "yes": true, "no": true,
	"via": true, "is": true, "was": true, "the": true, "a": true, "an": true, "and": true, "or": true, "to": true, "for": true, "from": true, "of": true, "in": true, "on": true, "with": true,
	"unauthorized": true, "forbidden": true, "expired": true, "invalid": true, "denied": true, "required": true, "missing": true,
	"empty": true, "unknown": true, "not": true, "unexpected": true, "failed": true, "error": true, "refused": true, "rejected": true,
	"secret": true, "secrets": true, "token": true, "tokens": true, "password": true, "passwords": true, "credentials": true,
	// The next link of a Go network error after a quoted URL that ends in
	// a key's name (Post ".../serviceaccounts/calico-node/token": dial tcp
	// 10.96.0.1:443: i/o timeout).
	"dial": true, "lookup": true, "read": true, "write": true,
}

// kubeRef is a namespaced object name (kube-system/bootstrap-token-abcdef):
// a Secret's name, not its content.
var kubeRef = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?/[a-z0-9]([-.a-z0-9]*[a-z0-9])?$`)

// filePath is an absolute path (a credentials file, not a credential).
var filePath = regexp.MustCompile(`^/[A-Za-z0-9._-]+(?:/[A-Za-z0-9._-]+)+$`)

// proseValue says whether the value v (quotes included) is plainly not a
// credential: a word of prose or of an error, a boolean, one character, an
// HTTP status,
// a namespaced object name, a file path, a JSONPath or template.
func proseValue(v string) bool {
	w := strings.Trim(v, `"'\`)
	switch {
	case notCredentials[strings.ToLower(strings.TrimRight(w, ".,;"))]:
		return true
	case len(w) <= 1: // b'...' of a Python bytes value, a stray letter
		return true
	case len(w) == 3 && strings.Trim(w, "0123456789") == "":
		return true
	case kubeRef.MatchString(w), filePath.MatchString(w):
		return true
	case strings.HasPrefix(w, "{") && strings.HasSuffix(w, "}"):
		return true
	}
	return false
}

// chainLink reports whether the bare value s[start:end], after a ":", is the
// next link of a Go error chain: a word ending in ":" and followed by a blank.
// After "=" it is a value like any other (PASSWORD=abc: is a password).
func chainLink(s string, start, end int) bool {
	if s[end-1] != ':' || end == len(s) || (s[end] != ' ' && s[end] != '\t') {
		return false
	}
	return strings.HasSuffix(strings.TrimRight(s[:start], " \t"), ":")
}

// mask returns Mark for a secret value, inside the quotes that enclosed it:
// \"x\" → \"[REDACTED]\", "x" → "[REDACTED]", and a quote left open stays
// open.
func mask(v string) string {
	for _, q := range []string{`\"`, `"`, `'`} {
		if strings.HasPrefix(v, q) {
			if len(v) >= 2*len(q) && strings.HasSuffix(v, q) {
				return q + Mark + q
			}
			return q + Mark
		}
	}
	return Mark
}

// KeyBlock follows, across the lines of a text, the secrets that span
// lines, for code that handles a file line by line (String sees one line at
// a time and cannot know that a base64 line sits inside a key): private key
// blocks (PEM and PGP: every line inside, the short last line of the body
// and the PGP armor headers and checksum included), kubeadm's certificate
// key on the line after "Using certificate key:", the value: line after a
// Kubernetes env name that is a credential, the user:password lines of a
// cloud-init chpasswd list, and the <Value> inside an XML password element.
type KeyBlock struct {
	inside bool
	// next: the next line holds a secret of this kind.
	next nextSecret
	// listIndent: inside a chpasswd list, the indentation of its "list:"
	// (-1 when not in one); chpasswd: a "chpasswd:" key was seen.
	chpasswd   bool
	listIndent int
	inList     bool
}

type nextSecret int

const (
	nextNone nextSecret = iota
	nextCertificateKey
	nextEnvValue
	nextXMLValue
)

var (
	keyMaterial = regexp.MustCompile(`^\s*[A-Za-z0-9+/]{64,}={0,2}\s*$`)
	hexOnly     = regexp.MustCompile(`^\s*[0-9a-fA-F]+\s*$`)
	beginKey    = regexp.MustCompile(`-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----`)
	endKey      = regexp.MustCompile(`-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----`)
	certKeyLine = regexp.MustCompile(`(?i)certificate key:\s*$`)
	envCredName = regexp.MustCompile(`(?i)(?:^|\s)(?:-\s+)?name:\s*["']?[a-z0-9_]*(?:secret|password|passwd|token|_key|_pass|_pwd|credentials?)["']?\s*$`)
	envValue    = regexp.MustCompile(`^(\s*value:\s*)\S.*$`)
	xmlPassword = regexp.MustCompile(`(?i)<[a-z0-9_:-]*password>\s*$`)
	xmlValue    = regexp.MustCompile(`(?i)^(\s*<value>)[^<]+(</value>.*)$`)
	chpasswdKey = regexp.MustCompile(`(?:^|\s)chpasswd:\s*$`)
	listKey     = regexp.MustCompile(`^(\s*)list:\s*\|`)
	userPass    = regexp.MustCompile(`^(\s*[a-z_][a-z0-9_.-]*:)\S+\s*$`)
)

// Line returns line, or line with its secret replaced by Mark (the whole
// line when it lies inside a private key block). The BEGIN and END lines
// are left to String.
func (k *KeyBlock) Line(line string) string {
	if k.inside {
		if endKey.MatchString(line) {
			k.inside = false
			return line
		}
		return Mark
	}
	if out, ok := k.multiLine(line); ok {
		return out
	}
	if !strings.Contains(line, "-----BEGIN ") {
		return line // the regexp's literal prefix, checked without it
	}
	if loc := beginKey.FindStringIndex(line); loc != nil && !endKey.MatchString(line[loc[1]:]) {
		k.inside = true
	}
	return line
}

// multiLine handles the secrets other than key blocks; ok says that line
// was rewritten.
func (k *KeyBlock) multiLine(line string) (string, bool) {
	next := k.next
	k.next = nextNone
	switch next {
	case nextCertificateKey:
		if hexOnly.MatchString(line) && len(strings.TrimSpace(line)) >= 32 {
			return Mark, true
		}
	case nextEnvValue:
		if m := envValue.FindStringSubmatch(line); m != nil {
			return m[1] + Mark, true
		}
	case nextXMLValue:
		if m := xmlValue.FindStringSubmatch(line); m != nil {
			return m[1] + Mark + m[2], true
		}
	}
	if k.inList {
		indent := len(line) - len(strings.TrimLeft(line, " \t"))
		if strings.TrimSpace(line) != "" && indent <= k.listIndent {
			k.inList, k.chpasswd = false, false
		} else if m := userPass.FindStringSubmatch(line); m != nil {
			return m[1] + Mark, true
		}
	}
	switch {
	case certKeyLine.MatchString(line):
		k.next = nextCertificateKey
	case envCredName.MatchString(line):
		k.next = nextEnvValue
	case xmlPassword.MatchString(line):
		k.next = nextXMLValue
	case chpasswdKey.MatchString(line):
		k.chpasswd = true
	case k.chpasswd:
		if m := listKey.FindStringSubmatch(line); m != nil {
			k.inList, k.listIndent = true, len(m[1])
		}
	}
	return line, false
}

// maxRounds bounds the passes of String: a replacement can, in principle,
// make text another rule matches; String repeats until nothing changes so
// that redacting twice is redacting once.
const maxRounds = 4

// String returns s with every secret replaced by Mark. It is idempotent.
func String(s string) string { return redact(s, 0) }

// redact is String of a text found depth encodings deep (see nested).
func redact(s string, depth int) string {
	if s == "" {
		return s
	}
	if keyMaterial.MatchString(s) && !hexOnly.MatchString(s) {
		// A bare line of base64 is the body of a key or certificate seen
		// out of its block (a log read from its middle): never evidence.
		return Mark
	}
	for range maxRounds {
		r := nested(round(s), depth)
		if r == s {
			break
		}
		s = r
	}
	return s
}

// round runs every rule once.
func round(s string) string {
	lower := strings.ToLower(s)
	for i := range rules {
		r := &rules[i]
		if !containsAny(lower, r.hints) || (r.pre != nil && !r.pre(lower)) {
			continue
		}
		t := r.apply(s)
		for r.repeat && t != s {
			// The pattern consumes the delimiters: a second secret one
			// character after the first was not seen yet.
			u := r.apply(t)
			if u == t {
				break
			}
			t = u
		}
		if t != s {
			s = t
			lower = strings.ToLower(s)
		}
	}
	return s
}

// Message makes valid UTF-8 of, then redacts, in place, every string of m
// and of the messages it holds: fields, list elements, map values and map
// keys. protojson and proto.Marshal refuse invalid UTF-8, and a node's files
// hold whatever bytes they hold: invalid sequences become U+FFFD.
func Message(m proto.Message) {
	Strings(m, clean)
}

// Strings replaces every string of m, and every string map key, by f of it,
// in place: Message redacts through it, and untrusted reports are clipped
// through it before they reach a terminal or a page.
func Strings(m proto.Message, f func(string) string) {
	if m == nil {
		return
	}
	walk(m.ProtoReflect(), f)
}

// MaxUntrusted is the longest string of a message from another machine
// that reaches a terminal, a page or the collector's store (see Received).
// It is above every bound the agent puts on its own strings (a kept log
// line is clipped at 4 KiB), so an honest agent's report is never clipped.
const MaxUntrusted = 16 << 10

// Received makes a message that came from another machine (an agent's
// upload, a report or bundle read from a file) safe to keep and show: every
// string valid UTF-8, redacted, then clipped to maxString bytes on a rune
// boundary with a note of how much was cut (0: no clipping). A string far
// over maxString is cut before it is redacted, to a size that bounds the
// work, and again after. It reports whether anything changed: an honest
// agent's report, redacted already, comes out the same.
func Received(m proto.Message, maxString int) (changed bool) {
	Strings(m, func(s string) string {
		c := s
		if maxString > 0 && len(c) > 4*maxString {
			c = clip(c, 4*maxString, len(s))
		}
		c = clean(c)
		if maxString > 0 && len(c) > maxString {
			c = clip(c, maxString, len(s))
		}
		if c != s {
			changed = true
		}
		return c
	})
	return changed
}

// clip cuts s at n bytes, on a rune boundary, noting how many bytes of the
// original, total bytes long, were cut.
func clip(s string, n, total int) string {
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + fmt.Sprintf("…[%d bytes clipped]", total-n)
}

// clean is what Message does to one string.
func clean(s string) string {
	return String(strings.ToValidUTF8(s, "\uFFFD"))
}

func walk(m protoreflect.Message, clean func(string) string) {
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.IsList():
			l := v.List()
			for i := 0; i < l.Len(); i++ {
				switch fd.Kind() {
				case protoreflect.StringKind:
					if s := l.Get(i).String(); s != "" {
						if c := clean(s); c != s {
							l.Set(i, protoreflect.ValueOfString(c))
						}
					}
				case protoreflect.MessageKind, protoreflect.GroupKind:
					walk(l.Get(i).Message(), clean)
				}
			}
		case fd.IsMap():
			walkMap(fd, v.Map(), clean)
		case fd.Kind() == protoreflect.StringKind:
			if s := v.String(); s != "" {
				if c := clean(s); c != s {
					m.Set(fd, protoreflect.ValueOfString(c))
				}
			}
		case fd.Kind() == protoreflect.MessageKind || fd.Kind() == protoreflect.GroupKind:
			walk(v.Message(), clean)
		}
		return true
	})
}

// walkMap cleans a map's values and string keys. The changes are applied
// after the walk (a map must not change while it is ranged over); a key that
// changes is moved. Two keys that clean to the same text keep the value of
// the later in range order.
func walkMap(fd protoreflect.FieldDescriptor, mp protoreflect.Map, clean func(string) string) {
	type entry struct {
		old, key protoreflect.MapKey
		moved    bool
		val      protoreflect.Value
	}
	var changed []entry
	stringKeys := fd.MapKey().Kind() == protoreflect.StringKind
	mp.Range(func(k protoreflect.MapKey, mv protoreflect.Value) bool {
		e := entry{old: k, key: k, val: mv}
		switch fd.MapValue().Kind() {
		case protoreflect.StringKind:
			if s := mv.String(); s != "" {
				if c := clean(s); c != s {
					e.val = protoreflect.ValueOfString(c)
				}
			}
		case protoreflect.MessageKind, protoreflect.GroupKind:
			walk(mv.Message(), clean) // in place: the entry itself does not change
		}
		if stringKeys {
			if s := k.String(); s != "" {
				if c := clean(s); c != s {
					e.key, e.moved = protoreflect.ValueOfString(c).MapKey(), true
				}
			}
		}
		if e.moved || !e.val.Equal(mv) {
			changed = append(changed, e)
		}
		return true
	})
	for _, e := range changed {
		if e.moved {
			mp.Clear(e.old)
		}
	}
	for _, e := range changed {
		mp.Set(e.key, e.val)
	}
}

// tokenShape says whether s holds six letters or digits, a dot and sixteen
// more: the shape of a bootstrap token, looked for without the regexp.
func tokenShape(s string) bool {
	alnum := func(c byte) bool { return 'a' <= c && c <= 'z' || '0' <= c && c <= '9' }
	for i := 6; i+16 < len(s); i++ {
		if s[i] != '.' {
			continue
		}
		ok := true
		for k := i - 6; k < i+17 && ok; k++ {
			ok = k == i || alnum(s[k])
		}
		if ok {
			return true
		}
	}
	return false
}

func containsAny(s string, subs []string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}
