package history_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/batchclaim/batchclaim/testkit/dbtest"
	"github.com/batchclaim/batchclaim/testkit/history"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

func TestCheckOutstanding(t *testing.T) {
	t.Parallel()
	at := time.Unix(0, 0)
	post := func(svc, id, effect string) history.LedgerEvent {
		return history.LedgerEvent{Service: svc, BatchID: id, Effect: effect, At: at}
	}
	settle := func(svc, id string) history.LedgerEvent {
		return history.LedgerEvent{Settle: true, Service: svc, BatchID: id, At: at}
	}
	for _, tc := range []struct {
		name   string
		events []history.LedgerEvent
		want   int
	}{
		{"serial", []history.LedgerEvent{post("s", "a", "accepted"), settle("s", "a"), post("s", "b", "accepted"), settle("s", "b")}, 0},
		{"other service_ids are independent", []history.LedgerEvent{post("s", "a", "accepted"), post("t", "b", "accepted")}, 0},
		{"a re-post of the same batch", []history.LedgerEvent{post("s", "a", "dropped-response"), post("s", "a", "duplicate")}, 0},
		{"refused posts never become outstanding", []history.LedgerEvent{post("s", "a", "rejected"), post("s", "a", "timeout"), post("s", "b", "accepted")}, 0},
		{"a re-post of a settled batch", []history.LedgerEvent{post("s", "a", "accepted"), settle("s", "a"), post("s", "b", "accepted"), post("s", "a", "duplicate")}, 0},
		{"two in flight", []history.LedgerEvent{post("s", "a", "accepted"), post("s", "b", "accepted"), settle("s", "a")}, 1},
		{"a lost answer still counts", []history.LedgerEvent{post("s", "a", "dropped-response"), post("s", "b", "accepted")}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if r := history.CheckOutstanding(tc.events); r.DoubleOutstanding != tc.want {
				t.Fatalf("double outstanding = %d, want %d (%v)", r.DoubleOutstanding, tc.want, r.Problems)
			}
		})
	}
}

// A forged history: a second acquisition while the first owner still holds the claim, a
// repeated epoch, and a status write by an owner after its claim was voided. Each is counted
// under its own name.
func TestCheckClaimsAndWrites(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.NewPool(t)
	a, b := uuid.New(), uuid.New()
	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := pool.Exec(ctx, sql, args...); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	for _, id := range []uuid.UUID{a, b} {
		exec(`INSERT INTO batchclaim.instances (id, name, nonce, expiry_1, expiry_2) VALUES ($1, 'x', gen_random_uuid(), now() + interval '1 hour', now() + interval '2 hours')`, id)
	}
	// One transaction per event, so commit order is event order.
	exec(`INSERT INTO batchclaim.service_id_claims (service_id, claimant, epoch) VALUES ('good', $1, 2), ('bad', $2, 2)`, b, b)
	exec(`INSERT INTO batchclaim.claim_events (service_id, instance_id, epoch, event) VALUES ('good', $1, 1, 'acquired')`, a)
	exec(`INSERT INTO batchclaim.batches (service_id, batch_id, payload) VALUES ('good', 'g1', ''), ('bad', 'b1', '')`)
	exec(`INSERT INTO batchclaim.batch_transitions (seq, from_state, to_state, instance_id, epoch)
	      SELECT seq, 'NEW', 'INFLIGHT', $1, 1 FROM batchclaim.batches WHERE batch_id = 'g1'`, a)
	exec(`INSERT INTO batchclaim.claim_events (service_id, instance_id, epoch, event) VALUES ('good', $1, 1, 'voided_expired'), ('good', $2, 2, 'acquired')`, a, b)
	exec(`INSERT INTO batchclaim.batch_transitions (seq, from_state, to_state, instance_id, epoch)
	      SELECT seq, 'INFLIGHT', 'PENDING', $1, 1 FROM batchclaim.batches WHERE batch_id = 'g1'`, a) // stale
	// Attempts a batch row carries without a row of the attempt log: one that committed its
	// batch under the voided epoch (stale), one in flight under the new owner.
	exec(`INSERT INTO batchclaim.batches (service_id, batch_id, payload, state, claimant, claim_epoch, submitted_at, finished_at, attempt_reason, attempt_from)
	      VALUES ('good', 'g2', '', 'COMMITTED', $1, 1, now(), now(), 'first', 'NEW')`, a) // stale
	exec(`INSERT INTO batchclaim.batches (service_id, batch_id, payload, state, claimant, claim_epoch, submitted_at, attempt_reason, attempt_from)
	      VALUES ('good', 'g3', '', 'INFLIGHT', $1, 2, now(), 'first', 'NEW')`, b)
	exec(`INSERT INTO batchclaim.claim_events (service_id, instance_id, epoch, event) VALUES ('bad', $1, 2, 'acquired')`, a)
	exec(`INSERT INTO batchclaim.claim_events (service_id, instance_id, epoch, event) VALUES ('bad', $1, 2, 'acquired')`, b) // two owners, same epoch

	rep, err := history.CheckClaims(ctx, pool)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Acquisitions != 4 || rep.DoubleOwners != 1 || rep.EpochRegressions != 1 || rep.Gaps != 0 {
		t.Fatalf("claims report: %+v", rep)
	}
	w, err := history.CheckWrites(ctx, pool)
	if err != nil {
		t.Fatal(err)
	}
	if w.Writes != 4 || w.StaleAccepted != 2 {
		t.Fatalf("writes report: %+v", w)
	}
}

// A claim freed by the deregistration of its owner (no claim event) and taken by another
// instance is a gap in the history when the caller says the owner deregistered, two owners
// otherwise.
func TestCheckClaimsDeregistered(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.NewPool(t)
	gone, b := uuid.New(), uuid.New()
	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := pool.Exec(ctx, sql, args...); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	exec(`INSERT INTO batchclaim.instances (id, name, nonce, expiry_1, expiry_2) VALUES ($1, 'b', gen_random_uuid(), now() + interval '1 hour', now() + interval '2 hours')`, b)
	exec(`INSERT INTO batchclaim.service_id_claims (service_id, claimant, epoch) VALUES ('s', $1, 2)`, b)
	exec(`INSERT INTO batchclaim.claim_events (service_id, instance_id, epoch, event) VALUES ('s', $1, 1, 'acquired')`, gone)
	var stop time.Time
	if err := pool.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&stop); err != nil {
		t.Fatal(err)
	}
	exec(`INSERT INTO batchclaim.claim_events (service_id, instance_id, epoch, event) VALUES ('s', $1, 2, 'acquired')`, b)

	rep, err := history.CheckClaimsWith(ctx, pool, history.ClaimOptions{Deregistered: map[uuid.UUID]time.Time{gone: stop}})
	if err != nil {
		t.Fatal(err)
	}
	if rep.DoubleOwners != 0 || rep.Gaps != 1 {
		t.Fatalf("with the deregistration known: %+v", rep)
	}
	if rep, err = history.CheckClaims(ctx, pool); err != nil || rep.DoubleOwners != 1 {
		t.Fatalf("without it: %+v, %v", rep, err)
	}
}
