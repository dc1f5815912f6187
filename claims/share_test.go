package claims_test

import (
	"context"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/batchclaim/batchclaim/claims"
	"github.com/batchclaim/batchclaim/testkit/dbtest"
)

// An instance that starts beside others may see itself alone in its first survey. Its cycle
// takes claims a chunk at a time and surveys again between chunks, so an instance that
// registers meanwhile lowers its target in the same cycle: it takes its share of two, not
// every free row to give half of them back cycles later. Here the second instance registers
// (a trigger of the test database) when the first chunk commits.
func TestAcquisitionFollowsInstancesThatJoinMidCycle(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewPool(t)
	registerServiceIDs(t, pool, 100)
	a, _ := newEngine(t, pool, 1, func(c *claims.Config) { c.ChunkSize = 10 })
	secondJoinsAtFirstChunk(t, pool)
	rep := cycle(t, a)
	if rep.Held != 50 || rep.Share.LiveInstances != 2 || rep.Share.Target != 50 {
		t.Fatalf("first cycle: held %d, share %+v; want 50 of 100 with two instances live", rep.Held, rep.Share)
	}
	if got := countOwned(owners(t, pool), a); got != 50 {
		t.Fatalf("the database lists %d claims of the first instance, want 50", got)
	}
}

// secondJoinsAtFirstChunk registers a second live instance (a trigger of the test database)
// when the first acquisition chunk commits.
func secondJoinsAtFirstChunk(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	if _, err := pool.Exec(t.Context(), `
CREATE FUNCTION public.second_instance_joins() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO batchclaim.instances (id, name, expiry_1, expiry_2, nonce)
    VALUES ('`+instanceID(2).String()+`', 'i2', now() + interval '1 hour', now() + interval '2 hours', gen_random_uuid())
    ON CONFLICT (id) DO NOTHING;
    RETURN NULL;
END $$;
CREATE TRIGGER second_instance_joins AFTER UPDATE ON batchclaim.service_id_claims
    FOR EACH STATEMENT EXECUTE FUNCTION public.second_instance_joins();`); err != nil {
		t.Fatal(err)
	}
}

// The same when every claim fits in one chunk: an instance that holds nothing yet takes at
// most half of its target in its first chunk and surveys again, so that of a fleet started
// together the first to cycle does not take every claim in one statement.
func TestNewcomerSurveysAgainWithinOneChunk(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewPool(t)
	registerServiceIDs(t, pool, 100)
	a, _ := newEngine(t, pool, 1, nil) // ChunkSize 1,000: every claim fits in one chunk
	secondJoinsAtFirstChunk(t, pool)
	if rep := cycle(t, a); rep.Held != 50 || rep.Share.Target != 50 {
		t.Fatalf("first cycle: held %d, share %+v; want 50 of 100 with two instances live", rep.Held, rep.Share)
	}
	// Alone, a newcomer still takes everything in its first cycle, in two chunks.
	if _, err := pool.Exec(t.Context(), `DROP TRIGGER second_instance_joins ON batchclaim.service_id_claims;
DELETE FROM batchclaim.instances WHERE id = '`+instanceID(2).String()+`'`); err != nil {
		t.Fatal(err)
	}
	c, _ := newEngine(t, pool, 3, nil)
	if err := a.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	if rep := cycle(t, c); rep.Held != 100 {
		t.Fatalf("a newcomer alone holds %d after its first cycle, want all 100", rep.Held)
	}
}

