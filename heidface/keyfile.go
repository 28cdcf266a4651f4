package heidface

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"hash/crc32"

	"github.com/tuneinsight/lattigo/v5/core/rlwe"
	"github.com/tuneinsight/lattigo/v5/schemes/bgv"
)

// KeyKind says what a key file holds.
type KeyKind uint8

const (
	SecretKeyFile KeyKind = 1
	PublicKeyFile KeyKind = 2
)

var keyMagic = [4]byte{'I', 'D', 'F', 'K'}

// keyFormat is the key file format: 2 binds the key to a cluster and its
// key server (KeyBinding); format 1 did not and is refused by name.
const keyFormat = 2

// MarshalKeyFile frames a key's binary form for a file:
//
//	"IDFK" | format u8 (2) | kind u8 | cluster id [16] | key server name length u8 | name | length u32 | key | CRC-32C u32 of all before
//
// so that a truncated or damaged key file, or one of another cluster, is
// refused, never used.
func MarshalKeyFile(kind KeyKind, bind KeyBinding, key []byte) []byte {
	b := append(keyMagic[:0:0], keyMagic[:]...)
	b = append(b, keyFormat, byte(kind))
	b = append(b, bind.Cluster[:]...)
	name := bind.KeyServer[:min(len(bind.KeyServer), 255)] // names have at most 64 bytes (config.CheckName)
	b = append(b, byte(len(name)))
	b = append(b, name...)
	b = binary.BigEndian.AppendUint32(b, uint32(len(key)))
	b = append(b, key...)
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

// ParseKeyFile checks a key file's framing and checksum and returns the
// key's binary form and what the file is bound to, for the caller to
// compare.
func ParseKeyFile(b []byte, kind KeyKind) ([]byte, KeyBinding, error) {
	var bind KeyBinding
	if len(b) < 6 || !bytes.Equal(b[:4], keyMagic[:]) {
		return nil, bind, fmt.Errorf("heidface: not an idface key file")
	}
	if b[4] != keyFormat {
		return nil, bind, fmt.Errorf("heidface: key file of format %d; this build reads format %d only (format 1 was written by an earlier idface and is not bound to a cluster: "+
			"run the earlier release to finish with that cluster, or start a new cluster)", b[4], keyFormat)
	}
	if KeyKind(b[5]) != kind {
		return nil, bind, fmt.Errorf("heidface: key file of kind %d, want kind %d", b[5], kind)
	}
	if len(b) < 4+2+16+1 {
		return nil, bind, fmt.Errorf("heidface: key file of %d bytes: truncated", len(b))
	}
	copy(bind.Cluster[:], b[6:22])
	nl := int(b[22])
	head := 23 + nl + 4
	if len(b) < head+4 {
		return nil, bind, fmt.Errorf("heidface: key file of %d bytes: truncated", len(b))
	}
	bind.KeyServer = string(b[23 : 23+nl])
	n := int(binary.BigEndian.Uint32(b[23+nl:]))
	if n != len(b)-head-4 {
		return nil, bind, fmt.Errorf("heidface: key file holds %d bytes, its header says %d: truncated or damaged", len(b)-head-4, n)
	}
	if crc32.Checksum(b[:len(b)-4], castagnoli) != binary.BigEndian.Uint32(b[len(b)-4:]) {
		return nil, bind, fmt.Errorf("heidface: key file checksum mismatch: the file is damaged")
	}
	return b[head : head+n], bind, nil
}

// Fingerprint names a public key: SHA-256 of its binary form. Local
// servers send it with every query so that a key server with another key
// refuses instead of decrypting garbage.
func Fingerprint(pk []byte) [32]byte { return sha256.Sum256(pk) }

// UnmarshalSecretKey parses a secret key's binary form for p.
func UnmarshalSecretKey(p *BGVScheme, b []byte) (sk *rlwe.SecretKey, err error) {
	defer func() {
		if r := recover(); r != nil {
			sk, err = nil, fmt.Errorf("heidface: malformed secret key")
		}
	}()
	sk = rlwe.NewSecretKey(p.BGV)
	if err := sk.UnmarshalBinary(b); err != nil {
		return nil, fmt.Errorf("heidface: secret key: %w", err)
	}
	return sk, nil
}

// UnmarshalPublicKey parses a public key's binary form for p.
func UnmarshalPublicKey(p *BGVScheme, b []byte) (pk *rlwe.PublicKey, err error) {
	defer func() {
		if r := recover(); r != nil {
			pk, err = nil, fmt.Errorf("heidface: malformed public key")
		}
	}()
	pk = rlwe.NewPublicKey(p.BGV)
	if err := pk.UnmarshalBinary(b); err != nil {
		return nil, fmt.Errorf("heidface: public key: %w", err)
	}
	if pk.Value[0].Q.N() != p.N() || pk.LevelQ() != p.BGV.MaxLevel() {
		return nil, fmt.Errorf("heidface: public key for other parameters")
	}
	return pk, nil
}

// CheckKeyPair verifies that sk decrypts what pk encrypts: a key server
// whose two files disagree must not start.
func CheckKeyPair(p *BGVScheme, sk *rlwe.SecretKey, pk *rlwe.PublicKey) error {
	pt := bgv.NewPlaintext(p.BGV, p.BGV.MaxLevel())
	pt.IsBatched = false
	want := make([]uint64, p.N())
	for i := range want {
		want[i] = uint64(i*7919) % p.BGV.PlaintextModulus()
	}
	ecd := bgv.NewEncoder(p.BGV)
	if err := ecd.Encode(want, pt); err != nil {
		return err
	}
	ct, err := rlwe.NewEncryptor(p.BGV, pk).EncryptNew(pt)
	if err != nil {
		return err
	}
	got := make([]uint64, p.N())
	if err := ecd.Decode(rlwe.NewDecryptor(p.BGV, sk).DecryptNew(ct), got); err != nil {
		return err
	}
	for i := range want {
		if got[i] != want[i] {
			return fmt.Errorf("heidface: the secret key does not decrypt what the public key encrypts: the key files belong to different key pairs")
		}
	}
	return nil
}
