package abis

import (
	"bytes"
	"context"
	"encoding/base64"
	"slices"
	"strings"
	"testing"
)

func faceBIR(org, typ, bdb string) string {
	return `<BIR><BDBInfo><Format><Organization>` + org + `</Organization><Type>` + typ + `</Type></Format><Type>Face</Type></BDBInfo><BDB>` + bdb + `</BDB></BIR>`
}

const fingerBIR = `<BIR><BDBInfo><Format><Organization>Mosip</Organization><Type>7</Type></Format><Type>Finger</Type><Subtype>Left IndexFinger</Subtype></BDBInfo><BDB>RklSAA</BDB></BIR>`

func TestFaceBDB(t *testing.T) {
	x := []float32{0.5, -1, 2, 0.25}
	rec, err := FixtureRecord(x)
	if err != nil {
		t.Fatal(err)
	}
	std, url := base64.StdEncoding.EncodeToString(rec), base64.RawURLEncoding.EncodeToString(rec)
	doc := func(inner ...string) []byte {
		return []byte(`<?xml version="1.0"?><BIR xmlns="http://standards.iso.org/iso-iec/19785/-3/ed-2/"><BIRInfo><Integrity>false</Integrity></BIRInfo>` + strings.Join(inner, "") + `</BIR>`)
	}
	for _, c := range []struct {
		name string
		doc  []byte
		want Failure
	}{
		{"fixture document", CBEFF(rec), 0},
		{"with fingers", doc(fingerBIR, faceBIR("Mosip", "8", std)), 0},
		{"URL-safe base64", doc(faceBIR("Mosip", "8", url)), 0},
		{"registry format", doc(faceBIR("257", "8", std)), 0},
		{"base64 over lines", doc(faceBIR("Mosip", "8", std[:10]+"\n  "+std[10:])), 0},
		{"empty", []byte("  "), FailNoData},
		{"not XML", []byte("RklSAD..."), FailCBEFF},
		{"unclosed", []byte("<BIR><BIR>"), FailCBEFF},
		{"a DTD", append([]byte(`<!DOCTYPE BIR [<!ENTITY x "y">]>`), doc(faceBIR("Mosip", "8", std))...), FailCBEFF},
		{"two roots", append(doc(faceBIR("Mosip", "8", std)), "<BIR/>"...), FailCBEFF},
		{"another root", []byte(`<Person><BIR/></Person>`), FailCBEFF},
		{"text after the root", append(doc(faceBIR("Mosip", "8", std)), "junk"...), FailCBEFF},
		{"no face", doc(fingerBIR), FailNoData},
		{"two faces", doc(faceBIR("Mosip", "8", std), faceBIR("Mosip", "8", std)), FailCBEFF},
		{"another format", doc(faceBIR("Acme", "8", std)), FailCBEFF},
		{"empty BDB", doc(faceBIR("Mosip", "8", "")), FailNoData},
		{"not base64", doc(faceBIR("Mosip", "8", "!!!")), FailCBEFF},
		{"not a face record", doc(faceBIR("Mosip", "8", base64.StdEncoding.EncodeToString([]byte("FIR\x00020\x00xxxx")))), FailCBEFF},
		{"unknown version", doc(faceBIR("Mosip", "8", base64.StdEncoding.EncodeToString([]byte("FAC\x00099\x00xxxx")))), FailCBEFF},
		{"exception", doc(`<BIR><BDBInfo><Format><Organization>Mosip</Organization><Type>8</Type></Format><Type>Face</Type></BDBInfo><BDB></BDB><others><entry key="EXCEPTION">true</entry></others></BIR>`), FailNoData},
		{"too deep", []byte(strings.Repeat("<BIR>", 20) + strings.Repeat("</BIR>", 20)), FailCBEFF},
	} {
		t.Run(c.name, func(t *testing.T) {
			bdb, err := FaceBDB(c.doc)
			if c.want == 0 {
				if err != nil {
					t.Fatal(err)
				}
				got, err := FixtureExtractor{}.Extract(context.Background(), bdb)
				if err != nil || !slices.Equal(got, x) {
					t.Fatalf("template %v %v, want %v", got, err, x)
				}
				return
			}
			if err == nil || CodeOf(err) != c.want {
				t.Fatalf("%v, want failure %d", err, c.want)
			}
		})
	}
}

