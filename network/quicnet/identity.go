// Package quicnet is idface's network over QUIC (quic-go) with mutual TLS
// 1.3: every server and every client has its own key and self-signed
// certificate, and each side accepts only the certificates pinned in the
// cluster configuration (SHA-256 of the certificate). It implements the
// network package's Dialer and Listener; it knows nothing of shares or
// templates, and it is the only package of idface that imports quic-go.
package quicnet

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/idface/idface/network"
)

// ALPN is the protocol name negotiated in TLS for wire version version
// (the caller's protocol.Version: quicnet knows no message): "idface/"
// and the version, so incompatible builds refuse each other at the
// handshake.
func ALPN(version int) string { return "idface/" + strconv.Itoa(version) }

// Identity is a key pair with its self-signed certificate, PEM-encoded.
type Identity struct {
	CertPEM, KeyPEM []byte
	Pin             string
}

// GenerateIdentity makes an ECDSA P-256 key and a self-signed certificate
// for name, valid ten years, usable as TLS server and client.
func GenerateIdentity(name string) (*Identity, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: name, Organization: []string{"idface"}},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().AddDate(10, 0, 0),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		DNSNames:     []string{name, "localhost"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	return &Identity{
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}),
		Pin:     Pin(der),
	}, nil
}

// Pin is the pinned fingerprint of a DER certificate: "sha256:<hex>".
func Pin(der []byte) string { return network.Pin(der) }

// LoadCertificate reads a PEM certificate and key and returns the TLS
// certificate with its pin.
func LoadCertificate(certFile, keyFile string) (tls.Certificate, string, error) {
	c, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return tls.Certificate{}, "", fmt.Errorf("quicnet: loading %s: %w", certFile, err)
	}
	return c, Pin(c.Certificate[0]), nil
}

// ErrUnpinned is returned when a peer presents a certificate that is not in
// the cluster configuration.
var ErrUnpinned = fmt.Errorf("quicnet: certificate not pinned in the cluster configuration")

func verifyPinned(allowed func(pin string) bool) func([][]byte, [][]*x509.Certificate) error {
	return func(raw [][]byte, _ [][]*x509.Certificate) error {
		if len(raw) == 0 {
			return fmt.Errorf("quicnet: peer sent no certificate")
		}
		if pin := Pin(raw[0]); !allowed(pin) {
			return fmt.Errorf("%w (%s)", ErrUnpinned, pin)
		}
		return nil
	}
}

// ServerTLS is the listener's TLS config for wire version version: TLS
// 1.3, a client certificate is required and must be pinned. Chain
// validation is replaced by the pin check: the certificates are
// self-signed and identified by hash.
func ServerTLS(cert tls.Certificate, pins Pins, version int) *tls.Config {
	return &tls.Config{
		MinVersion:            tls.VersionTLS13,
		Certificates:          []tls.Certificate{cert},
		ClientAuth:            tls.RequireAnyClientCert,
		NextProtos:            []string{ALPN(version)},
		VerifyPeerCertificate: verifyPinned(func(p string) bool { _, ok := pins[p]; return ok }),
	}
}

// ClientTLS is the dialer's TLS config for wire version version: the
// server must present a certificate with one of serverPins (two while it
// rotates its key).
func ClientTLS(cert tls.Certificate, serverPins []string, version int) *tls.Config {
	return &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{cert},
		NextProtos:   []string{ALPN(version)},
		// The pin replaces name and chain validation; see ServerTLS.
		InsecureSkipVerify: true,
		VerifyPeerCertificate: verifyPinned(func(p string) bool {
			for _, want := range serverPins {
				if strings.EqualFold(p, want) {
					return true
				}
			}
			return false
		}),
	}
}
