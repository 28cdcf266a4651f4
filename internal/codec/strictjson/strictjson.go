// Package strictjson reads JSON as written, for what a user or a program
// hands idface (a line of a JSON lines file, a gateway request's body):
// one object with the fields its reader names, or one array of numbers.
//
// encoding/json is lenient where that changes what is read: a null leaves
// a number or a string as it was (a reused buffer keeps the previous
// line's values) or reads as 0, a repeated key is taken silently (the
// last wins, so a proxy or an audit log that takes the first sees another
// value than the one acted on), and a key matches a field whatever its
// case. Here each of these is refused, naming the field or the element:
// a null, a value of another type, a key given twice (exactly, or
// differing only in case), a key that is not a field as written, a
// missing required field, text that is not UTF-8 and anything after the
// value. A number is read once into a float32 (no rounding through
// float64); one beyond float32's range reads as an infinity, which the
// callers refuse as they refuse any infinity. JSON has no NaN or
// Infinity, so neither is ever read. One byte order mark before the value
// is skipped (RFC 8259 allows it).
//
// The walk goes token by token through encoding/json's Decoder, which
// checks the grammar, and stops at the first refusal: nothing nested is
// descended into, and nothing is allocated from a count in the input.
package strictjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Field is one field an object may hold, and where its value goes.
type Field struct {
	Key string
	// Into receives the value: a *string (a JSON string), a *bool (true
	// or false) or a *[]float32 (an array of numbers; a new slice).
	Into any
	// Required fields missing from the object are refused.
	Required bool
	// Seen is set by Object when the object holds the field.
	Seen bool
}

// Error is a refusal: Path is the value refused ("template[17]", "id";
// "" for the whole), Msg says what was wrong and what to do, with Path.
type Error struct {
	Path string
	Msg  string
}

func (e *Error) Error() string { return e.Msg }

func refuse(path, format string, args ...any) error {
	return &Error{Path: path, Msg: fmt.Sprintf(format, args...)}
}

// Object reads b, one JSON object whose keys are fields' Keys, into the
// fields, setting each one's Seen.
func Object(b []byte, fields []Field) error {
	for i := range fields {
		fields[i].Seen = false
		switch fields[i].Into.(type) {
		case *string, *bool, *[]float32:
		default:
			return fmt.Errorf("strictjson: field %q: Into is a %T, not a *string, *bool or *[]float32", fields[i].Key, fields[i].Into)
		}
	}
	dec, err := start(b)
	if err != nil {
		return err
	}
	tok, err := dec.Token()
	if err != nil {
		return syntax("", "a JSON object", dec, err)
	}
	if tok != json.Delim('{') {
		return refuse("", "%s, not a JSON object {%s}", kind(tok), keys(fields))
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return syntax("", "a field", dec, err)
		}
		key, _ := tok.(string)
		f, err := field(fields, key)
		if err != nil {
			return err
		}
		f.Seen = true
		if err := value(dec, f); err != nil {
			return err
		}
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return syntax("", "the end of the object", dec, err)
	}
	if err := end(dec, "object"); err != nil {
		return err
	}
	for _, f := range fields {
		if f.Required && !f.Seen {
			return refuse(f.Key, "%s is missing", f.Key)
		}
	}
	return nil
}

// field finds the field key names: a key that repeats one seen before
// (also differing only in case), or that is no field as written, is
// refused.
func field(fields []Field, key string) (*Field, error) {
	for i := range fields {
		if f := &fields[i]; f.Seen && strings.EqualFold(f.Key, key) {
			if f.Key == key {
				return nil, refuse(key, "the field %q appears twice: give each field once", key)
			}
			return nil, refuse(key, "the field %q repeats %q (keys that differ only in case are one field to some readers): give each field once, as %q", key, f.Key, f.Key)
		}
	}
	for i := range fields {
		if fields[i].Key == key {
			return &fields[i], nil
		}
	}
	for _, f := range fields {
		if strings.EqualFold(f.Key, key) {
			return nil, refuse(key, "unknown field %q: fields are read as written, case included; write %q", key, f.Key)
		}
	}
	return nil, refuse(key, "unknown field %q: the fields are %s", key, keys(fields))
}

