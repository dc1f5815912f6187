package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// librarySpan records a span as the library's code does: from the global tracer provider,
// under the library's instrumentation scope, with one of the span names and attributes
// docs/observability.md lists. What startTracing installed exports it.
func librarySpan(name string, attrs ...attribute.KeyValue) {
	_, span := otel.GetTracerProvider().Tracer("github.com/batchclaim/batchclaim").
		Start(context.Background(), name, trace.WithAttributes(attrs...))
	span.End()
}

// Traces are off unless the standard environment variables ask for them; a value that is
// not supported is refused by name.
func TestTraceExporterFromEnv(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		env  map[string]string
		want string
		err  string
	}{
		{env: nil, want: ""},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "none"}, want: ""},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, want: "otlp"},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/v1/traces"}, want: "otlp"},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, want: "otlp"},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "Console"}, want: "console"},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, want: ""},
		{env: map[string]string{"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "otlp"}, want: ""},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"}, want: "otlp"},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, err: "OTEL_EXPORTER_OTLP_PROTOCOL=grpc: only http/protobuf"},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
			"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/json"}, err: "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=http/json"},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, err: "OTEL_TRACES_EXPORTER=zipkin: want otlp, console or none"},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp,console"}, err: "OTEL_TRACES_EXPORTER=otlp,console"},
	} {
		got, err := traceExporter(func(k string) string { return tt.env[k] })
		switch {
		case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
			t.Errorf("%v: error %v, want one saying %q", tt.env, err, tt.err)
		case tt.err == "" && (err != nil || got != tt.want):
			t.Errorf("%v: %q %v, want %q", tt.env, got, err, tt.want)
		}
	}
}

// Off by default: startTracing leaves the no-op provider in place.
func TestStartTracingOff(t *testing.T) {
	before := otel.GetTracerProvider()
	stop, err := startTracing(context.Background(), func(string) string { return "" }, io.Discard, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	stop()
	if otel.GetTracerProvider() != before {
		t.Error("startTracing without OTEL_* variables installed a tracer provider")
	}
}

// With an OTLP endpoint set, the spans go there over OTLP/HTTP, with the service's name; the
// ones still buffered are sent at stop.
func TestStartTracingOTLP(t *testing.T) {
	var (
		mu     sync.Mutex
		bodies [][]byte
		paths  []string
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		bodies, paths = append(bodies, b), append(paths, r.URL.Path)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	defer srv.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", srv.URL)
	t.Setenv("OTEL_SERVICE_NAME", "")
	t.Cleanup(func() { otel.SetTracerProvider(noop.NewTracerProvider()) })

	stop, err := startTracing(context.Background(), os.Getenv, io.Discard, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	librarySpan("batchclaim.post", attribute.String("batchclaim.service_id", "otlp-svc"))
	stop()

	mu.Lock()
	defer mu.Unlock()
	if len(bodies) == 0 {
		t.Fatal("no OTLP request")
	}
	all := bytes.Join(bodies, nil)
	for _, want := range []string{"batchclaim.post", "otlp-svc", "batchclaim.service_id", "service.name", "batchclaim", version} {
		if !bytes.Contains(all, []byte(want)) {
			t.Errorf("OTLP export lacks %q", want)
		}
	}
	if paths[0] != "/v1/traces" {
		t.Errorf("OTLP request to %s, want /v1/traces", paths[0])
	}
}

// OTEL_TRACES_EXPORTER=console writes the spans as JSON.
func TestStartTracingConsole(t *testing.T) {
	t.Cleanup(func() { otel.SetTracerProvider(noop.NewTracerProvider()) })
	var out bytes.Buffer
	env := map[string]string{"OTEL_TRACES_EXPORTER": "console"}
	stop, err := startTracing(context.Background(), func(k string) string { return env[k] }, &out, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	librarySpan("batchclaim.enqueue", attribute.String("batchclaim.batch_id", "console-batch"))
	stop()
	for _, want := range []string{`"Name":"batchclaim.enqueue"`, "console-batch"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("console output lacks %s: %.300s", want, out.String())
		}
	}
}
