package claims_test

import (
	"context"
	"sort"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
)

type claimEvent struct {
	id       int64
	service  string
	instance uuid.UUID
	epoch    int64
	event    string
	at       time.Time
}

// checkHistory verifies, from claim_events alone, that every service_id had at most one
// owner at any database instant and that its epochs strictly increased over time; and that
// the history ends where the claims table is.
func checkHistory(t testing.TB, pool *pgxpool.Pool) (acquisitions int) {
	t.Helper()
	ctx := context.Background()
	rows, err := pool.Query(ctx, `SELECT id, service_id, instance_id, epoch, event, at FROM claim_events`)
	if err != nil {
		t.Fatal(err)
	}
	per := map[string][]claimEvent{}
	for rows.Next() {
		var e claimEvent
		if err := rows.Scan(&e.id, &e.service, &e.instance, &e.epoch, &e.event, &e.at); err != nil {
			t.Fatal(err)
		}
		per[e.service] = append(per[e.service], e)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	final := owners(t, pool)
	for svc, evs := range per {
		sort.Slice(evs, func(i, j int) bool { return evs[i].at.Before(evs[j].at) })
		var cur *claimEvent // the ownership open at this point of the history
		var lastEpoch int64
		for i := range evs {
			e := &evs[i]
			if e.event == "acquired" {
				acquisitions++
				if cur != nil {
					t.Errorf("%s: %s acquired epoch %d at %v while %s still owned epoch %d (two owners)",
						svc, e.instance, e.epoch, e.at, cur.instance, cur.epoch)
				}
				if e.epoch <= lastEpoch {
					t.Errorf("%s: epoch %d acquired after epoch %d (not strictly increasing)", svc, e.epoch, lastEpoch)
				}
				lastEpoch, cur = e.epoch, e
				continue
			}
			if cur == nil || cur.epoch != e.epoch || cur.instance != e.instance {
				t.Errorf("%s: %s of epoch %d by %s ends no open ownership (open: %+v)", svc, e.event, e.epoch, e.instance, cur)
			}
			cur = nil
		}
		o := final[svc]
		switch {
		case cur == nil && o.claimant != nil:
			t.Errorf("%s: history says free, table says %s", svc, o.claimant)
		case cur != nil && (o.claimant == nil || *o.claimant != cur.instance || o.epoch != cur.epoch):
			t.Errorf("%s: history says %s@%d, table says %v@%d", svc, cur.instance, cur.epoch, o.claimant, o.epoch)
		}
	}
	return acquisitions
}
