package inspect_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/batchclaim/batchclaim"
	"github.com/batchclaim/batchclaim/ingest"
	"github.com/batchclaim/batchclaim/inspect"
	"github.com/batchclaim/batchclaim/pgdb"
	"github.com/batchclaim/batchclaim/testkit/dbtest"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// seed stores six batches of three service_ids and two kinds, moves three to terminal states,
// halts one service_id, and records an instance, a takeover and a retention run. It returns
// the seqs by batch id.
func seed(t *testing.T, d pgdb.DB) map[string]int64 {
	t.Helper()
	ctx := t.Context()
	seqs := map[string]int64{}
	for _, b := range []struct {
		svc, id string
		opts    []ingest.EnqueueOption
	}{
		{"svc-a", "a1", nil},
		{"svc-a", "a2", []ingest.EnqueueOption{ingest.RunAt(time.Now().Add(time.Hour))}},
		{"svc-a", "a3", nil},
		{"svc-b", "b1", nil},
		{"net", "p1", []ingest.EnqueueOption{ingest.Kind("ping"), ingest.Timeout(2 * time.Second)}},
		{"net", "r1", []ingest.EnqueueOption{ingest.Kind("report")}},
	} {
		st, err := ingest.Enqueue(ctx, d, b.svc, b.id, []byte(`{"n":1}`), b.opts...)
		if err != nil {
			t.Fatal(err)
		}
		seqs[b.id] = st.Seq
	}
	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := d.Exec(ctx, sql, args...); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	// svc-a's oldest batch is older than net's, which is older than svc-b's.
	exec(`UPDATE batchclaim.batches SET created_at = now() - interval '1 hour' WHERE service_id = 'svc-a'`)
	exec(`UPDATE batchclaim.batches SET created_at = now() - interval '10 minutes' WHERE service_id = 'net'`)
	exec(`UPDATE batchclaim.batches SET state = 'COMMITTED' WHERE batch_id = 'a1'`)
	exec(`UPDATE batchclaim.batches SET state = 'INVALID', last_error = 'bad signature' WHERE batch_id = 'b1'`)
	exec(`UPDATE batchclaim.batches SET state = 'COMMITTED', attempts = 1, output = '{"ms":12}' WHERE batch_id = 'p1'`)
	exec(`INSERT INTO batchclaim.service_halts (service_id, seq, reason) VALUES ('svc-b', $1, 'INVALID batch b1')`, seqs["b1"])
	return seqs
}

