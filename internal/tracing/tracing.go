package tracing

import (
	"context"
	"reflect"
	"sync/atomic"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/batchclaim/batchclaim"
)

// Scope is the instrumentation scope of every span.
const Scope = "github.com/batchclaim/batchclaim"

// Span names.
const (
	Enqueue    = "batchclaim.enqueue"     // one batch stored (ingest)
	ClaimCycle = "batchclaim.claim_cycle" // one claim cycle (claims)
	Fetch      = "batchclaim.fetch"       // the queuer reads the head batches of held service_ids, marking the NEW ones that go
	Mark       = "batchclaim.mark"        // the queuer marks the other head batches that go in flight
	Post       = "batchclaim.post"        // one submission: the Submitter's call (submitter)
	Outcome    = "batchclaim.outcome"     // its outcome recorded, fenced on the claim (observer)
	Poll       = "batchclaim.poll"        // one status poll of the ledger (observer)
)

// Attribute keys.
const (
	ServiceID = attribute.Key("batchclaim.service_id")
	BatchID   = attribute.Key("batchclaim.batch_id")
	Seq       = attribute.Key("batchclaim.seq")     // the batch's place in its service_id's order
	Epoch     = attribute.Key("batchclaim.epoch")   // the epoch of the claim the work runs under
	Attempt   = attribute.Key("batchclaim.attempt") // this submission's number, 1 for the first
	Reason    = attribute.Key("batchclaim.reason")  // first | retry | resubmit
	Verdict   = attribute.Key("batchclaim.verdict")
	HTTPCode  = attribute.Key("http.response.status_code")
	Batches   = attribute.Key("batchclaim.batches") // batches a fetch, mark or poll dealt with
	Claims    = attribute.Key("batchclaim.claims")  // claims held (cycle) or looked at (fetch)
	New       = attribute.Key("batchclaim.new")     // false: the batch was stored before
)

// Start starts a span of the current global tracer provider with attrs. A caller on a path
// run for every job should pass none and set them under span.IsRecording, as StartJob does:
// they are built even while no provider is installed.
func Start(ctx context.Context, name string, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	t, off := tracer()
	if off {
		return ctx, noSpan
	}
	return t.Start(ctx, name, trace.WithAttributes(attrs...))
}

// noSpan is the span Start and StartJob return while no provider is installed: it records
// nothing, ends nothing, and costs no allocation.
var noSpan = trace.SpanFromContext(context.Background())

// providerTracer is the tracer of one provider.
type providerTracer struct {
	tp  trace.TracerProvider
	t   trace.Tracer
	off bool // tp is a provider whose spans are never recorded or exported (noProvider)
}

// noProvider reports whether tp is OpenTelemetry's global provider while no program has
// installed one, or the API's no-op provider: their spans record nothing, and a span started
// from them would only copy its parent's span context into a new context. Start and StartJob
// then start none, and leave ctx as it is, whose span context is the same: an instance runs
// thousands of jobs a second, each with two spans, and these are allocations a job. The
// global provider is recognised by its type, as the API keeps it unexported; should the API
// rename it, spans are started as before and TestNoProviderCostsNothing fails.
func noProvider(tp trace.TracerProvider) bool {
	if _, ok := tp.(noop.TracerProvider); ok {
		return true
	}
	t := reflect.TypeOf(tp)
	return t.Kind() == reflect.Pointer && t.Elem().PkgPath() == "go.opentelemetry.io/otel/internal/global" && t.Elem().Name() == "tracerProvider"
}

// last is the tracer of the provider tracer last saw.
var last atomic.Pointer[providerTracer]

// tracer returns the current global provider's tracer of Scope. It is kept while the provider
// stays the same: a provider's Tracer may take a lock and look up a map (the default
// provider's does), and every job starts two spans.
func tracer() (t trace.Tracer, off bool) {
	tp := otel.GetTracerProvider()
	// last keeps only a provider that is a pointer (the SDK's, the default one), so that this
	// comparison is of two pointers or of two values of different types, and never panics.
	if c := last.Load(); c != nil && c.tp == tp {
		return c.t, c.off
	}
	t, off = tp.Tracer(Scope), noProvider(tp)
	if reflect.TypeOf(tp).Kind() == reflect.Pointer {
		last.Store(&providerTracer{tp, t, off})
	}
	return t, off
}

// StartJob starts a span of one job (a post, an outcome): Start with Job(j)'s attributes,
// which are built and set only when the span records (a caller sets its others the same way,
// under span.IsRecording). An instance runs thousands of jobs a second, and while no
// provider is installed, or the sampler drops the trace, they would be built for nothing. A
// sampler does not see them: the samplers of OTEL_TRACES_SAMPLER go by the trace id and the
// parent.
func StartJob(ctx context.Context, name string, j batchclaim.Job) (context.Context, trace.Span) {
	ctx, span := Start(ctx, name)
	if span.IsRecording() {
		span.SetAttributes(Job(j)...)
	}
	return ctx, span
}

// Job are the attributes of a job: service_id, batch id, seq, epoch, attempt and reason.
func Job(j batchclaim.Job) []attribute.KeyValue {
	return []attribute.KeyValue{
		ServiceID.String(j.Claim.ServiceID), BatchID.String(j.Batch.BatchID), Seq.Int64(j.Batch.Seq),
		Epoch.Int64(j.Claim.Epoch), Attempt.Int(j.Batch.Attempts + 1), Reason.String(string(j.Reason)),
	}
}

// End ends span, with an error status when err is not nil.
func End(span trace.Span, err error) {
	if err != nil && span.IsRecording() {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}
