package dlt_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/batchclaim/batchclaim/dlt"
)

func TestParseFlavor(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"sawtooth", "scabbard"} {
		if f, err := dlt.ParseFlavor(s); err != nil || string(f) != s {
			t.Errorf("ParseFlavor(%q) = %q, %v", s, f, err)
		}
	}
	if _, err := dlt.ParseFlavor("fabric"); err == nil || !strings.Contains(err.Error(), `"fabric"`) {
		t.Errorf("ParseFlavor(fabric) err = %v, want it to name the flavor", err)
	}
}

func TestNewClientValidation(t *testing.T) {
	t.Parallel()
	ok := dlt.Config{Flavor: dlt.FlavorScabbard, URL: "http://node:8085", Circuit: "c", Service: "s"}
	tests := []struct {
		name   string
		change func(*dlt.Config)
		want   string
	}{
		{"unknown flavor", func(c *dlt.Config) { c.Flavor = "fabric" }, `unknown ledger flavor "fabric"`},
		{"no flavor", func(c *dlt.Config) { c.Flavor = "" }, "unknown ledger flavor"},
		{"empty URL", func(c *dlt.Config) { c.URL = "" }, "ledger URL is empty"},
		{"bad URL", func(c *dlt.Config) { c.URL = "http://[::1" }, "ledger URL"},
		{"bad scheme", func(c *dlt.Config) { c.URL = "ftp://node" }, "scheme must be http or https"},
		{"no host", func(c *dlt.Config) { c.URL = "http:///x" }, "has no host"},
		{"query", func(c *dlt.Config) { c.URL = "http://node/?a=b" }, "query or fragment"},
		{"no circuit", func(c *dlt.Config) { c.Circuit = "" }, "scabbard needs a circuit"},
		{"no service", func(c *dlt.Config) { c.Service = "" }, "scabbard needs a service"},
		{"neither", func(c *dlt.Config) { c.Circuit, c.Service = "", "" }, "needs a circuit and a service"},
		{"negative timeout", func(c *dlt.Config) { c.RequestTimeout = -1 }, "request timeout"},
		{"negative concurrency", func(c *dlt.Config) { c.StatusConcurrency = -1 }, "status concurrency"},
		{"negative idle connections", func(c *dlt.Config) { c.IdleConns = -1 }, "idle connections must not be negative"},
		{"idle connections and a client", func(c *dlt.Config) { c.IdleConns, c.HTTPClient = 8, &http.Client{} }, "configure them in the HTTPClient"},
	}
	for _, tt := range tests {
		cfg := ok
		tt.change(&cfg)
		_, err := dlt.NewClient(cfg)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: err = %v, want it to contain %q", tt.name, err, tt.want)
		}
	}
}

func TestNewClientFlavors(t *testing.T) {
	t.Parallel()
	c, err := dlt.NewClient(dlt.Config{Flavor: dlt.FlavorScabbard, URL: "https://node", Circuit: "c", Service: "s"})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := c.(*dlt.Scabbard); !ok || c.Flavor() != dlt.FlavorScabbard || c.OrderedOnValid() {
		t.Fatalf("scabbard client = %T %s ordered=%v", c, c.Flavor(), c.OrderedOnValid())
	}
	c, err = dlt.NewClient(dlt.Config{Flavor: dlt.FlavorSawtooth, URL: "http://rest:8008"})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := c.(*dlt.Sawtooth); !ok || c.Flavor() != dlt.FlavorSawtooth || c.OrderedOnValid() {
		t.Fatalf("sawtooth client = %T %s ordered=%v", c, c.Flavor(), c.OrderedOnValid())
	}
	if _, err := dlt.NewScabbard(dlt.ScabbardConfig{URL: "http://node"}); err == nil {
		t.Fatal("NewScabbard without circuit: no error")
	}
	if _, err := dlt.NewSawtooth(dlt.SawtoothConfig{URL: "node:8008"}); err == nil {
		t.Fatal("NewSawtooth with a URL without scheme: no error")
	}
}
