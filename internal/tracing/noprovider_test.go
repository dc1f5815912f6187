package tracing_test

import (
	"context"
	"os"
	"os/exec"
	"testing"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/batchclaim/batchclaim"
	"github.com/batchclaim/batchclaim/claims"
	"github.com/batchclaim/batchclaim/internal/tracing"
)

// childEnv marks the test binary re-run by TestNoProviderCostsNothing: a process in which no
// test installed a provider.
const childEnv = "BATCHCLAIM_TRACING_NO_PROVIDER_CHILD"

// While no provider is installed (OpenTelemetry's global default, in a process that never
// installed one) or the no-op provider is, a job's spans cost no allocation and leave the
// context as it was, with its parent's span context; once a provider is installed they
// record again.
func TestNoProviderCostsNothing(t *testing.T) {
	if os.Getenv(childEnv) == "" {
		// The global default is gone once any test installs a provider: check it in a
		// process of its own, this test alone.
		cmd := exec.Command(os.Args[0], "-test.run=^TestNoProviderCostsNothing$", "-test.count=1")
		cmd.Env = append(os.Environ(), childEnv+"=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("with OpenTelemetry's default provider: %v\n%s", err, out)
		}
		otel.SetTracerProvider(noop.NewTracerProvider())
		t.Cleanup(func() { otel.SetTracerProvider(noop.NewTracerProvider()) })
	}
	job := batchclaim.Job{Claim: claims.Claim{ServiceID: "svc", Epoch: 3}, Batch: batchclaim.Batch{Seq: 9, BatchID: "b-9"}}

	// A parent span from a provider the program holds itself, not the global one.
	parents := tracetest.NewInMemoryExporter()
	parentCtx, parent := sdktrace.NewTracerProvider(sdktrace.WithSyncer(parents)).Tracer("app").Start(context.Background(), "request")
	ctx, span := tracing.StartJob(parentCtx, tracing.Post, job)
	if span.IsRecording() {
		t.Error("a job's span records with no provider installed")
	}
	if got := trace.SpanContextFromContext(ctx); !got.Equal(parent.SpanContext()) {
		t.Errorf("the job's context carries span context %v, want its parent's %v", got, parent.SpanContext())
	}
	tracing.End(span, context.Canceled)
	if len(parents.GetSpans()) != 0 {
		t.Error("ending the job's span ended its parent")
	}
	parent.End()

	ctx = context.Background()
	if n := testing.AllocsPerRun(100, func() {
		_, span := tracing.StartJob(ctx, tracing.Post, job)
		tracing.End(span, nil)
		_, span = tracing.Start(ctx, tracing.Enqueue)
		tracing.End(span, nil)
	}); n != 0 {
		t.Errorf("%v allocations for two spans with no provider installed, want 0", n)
	}

	spans := tracetest.NewInMemoryExporter()
	otel.SetTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans)))
	_, span = tracing.StartJob(context.Background(), tracing.Post, job)
	span.End()
	if got := spans.GetSpans(); len(got) != 1 || got[0].Name != tracing.Post {
		t.Errorf("once a provider is installed, its exporter got %v, want the job's span", got)
	}
}
