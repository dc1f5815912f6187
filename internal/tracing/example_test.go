package tracing_test

import (
	"context"
	"errors"
	"fmt"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/batchclaim/batchclaim"
	"github.com/batchclaim/batchclaim/internal/tracing"
)

// record installs an SDK provider that keeps the spans it ends in memory, and returns them
// with a func that installs the no-op provider again.
func record() (*tracetest.InMemoryExporter, func()) {
	spans := tracetest.NewInMemoryExporter()
	otel.SetTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans)))
	return spans, func() { otel.SetTracerProvider(noop.NewTracerProvider()) }
}

// printSpan writes a span's name, scope, attributes and status.
func printSpan(s tracetest.SpanStub) {
	fmt.Println(s.Name, "scope", s.InstrumentationScope.Name)
	for _, kv := range s.Attributes {
		fmt.Printf("  %s=%s\n", kv.Key, kv.Value.Emit())
	}
	fmt.Printf("  status %s %q\n", s.Status.Code, s.Status.Description)
}

// StartJob starts the span of one job with the job's attributes; a caller adds its own under
// span.IsRecording, and End ends the span.
func ExampleStartJob() {
	spans, stop := record()
	defer stop()

	job := batchclaim.Job{
		Claim:  batchclaim.Claim{ServiceID: "order-42", Epoch: 3},
		Batch:  batchclaim.Batch{BatchID: "b-9", Seq: 9, Attempts: 1},
		Reason: batchclaim.ReasonRetry,
	}
	_, span := tracing.StartJob(context.Background(), tracing.Post, job)
	if span.IsRecording() {
		span.SetAttributes(tracing.HTTPCode.Int(202))
	}
	tracing.End(span, nil)

	for _, s := range spans.GetSpans() {
		printSpan(s)
	}
	// Output:
	// batchclaim.post scope github.com/batchclaim/batchclaim
	//   batchclaim.service_id=order-42
	//   batchclaim.batch_id=b-9
	//   batchclaim.seq=9
	//   batchclaim.epoch=3
	//   batchclaim.attempt=2
	//   batchclaim.reason=retry
	//   http.response.status_code=202
	//   status Unset ""
}

// A span started under another's context is its child. End with an error marks the span
// failed and records the error as an event.
func ExampleEnd() {
	spans, stop := record()
	defer stop()

	ctx, cycle := tracing.Start(context.Background(), tracing.ClaimCycle, tracing.Claims.Int(2))
	_, poll := tracing.Start(ctx, tracing.Poll, tracing.Batches.Int(5))
	tracing.End(poll, errors.New("ledger answered 503"))
	tracing.End(cycle, nil)

	ended := spans.GetSpans() // in the order they ended
	for _, s := range ended {
		printSpan(s)
		for _, e := range s.Events {
			fmt.Println("  event", e.Name)
		}
	}
	fmt.Println("poll is a child of the cycle:", ended[0].Parent.SpanID() == ended[1].SpanContext.SpanID())
	// Output:
	// batchclaim.poll scope github.com/batchclaim/batchclaim
	//   batchclaim.batches=5
	//   status Error "ledger answered 503"
	//   event exception
	// batchclaim.claim_cycle scope github.com/batchclaim/batchclaim
	//   batchclaim.claims=2
	//   status Unset ""
	// poll is a child of the cycle: true
}

// Under a no-op provider, as under the default one until a program installs another, spans
// do not record and StartJob does not build the job's attributes. Job gives them to a caller
// that wants them elsewhere.
func ExampleJob() {
	otel.SetTracerProvider(noop.NewTracerProvider())
	job := batchclaim.Job{
		Claim:  batchclaim.Claim{ServiceID: "order-42", Epoch: 1},
		Batch:  batchclaim.Batch{BatchID: "b-1", Seq: 1},
		Reason: batchclaim.ReasonFirst,
	}
	_, span := tracing.StartJob(context.Background(), tracing.Post, job)
	fmt.Println("recording:", span.IsRecording())
	tracing.End(span, nil)

	for _, kv := range tracing.Job(job) {
		fmt.Printf("%s=%s\n", kv.Key, kv.Value.Emit())
	}
	// Output:
	// recording: false
	// batchclaim.service_id=order-42
	// batchclaim.batch_id=b-1
	// batchclaim.seq=1
	// batchclaim.epoch=1
	// batchclaim.attempt=1
	// batchclaim.reason=first
}
