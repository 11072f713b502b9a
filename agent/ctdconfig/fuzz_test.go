package ctdconfig

import (
	"errors"
	"testing"
)

// FuzzParseConfig: any bytes give a *ParseError or a File that Build can
// describe, and a broken file is still described; nothing panics.
func FuzzParseConfig(f *testing.F) {
	for _, s := range []string{"", v2Config, v3Config, dockerPackageConfig, legacyConfig,
		"version = 2\n[plugins\n", "a = 1\n[a]\n", "x = [1, [2, {a = [3]}]]\n[[t]]\n[[t]]\nk = 1\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		file, err := ParseConfig(cfgPath, b)
		if err != nil {
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("error %v is not a *ParseError", err)
			}
			c := brokenMain(cfgPath, b, pe)
			if c.ParseError == "" {
				t.Fatal("a broken file without parse_error")
			}
			return
		}
		c := Build([]*File{file})
		if c.GrpcAddress == "" || c.Version == 0 {
			t.Fatalf("Build lost a default: %v", c)
		}
		file.Imports()
	})
}

// FuzzParseHosts: any bytes give a HostsFile; nothing panics.
func FuzzParseHosts(f *testing.F) {
	for _, s := range []string{mirrorHosts, orderedHosts, "server = \"127.0.0.1:5000\"\n", "[host]\n",
		"server = \"http://127.0.0.1:5000\n", "[host.\"https://[::1\"]\n", "host = 1\n",
		"[host.\"a\"]\nclient = [[\"c\", \"k\"], \"p\", 3]\nheader = {x = [1]}\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		hf := ParseHosts(hostsPath, "r", b)
		if hf == nil || hf.Path != hostsPath {
			t.Fatalf("ParseHosts = %v", hf)
		}
	})
}
