package protocol

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// CheckID validates a new identifier: CheckStoredID's rules, and it must
// be in Unicode normal form NFC. Ids are compared byte for byte; without
// the normal form one name written two ways ("é" as one character, or as
// "e" and a combining accent) would be two ids, and a deletion or a
// duplicate check could miss the row.
func CheckID(id string) error {
	if err := CheckStoredID(id); err != nil {
		return err
	}
	if !norm.NFC.IsNormalString(id) {
		return fmt.Errorf("id %q is not in Unicode normal form NFC (a character such as \"é\" can be written in more than one way, and each way would be another id): use its NFC form %q (e.g. convert a file of ids with 'uconv -x Any-NFC')", id, norm.NFC.String(id))
	}
	return nil
}

// CheckStoredID validates an identifier that may already be enrolled:
// 1..MaxIDLen bytes of UTF-8 with no control, format (bidirectional
// overrides, zero-width characters), line or paragraph separator, or
// replacement characters, so that an id prints as what it is in logs,
// terminals and reports. It does not require NFC, so that rows enrolled
// before CheckID did can still be deleted.
func CheckStoredID(id string) error {
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
