package redact

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestClipJSON(t *testing.T) {
	long := strings.Repeat("é", 40) // 80 bytes
	in := `{"a":"` + long + `","b":"short","c":["` + strings.Repeat(`\"`, 30) + `"],"d":1}`
	out := ClipJSON([]byte(in), 16)
	var v map[string]any
	if err := json.Unmarshal(out, &v); err != nil {
		t.Fatalf("clipped JSON does not decode: %v\n%s", err, out)
	}
	if a := v["a"].(string); !strings.HasPrefix(a, strings.Repeat("é", 8)+"…[") || !strings.HasSuffix(a, " bytes clipped]") {
		t.Errorf("a = %q, want 16 bytes and a note", a)
	}
	if v["b"] != "short" || v["d"] != float64(1) {
		t.Errorf("b, d = %v, %v: want them unchanged", v["b"], v["d"])
	}
	if c := v["c"].([]any)[0].(string); !strings.HasPrefix(c, `""""""""`) || strings.Count(c, `"`) != 8 {
		t.Errorf("c = %q: want an escape never cut in two", c)
	}
	if got := string(ClipJSON([]byte(`{"a":"b"}`), 4)); got != `{"a":"b"}` {
		t.Errorf("nothing over the bound: %q", got)
	}
}

func FuzzClipJSON(f *testing.F) {
	f.Add([]byte(`{"a":"0123456789abcdef","b":["x\"yz0123456789"]}`), uint8(4))
	f.Add([]byte(`"\u00e9\u00e9\u00e9\u00e9\u00e9"`), uint8(3))
	f.Fuzz(func(t *testing.T, b []byte, n uint8) {
		max := int(n%32) + 1
		out := ClipJSON(b, max)
		if json.Valid(b) && !json.Valid(out) {
			t.Errorf("valid JSON made invalid: %q → %q", b, out)
		}
	})
}
