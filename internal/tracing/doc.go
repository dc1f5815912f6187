// Package tracing starts the OpenTelemetry spans of batchclaim's data path: enqueue, the
// claim cycle, the queuer's fetch and in-flight mark, the submission (POST), the recording of
// its outcome, and the status poll.
//
// Spans come from the tracer of otel.GetTracerProvider() at the time they start: a no-op
// until a program installs a provider (otel.SetTracerProvider), and until then none is
// started at all (the context stays as it was). The library depends on the OpenTelemetry
// API only; the run command installs the SDK and an exporter when the standard OTEL_*
// environment variables ask for one (see docs/observability.md).
package tracing
