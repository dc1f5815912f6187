package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// tracingShutdownTimeout bounds the export of the spans still buffered when the process stops.
const tracingShutdownTimeout = 5 * time.Second

// traceExporter is the span exporter the standard OpenTelemetry environment variables ask
// for: "" when traces are off, else "otlp" or "console".
//
//   - OTEL_SDK_DISABLED=true turns everything off.
//   - OTEL_TRACES_EXPORTER: otlp, console or none; unset means otlp when an OTLP endpoint is
//     set (OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT), else none.
//   - OTEL_EXPORTER_OTLP_(TRACES_)PROTOCOL: http/protobuf (the default) only.
func traceExporter(getenv func(string) string) (string, error) {
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") {
		return "", nil
	}
	kind := strings.ToLower(strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")))
	if kind == "" && (getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != "") {
		kind = "otlp"
	}
	switch kind {
	case "", "none":
		return "", nil
	case "console":
		return kind, nil
	case "otlp":
		proto := getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
		name := "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
		if proto == "" {
			proto, name = getenv("OTEL_EXPORTER_OTLP_PROTOCOL"), "OTEL_EXPORTER_OTLP_PROTOCOL"
		}
		if proto != "" && proto != "http/protobuf" {
			return "", fmt.Errorf("%s=%s: only http/protobuf is built in (an OTLP/HTTP endpoint, port 4318 on a collector)", name, proto)
		}
		return kind, nil
	}
	return "", fmt.Errorf("OTEL_TRACES_EXPORTER=%s: want otlp, console or none (one exporter)", getenv("OTEL_TRACES_EXPORTER"))
}

// startTracing installs the OpenTelemetry SDK as the global tracer provider when the
// environment asks for traces (traceExporter), exporting to an OTLP/HTTP endpoint (configured
// by the standard OTEL_EXPORTER_OTLP_* variables) or as JSON to console. The resource is
// service.name batchclaim (OTEL_SERVICE_NAME overrides it), service.version and
// OTEL_RESOURCE_ATTRIBUTES; sampling follows OTEL_TRACES_SAMPLER (default: every trace).
// stop exports the spans still buffered.
func startTracing(ctx context.Context, getenv func(string) string, console io.Writer, logger *slog.Logger) (stop func(), err error) {
	kind, err := traceExporter(getenv)
	if err != nil || kind == "" {
		return func() {}, err
	}
	var exp sdktrace.SpanExporter
	switch kind {
	case "otlp":
		exp, err = otlptracehttp.New(ctx) // reads OTEL_EXPORTER_OTLP_* itself; dials lazily
	case "console":
		exp, err = stdouttrace.New(stdouttrace.WithWriter(console))
	}
	if err != nil {
		return nil, fmt.Errorf("traces (OTEL_TRACES_EXPORTER=%s): %w", kind, err)
	}
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(
		attribute.String("service.name", "batchclaim"), attribute.String("service.version", version)))
	if err == nil {
		res, err = resource.Merge(res, envResource(ctx))
	}
	if err != nil {
		return nil, fmt.Errorf("traces: resource: %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	otel.SetTracerProvider(tp)
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) { logger.Warn("traces", "error", err) }))
	logger.Info("exporting traces", "exporter", kind)
	return func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), tracingShutdownTimeout)
		defer cancel()
		if err := tp.Shutdown(sctx); err != nil && !errors.Is(err, context.Canceled) {
			logger.Warn("traces: export at stop", "error", err)
		}
	}, nil
}

// envResource is what OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES say (empty when unset or
// malformed: a bad attribute list is the SDK's to report, not a reason not to start).
func envResource(ctx context.Context) *resource.Resource {
	r, err := resource.New(ctx, resource.WithFromEnv())
	if err != nil && r == nil {
		return resource.Empty()
	}
	return r
}
