package testcert_test

import (
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"

	"github.com/batchclaim/batchclaim/testkit/testcert"
)

// A server with the certificate, a client that trusts it.
func Example() {
	dir, _ := os.MkdirTemp("", "cert")
	defer os.RemoveAll(dir)
	cert, err := testcert.Issue(dir) // in a test: testcert.New(t)
	if err != nil {
		fmt.Println(err)
		return
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "hello over TLS") }))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert.TLS}}
	srv.StartTLS()
	defer srv.Close()
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: cert.Pool()}}}
	resp, err := client.Get(srv.URL)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	fmt.Println(string(b))
	// Output: hello over TLS
}