// Every read model against a database with batches in several states and kinds, in the
// default schema and in another, each read in a READ ONLY transaction: none of them writes.
func TestReadModels(t *testing.T) {
	t.Parallel()
	t.Run("default schema", func(t *testing.T) {
		t.Parallel()
		testReadModels(t, dbtest.NewOpen(t))
	})
	t.Run("schema tenant_7", func(t *testing.T) {
		t.Parallel()
		pool, err := pgxpool.New(t.Context(), dbtest.NewDBInSchema(t, "tenant_7"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		testReadModels(t, dbtest.Open(t, pool, "tenant_7"))
	})
}

func testReadModels(t *testing.T, d pgdb.DB) {
	ctx := t.Context()
	seqs := seed(t, d)
	tx, err := d.BeginTx(ctx, pgx.TxOptions{AccessMode: pgx.ReadOnly})
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background()) //nolint:errcheck

	totals, err := inspect.Totals(ctx, tx)
	if err != nil {
		t.Fatal(err)
	}
	wantTotals := inspect.StateCounts{"NEW": 3, "COMMITTED": 2, "INVALID": 1}
	if !equalCounts(totals, wantTotals) || totals.Total() != 6 || totals.Finished() != 3 {
		t.Errorf("Totals = %v (total %d, finished %d), want %v (6, 3)", totals, totals.Total(), totals.Finished(), wantTotals)
	}

	all, err := inspect.Batches(ctx, tx, -1)
	if err != nil {
		t.Fatal(err)
	}
	if !equalCounts(all.ByState, wantTotals) {
		t.Errorf("Batches.ByState = %v, want %v", all.ByState, wantTotals)
	}
	// svc-b has no unfinished batch; svc-a's oldest unfinished one is older than net's.
	if all.OpenServices != 2 || len(all.Services) != 2 || all.Services[0].ServiceID != "svc-a" || all.Services[1].ServiceID != "net" {
		t.Fatalf("Batches services = %d %+v, want svc-a then net", all.OpenServices, all.Services)
	}
	if a := all.Services[0]; !equalCounts(a.ByState, inspect.StateCounts{"NEW": 2, "COMMITTED": 1}) || a.OldestOpenSeconds < 3500 || all.OldestOpenSeconds != a.OldestOpenSeconds {
		t.Errorf("svc-a = %+v, oldest of all %.0fs; want NEW 2, COMMITTED 1, oldest open about 3600s", a, all.OldestOpenSeconds)
	}
	if len(all.Halted) != 1 || all.Halted[0].ServiceID != "svc-b" || all.Halted[0].Seq != seqs["b1"] {
		t.Errorf("Batches.Halted = %+v, want svc-b at seq %d", all.Halted, seqs["b1"])
	}
	one, err := inspect.Batches(ctx, tx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if one.OpenServices != 2 || len(one.Services) != 1 || one.Services[0].ServiceID != "svc-a" {
		t.Errorf("Batches(1) = %d %+v, want 2 open and svc-a listed alone", one.OpenServices, one.Services)
	}

	kinds, err := inspect.Kinds(ctx, tx)
	if err != nil {
		t.Fatal(err)
	}
	if len(kinds) != 2 || kinds[0].Kind != "ping" || kinds[1].Kind != "report" ||
		!equalCounts(kinds[0].ByState, inspect.StateCounts{"COMMITTED": 1}) || !equalCounts(kinds[1].ByState, inspect.StateCounts{"NEW": 1}) {
		t.Errorf("Kinds = %+v, want ping COMMITTED 1, report NEW 1", kinds)
	}

	p1, err := inspect.Job(ctx, tx, seqs["p1"])
	if err != nil {
		t.Fatal(err)
	}
	if p1.Seq != seqs["p1"] || p1.ServiceID != "net" || p1.BatchID != "p1" || p1.Kind != "ping" || p1.State != "COMMITTED" ||
		p1.Attempts != 1 || p1.TimeoutMs == nil || *p1.TimeoutMs != 2000 || p1.FinishedAt == nil || p1.NextAttemptAt != nil ||
		p1.PayloadBytes != int64(len(`{"n":1}`)) || string(p1.Output) != `{"ms": 12}` {
		t.Errorf("Job(p1) = %+v (output %s)", p1, p1.Output)
	}
	a2, err := inspect.Job(ctx, tx, seqs["a2"])
	if err != nil {
		t.Fatal(err)
	}
	if a2.Kind != "" || a2.State != "NEW" || a2.FinishedAt != nil || a2.NextAttemptAt == nil || a2.Output != nil {
		t.Errorf("Job(a2) = %+v, want an unfinished plain job with its next attempt (RunAt)", a2)
	}
	b1, err := inspect.Job(ctx, tx, seqs["b1"])
	if err != nil || b1.LastError != "bad signature" {
		t.Errorf("Job(b1) = %+v, %v; want its last error", b1, err)
	}
	if _, err := inspect.Job(ctx, tx, 1_000_000); !errors.Is(err, batchclaim.ErrNotFound) {
		t.Errorf("Job(unknown) = %v, want ErrNotFound", err)
	}

	ret, err := inspect.Retention(ctx, tx)
	if err != nil || ret != (inspect.RetentionStatus{}) {
		t.Errorf("Retention before any run = %+v, %v; want the zero value", ret, err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
}

// The JSON names are those `batchclaim status --json` prints.
func TestJSONNames(t *testing.T) {
	t.Parallel()
	timeout := int64(2000)
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tt := range []struct {
		v    any
		want string
	}{
		{inspect.BatchStatus{ByState: inspect.StateCounts{"NEW": 1}, Services: []inspect.ServiceStatus{{ServiceID: "s", ByState: inspect.StateCounts{"NEW": 1}, OldestOpenSeconds: 2}}},
			`{"by_state":{"NEW":1},"oldest_open_seconds":0,"open_services":0,"services":[{"service_id":"s","by_state":{"NEW":1},"oldest_open_seconds":2}],"halted":null}`},
		{inspect.KindStatus{Kind: "ping", ByState: inspect.StateCounts{"COMMITTED": 3}}, `{"kind":"ping","by_state":{"COMMITTED":3}}`},
		{inspect.JobStatus{Seq: 7, ServiceID: "s", BatchID: "b", State: "NEW", TimeoutMs: &timeout, CreatedAt: at, UpdatedAt: at, NextAttemptAt: &at},
			`{"seq":7,"service_id":"s","batch_id":"b","state":"NEW","attempts":0,"timeout_ms":2000,"created_at":"2026-01-02T03:04:05Z","updated_at":"2026-01-02T03:04:05Z","next_attempt_at":"2026-01-02T03:04:05Z","payload_bytes":0}`},
		{inspect.RetentionStatus{}, `{"ran":false,"max_age_seconds":0,"last_run_at":null,"last_run_age_seconds":0,"last_run_instance":"","last_run_pruned":0,"pruned_total":0}`},
	} {
		got, err := json.Marshal(tt.v)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != tt.want {
			t.Errorf("%T as JSON:\n got %s\nwant %s", tt.v, got, tt.want)
		}
	}
}

// An instance's progress, the database clock, a takeover and its delay, and a retention run
// by an instance that has since left the registry.
func TestInstancesTakeoversRetention(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	d := dbtest.NewOpen(t)
	seqs := seed(t, d)
	victim, taker := uuid.New(), uuid.New()
	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := d.Exec(ctx, sql, args...); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	for _, in := range []struct {
		id   uuid.UUID
		name string
	}{{victim, "victim"}, {taker, "taker"}} {
		exec(`INSERT INTO batchclaim.instances (id, name, nonce, expiry_1, expiry_2) VALUES ($1, $2, gen_random_uuid(), now() + interval '1 minute', now() + interval '2 minutes')`, in.id, in.name)
	}
	exec(`UPDATE batchclaim.batches SET state = 'INFLIGHT', claimant = $1 WHERE batch_id = 'a2'`, taker)
	exec(`INSERT INTO batchclaim.batch_transitions (seq, from_state, to_state, instance_id) VALUES ($1, 'INFLIGHT', 'COMMITTED', $2)`, seqs["a1"], victim)

	since, err := inspect.Now(ctx, d)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := inspect.Takeovers(ctx, d); err != nil || n != 0 {
		t.Errorf("Takeovers before any = %d, %v; want 0", n, err)
	}
	exec(`INSERT INTO batchclaim.claim_events (service_id, instance_id, epoch, event, at) VALUES ('svc-a', $1, 1, 'voided_expired', $2)`, victim, since)
	exec(`INSERT INTO batchclaim.claim_events (service_id, instance_id, epoch, event, at) VALUES ('net', $1, 1, 'voided_idle', $2)`, victim, since)
	exec(`INSERT INTO batchclaim.claim_events (service_id, instance_id, epoch, event, at) VALUES ('svc-a', $1, 2, 'acquired', $2)`, taker, since.Add(1500*time.Millisecond))

	ins, err := inspect.Instances(ctx, d)
	if err != nil {
		t.Fatal(err)
	}
	want := []inspect.InstanceProgress{{ID: taker, Name: "taker", InFlight: 1}, {ID: victim, Name: "victim", Committed: 1}}
	if len(ins) != 2 || ins[0] != want[0] || ins[1] != want[1] {
		t.Errorf("Instances = %+v, want %+v", ins, want)
	}
	if n, err := inspect.Takeovers(ctx, d); err != nil || n != 2 {
		t.Errorf("Takeovers = %d, %v; want 2", n, err)
	}
	delays, err := inspect.TakeoverDelays(ctx, d, victim, since)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]inspect.TakeoverDelay{}
	for _, dl := range delays {
		got[dl.ServiceID] = dl
	}
	if len(delays) != 2 || got["svc-a"].Event != "voided_expired" || got["svc-a"].Seconds != 1.5 || got["net"].Seconds != -1 {
		t.Errorf("TakeoverDelays = %+v, want svc-a after 1.5s and net not yet (-1)", delays)
	}
	if other, err := inspect.TakeoverDelays(ctx, d, taker, since); err != nil || len(other) != 0 {
		t.Errorf("TakeoverDelays of the taker = %+v, %v; want none", other, err)
	}

	gone := uuid.New()
	exec(`INSERT INTO batchclaim.retention_state (instance_id, max_age_ms, last_run_at, last_run_pruned, pruned_total) VALUES ($1, 86400000, now() - interval '30 seconds', 4, 9)`, gone)
	ret, err := inspect.Retention(ctx, d)
	if err != nil {
		t.Fatal(err)
	}
	if !ret.Ran || ret.MaxAgeSeconds != 86400 || ret.LastRunAt == nil || ret.LastRunAgeSeconds < 29 || ret.LastRunInstance != gone.String() ||
		ret.LastRunPruned != 4 || ret.PrunedTotal != 9 {
		t.Errorf("Retention = %+v, want a run 30s ago by %s that deleted 4 of 9", ret, gone)
	}
	exec(`UPDATE batchclaim.retention_state SET instance_id = $1`, taker)
	if ret, err := inspect.Retention(ctx, d); err != nil || ret.LastRunInstance != "taker" {
		t.Errorf("Retention by a registered instance = %+v, %v; want it by name", ret, err)
	}
}

func equalCounts(a, b inspect.StateCounts) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}