// A claim over the fair share whose service_id has a job in flight is not given back while
// the job runs, and with a backlog each outcome chains the next job: an instance that held
// every busy claim kept them all, and one that joined under load had nothing to do until the
// backlog drained. The surplus busy claims now yield (no new job starts on them) and are
// given back as their running jobs end; the joining instance takes them at its next cycle.
// A cycle that ends within the share stops the yield.
func TestBusySurplusYieldsAndIsReleasedAsItsJobsEnd(t *testing.T) {
	t.Parallel()
	pool, ids, a := holdingAll(t, 10)
	// A job of every service_id in flight under a's claim.
	for _, c := range a.Held() {
		if _, err := pool.Exec(t.Context(), `INSERT INTO batchclaim.batches (service_id, batch_id, payload, state, attempts, claimant, claim_epoch)
VALUES ($1, 'job', '', 'INFLIGHT', 1, $2, $3)`, c.ServiceID, a.InstanceID(), c.Epoch); err != nil {
			t.Fatal(err)
		}
	}
	finish := func(id string) {
		t.Helper()
		if _, err := pool.Exec(t.Context(), `UPDATE batchclaim.batches SET state = 'COMMITTED' WHERE service_id = $1`, id); err != nil {
			t.Fatal(err)
		}
	}
	yielding := func() []string {
		var out []string
		for _, id := range ids {
			if a.Yielding(id) {
				out = append(out, id)
			}
		}
		return out
	}

	b, _ := newEngine(t, pool, 2, nil)
	if rep := cycle(t, b); rep.Held != 0 || rep.Share.Target != 5 {
		t.Fatalf("joining: held %d, share %+v; want 0 of a target of 5 (nothing free)", rep.Held, rep.Share)
	}
	cycle(t, a) // over the share for the first cycle: nothing given back yet
	if y := yielding(); len(y) != 0 {
		t.Fatalf("yielding after one cycle over the share: %v", y)
	}
	rep := cycle(t, a) // the second: the surplus is busy, so it yields
	if rep.Released != 0 || rep.Held != 10 {
		t.Fatalf("second cycle over the share: released %d, held %d; want 0 and 10 (every claim busy)", rep.Released, rep.Held)
	}
	y := yielding()
	if len(y) != 5 || a.Stats().Yielding != 5 {
		t.Fatalf("%d claims yield (%v), Stats.Yielding %d; want the surplus, 5", len(y), y, a.Stats().Yielding)
	}
	for _, id := range y {
		if _, ok := a.Holds(id); !ok {
			t.Fatalf("yielding claim %s is not usable: its running job's outcome must be written under it", id)
		}
	}

	// Two of the yielding service_ids' jobs end: those two are given back, and b takes them.
	finish(y[0])
	finish(y[1])
	if rep := cycle(t, a); rep.Released != 2 || rep.Held != 8 {
		t.Fatalf("after two yielding jobs ended: released %d, held %d; want 2 and 8", rep.Released, rep.Held)
	}
	if got := yielding(); !slices.Equal(got, y[2:]) || a.Stats().Yielding != 3 {
		t.Fatalf("yielding %v (Stats.Yielding %d), want the three still busy %v", got, a.Stats().Yielding, y[2:])
	}
	if rep := cycle(t, b); rep.Held != 2 {
		t.Fatalf("b holds %d after the release, want 2", rep.Held)
	}
	for _, id := range y[:2] {
		if !owners(t, pool)[id].is(b) {
			t.Fatalf("%s is not b's after its release", id)
		}
	}

	// b leaves before the rest is given back: a is within the share of one instance again,
	// and the three stop yielding.
	if err := b.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	cycle(t, a)
	if got := yielding(); len(got) != 0 || a.Stats().Yielding != 0 {
		t.Fatalf("still yielding %v (Stats.Yielding %d) with a alone", got, a.Stats().Yielding)
	}
}

