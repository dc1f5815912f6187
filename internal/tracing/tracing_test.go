package tracing_test

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/batchclaim/batchclaim"
	"github.com/batchclaim/batchclaim/claims"
	"github.com/batchclaim/batchclaim/internal/tracing"
)

// unhashable is a provider whose type cannot be compared (it holds a map), and wrapped a
// provider of a comparable type that holds one: neither may be compared with the provider
// kept, and the tracer is looked up from them every time.
type unhashable struct {
	trace.TracerProvider
	tags map[string]string
}

type wrapped struct{ trace.TracerProvider }

// Spans go to the provider installed when they start, whichever was installed before, and a
// job's span carries the job's attributes only when it records.
func TestSpansFollowTheInstalledProvider(t *testing.T) {
	t.Cleanup(func() { otel.SetTracerProvider(noop.NewTracerProvider()) })
	job := batchclaim.Job{Claim: claims.Claim{ServiceID: "svc", Epoch: 3}, Batch: batchclaim.Batch{Seq: 9, BatchID: "b-9", Attempts: 1}, Reason: batchclaim.ReasonFirst}
	start := func(name string) trace.Span {
		_, span := tracing.StartJob(context.Background(), name, job)
		span.End()
		return span
	}

	a, b := tracetest.NewInMemoryExporter(), tracetest.NewInMemoryExporter()
	otel.SetTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSyncer(a)))
	start("first")
	otel.SetTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSyncer(b)))
	start("second")
	otel.SetTracerProvider(unhashable{sdktrace.NewTracerProvider(sdktrace.WithSyncer(a)), map[string]string{}})
	start("third")
	otel.SetTracerProvider(wrapped{unhashable{sdktrace.NewTracerProvider(sdktrace.WithSyncer(b)), map[string]string{}}})
	start("fourth")
	otel.SetTracerProvider(wrapped{unhashable{sdktrace.NewTracerProvider(sdktrace.WithSyncer(b)), map[string]string{}}})
	start("fourth")
	otel.SetTracerProvider(noop.NewTracerProvider())
	if span := start("fifth"); span.IsRecording() {
		t.Error("a span of the no-op provider records")
	}

	names := func(e *tracetest.InMemoryExporter) []string {
		var out []string
		for _, s := range e.GetSpans() {
			out = append(out, s.Name)
			attrs := map[attribute.Key]attribute.Value{}
			for _, kv := range s.Attributes {
				attrs[kv.Key] = kv.Value
			}
			if attrs[tracing.BatchID].AsString() != "b-9" || attrs[tracing.Seq].AsInt64() != 9 || attrs[tracing.Epoch].AsInt64() != 3 ||
				attrs[tracing.Attempt].AsInt64() != 2 || attrs[tracing.ServiceID].AsString() != "svc" {
				t.Errorf("span %s: attributes %v, want the job's", s.Name, s.Attributes)
			}
		}
		return out
	}
	if got := names(a); len(got) != 2 || got[0] != "first" || got[1] != "third" {
		t.Errorf("the first provider got %v, want [first third]", got)
	}
	if got := names(b); len(got) != 3 || got[0] != "second" || got[1] != "fourth" || got[2] != "fourth" {
		t.Errorf("the second provider got %v, want [second fourth fourth]", got)
	}
}
