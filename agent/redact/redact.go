// Package redact removes secrets from text before it leaves the host: private
// keys, Kubernetes bootstrap tokens, kubeadm certificate keys, passwords and
// credentials in key=value or key: value form, URL user info, bearer/basic
// authorization values, and Azure SAS signatures and account keys.
//
// It is the single choke point every report passes through (Message), so a
// probe that quotes a line carrying a secret cannot leak it. Redaction keeps
// what helps diagnosis: the name of the field, a token's public ID, the shape
// of a URL.
package redact

import (
	"regexp"
	"strings"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// Mark replaces a secret value.
const Mark = "[REDACTED]"

type rule struct {
	re   *regexp.Regexp
	repl string
	// hints: the rule only runs on text containing one of these (lower
	// case). Every report string passes here, so most must be cheap no-ops.
	hints []string
}

// credentialWords are the words that name a credential in key=value and
// --flag value forms.
var credentialWords = []string{"password", "passwd", "secret", "token", "api", "access", "credential"}

var rules = []rule{
	// PEM private key blocks, whole or cut off by an excerpt boundary.
	{regexp.MustCompile(`(?s)-----BEGIN ([A-Z0-9 ]*)PRIVATE KEY-----.*?(-----END [A-Z0-9 ]*PRIVATE KEY-----|$)`), "-----BEGIN ${1}PRIVATE KEY-----" + Mark + "-----END ${1}PRIVATE KEY-----", []string{"private key"}},
	// Base64 key material in kubeconfigs and similar YAML.
	{regexp.MustCompile(`(?i)((?:client-key-data|private-key|privateKey|key-data)["']?\s*[:=]\s*["']?)[A-Za-z0-9+/=_-]{8,}`), "${1}" + Mark, []string{"key-data", "private-key", "privatekey"}},
	// Kubernetes bootstrap tokens: [a-z0-9]{6}.[a-z0-9]{16}. The ID before
	// the dot is public (it names the token in kubeadm token list).
	{regexp.MustCompile(`\b([a-z0-9]{6})\.[a-z0-9]{16}\b`), "${1}." + Mark, []string{"."}},
	// kubeadm --certificate-key / certificateKey: decrypts the uploaded
	// control-plane certificates.
	{regexp.MustCompile(`(?i)(certificate[-_]?key["']?\s*[:= ]\s*["']?)[0-9a-f]{32,}`), "${1}" + Mark, []string{"certificate"}},
	// Authorization headers.
	{regexp.MustCompile(`(?i)\b(authorization["']?\s*[:=]\s*["']?(?:bearer|basic)\s+)[A-Za-z0-9._~+/=-]+`), "${1}" + Mark, []string{"authorization"}},
	{regexp.MustCompile(`(?i)\b(bearer\s+)[A-Za-z0-9._~+/=-]{16,}`), "${1}" + Mark, []string{"bearer"}},
	// Azure SAS signature and storage account keys.
	{regexp.MustCompile(`(?i)([?&](?:sig|signature)=)[^&\s"']+`), "${1}" + Mark, []string{"sig=", "signature="}},
	{regexp.MustCompile(`(?i)(AccountKey=)[^;\s"']+`), "${1}" + Mark, []string{"accountkey="}},
	// user:password@ in URLs.
	{regexp.MustCompile(`([a-zA-Z][a-zA-Z0-9+.-]*://[^/\s:@]+:)[^@\s/]+@`), "${1}" + Mark + "@", []string{"@"}},
	// key=value and key: value credentials, on one line.
	{regexp.MustCompile(`(?i)\b([a-z0-9_.-]*(?:password|passwd|secret|token|api[-_]?key|access[-_]?key|credentials?))(["']?[ \t]*[:=][ \t]*["']?)([^\s"'}]+)`), "${1}${2}" + Mark, credentialWords},
	// Registry logins with a short -p flag (docker, podman, nerdctl, helm,
	// skopeo, oras login ... -p SECRET).
	{regexp.MustCompile(`(?i)(\blogin\b[^\n]*?\s-p(?:\s+|=))(\S+)`), "${1}" + Mark, []string{"login"}},
	// --flag value credentials (--token, --password, --client-secret).
	{regexp.MustCompile(`(?i)(--[a-z0-9-]*(?:password|passwd|secret|token|api-key|access-key))(\s+)([^\s-]\S*)`), "${1}${2}" + Mark, credentialWords},
}

// KeyBlock follows PEM private key blocks across the lines of a text, for
// code that handles a file line by line (String sees one line at a time and
// cannot know that a base64 line sits inside a key).
type KeyBlock struct{ inside bool }

var (
	keyMaterial = regexp.MustCompile(`^\s*[A-Za-z0-9+/]{64,}={0,2}\s*$`)
	hexOnly     = regexp.MustCompile(`^\s*[0-9a-fA-F]+\s*$`)
	beginKey    = regexp.MustCompile(`-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----`)
	endKey      = regexp.MustCompile(`-----END [A-Z0-9 ]*PRIVATE KEY-----`)
)

// Line returns line, or Mark when it lies inside a private key block. The
// BEGIN and END lines are left to String.
func (k *KeyBlock) Line(line string) string {
	if k.inside {
		if endKey.MatchString(line) {
			k.inside = false
			return line
		}
		return Mark
	}
	if loc := beginKey.FindStringIndex(line); loc != nil && !endKey.MatchString(line[loc[1]:]) {
		k.inside = true
	}
	return line
}

// String returns s with every secret replaced by Mark.
func String(s string) string {
	if s == "" {
		return s
	}
	if keyMaterial.MatchString(s) && !hexOnly.MatchString(s) {
		// A bare line of base64 is the body of a key or certificate seen
		// out of its block (a log read from its middle): never evidence.
		return Mark
	}
	lower := strings.ToLower(s)
	for _, r := range rules {
		if containsAny(lower, r.hints) {
			s = r.re.ReplaceAllString(s, r.repl)
			lower = strings.ToLower(s)
		}
	}
	return s
}

// Message redacts, in place, every string field of m and of the messages it
// holds (lists and maps included).
func Message(m proto.Message) {
	if m == nil {
		return
	}
	walk(m.ProtoReflect())
}

func walk(m protoreflect.Message) {
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.IsList():
			l := v.List()
			for i := 0; i < l.Len(); i++ {
				switch fd.Kind() {
				case protoreflect.StringKind:
					l.Set(i, protoreflect.ValueOfString(String(l.Get(i).String())))
				case protoreflect.MessageKind, protoreflect.GroupKind:
					walk(l.Get(i).Message())
				}
			}
		case fd.IsMap():
			mp := v.Map()
			mp.Range(func(k protoreflect.MapKey, mv protoreflect.Value) bool {
				switch fd.MapValue().Kind() {
				case protoreflect.StringKind:
					mp.Set(k, protoreflect.ValueOfString(String(mv.String())))
				case protoreflect.MessageKind:
					walk(mv.Message())
				}
				return true
			})
		case fd.Kind() == protoreflect.StringKind:
			if s := v.String(); s != "" {
				if r := String(s); r != s {
					m.Set(fd, protoreflect.ValueOfString(r))
				}
			}
		case fd.Kind() == protoreflect.MessageKind || fd.Kind() == protoreflect.GroupKind:
			walk(v.Message())
		}
		return true
	})
}

func containsAny(s string, subs []string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}
