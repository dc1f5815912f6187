package tracing

import (
	"context"

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
	return otel.GetTracerProvider().Tracer(Scope).Start(ctx, name, trace.WithAttributes(attrs...))
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
