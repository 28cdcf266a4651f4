package input

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/idface/idface/protocol"
)

// IDRules is the help text of an ids file, for --help. A constant, so that
// no caller changes it; the bound is protocol.MaxIDLen (TestHelpTexts).
const IDRules = "Ids: one per line, in the order of the templates; an id is taken as\n" +
	"written, here and at the gateway: 1 to 256 bytes of UTF-8 without control\n" +
	"characters, and one that begins or ends with a space (or other white space)\n" +
	"is refused, not trimmed; blank lines (except at the end) and repeated ids\n" +
	"are refused."

// Lines calls f with every line of r (numbered from 1) that is not
// blank, as written but for its line ending ("\n" or "\r\n"): each
// format trims what it allows (CSV white space around values, JSON white
// space, nothing of an id). A line of white space only (or a byte order
// mark) is blank, and an error naming it unless only blank lines follow:
// it would shift every later line against its template. A line over
// MaxLine is an error.
func Lines(r io.Reader, path string, f func(n int, line string) error) error {
	br := bufio.NewReaderSize(r, 64<<10)
	blank := 0 // the first blank line since the last non-blank one
	for n := 1; ; n++ {
		line, err := readLine(br)
		if errors.Is(err, errLong) {
			return fmt.Errorf("%s line %d is longer than %d bytes", path, n, MaxLine)
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return fmt.Errorf("%s: %w", path, err)
		}
		if errors.Is(err, io.EOF) && line == nil {
			return nil
		}
		s := strings.TrimSuffix(string(line), "\r")
		isBlank := strings.TrimSpace(strings.TrimPrefix(s, bom)) == ""
		switch {
		case isBlank && blank == 0:
			blank = n
		case isBlank:
		case blank > 0:
			return fmt.Errorf("%s line %d is blank: every line holds one entry (a blank line would shift every later one); remove it", path, blank)
		default:
			if err := f(n, s); err != nil {
				return err
			}
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
	}
}

// bom is the byte order mark some editors write first in a UTF-8 file.
const bom = "\ufeff"

// trimmed is a CSV or labels line without a byte order mark and the white
// space around it.
func trimmed(line string) string { return strings.TrimSpace(strings.TrimPrefix(line, bom)) }

var errLong = errors.New("line too long")

// readLine returns the next line without its newline; nil and io.EOF at
// the end.
func readLine(br *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		chunk, err := br.ReadSlice('\n')
		if len(line)+len(chunk) > MaxLine+1 {
			return nil, errLong
		}
		line = append(line, chunk...)
		switch {
		case err == nil:
			return bytes.TrimSuffix(line, []byte("\n")), nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF) && len(line) > 0:
			return line, io.EOF
		default:
			return nil, err
		}
	}
}

// ReadIDs reads an ids file (IDRules): every id is taken as written
// (CheckID; only a byte order mark before line 1 and the line endings
// are dropped) and checked as the cluster will, a repeated id names both
// lines. lines[i] is the line of ids[i].
func ReadIDs(path string) (ids []string, lines []int, err error) {
	first := map[string]int{}
	err = readList(path, func(n int, id string) error {
		if n == 1 {
			id = strings.TrimPrefix(id, bom)
		}
		if err := CheckID(id); err != nil {
			return fmt.Errorf("%s line %d: %w", path, n, err)
		}
		if k, ok := first[id]; ok {
			return fmt.Errorf("%s line %d repeats the id on line %d (%q): ids are unique", path, n, k, id)
		}
		first[id] = n
		ids, lines = append(ids, id), append(lines, n)
		return nil
	})
	return ids, lines, err
}

// ReadLabels reads a labels file: one label per line (repeated for the
// samples of one person; white space around it dropped), blank lines
// refused as in Lines.
func ReadLabels(path string) ([]string, error) {
	var labels []string
	err := readList(path, func(_ int, l string) error {
		labels = append(labels, trimmed(l))
		return nil
	})
	return labels, err
}

func readList(path string, f func(n int, s string) error) error {
	fh, err := os.Open(path)
	if err != nil {
		return err
	}
	defer fh.Close()
	if err := Lines(fh, path, f); err != nil {
		return err
	}
	return nil
}

// CheckID checks an id as every server will, with the limit in the
// message ("id is 10000 bytes; ids are at most 256 bytes"), and refuses
// one that begins or ends with white space. It is the one check of an id
// an operator or gate software hands over (ids files, JSON lines, --id,
// the gateway's bodies): ids are taken as written, never trimmed, so the
// id a log or a proxy shows is the id acted on, and every reader agrees.
func CheckID(id string) error {
	if len(id) > protocol.MaxIDLen {
		return fmt.Errorf("id is %d bytes; ids are at most %d bytes", len(id), protocol.MaxIDLen)
	}
	first, _ := utf8.DecodeRuneInString(id)
	last, _ := utf8.DecodeLastRuneInString(id)
	switch {
	case id != "" && unicode.IsSpace(first):
		return fmt.Errorf("id %q begins with a space (%U): ids are taken as written, not trimmed; remove it", id, first)
	case id != "" && unicode.IsSpace(last):
		return fmt.Errorf("id %q ends with a space (%U): ids are taken as written, not trimmed; remove it", id, last)
	}
	return protocol.CheckID(id)
}
