package protocol

import (
	"strings"
	"testing"
)

func TestCheckID(t *testing.T) {
	for id, ok := range map[string]bool{
		"alice": true, "person-7/sample-0": true, "Zoë Ünal": true, "名前": true,
		"":                              false,
		strings.Repeat("x", MaxIDLen+1): false,
		"bad\x01id":                     false,
		"tab\tid":                       false,
		"evil\u202egnp.exe":             false, // right-to-left override
		"zero\u200bwidth":               false,
		"line\u2028sep":                 false,
		"para\u2029sep":                 false,
		"bom\ufeff":                     false,
		"\xff\xfe":                      false,
		"replacement\ufffd":             false,
	} {
		if err := CheckID(id); (err == nil) != ok {
			t.Errorf("CheckID(%q) = %v, want ok = %v", id, err, ok)
		}
	}
}