// Counting the service_ids reads every row of the claims table, and every instance of a fleet
// did it at every cycle. A survey counts them only when the number may have changed: when some
// row is free (a new service_id comes as one), before a cycle that may give claims back, and
// every tenth cycle for rows deleted without freeing any.
func TestSurveyCountsServiceIDsWhenTheyMayHaveChanged(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool, ids, a := holdingAll(t, 20)
	// A held row deleted frees none: the cycles go on with the last count, until the tenth.
	if _, err := pool.Exec(ctx, `DELETE FROM batchclaim.service_id_claims WHERE service_id = $1`, ids[0]); err != nil {
		t.Fatal(err)
	}
	stale := 0
	for ; ; stale++ {
		rep := cycle(t, a)
		if rep.Held != 19 {
			t.Fatalf("held %d after one of 20 rows was deleted, want 19", rep.Held)
		}
		if rep.Share.ServiceIDs == 19 {
			break
		}
		if rep.Share.ServiceIDs != 20 || stale == 20 {
			t.Fatalf("cycle %d after the delete: %d service_ids, want 20 (the last count) until a recount gives 19", stale+1, rep.Share.ServiceIDs)
		}
	}
	if stale == 0 || stale > 9 {
		t.Errorf("the survey counted again %d cycles after the delete, want 1 to 9: counted at every cycle, or not every tenth", stale)
	}
	// A new service_id is a free row: counted and taken in the next cycle.
	if err := claims.RegisterServiceIDs(ctx, pool, "svc-new"); err != nil {
		t.Fatal(err)
	}
	if rep := cycle(t, a); rep.Held != 20 || rep.Share.ServiceIDs != 20 {
		t.Fatalf("the cycle after a new service_id: held %d of %d, want 20 of 20", rep.Held, rep.Share.ServiceIDs)
	}
}

// The surplus release locks the claims it gives back, skipping rows another transaction has
// locked. It offered only as many as it wanted to give back, the newest first, and while a
// fleet started those were the rows peers' acquisitions had locked (an acquisition that read
// a row as free before this instance took it keeps its lock until its statement ends): an
// instance gave none back for cycles on end. A locked row now makes room for the next one.
func TestSurplusReleasePassesOverLockedRows(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool, ids, a := holdingAll(t, 20)
	// The first ten are the newest claims, which the release offers first.
	if _, err := pool.Exec(ctx, `UPDATE batchclaim.service_id_claims
SET claimed_at = claimed_at + CASE WHEN service_id < $1 THEN interval '1 minute' ELSE interval '0' END`, ids[10]); err != nil {
		t.Fatal(err)
	}
	newEngine(t, pool, 2, nil) // live: a's target is 10
	if rep := cycle(t, a); rep.Released != 0 || rep.Share.Target != 10 {
		t.Fatalf("first cycle over the share: released %d, share %+v; want 0 of a target of 10", rep.Released, rep.Share)
	}
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	if _, err := tx.Exec(ctx, `SELECT 1 FROM batchclaim.service_id_claims WHERE service_id < $1 FOR UPDATE`, ids[10]); err != nil {
		t.Fatal(err)
	}
	rep := cycle(t, a) // the second: ten idle claims go back, the locked ones passed over
	if rep.Released != 10 || rep.Held != 10 {
		t.Fatalf("second cycle over the share with the ten newest rows locked: released %d, held %d; want 10 and 10", rep.Released, rep.Held)
	}
	for _, c := range a.Held() {
		if c.ServiceID >= ids[10] {
			t.Errorf("%s, not locked, is still held, want the ten unlocked claims given back (held %v)", c.ServiceID, a.Held())
			break
		}
	}
	if a.Stats().Yielding != 0 {
		t.Errorf("%d claims yield, want none: every claim is idle", a.Stats().Yielding)
	}
}

// holdingAll registers n service_ids and an engine that holds them all after its first cycle.
func holdingAll(t *testing.T, n int) (*pgxpool.Pool, []string, *claims.Engine) {
	t.Helper()
	pool := dbtest.NewPool(t)
	ids := registerServiceIDs(t, pool, n)
	a, _ := newEngine(t, pool, 1, nil)
	if rep := cycle(t, a); rep.Held != n || rep.Share.ServiceIDs != n {
		t.Fatalf("alone: held %d of %d service_ids, want %d of %d", rep.Held, rep.Share.ServiceIDs, n, n)
	}
	return pool, ids, a
}
