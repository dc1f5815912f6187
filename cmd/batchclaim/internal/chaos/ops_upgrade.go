package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/batchclaim/batchclaim/migrations"
)

// The upgrade operation: the run starts on the schema before the latest migration
// (startOnPreviousSchema), and the operation applies that migration while the instances
// work, as the first step of a rolling upgrade does (docs/compatibility.md). The instances
// are this build's, so they stand for the previous release where the migration changed none
// of its statements; every invariant is judged across the upgrade.

// startOnPreviousSchema takes the run's database one migration down, before the audit is
// installed and the first batch stored, and returns the version it is at.
func (r *run) startOnPreviousSchema(ctx context.Context) (uint, error) {
	url := r.db.url(r.db.addrs, "chaos-upgrade")
	if err := migrations.Down(ctx, url, 1); err != nil {
		return 0, fmt.Errorf("down one migration for the upgrade operation: %w", err)
	}
	v, _, err := migrations.Version(ctx, url)
	return v, err
}

// opUpgrade applies the migrations the database lacks. It holds the host lane's turn, so
// that no fault (a restart, a failover) meets the migration's transaction; the instances go
// on working meanwhile, waiting for its locks where they need them.
func (r *run) opUpgrade(ctx context.Context, _ *rand.Rand) OpRecord {
	rec := OpRecord{Kind: OpUpgrade}
	r.hostMu.Lock()
	defer r.hostMu.Unlock()
	url := r.db.url(r.db.addrs, "chaos-upgrade")
	latest, err := migrations.Latest()
	if err != nil {
		rec.Result, rec.Err = "no migrations", err.Error()
		return rec
	}
	from, dirty, err := migrations.Version(ctx, url)
	switch {
	case err != nil:
		rec.Result, rec.Err = "schema version not read", err.Error()
		return rec
	case dirty:
		rec.Result = fmt.Sprintf("schema version %d is dirty", from)
		return rec
	case from >= latest:
		rec.Result = fmt.Sprintf("schema at version %d already", from)
		return rec
	}
	rec.At, _ = r.dbNow(ctx)
	began, waits := time.Now(), 0
	// With the default lock timeout: a migration that meets a long transaction (long_snapshot)
	// gives up and tries again instead of stalling every instance behind its lock request.
	if err := migrations.Up(ctx, url, migrations.OnLockWait(func(w migrations.LockWait) {
		waits = w.Attempt
		r.event("upgrade", "migration %d gave up waiting for a lock (attempt %d), trying again in %v; oldest holders: %v", w.Version, w.Attempt, w.Retry, w.Holders)
	})); err != nil {
		rec.Result, rec.Err = fmt.Sprintf("migrating from version %d failed", from), err.Error()
		return rec
	}
	took := time.Since(began)
	rec.End, _ = r.dbNow(ctx)
	rec.Result, rec.Acted = fmt.Sprintf("schema version %d -> %d while the instances worked, in %v (%d times given up for a lock)",
		from, latest, took.Round(time.Millisecond), waits), true
	return rec
}