// value reads f's value into f.Into.
func value(dec *json.Decoder, f *Field) error {
	want := "a string"
	switch f.Into.(type) {
	case *bool:
		want = "true or false"
	case *[]float32:
		want = "an array of numbers"
	}
	tok, err := dec.Token()
	if err != nil {
		return syntax(f.Key, want, dec, err)
	}
	switch into := f.Into.(type) {
	case *string:
		s, ok := tok.(string)
		if !ok {
			return refuse(f.Key, "%s is %s, not a string", f.Key, kind(tok))
		}
		*into = s
	case *bool:
		v, ok := tok.(bool)
		if !ok {
			return refuse(f.Key, "%s is %s, not true or false", f.Key, kind(tok))
		}
		*into = v
	case *[]float32:
		if tok != json.Delim('[') {
			return refuse(f.Key, "%s is %s, not an array of numbers", f.Key, kind(tok))
		}
		v, err := numbers(dec, f.Key, []float32{})
		if err != nil {
			return err
		}
		*into = v
	}
	return nil
}

// Array reads b, one JSON array of numbers, appending them to dst; name
// names the array in refusals ("template[3] is null, not a number").
func Array(b []byte, name string, dst []float32) ([]float32, error) {
	dec, err := start(b)
	if err != nil {
		return nil, err
	}
	tok, err := dec.Token()
	if err != nil {
		return nil, syntax("", "a JSON array of numbers", dec, err)
	}
	if tok != json.Delim('[') {
		return nil, refuse("", "%s, not a JSON array of numbers", kind(tok))
	}
	if dst, err = numbers(dec, name, dst); err != nil {
		return nil, err
	}
	if err := end(dec, "array"); err != nil {
		return nil, err
	}
	return dst, nil
}

// numbers reads the elements of an array whose '[' was read, and its ']'.
func numbers(dec *json.Decoder, name string, dst []float32) ([]float32, error) {
	for i := 0; ; i++ {
		at := fmt.Sprintf("%s[%d]", name, i)
		tok, err := dec.Token()
		if err != nil {
			return nil, syntax(at, "a number", dec, err)
		}
		if tok == json.Delim(']') {
			return dst, nil
		}
		n, ok := tok.(json.Number)
		if !ok {
			return nil, refuse(at, "%s is %s, not a number", at, kind(tok))
		}
		// Out of range, ParseFloat gives the infinity of the number's
		// sign (strconv.ErrRange), which callers refuse as infinite.
		v, err := strconv.ParseFloat(string(n), 32)
		if err != nil && !errors.Is(err, strconv.ErrRange) {
			return nil, refuse(at, "%s is not a number", at)
		}
		dst = append(dst, float32(v))
	}
}

// start checks b is UTF-8 and returns a decoder past one byte order mark.
func start(b []byte) (*json.Decoder, error) {
	b = bytes.TrimPrefix(b, []byte("\ufeff"))
	if !utf8.Valid(b) {
		n := 0
		for n < len(b) {
			r, size := utf8.DecodeRune(b[n:])
			if r == utf8.RuneError && size <= 1 {
				break
			}
			n += size
		}
		return nil, refuse("", "not UTF-8 (byte %d): JSON is UTF-8 text", n+1)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	return dec, nil
}

// end refuses anything but white space after the value.
func end(dec *json.Decoder, what string) error {
	if _, err := dec.Token(); err != io.EOF {
		return refuse("", "data after the JSON %s (byte %d): one value only", what, dec.InputOffset()+1)
	}
	return nil
}

// syntax turns a Decoder's error at path, where want was expected, into
// a refusal that quotes nothing of the input.
func syntax(path, want string, dec *json.Decoder, err error) error {
	var se *json.SyntaxError
	switch {
	case errors.Is(err, io.EOF) && path == "" && dec.InputOffset() == 0:
		return refuse(path, "empty: want %s", want)
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		err = errors.New("the JSON is cut short")
	case errors.As(err, &se):
		err = fmt.Errorf("syntax error at byte %d", se.Offset)
	}
	switch {
	case path == "":
		return refuse(path, "not JSON: %v", err)
	case want == "a number":
		return refuse(path, "%s is not a number (%v): JSON has no NaN, Infinity or empty elements; write a finite number", path, err)
	}
	return refuse(path, "%s is not %s (%v)", path, want, err)
}

// kind names a token's JSON type.
func kind(tok json.Token) string {
	switch t := tok.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case string:
		return "a string"
	case json.Number:
		return "a number"
	case json.Delim:
		if t == '[' {
			return "an array"
		}
		return "an object"
	}
	return fmt.Sprintf("a %T", tok)
}

// keys lists the fields' keys for messages: `"id", "template"`.
func keys(fields []Field) string {
	var ks []string
	for _, f := range fields {
		ks = append(ks, strconv.Quote(f.Key))
	}
	return strings.Join(ks, ", ")
}
