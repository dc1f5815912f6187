package node_test

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/batchclaim/batchclaim/dlt"
	"github.com/batchclaim/batchclaim/dlt/dltsim"
	"github.com/batchclaim/batchclaim/ingest"
	"github.com/batchclaim/batchclaim/internal/tracing"
	"github.com/batchclaim/batchclaim/testkit/testutil"
)

// A batch run through a node leaves a span for each step of its way (stored, fetched, marked
// in flight, posted, its outcome recorded, its status polled) besides the claim cycles, with
// the attributes that find it: service_id, batch id, seq, epoch, attempt.
func TestTraceSpans(t *testing.T) {
	// The provider is global: the other tests of the package running meanwhile send their
	// spans to it too, so the spans looked at are those of a service_id only this test uses.
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	otel.SetTracerProvider(tp)
	t.Cleanup(func() {
		otel.SetTracerProvider(noop.NewTracerProvider())
		_ = tp.Shutdown(context.Background())
	})

	e := setup(t, dlt.FlavorSawtooth, dltsim.Config{CommitLatency: 5 * time.Millisecond})
	const svc = "traced-service"
	var ids []string
	for b := range 2 {
		id, list := dlt.FakeBatch(svc, b)
		if _, err := ingest.Enqueue(t.Context(), e.admin, svc, id, list); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	n, _ := e.start("traced", nil)
	e.waitFinished(30 * time.Second)
	epoch := int64(0)
	for _, c := range n.Engine().Held() {
		if c.ServiceID == svc {
			epoch = c.Epoch
		}
	}
	if epoch == 0 {
		t.Fatalf("%s not held after its batches finished", svc)
	}

	attrs := func(s tracetest.SpanStub) map[attribute.Key]attribute.Value {
		m := map[attribute.Key]attribute.Value{}
		for _, kv := range s.Attributes {
			m[kv.Key] = kv.Value
		}
		return m
	}
	// byName holds the spans of svc's batches by name, and every span's name.
	testutil.WaitFor(t, 10*time.Second, "the spans of both outcomes", func() bool {
		k := 0
		for _, s := range exp.GetSpans() {
			if s.Name == tracing.Outcome && attrs(s)[tracing.ServiceID].AsString() == svc {
				k++
			}
		}
		return k == 2
	})
	spans := exp.GetSpans()
	names := map[string]int{}
	for _, s := range spans {
		names[s.Name]++
		if s.InstrumentationScope.Name != tracing.Scope {
			t.Errorf("span %s of scope %q", s.Name, s.InstrumentationScope.Name)
		}
	}
	for _, name := range []string{tracing.ClaimCycle, tracing.Fetch, tracing.Poll} {
		if names[name] == 0 {
			t.Errorf("no %s span; spans: %v", name, names)
		}
	}
	// The NEW batches were marked in flight by the fetches that read them.
	marked := int64(0)
	for _, s := range spans {
		if s.Name == tracing.Fetch {
			marked += attrs(s)[tracing.Batches].AsInt64()
		}
	}
	if marked != int64(len(ids)) {
		t.Errorf("fetch spans marked %d batches, want %d", marked, len(ids))
	}
	for seq, id := range ids {
		want := map[string]map[attribute.Key]attribute.Value{
			tracing.Enqueue: {tracing.ServiceID: attribute.StringValue(svc), tracing.BatchID: attribute.StringValue(id),
				tracing.Seq: attribute.Int64Value(int64(seq + 1)), tracing.New: attribute.BoolValue(true)},
			tracing.Post: {tracing.ServiceID: attribute.StringValue(svc), tracing.BatchID: attribute.StringValue(id),
				tracing.Seq: attribute.Int64Value(int64(seq + 1)), tracing.Epoch: attribute.Int64Value(epoch),
				tracing.Attempt: attribute.Int64Value(1), tracing.Reason: attribute.StringValue("first"),
				tracing.HTTPCode: attribute.Int64Value(202)},
			tracing.Outcome: {tracing.ServiceID: attribute.StringValue(svc), tracing.BatchID: attribute.StringValue(id),
				tracing.Seq: attribute.Int64Value(int64(seq + 1)), tracing.Epoch: attribute.Int64Value(epoch),
				tracing.Attempt: attribute.Int64Value(1), tracing.Verdict: attribute.StringValue("accepted")},
		}
		for name, w := range want {
			found := false
			for _, s := range spans {
				got := attrs(s)
				if s.Name != name || got[tracing.BatchID].AsString() != id {
					continue
				}
				found = true
				for k, v := range w {
					if got[k] != v {
						t.Errorf("%s span of batch %d: %s = %v, want %v", name, seq+1, k, got[k].Emit(), v.Emit())
					}
				}
				if !s.EndTime.After(s.StartTime) && !s.EndTime.Equal(s.StartTime) {
					t.Errorf("%s span of batch %d not ended", name, seq+1)
				}
			}
			if !found {
				t.Errorf("no %s span of batch %d (%s)", name, seq+1, id)
			}
		}
	}
}
