package protocol

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// CheckID validates an identifier: 1..MaxIDLen bytes of UTF-8 with no
// control, format (bidirectional overrides, zero-width characters), line or
// paragraph separator, or replacement characters, so that an id prints as
// what it is in logs, terminals and reports.
func CheckID(id string) error {
	if id == "" {
		return fmt.Errorf("empty id")
	}
	if len(id) > MaxIDLen {
		return fmt.Errorf("id of %d bytes, limit %d", len(id), MaxIDLen)
	}
	if !utf8.ValidString(id) {
		return fmt.Errorf("id %q is not UTF-8", id)
	}
	if i := strings.IndexFunc(id, badIDRune); i >= 0 {
		r, _ := utf8.DecodeRuneInString(id[i:])
		return fmt.Errorf("id %q contains the control or invisible character %U", id, r)
	}
	return nil
}

func badIDRune(r rune) bool {
	return unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || unicode.Is(unicode.Zl, r) ||
		unicode.Is(unicode.Zp, r) || r == utf8.RuneError
}
