package protocol

import (
	"fmt"
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
		"Zoe\u0308 U\u0308nal":          false, // NFD of "Zoë Ünal"
		"\u1100\u1161":                  false, // a decomposed Hangul syllable (NFC: U+AC00)
		"\u212b":                        false, // the Angstrom sign (NFC: U+00C5)
	} {
		if err := CheckID(id); (err == nil) != ok {
			t.Errorf("CheckID(%q) = %v, want ok = %v", id, err, ok)
		}
	}
}

// TestCheckIDWantsNFC (review 17, item 9): ids are compared byte for
// byte, so the NFC and NFD forms of one name would be two ids. A new id
// must be NFC, and the refusal gives the NFC form to use; CheckStoredID,
// for ids that may already be enrolled (a deletion), accepts the other
// forms, so that rows enrolled before the check stay deletable.
func TestCheckIDWantsNFC(t *testing.T) {
	nfc, nfd := "Zo\u00eb", "Zoe\u0308"
	if err := CheckID(nfc); err != nil {
		t.Fatal(err)
	}
	err := CheckID(nfd)
	if err == nil || !strings.Contains(err.Error(), "NFC") || !strings.Contains(err.Error(), fmt.Sprintf("%q", nfc)) {
		t.Fatalf("CheckID(NFD) = %v, want a refusal naming NFC and the form %q", err, nfc)
	}
	if err := CheckStoredID(nfd); err != nil {
		t.Fatalf("CheckStoredID(NFD) = %v", err)
	}
	for _, bad := range []string{"", "tab\tid", "zero\u200bwidth"} {
		if CheckStoredID(bad) == nil {
			t.Errorf("CheckStoredID(%q) accepted", bad)
		}
	}
}
