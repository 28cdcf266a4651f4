package abis

import (
	"bytes"
	"context"
	"encoding/base64"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

const shareDir = "testdata/datashare"

func shareFile(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(shareDir, name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func shareKeys(t testing.TB, pairs ...string) *DataShareKeys {
	t.Helper()
	var paths []string
	for _, p := range pairs {
		paths = append(paths, filepath.Join(shareDir, p))
	}
	k, err := LoadDataShareKeys(paths...)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func failsWith(t *testing.T, err error, code Failure, says string) {
	t.Helper()
	if err == nil || CodeOf(err) != code || !strings.Contains(err.Error(), says) {
		t.Fatalf("got %v, want failure %d saying %q", err, code, says)
	}
}

// TestDataShareJavaVectors opens data shares that Java's JCE sealed as
// MOSIP's key manager does (testdata/datashare/MosipEncrypt.java, both
// forms), and refuses them with the key of another partner, naming the
// certificate they are sealed to; with both keys (a rotation) they open.
func TestDataShareJavaVectors(t *testing.T) {
	want := shareFile(t, "cbeff.xml")
	for _, form := range []string{"ver_r2", "legacy"} {
		share := shareFile(t, "share-"+form+".txt")
		got, err := shareKeys(t, "pair.pem").Open(share)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%s: %q, %v", form, got, err)
		}
		_, err = shareKeys(t, "other-pair.pem").Open(share)
		failsWith(t, err, FailCBEFF, "sealed to the certificate of thumbprint")
		failsWith(t, err, FailCBEFF, "does not open with this ABIS's private keys")
		if got, err := shareKeys(t, "other-pair.pem", "pair.pem").Open(share); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%s with two keys: %v", form, err)
		}
		// The standard alphabet, padding and line breaks read the same.
		raw, err := base64.URLEncoding.DecodeString(string(share))
		if err != nil {
			t.Fatal(err)
		}
		std := base64.StdEncoding.EncodeToString(raw)
		std = std[:40] + "\r\n" + std[40:] + "\n"
		if got, err := shareKeys(t, "pair.pem").Open([]byte(std)); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%s in standard base64: %v", form, err)
		}
	}
}

// TestDataShareResigned: MOSIP seals to the certificate its partner
// management re-signed for the partner (same key, another issuer, so
// another thumbprint): it opens with the partner's own pair, by trying the
// key, and with the re-signed certificate added to the pair's file, by
// its thumbprint.
func TestDataShareResigned(t *testing.T) {
	want, share := shareFile(t, "cbeff.xml"), shareFile(t, "share-resigned.txt")
	if got, err := shareKeys(t, "pair.pem").Open(share); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("with the partner's own certificate: %v", err)
	}
	var k DataShareKeys
	if err := k.Add(append(shareFile(t, "pair.pem"), shareFile(t, "resigned.pem")...)); err != nil {
		t.Fatal(err)
	}
	if len(k.keys) != 1 || len(k.keys[0].thumbs) != 2 {
		t.Fatalf("a key with two certificates of it: %d keys, %d thumbprints", len(k.keys), len(k.keys[0].thumbs))
	}
	if got, err := k.Open(share); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("with the re-signed certificate: %v", err)
	}
}

// TestDataShareLegacyForms: the older form without a thumbprint opens
// (for a 2048-bit key and a 3072-bit one, whose sealed key alone is longer
// than 256 bytes), and its data cut short is refused.
func TestDataShareLegacyForms(t *testing.T) {
	want := shareFile(t, "cbeff.xml")
	for _, c := range []struct{ pair, share string }{{"pair.pem", "share-legacy.txt"}, {"pair3072.pem", "share-legacy3072.txt"}} {
		raw, err := base64.URLEncoding.DecodeString(string(shareFile(t, c.share)))
		if err != nil {
			t.Fatal(err)
		}
		k := shareKeys(t, c.pair)
		if got, err := k.Open(shareFile(t, c.share)); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%s: %v", c.share, err)
		}
		bare := []byte(base64.RawURLEncoding.EncodeToString(raw[thumbprintSize:]))
		if got, err := k.Open(bare); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%s without its thumbprint: %v", c.share, err)
		}
		split := bytes.Index(raw, []byte(shareSplitter)) + len(shareSplitter)
		for _, n := range []int{0, 1, legacyNonceSize + gcmTagSize - 1} {
			_, err := k.Open([]byte(base64.RawURLEncoding.EncodeToString(raw[:split+n])))
			failsWith(t, err, FailCBEFF, "too short")
		}
		_, err = k.Open([]byte(base64.RawURLEncoding.EncodeToString(raw[:split+legacyNonceSize+gcmTagSize])))
		failsWith(t, err, FailCBEFF, "does not open with its key")
	}
}

