package claims_test

import (
	"testing"

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
	rep := cycle(t, a)
	if rep.Held != 50 || rep.Share.LiveInstances != 2 || rep.Share.Target != 50 {
		t.Fatalf("first cycle: held %d, share %+v; want 50 of 100 with two instances live", rep.Held, rep.Share)
	}
	if got := countOwned(owners(t, pool), a); got != 50 {
		t.Fatalf("the database lists %d claims of the first instance, want 50", got)
	}
}
