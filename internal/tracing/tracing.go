package tracing

import (
	"context"
	"reflect"
	"sync/atomic"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

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

// Start starts a span of the current global tracer provider.
func Start(ctx context.Context, name string, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	return tracer().Start(ctx, name, trace.WithAttributes(attrs...))
}

// providerTracer is the tracer of one provider.
type providerTracer struct {
	tp trace.TracerProvider
	t  trace.Tracer
}

// last is the tracer of the provider tracer last saw.
var last atomic.Pointer[providerTracer]

// tracer returns the current global provider's tracer of Scope. It is kept while the provider
// stays the same: a provider's Tracer may take a lock and look up a map (the default
// provider's does), and every job starts two spans.
func tracer() trace.Tracer {
	tp := otel.GetTracerProvider()
	// last keeps only a provider that is a pointer (the SDK's, the default one), so that this
	// comparison is of two pointers or of two values of different types, and never panics.
	if c := last.Load(); c != nil && c.tp == tp {
		return c.t
	}
	t := tp.Tracer(Scope)
	if reflect.TypeOf(tp).Kind() == reflect.Pointer {
		last.Store(&providerTracer{tp, t})
	}
	return t
}

// StartJob starts a span of one job (a post, an outcome): Start with Job(j)'s attributes,
// which are built and set only when the span records (a caller sets its others the same way,
// under span.IsRecording). An instance runs thousands of jobs a second, and while no
// provider is installed, or the sampler drops the trace, they would be built for nothing. A
// sampler does not see them: the samplers of OTEL_TRACES_SAMPLER go by the trace id and the
// parent.
func StartJob(ctx context.Context, name string, j batchclaim.Job) (context.Context, trace.Span) {
	ctx, span := tracer().Start(ctx, name)
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
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}