// TestDataShareRefused: a data share altered, cut or malformed anywhere
// is refused with FailCBEFF, saying why, and nothing of it is returned.
func TestDataShareRefused(t *testing.T) {
	k := shareKeys(t, "pair.pem")
	raw, err := base64.URLEncoding.DecodeString(string(shareFile(t, "share-ver_r2.txt")))
	if err != nil {
		t.Fatal(err)
	}
	enc := func(b []byte) []byte { return []byte(base64.RawURLEncoding.EncodeToString(b)) }
	split := bytes.Index(raw, []byte(shareSplitter))
	flip := func(i int) []byte {
		b := bytes.Clone(raw)
		b[i] ^= 1
		return enc(b)
	}
	// A thumbprint altered names no certificate of this partner: the key
	// is tried, as MOSIP's mock ABIS does, and the share opens.
	if got, err := k.Open(flip(len(shareVersion))); err != nil || !bytes.Equal(got, shareFile(t, "cbeff.xml")) {
		t.Fatalf("a share with its thumbprint altered: %v", err)
	}
	for _, c := range []struct {
		name string
		doc  []byte
		says string
	}{
		{"plain XML", shareFile(t, "cbeff.xml"), "not base64"},
		{"no splitter", enc(raw[:split]), "no key part"},
		{"a byte of the sealed key", flip(split - 1), "does not open with this ABIS's private key"},

		{"a byte of the AAD", flip(split + len(shareSplitter)), "does not open with its key"},
		{"a byte of the ciphertext", flip(len(raw) - 20), "does not open with its key"},
		{"the tag cut", enc(raw[:len(raw)-1]), "does not open with its key"},
		{"the data cut to the AAD", enc(raw[:split+len(shareSplitter)+shareAADSize]), "too short"},
		{"only the version", enc([]byte(shareVersion + shareSplitter)), "too short"},
		{"empty", nil, "no key part"},
	} {
		got, err := k.Open(c.doc)
		if got != nil {
			t.Errorf("%s: returned %d bytes", c.name, len(got))
		}
		if err == nil || CodeOf(err) != FailCBEFF || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s: %v, want failure %d saying %q", c.name, err, FailCBEFF, c.says)
		}
	}
}

// TestDataShareKeyFiles: a key file needs an RSA key and its own
// certificate.
func TestDataShareKeyFiles(t *testing.T) {
	pair, other := shareFile(t, "pair.pem"), shareFile(t, "other-pair.pem")
	cut := func(b []byte, block string) []byte {
		i := bytes.Index(b, []byte("-----BEGIN "+block))
		j := bytes.Index(b[i:], []byte("-----END "+block))
		end := i + j + bytes.IndexByte(b[i+j:], '\n') + 1
		return append(bytes.Clone(b[:i]), b[end:]...)
	}
	keyOnly, certOnly := cut(pair, "CERTIFICATE"), cut(pair, "PRIVATE KEY")
	mixed := append(bytes.Clone(keyOnly), cut(other, "PRIVATE KEY")...)
	for _, c := range []struct {
		name string
		pem  []byte
		says string
	}{
		{"no certificate", keyOnly, "no certificate"},
		{"no key", certOnly, "no RSA private key"},
		{"another's certificate", mixed, "no certificate is of the private key"},
		{"two keys", append(bytes.Clone(pair), cut(other, "CERTIFICATE")...), "two private keys"},
		{"an encrypted key", []byte("-----BEGIN ENCRYPTED PRIVATE KEY-----\nAAAA\n-----END ENCRYPTED PRIVATE KEY-----\n"), "an encrypted private key"},
		{"an EC key", []byte("-----BEGIN EC PRIVATE KEY-----\nAAAA\n-----END EC PRIVATE KEY-----\n"), "an EC private key"},
		{"not PEM", []byte("hello"), "no RSA private key"},
	} {
		var k DataShareKeys
		if err := k.Add(c.pem); err == nil || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s: %v, want %q", c.name, err, c.says)
		}
	}
	if _, err := LoadDataShareKeys(); err == nil {
		t.Error("no key file was taken")
	}
}

