package election_test

import (
	"testing"
	"time"

	"github.com/batchclaim/batchclaim/testkit/dbtest"
	"github.com/batchclaim/batchclaim/testkit/testutil"
	"github.com/google/uuid"
)

// A renewal that started before the holder's lease expired but commits after a standby
// took its snapshot must not let both succeed. Here the holder is written by hand: its
// lease expired a second ago, and a transaction renews it but stays open, as a renewal
// statement still in flight would. The standby's takeover writes the holder's lease row
// (eviction), so it waits for that renewal and loses the race instead of electing a second
// primary next to a holder that is about to be told its renewal succeeded.
func TestTakeoverConflictsWithLateRenewal(t *testing.T) {
	t.Parallel()
	pool, _ := testDB(t)
	ctx := t.Context()
	holder := uuid.New()
	if _, err := pool.Exec(ctx, `INSERT INTO batchclaim.election_members (instance_id, name, expires_at) VALUES ($1, 'holder', now() - interval '1 second')`, holder); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO batchclaim.election_terms (role, epoch, instance_id, name, elected_at) VALUES ('r', 7, $1, 'holder', now())`, holder); err != nil {
		t.Fatal(err)
	}
	renewal, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = renewal.Rollback(ctx) }()
	if _, err := renewal.Exec(ctx, `UPDATE batchclaim.election_members SET renewed_at = now(), expires_at = now() + interval '1 hour' WHERE instance_id = $1`, holder); err != nil {
		t.Fatal(err)
	}

	b, _, _ := startElector(t, dbtest.Open(t, pool, ""), "b", []string{"r"}, nil)
	testutil.WaitFor(t, 20*time.Second, "b's takeover held up by the renewal in flight (or b elected)", func() bool {
		_, elected := b.CheckPrimary("r")
		return b.Stats().RacesLost >= 1 || elected
	})
	if _, ok := b.CheckPrimary("r"); ok {
		t.Fatal("b was elected while the holder's renewal was in flight")
	}
	if err := renewal.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	// b's next cycles must see the renewed lease and leave the role alone.
	after := b.Stats().Cycles
	testutil.WaitFor(t, 20*time.Second, "three more cycles of b", func() bool { return b.Stats().Cycles >= after+3 })
	if _, ok := b.CheckPrimary("r"); ok {
		t.Fatal("b was elected although the holder's renewal committed")
	}
	var epoch int64
	var who uuid.UUID
	if err := pool.QueryRow(ctx, `SELECT epoch, instance_id FROM batchclaim.election_terms WHERE role = 'r'`).Scan(&epoch, &who); err != nil {
		t.Fatal(err)
	}
	if epoch != 7 || who != holder {
		t.Fatalf("the term changed to %s@%d while its holder's renewal succeeded", who, epoch)
	}
}
