package abis

import (
	"bytes"
	"encoding/binary"
	"fmt"

	"github.com/idface/idface/internal/codec/npy"
)

// ISO/IEC 19794-5 face records: the adapter checks only the general
// header ("FAC\0" and a version it knows); the extractor reads the rest.
var (
	faceMagic    = []byte("FAC\x00")
	faceVersions = [][]byte{[]byte("010\x00"), []byte("030\x00")} // 19794-5:2005, :2011
)

func checkFaceRecord(bdb []byte) error {
	if len(bdb) < 8 || !bytes.Equal(bdb[:4], faceMagic) {
		return fail(FailCBEFF, "face BDB is not an ISO/IEC 19794-5 record (no FAC header)")
	}
	for _, v := range faceVersions {
		if bytes.Equal(bdb[4:8], v) {
			return nil
		}
	}
	return fail(FailCBEFF, "ISO/IEC 19794-5 version %q unknown (want 010 or 030)", bdb[4:7])
}

// The fixture record, for tests and the demo only: an ISO/IEC
// 19794-5:2005 record of one face whose image data is not an image but
// FixtureMagic followed by a .npy of one float32 template (as idface synth
// writes them). No face model reads it; FixtureExtractor does.
//
//	general header (14): "FAC\0" "010\0" | record length u32 | faces u16 (1)
//	facial header (20):  block length u32 | feature points u16 (0) | gender, eyes, hair u8 |
//	                     property mask [3] | expression u16 | pose [3] | pose uncertainty [3]
//	image info (12):     face image type u8 (1, full frontal) | image data type u8 (0) |
//	                     width u16 | height u16 | colour space u8 | source u8 | device u16 | quality u16
//	image data:          FixtureMagic | .npy (1 x dim, <f4)
const FixtureMagic = "IDFACE-FIXTURE-TEMPLATE/1\n"

const (
	isoGeneral = 14
	isoFacial  = 20
	isoImage   = 12
)

// FixtureRecord writes the fixture face record holding template x.
func FixtureRecord(x []float32) ([]byte, error) {
	var img bytes.Buffer
	img.WriteString(FixtureMagic)
	if err := npy.Write(&img, &npy.Matrix{Rows: 1, Cols: len(x), F32: x}); err != nil {
		return nil, err
	}
	block := isoFacial + isoImage + img.Len()
	total := isoGeneral + block
	b := make([]byte, 0, total)
	b = append(b, faceMagic...)
	b = append(b, faceVersions[0]...)
	b = binary.BigEndian.AppendUint32(b, uint32(total))
	b = binary.BigEndian.AppendUint16(b, 1)
	b = binary.BigEndian.AppendUint32(b, uint32(block))
	b = append(b, make([]byte, isoFacial-4)...) // no feature points, unspecified properties
	b = append(b, 1, 0)                         // full frontal, JPEG as declared
	b = append(b, make([]byte, isoImage-2)...)
	return append(b, img.Bytes()...), nil
}

// FixtureTemplate reads the template of a fixture record, checking the
// record's structure.
func FixtureTemplate(rec []byte) ([]float32, error) {
	if len(rec) < isoGeneral+isoFacial+isoImage || !bytes.Equal(rec[:8], []byte("FAC\x00010\x00")) {
		return nil, fmt.Errorf("abis: not an ISO/IEC 19794-5:2005 record")
	}
	if n := binary.BigEndian.Uint32(rec[8:]); int64(n) != int64(len(rec)) {
		return nil, fmt.Errorf("abis: face record says %d bytes, has %d", n, len(rec))
	}
	if n := binary.BigEndian.Uint16(rec[12:]); n != 1 {
		return nil, fmt.Errorf("abis: face record holds %d faces, want 1", n)
	}
	if n := binary.BigEndian.Uint32(rec[14:]); int64(n) != int64(len(rec)-isoGeneral) {
		return nil, fmt.Errorf("abis: facial block says %d bytes, has %d", n, len(rec)-isoGeneral)
	}
	if n := binary.BigEndian.Uint16(rec[18:]); n != 0 {
		return nil, fmt.Errorf("abis: fixture records have no feature points")
	}
	img := rec[isoGeneral+isoFacial+isoImage:]
	data, ok := bytes.CutPrefix(img, []byte(FixtureMagic))
	if !ok {
		return nil, fmt.Errorf("abis: the face image is not a fixture template (the fixture extractor reads only records idface wrote for tests; plug a face model with --extractor)")
	}
	m, err := npy.Read(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("abis: fixture template: %w", err)
	}
	if m.Rows != 1 {
		return nil, fmt.Errorf("abis: fixture template has %d rows, want 1", m.Rows)
	}
	return m.RowF32(0, nil), nil
}

// FixtureCBEFF is a CBEFF document (MOSIP's CBEFF-XML) holding one face
// BIR whose BDB is the fixture record of x.
func FixtureCBEFF(x []float32) ([]byte, error) {
	rec, err := FixtureRecord(x)
	if err != nil {
		return nil, err
	}
	return CBEFF(rec), nil
}

// CBEFF wraps one face record (ISO/IEC 19794-5) in a CBEFF document as
// MOSIP writes them.
func CBEFF(faceRecord []byte) []byte {
	var b bytes.Buffer
	b.WriteString(`<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<BIR xmlns="http://standards.iso.org/iso-iec/19785/-3/ed-2/">
  <BIRInfo><Integrity>false</Integrity></BIRInfo>
  <BIR>
    <Version><Major>1</Major><Minor>1</Minor></Version>
    <CBEFFVersion><Major>1</Major><Minor>1</Minor></CBEFFVersion>
    <BIRInfo><Integrity>false</Integrity></BIRInfo>
    <BDBInfo>
      <Format><Organization>Mosip</Organization><Type>8</Type></Format>
      <Type>Face</Type>
      <Level>Raw</Level>
      <Purpose>Enroll</Purpose>
      <Quality><Score>100</Score></Quality>
    </BDBInfo>
    <BDB>`)
	b.WriteString(b64(faceRecord))
	b.WriteString("</BDB>\n  </BIR>\n</BIR>\n")
	return b.Bytes()
}