// TestFetcherOpensDataShares: with keys, the fetcher returns the document
// a data share seals, and refuses a plain one.
func TestFetcherOpensDataShares(t *testing.T) {
	docs := map[string][]byte{"/share": shareFile(t, "share-ver_r2.txt"), "/plain": shareFile(t, "cbeff.xml"), "/empty": shareFile(t, "share-empty.txt")}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write(docs[r.URL.Path]) }))
	defer srv.Close()
	f := &Fetcher{AllowHTTP: true, Keys: shareKeys(t, "pair.pem")}
	got, err := f.Fetch(context.Background(), srv.URL+"/share")
	if err != nil || !bytes.Equal(got, docs["/plain"]) {
		t.Fatalf("a data share: %q %v", got, err)
	}
	_, err = f.Fetch(context.Background(), srv.URL+"/plain")
	failsWith(t, err, FailCBEFF, "not base64")
	_, err = f.Fetch(context.Background(), srv.URL+"/empty")
	failsWith(t, err, FailNoData, "empty document")
	// The bound is the document's: its base64 share is larger.
	f.MaxBytes = int64(len(docs["/plain"]))
	if _, err := f.Fetch(context.Background(), srv.URL+"/share"); err != nil {
		t.Fatalf("a share of a document at the bound: %v", err)
	}
	f.MaxBytes--
	_, err = f.Fetch(context.Background(), srv.URL+"/share")
	failsWith(t, err, FailFetch, "over")
}

// TestDataShareLiveJava seals a fresh document with Java's JCE as MOSIP
// does (MosipEncrypt.java) and opens it; skipped where no JDK is
// installed (the vectors above were made so).
func TestDataShareLiveJava(t *testing.T) {
	java, err := exec.LookPath("java")
	if err != nil {
		t.Skip("no java")
	}
	if _, err := exec.LookPath("javac"); err != nil {
		t.Skip("no JDK (javac): java cannot run a source file")
	}
	doc := filepath.Join(t.TempDir(), "doc.xml")
	want := []byte("<BIR>" + strings.Repeat("face ", 1000) + "</BIR>")
	if err := os.WriteFile(doc, want, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, form := range []string{"ver_r2", "legacy"} {
		out, err := exec.Command(java, filepath.Join(shareDir, "MosipEncrypt.java"), filepath.Join(shareDir, "cert.pem"), doc, form).Output()
		if err != nil {
			t.Fatalf("%s: %v", form, err)
		}
		if got, err := shareKeys(t, "pair.pem").Open(out); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%s: %v", form, err)
		}
	}
}

// FuzzDataShareOpen: anything from a referenceURL is refused or opened,
// never a panic.
func FuzzDataShareOpen(f *testing.F) {
	f.Add(shareFile(f, "share-ver_r2.txt"))
	f.Add(shareFile(f, "share-legacy.txt"))
	f.Add([]byte(base64.RawURLEncoding.EncodeToString([]byte(shareVersion + shareSplitter))))
	k := shareKeys(f, "pair.pem")
	f.Fuzz(func(t *testing.T, doc []byte) {
		if got, err := k.Open(doc); err != nil && got != nil {
			t.Fatalf("%v with %d bytes", err, len(got))
		}
	})
}
