package claims

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/batchclaim/batchclaim/testkit/dbtest"
)

// TestLockedRowsDelayNoOne: rows another transaction holds locked (an expired owner's claim,
// a free claim) are skipped by the cycle's void and acquire statements instead of waited for,
// and taken on a later cycle once the lock is gone. A cycle that waited would block until the
// other transaction ends, which here is after the cycle must have returned.
func TestLockedRowsDelayNoOne(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := dbtest.NewPool(t)
	ids := make([]string, 10)
	for i := range ids {
		ids[i] = fmt.Sprintf("svc-%02d", i)
	}
	if err := RegisterServiceIDs(ctx, pool, ids...); err != nil {
		t.Fatal(err)
	}
	a, err := New(dbtest.Open(t, pool, ""), Config{Name: "a"})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Register(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `UPDATE batchclaim.service_id_claims SET claimant = $1, epoch = nextval('batchclaim.service_id_claim_epochs') WHERE service_id < 'svc-09'`, a.InstanceID()); err != nil {
		t.Fatal(err)
	}
	// X locks one of a's claims and the one free claim, and keeps them locked.
	x, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer x.Rollback(ctx) //nolint:errcheck
	if _, err := x.Exec(ctx, `SELECT 1 FROM batchclaim.service_id_claims WHERE service_id IN ('svc-00', 'svc-09') FOR UPDATE`); err != nil {
		t.Fatal(err)
	}

	b, err := New(dbtest.Open(t, pool, ""), Config{Name: "b"})
	if err != nil {
		t.Fatal(err)
	}
	b.ShiftDBTime(b.cfg.Expiry2 + time.Second) // b's view: a is past expiry_2
	if err := b.Register(ctx); err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	rep, err := b.Cycle(cctx)
	cancel()
	if err != nil {
		t.Fatalf("cycle with locked rows: %v", err)
	}
	if len(rep.Voided) != 8 || rep.Held != 8 || rep.Retries != 0 {
		t.Fatalf("voided %d, held %d, retries %d; want 8 voided and held (svc-00 and svc-09 locked, skipped) and no retry", len(rep.Voided), rep.Held, rep.Retries)
	}
	if _, ok := b.Holds("svc-00"); ok {
		t.Fatal("took svc-00 although it was locked")
	}
	if err := x.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	rep, err = b.Cycle(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Voided) != 1 || rep.Held != 10 {
		t.Fatalf("after the locks went: voided %d, held %d; want 1 and 10", len(rep.Voided), rep.Held)
	}
}
