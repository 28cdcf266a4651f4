package abis

import (
	"bytes"
	"encoding/base64"
	"encoding/xml"
	"errors"
	"io"
	"strings"
)

// MaxCBEFF bounds a CBEFF document read from a referenceURL by default.
const MaxCBEFF = 16 << 20

// maxDepth bounds the nesting of a CBEFF document's elements.
const maxDepth = 16

// bir is one CBEFF BIR (ISO/IEC 19785-3 XML, MOSIP's CBEFF-XML): a
// document is a BIR whose children are BIRs, one per sample.
type bir struct {
	XMLName xml.Name `xml:"BIR"`
	BDBInfo *struct {
		Format struct {
			Organization string `xml:"Organization"`
			Type         string `xml:"Type"`
		} `xml:"Format"`
		Type    string `xml:"Type"`
		Subtype string `xml:"Subtype"`
	} `xml:"BDBInfo"`
	BDB    *string `xml:"BDB"`
	Others []struct {
		Entries []struct {
			Key   string `xml:"key,attr"`
			Value string `xml:",chardata"`
		} `xml:"entry"`
	} `xml:"others"`
	BIRs []bir `xml:"BIR"`
}

// The face BDB formats accepted: ISO/IEC 19794-5 as MOSIP names it
// (organization Mosip, type 8) and as the CBEFF registry does
// (organization 257, ISO/IEC JTC 1/SC 37; type 8).
func faceFormat(org, typ string) bool {
	org, typ = strings.TrimSpace(org), strings.TrimSpace(typ)
	return (strings.EqualFold(org, "mosip") || org == "257") && (typ == "8" || typ == "0x0008" || typ == "0008")
}

// FaceBDB reads a CBEFF document strictly and returns the BDB of its one
// face BIR: an ISO/IEC 19794-5 face record. It refuses what is not
// well-formed XML or holds a DTD (FailCBEFF), a document with several
// face BIRs or a face BIR of another format (FailCBEFF), and one with no
// face, or a face marked as an exception or with an empty BDB
// (FailNoData).
func FaceBDB(doc []byte) ([]byte, error) {
	if len(bytes.TrimSpace(doc)) == 0 {
		return nil, fail(FailNoData, "empty CBEFF document")
	}
	if err := wellFormed(doc); err != nil {
		return nil, err
	}
	var root bir
	if err := xml.Unmarshal(doc, &root); err != nil {
		return nil, fail(FailCBEFF, "CBEFF: %v", err)
	}
	var faces []*bir
	var walk func(b *bir)
	walk = func(b *bir) {
		if b.BDBInfo != nil && hasType(b.BDBInfo.Type, "face") {
			faces = append(faces, b)
		}
		for i := range b.BIRs {
			walk(&b.BIRs[i])
		}
	}
	walk(&root)
	switch {
	case len(faces) == 0:
		return nil, fail(FailNoData, "CBEFF holds no face BIR")
	case len(faces) > 1:
		return nil, fail(FailCBEFF, "CBEFF holds %d face BIRs, want one", len(faces))
	}
	f := faces[0]
	for _, o := range f.Others {
		for _, e := range o.Entries {
			if strings.EqualFold(e.Key, "EXCEPTION") && strings.EqualFold(strings.TrimSpace(e.Value), "true") {
				return nil, fail(FailNoData, "the face BIR is marked as an exception (no face captured)")
			}
		}
	}
	if !faceFormat(f.BDBInfo.Format.Organization, f.BDBInfo.Format.Type) {
		return nil, fail(FailCBEFF, "face BDB format %q/%q is not ISO/IEC 19794-5 (Mosip/8 or 257/8)", f.BDBInfo.Format.Organization, f.BDBInfo.Format.Type)
	}
	if f.BDB == nil || strings.TrimSpace(*f.BDB) == "" {
		return nil, fail(FailNoData, "the face BIR has no BDB")
	}
	bdb, err := decodeBase64(*f.BDB)
	if err != nil {
		return nil, fail(FailCBEFF, "face BDB: %v", err)
	}
	if err := checkFaceRecord(bdb); err != nil {
		return nil, err
	}
	return bdb, nil
}

// hasType reports whether a BDBInfo Type (a space-separated list)
// names t.
func hasType(list, t string) bool {
	for _, f := range strings.Fields(list) {
		if strings.EqualFold(f, t) {
			return true
		}
	}
	return false
}

// wellFormed refuses a document that is not one well-formed element (no
// DTD, no entity declarations, nothing after the root but comments and
// space, nesting at most maxDepth).
func wellFormed(doc []byte) error {
	d := xml.NewDecoder(bytes.NewReader(doc))
	d.Strict = true
	depth, roots := 0, 0
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fail(FailCBEFF, "CBEFF is not well-formed XML: %v", err)
		}
		switch t := tok.(type) {
		case xml.Directive:
			return fail(FailCBEFF, "CBEFF holds a DTD or directive")
		case xml.StartElement:
			if depth == 0 {
				roots++
				if roots > 1 {
					return fail(FailCBEFF, "CBEFF has more than one root element")
				}
				if t.Name.Local != "BIR" {
					return fail(FailCBEFF, "CBEFF root is <%s>, want <BIR>", t.Name.Local)
				}
			}
			depth++
			if depth > maxDepth {
				return fail(FailCBEFF, "CBEFF nests deeper than %d", maxDepth)
			}
		case xml.EndElement:
			depth--
		case xml.CharData:
			if depth == 0 && len(bytes.TrimSpace(t)) > 0 {
				return fail(FailCBEFF, "text outside the CBEFF root")
			}
		}
	}
	if roots == 0 {
		return fail(FailCBEFF, "CBEFF has no root element")
	}
	return nil
}

// decodeBase64 reads a BDB in standard or URL-safe base64 (MOSIP writes
// both), padded or not, ignoring white space.
func decodeBase64(s string) ([]byte, error) {
	s = strings.Map(func(r rune) rune {
		if r == ' ' || r == '\n' || r == '\r' || r == '\t' {
			return -1
		}
		return r
	}, s)
	s = strings.TrimRight(s, "=")
	enc := base64.RawStdEncoding
	if strings.ContainsAny(s, "-_") {
		enc = base64.RawURLEncoding
	}
	b, err := enc.Strict().DecodeString(s)
	if err != nil {
		return nil, errors.New("not base64")
	}
	return b, nil
}

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }
