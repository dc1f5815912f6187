package testcert

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// Cert is a self-signed certificate and its key, in memory and in two PEM files.
type Cert struct {
	CertPEM, KeyPEM   []byte
	CertFile, KeyFile string
	TLS               tls.Certificate
	X509              *x509.Certificate
}

// New issues a self-signed certificate valid for an hour, for server and client use, naming
// hosts (IP addresses or DNS names; none means 127.0.0.1 and localhost), and writes it to
// files under t.TempDir(). It fails the test on error.
func New(t testing.TB, hosts ...string) Cert {
	t.Helper()
	c, err := Issue(t.TempDir(), hosts...)
	if err != nil {
		t.Fatalf("testcert: %v", err)
	}
	return c
}

// Issue is New without a test: it writes cert.pem and key.pem into dir.
func Issue(dir string, hosts ...string) (Cert, error) {
	if len(hosts) == 0 {
		hosts = []string{"127.0.0.1", "localhost"}
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return Cert{}, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return Cert{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: hosts[0]},
		NotBefore:             time.Now().Add(-time.Minute),
		NotAfter:              time.Now().Add(time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return Cert{}, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return Cert{}, err
	}
	c := Cert{
		CertPEM:  pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:   pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
		CertFile: filepath.Join(dir, "cert.pem"),
		KeyFile:  filepath.Join(dir, "key.pem"),
	}
	if c.X509, err = x509.ParseCertificate(der); err != nil {
		return Cert{}, err
	}
	if c.TLS, err = tls.X509KeyPair(c.CertPEM, c.KeyPEM); err != nil {
		return Cert{}, err
	}
	if err := os.WriteFile(c.CertFile, c.CertPEM, 0o600); err != nil {
		return Cert{}, err
	}
	return c, os.WriteFile(c.KeyFile, c.KeyPEM, 0o600)
}

// Pool is a certificate pool holding only this certificate.
func (c Cert) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(c.X509)
	return p
}
