package migrations

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/golang-migrate/migrate/v4"
	"github.com/golang-migrate/migrate/v4/database"
	"github.com/golang-migrate/migrate/v4/source"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// LockTimeoutDefault is how long a migration waits for a lock on a table before it gives
// up, is rolled back, and is tried again (LockTimeout).
const LockTimeoutDefault = 2 * time.Second

// LockTimeout sets how long each migration waits for a lock on a table before it is rolled
// back and tried again, after as long a pause, until it gets its locks or ctx ends; 0 makes it
// wait as long as it takes. A migration that changes a table waits for every transaction
// that holds a lock on it (a long report, a pg_dump, an idle transaction left open), and
// while it waits every other statement on that table queues behind it: the whole fleet
// stalls. Waiting at most d at a time stalls the fleet at most d at a time, and the
// migration still goes in once the long transaction ends. Each migration runs in one
// transaction (its statements are sent as one), so one given up leaves nothing behind.
func LockTimeout(d time.Duration) Option { return func(o *options) { o.lockTimeout = d } }

// LockWait is one migration given up for a lock, as OnLockWait reports it.
type LockWait struct {
	Version uint          // the migration that gave up
	Attempt int           // how many times it has given up so far
	Retry   time.Duration // the pause before the next attempt
	// Holders are the oldest transactions holding a lock on a table of the schema, each as
	// "pid N (state, transaction open for D): query": most likely what the migration waits
	// for.
	Holders []string
}

// OnLockWait is called each time a migration has given up waiting for a lock, before the
// pause and the next attempt (LockTimeout).
func OnLockWait(fn func(LockWait)) Option { return func(o *options) { o.onLockWait = fn } }

// lockTimed is the embedded migrations, each with the statement that bounds its lock waits
// first, on its first line (so that golang-migrate's line numbers in errors stay right).
type lockTimed struct {
	source.Driver
	timeout time.Duration
}

func (l lockTimed) ReadUp(version uint) (io.ReadCloser, string, error) {
	r, id, err := l.Driver.ReadUp(version)
	return l.wrap(r), id, err
}

func (l lockTimed) ReadDown(version uint) (io.ReadCloser, string, error) {
	r, id, err := l.Driver.ReadDown(version)
	return l.wrap(r), id, err
}

func (l lockTimed) wrap(r io.ReadCloser) io.ReadCloser {
	if r == nil {
		return nil
	}
	set := fmt.Sprintf("SET LOCAL lock_timeout = '%dms'; ", max(l.timeout.Milliseconds(), 1)) // 0ms would be no limit
	return struct {
		io.Reader
		io.Closer
	}{io.MultiReader(strings.NewReader(set), r), r}
}

// lockGivenUp reports whether err is a migration's statements given up for a lock
// (lock_timeout): they were rolled back together, and golang-migrate left the version dirty
// at the version it was moving to.
func lockGivenUp(err error) bool {
	var de database.Error // a migration's own statements fail with this value type
	if !errors.As(err, &de) {
		return false
	}
	var pe *pgconn.PgError
	return errors.As(de.OrigErr, &pe) && pe.Code == "55P03"
}

// retryLocks runs step until it ends without a migration given up for a lock, or ctx ends:
// after each such failure it sets the dirty version back to the one before the migration that
// gave up (up: the one before it; down: the one after it), reports the wait and pauses.
func retryLocks(ctx context.Context, databaseURL string, o options, up bool, step func(*migrate.Migrate) error) error {
	for attempt := 1; ; attempt++ {
		err := run(ctx, databaseURL, o, step)
		if o.lockTimeout <= 0 || !lockGivenUp(err) {
			return err
		}
		v, dirty, verr := Version(ctx, databaseURL, InSchema(o.schema))
		if verr != nil || !dirty {
			return errors.Join(err, verr)
		}
		back, ferr := versionBefore(v, up)
		if ferr != nil {
			return errors.Join(err, ferr)
		}
		if ferr := run(ctx, databaseURL, o, func(m *migrate.Migrate) error { return m.Force(back) }); ferr != nil {
			return errors.Join(err, fmt.Errorf("set version %d back to %d after the migration gave up for a lock: %w", v, back, ferr))
		}
		w := LockWait{Version: v, Attempt: attempt, Retry: o.lockTimeout, Holders: lockHolders(ctx, databaseURL, o.schema)}
		if !up {
			w.Version = uint(back)
		}
		if o.onLockWait != nil {
			o.onLockWait(w)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("migration %d waited for a lock until the context ended: %w", w.Version, ctx.Err())
		case <-time.After(w.Retry):
		}
	}
}

// versionBefore is the clean version to set back to when the migration moving to dirty gave
// up: going up, the one before dirty (-1: none); going down, the one after it.
func versionBefore(dirty uint, up bool) (int, error) {
	src, err := embedded()
	if err != nil {
		return 0, err
	}
	defer src.Close()
	if !up {
		next, err := src.Next(dirty)
		return int(next), err
	}
	prev, err := src.Prev(dirty)
	if err != nil {
		return database.NilVersion, nil //nolint:nilerr // dirty is the first migration
	}
	return int(prev), nil
}

// lockHolders lists the three oldest transactions that hold a lock on a table of schema,
// other than this session's, for a report of what a migration waits for.
func lockHolders(ctx context.Context, databaseURL, schema string) []string {
	qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(qctx, databaseURL)
	if err != nil {
		return nil
	}
	defer conn.Close(context.WithoutCancel(ctx))
	rows, err := conn.Query(qctx, `SELECT DISTINCT ON (a.xact_start, a.pid) a.pid, COALESCE(a.state, ''),
			COALESCE(extract(epoch FROM now() - a.xact_start), 0)::float8, left(regexp_replace(a.query, '\s+', ' ', 'g'), 80)
		FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
		WHERE l.granted AND l.relation IN (SELECT c.oid FROM pg_class c WHERE c.relnamespace = to_regnamespace($1))
		  AND a.pid <> pg_backend_pid() AND a.xact_start IS NOT NULL
		ORDER BY a.xact_start, a.pid
		LIMIT 3`, schema)
	if err != nil {
		return nil
	}
	var out []string
	for rows.Next() {
		var pid int32
		var state, query string
		var open float64
		if rows.Scan(&pid, &state, &open, &query) == nil {
			out = append(out, fmt.Sprintf("pid %d (%s, transaction open for %.1fs): %s", pid, state, open, query))
		}
	}
	rows.Close()
	return out
}
