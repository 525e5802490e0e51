package redistest

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
	"os"
	"path/filepath"
	"time"
)

// TLSFiles is a throwaway certificate authority and a server certificate it
// signed for 127.0.0.1, written as PEM files, for a TLS Redis in tests (see
// StartTLSProcess). Nothing else trusts the CA, so a client that does not
// load CAFile cannot connect.
type TLSFiles struct {
	CAFile   string // the CA certificate
	CertFile string // the server certificate, for IP 127.0.0.1
	KeyFile  string // the server's private key

	ca *x509.Certificate
}

// tlsValidity is how long the generated certificates are valid. Not before
// is set an hour back, so a clock that moves a little does not matter.
const tlsValidity = 24 * time.Hour

// NewTLSFiles generates a fresh ECDSA P-256 CA and server certificate and
// writes them into dir (e.g. t.TempDir()).
func NewTLSFiles(dir string) (*TLSFiles, error) {
	now := time.Now()
	ca, caKey, err := issue(&x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "latchkey test CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(tlsValidity),
		KeyUsage:              x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}, nil, nil)
	if err != nil {
		return nil, fmt.Errorf("redistest: making the test CA: %w", err)
	}
	cert, key, err := issue(&x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "127.0.0.1"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(tlsValidity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}, ca, caKey)
	if err != nil {
		return nil, fmt.Errorf("redistest: making the server certificate: %w", err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("redistest: encoding the server key: %w", err)
	}

	f := &TLSFiles{
		CAFile:   filepath.Join(dir, "ca.pem"),
		CertFile: filepath.Join(dir, "server.pem"),
		KeyFile:  filepath.Join(dir, "server-key.pem"),
		ca:       ca,
	}
	for _, w := range []struct {
		path, typ string
		der       []byte
	}{{f.CAFile, "CERTIFICATE", ca.Raw}, {f.CertFile, "CERTIFICATE", cert.Raw}, {f.KeyFile, "PRIVATE KEY", keyDER}} {
		data := pem.EncodeToMemory(&pem.Block{Type: w.typ, Bytes: w.der})
		if err := os.WriteFile(w.path, data, 0o600); err != nil {
			return nil, fmt.Errorf("redistest: writing %s: %w", w.path, err)
		}
	}
	return f, nil
}

// issue generates a key and a certificate for it from tmpl, signed by
// parent with parentKey, or self-signed when parent is nil.
func issue(tmpl, parent *x509.Certificate, parentKey *ecdsa.PrivateKey) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		return nil, nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, err
	}
	return cert, key, nil
}

// ClientConfig returns a client configuration that trusts only the CA.
func (f *TLSFiles) ClientConfig() *tls.Config {
	pool := x509.NewCertPool()
	pool.AddCert(f.ca)
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
}

// ServerArgs are the redis-server arguments that serve the certificate.
// Clients need no certificate of their own (--tls-auth-clients no).
func (f *TLSFiles) ServerArgs() []string {
	return []string{
		"--tls-cert-file", f.CertFile,
		"--tls-key-file", f.KeyFile,
		"--tls-ca-cert-file", f.CAFile,
		"--tls-auth-clients", "no",
	}
}
