package dlt_test

import (
	"crypto/tls"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/batchclaim/batchclaim"
	"github.com/batchclaim/batchclaim/dlt"
	"github.com/batchclaim/batchclaim/testkit/testcert"
)

// The client trusts the CA file's certificates and presents its client certificate to a
// ledger that demands one.
func TestClientTLS(t *testing.T) {
	t.Parallel()
	serverCert, clientCert, stranger := testcert.New(t), testcert.New(t, "batchclaim-client"), testcert.New(t)
	var sawClient string
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sawClient = r.TLS.PeerCertificates[0].Subject.CommonName
		w.WriteHeader(http.StatusAccepted)
		_, _ = w.Write([]byte(`{"link":"/batch_statuses?id=x"}`))
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{serverCert.TLS}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: clientCert.Pool()}
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshakes below
	srv.StartTLS()
	t.Cleanup(srv.Close)
	_, list := dlt.FakeBatch("svc-tls", 0)

	// A ledger refusing the client certificate does so after the client finished its side of
	// the handshake (TLS 1.3), so the request may already be written when the refusal arrives:
	// the verdict is then Unknown, else Retry. A server certificate the client does not trust
	// stops the handshake before any request: Retry.
	refused := []batchclaim.Verdict{batchclaim.Retry, batchclaim.Unknown}
	tests := []struct {
		name           string
		ca, cert, key  string
		verdicts       []batchclaim.Verdict // any of
		detailContains string
	}{
		{"CA file and client certificate", serverCert.CertFile, clientCert.CertFile, clientCert.KeyFile, []batchclaim.Verdict{batchclaim.Accepted}, ""},
		{"no client certificate", serverCert.CertFile, "", "", refused, "certificate"},
		{"client certificate the ledger does not trust", serverCert.CertFile, stranger.CertFile, stranger.KeyFile, refused, "certificate"},
		{"CA file of another authority", stranger.CertFile, clientCert.CertFile, clientCert.KeyFile, []batchclaim.Verdict{batchclaim.Retry}, "certificate signed by unknown authority"},
	}
	for _, tt := range tests {
		c, err := dlt.NewClient(dlt.Config{Flavor: dlt.FlavorSawtooth, URL: srv.URL, CAFile: tt.ca, ClientCertFile: tt.cert, ClientKeyFile: tt.key})
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		res, err := c.Post(t.Context(), list)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if !slices.Contains(tt.verdicts, res.Verdict) || !strings.Contains(res.Detail, tt.detailContains) {
			t.Errorf("%s: verdict %s detail %q, want one of %v with %q", tt.name, res.Verdict, res.Detail, tt.verdicts, tt.detailContains)
		}
		if res.Verdict == batchclaim.Accepted && sawClient != "batchclaim-client" {
			t.Errorf("%s: the ledger saw client certificate %q", tt.name, sawClient)
		}
	}
}

func TestClientTLSValidation(t *testing.T) {
	t.Parallel()
	cert := testcert.New(t)
	notPEM := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(notPEM, []byte("not a certificate\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ok := dlt.Config{Flavor: dlt.FlavorSawtooth, URL: "https://ledger:8008"}
	tests := []struct {
		name   string
		change func(*dlt.Config)
		want   string
	}{
		{"certificate without key", func(c *dlt.Config) { c.ClientCertFile = cert.CertFile }, "a client certificate and its key go together"},
		{"key without certificate", func(c *dlt.Config) { c.ClientKeyFile = cert.KeyFile }, "a client certificate and its key go together"},
		{"CA file for an http URL", func(c *dlt.Config) { c.URL, c.CAFile = "http://ledger:8008", cert.CertFile }, "ledger URL is http, not https"},
		{"CA file and an HTTPClient", func(c *dlt.Config) { c.CAFile, c.HTTPClient = cert.CertFile, &http.Client{} }, "configure TLS in the HTTPClient"},
		{"missing CA file", func(c *dlt.Config) { c.CAFile = filepath.Join(t.TempDir(), "none.pem") }, "read CA file"},
		{"CA file without a certificate", func(c *dlt.Config) { c.CAFile = notPEM }, "holds no PEM certificate"},
		{"key that is not a key", func(c *dlt.Config) { c.ClientCertFile, c.ClientKeyFile = cert.CertFile, notPEM }, "load client certificate"},
	}
	for _, tt := range tests {
		cfg := ok
		tt.change(&cfg)
		if _, err := dlt.NewClient(cfg); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: err = %v, want it to contain %q", tt.name, err, tt.want)
		}
	}
}