func TestFixtureRecordRefusals(t *testing.T) {
	rec, _ := FixtureRecord([]float32{1, 2})
	for name, r := range map[string][]byte{
		"short":       rec[:20],
		"length":      append(bytes.Clone(rec), 0),
		"two faces":   func() []byte { b := bytes.Clone(rec); b[13] = 2; return b }(),
		"not fixture": func() []byte { b := bytes.Clone(rec); b[46] = 'X'; return b }(),
	} {
		if _, err := FixtureTemplate(r); err == nil {
			t.Errorf("%s: read", name)
		}
	}
}

func TestParseTemplate(t *testing.T) {
	if x, err := ParseTemplate([]byte(" [1, -2.5, 3e-1]\n")); err != nil || !slices.Equal(x, []float32{1, -2.5, 0.3}) {
		t.Errorf("JSON: %v %v", x, err)
	}
	rec, _ := FixtureRecord([]float32{1, 2, 3})
	if x, err := ParseTemplate(rec[46+len(FixtureMagic):]); err != nil || !slices.Equal(x, []float32{1, 2, 3}) {
		t.Errorf(".npy: %v %v", x, err)
	}
	for _, bad := range []string{"", "[1, null]", "{\"a\":1}", "[1] [2]"} {
		if _, err := ParseTemplate([]byte(bad)); err == nil {
			t.Errorf("%q read", bad)
		}
	}
}

func TestCommandExtractor(t *testing.T) {
	rec, _ := FixtureRecord([]float32{1, 2})
	x, err := (&CommandExtractor{Argv: []string{"sh", "-c", "cat >/dev/null; echo '[0.5, 0.25]'"}}).Extract(context.Background(), rec)
	if err != nil || !slices.Equal(x, []float32{0.5, 0.25}) {
		t.Fatalf("%v %v", x, err)
	}
	if _, err := (&CommandExtractor{Argv: []string{"sh", "-c", "cat >/dev/null; echo no face >&2; exit 3"}}).Extract(context.Background(), rec); CodeOf(err) != FailQuality {
		t.Errorf("exit 3: %v, want failure 18", err)
	}
	if _, err := (&CommandExtractor{Argv: []string{"sh", "-c", "exit 1"}}).Extract(context.Background(), rec); err == nil || CodeOf(err) != FailInternal {
		t.Errorf("exit 1: %v, want an internal failure", err)
	}
}

// FuzzFaceBDB: no document panics the parser; what it accepts is a face
// record it found in the document.
func FuzzFaceBDB(f *testing.F) {
	rec, _ := FixtureRecord([]float32{1, 2, 3})
	f.Add(CBEFF(rec))
	f.Add([]byte(`<BIR>` + fingerBIR + faceBIR("Mosip", "8", "RkFDADAxMAA") + `</BIR>`))
	f.Add([]byte(`<BIR><BIR><BDBInfo><Type>Face</Type></BDBInfo></BIR></BIR>`))
	f.Add([]byte(`<!DOCTYPE x><BIR/>`))
	f.Fuzz(func(t *testing.T, doc []byte) {
		bdb, err := FaceBDB(doc)
		if err != nil {
			if c := CodeOf(err); c != FailCBEFF && c != FailNoData {
				t.Fatalf("failure %d for a document", c)
			}
			return
		}
		if !bytes.HasPrefix(bdb, []byte("FAC\x00")) {
			t.Fatalf("accepted a BDB that is no face record: %q", bdb)
		}
		FixtureExtractor{}.Extract(context.Background(), bdb)
	})
}
