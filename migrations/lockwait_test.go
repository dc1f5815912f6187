package migrations_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/batchclaim/batchclaim/migrations"
	"github.com/batchclaim/batchclaim/testkit/dbtest"
)

// A migration that needs a lock a long transaction holds gives up after LockTimeout, is rolled
// back and tried again, up and down: meanwhile other statements on the table run (behind a
// migration that kept waiting they would queue until the long transaction ended), and it goes
// in once the transaction ends.
func TestMigrationsGiveUpForLocksAndTryAgain(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	url, latest := dbtest.NewDBBeforeLatest(t)
	connect := func() *pgx.Conn {
		t.Helper()
		c, err := pgx.Connect(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close(context.Background()) })
		return c
	}
	holder, reader := connect(), connect()
	var holderPID int
	if err := holder.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&holderPID); err != nil {
		t.Fatal(err)
	}

	for _, step := range []struct {
		name    string
		version uint // the migration that waits
		want    uint // the version once it went in
		migrate func(...migrations.Option) error
	}{
		{"up", latest, latest, func(o ...migrations.Option) error { return migrations.Up(ctx, url, o...) }},
		{"down", latest, latest - 1, func(o ...migrations.Option) error { return migrations.Down(ctx, url, 1, o...) }},
	} {
		// A long transaction that read batches holds its lock until it ends.
		tx, err := holder.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, `SELECT count(*) FROM batchclaim.batches`); err != nil {
			t.Fatal(err)
		}
		waits := make(chan migrations.LockWait, 1000)
		done := make(chan error, 1)
		go func() {
			done <- step.migrate(migrations.LockTimeout(200*time.Millisecond), migrations.OnLockWait(func(w migrations.LockWait) { waits <- w }))
		}()
		var w migrations.LockWait
		select {
		case w = <-waits:
		case err := <-done:
			t.Fatalf("%s ended (%v) while a transaction held batches", step.name, err)
		case <-time.After(30 * time.Second):
			t.Fatalf("%s: no lock wait reported", step.name)
		}
		if w.Version != step.version || w.Attempt != 1 || w.Retry != 200*time.Millisecond ||
			!strings.Contains(strings.Join(w.Holders, "\n"), fmt.Sprintf("pid %d (idle in transaction", holderPID)) {
			t.Errorf("%s: first lock wait %+v; want migration %d, attempt 1, the holder pid %d named", step.name, w, step.version, holderPID)
		}
		// The table serves others while the migration tries again.
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		var n int
		err = reader.QueryRow(rctx, `SELECT count(*) FROM batchclaim.batches`).Scan(&n)
		cancel()
		if err != nil {
			t.Fatalf("%s: a read of batches while the migration waited: %v", step.name, err)
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("%s after the transaction ended: %v", step.name, err)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("%s did not end after the transaction ended", step.name)
		}
		if v, dirty, err := migrations.Version(ctx, url); err != nil || dirty || v != step.want {
			t.Fatalf("%s: version %d dirty %v (%v), want %d clean", step.name, v, dirty, err, step.want)
		}
	}
}
