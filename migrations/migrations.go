package migrations

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/golang-migrate/migrate/v4"
	_ "github.com/golang-migrate/migrate/v4/database/pgx/v5" // registers pgx5://
	"github.com/golang-migrate/migrate/v4/source"
	"github.com/golang-migrate/migrate/v4/source/iofs"
	"github.com/jackc/pgx/v5"

	"github.com/batchclaim/batchclaim/pgdb"
)

//go:embed *.sql
var files embed.FS

// FS returns the embedded migration files.
func FS() embed.FS { return files }

// SchemaDefault is the schema the migrations create their objects in unless InSchema names
// another.
const SchemaDefault = pgdb.SchemaDefault

// VersionTable is the name of the table, in the schema, where golang-migrate records the
// applied version. Being in batchclaim's own schema, it never meets an application's own
// public.schema_migrations.
const VersionTable = "schema_migrations"

// Option changes where or how the migrations run.
type Option func(*options)

type options struct {
	schema      string
	onMove      func(version uint)
	lockTimeout time.Duration
	onLockWait  func(LockWait)
}

// InSchema runs the migrations in schema instead of SchemaDefault. Every instance and command
// using that database must be given the same schema.
func InSchema(schema string) Option { return func(o *options) { o.schema = schema } }

// OnMove is called, before Up applies anything, when Up finds a database migrated by a
// release that kept its tables in public, and moves them: version is the one found there.
func OnMove(fn func(version uint)) Option { return func(o *options) { o.onMove = fn } }

func resolve(opts []Option) (options, error) {
	o := options{schema: SchemaDefault, lockTimeout: LockTimeoutDefault}
	for _, f := range opts {
		f(&o)
	}
	return o, pgdb.ValidateSchema(o.schema)
}

// Up applies every migration not yet applied. It creates the schema if it does not exist; a
// database whose tables an earlier release left in public (with golang-migrate's
// public.schema_migrations) has them moved into the schema first (see docs/schema.md).
func Up(ctx context.Context, databaseURL string, opts ...Option) error {
	o, err := resolve(opts)
	if err != nil {
		return err
	}
	if err := prepare(ctx, databaseURL, o); err != nil {
		return err
	}
	return retryLocks(ctx, databaseURL, o, true, func(m *migrate.Migrate) error { return m.Up() })
}

// Down reverts steps migrations (all of them when steps <= 0). The schema and its version
// table stay. Like Up, a migration given up for a lock is tried again (LockTimeout).
func Down(ctx context.Context, databaseURL string, steps int, opts ...Option) error {
	o, err := resolve(opts)
	if err != nil {
		return err
	}
	if steps <= 0 {
		return retryLocks(ctx, databaseURL, o, false, func(m *migrate.Migrate) error { return m.Down() })
	}
	// The version to go down to, found once: an attempt given up for a lock may have
	// reverted some of the steps already.
	v, dirty, err := Version(ctx, databaseURL, InSchema(o.schema))
	if err != nil {
		return err
	}
	target, ok := stepsDown(v, steps)
	if dirty || !ok {
		// golang-migrate says what is wrong: a dirty version, or fewer migrations than steps.
		return run(ctx, databaseURL, o, func(m *migrate.Migrate) error { return m.Steps(-steps) })
	}
	return retryLocks(ctx, databaseURL, o, false, func(m *migrate.Migrate) error {
		if target < 0 {
			return m.Down()
		}
		return m.Migrate(uint(target))
	})
}

// stepsDown is the version steps migrations below v (-1: none applied), and whether there
// are that many.
func stepsDown(v uint, steps int) (int, bool) {
	src, err := embedded()
	if err != nil || v == 0 {
		return 0, false
	}
	defer src.Close()
	target := int(v)
	for range steps {
		if target < 0 {
			return 0, false
		}
		prev, err := src.Prev(uint(target))
		if err != nil {
			target = -1
			continue
		}
		target = int(prev)
	}
	return target, true
}

// ErrInPublic is returned by Version for a database whose tables an earlier release left in
// public: Up moves them.
var ErrInPublic = errors.New("batchclaim's tables are in schema public, where v0.1.0 and earlier kept them: stop every instance and run `batchclaim migrate up` to move them")

// Version reports the applied version and whether a failed migration left it dirty. Version 0
// means nothing is applied. It only reads: the schema and its version table need not exist.
func Version(ctx context.Context, databaseURL string, opts ...Option) (version uint, dirty bool, err error) {
	o, err := resolve(opts)
	if err != nil {
		return 0, false, err
	}
	conn, err := pgx.Connect(ctx, databaseURL)
	if err != nil {
		return 0, false, fmt.Errorf("open database: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	v, dirty, found, err := readVersion(ctx, conn, o.schema)
	if err != nil || found {
		return v, dirty, err
	}
	if legacy, err := inPublic(ctx, conn, o.schema); err != nil || legacy {
		return 0, false, errors.Join(err, ErrInPublic)
	}
	return 0, false, nil
}

// readVersion reads schema's version table; found is false when there is none.
func readVersion(ctx context.Context, q pgdb.Querier, schema string) (version uint, dirty, found bool, err error) {
	table := pgx.Identifier{schema, VersionTable}
	if err := q.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, table.Sanitize()).Scan(&found); err != nil || !found {
		return 0, false, false, err
	}
	var v int64
	err = q.QueryRow(ctx, `SELECT version, dirty FROM `+table.Sanitize()+` LIMIT 1`).Scan(&v, &dirty)
	if pgdb.NoRows(err) {
		return 0, false, true, nil
	}
	return uint(v), dirty, true, err
}

// inPublic reports whether an earlier release's tables are in public and not yet in schema.
func inPublic(ctx context.Context, q pgdb.Querier, schema string) (bool, error) {
	var legacy bool
	err := q.QueryRow(ctx, `SELECT to_regclass('public.service_id_claims') IS NOT NULL
		AND to_regclass('public.schema_migrations') IS NOT NULL
		AND to_regclass($1) IS NULL`, pgx.Identifier{schema, "service_id_claims"}.Sanitize()).Scan(&legacy)
	return legacy, err
}

// embedded is the embedded migrations as golang-migrate reads them.
func embedded() (source.Driver, error) { return iofs.New(files, ".") }

// Latest is the highest version among the embedded files.
func Latest() (uint, error) {
	src, err := embedded()
	if err != nil {
		return 0, err
	}
	defer src.Close()
	v, err := src.First()
	if err != nil {
		return 0, err
	}
	for {
		next, err := src.Next(v)
		if err != nil {
			return v, nil //nolint:nilerr // end of the list
		}
		v = next
	}
}

func run(ctx context.Context, databaseURL string, o options, step func(*migrate.Migrate) error) error {
	src, err := embedded()
	if err != nil {
		return fmt.Errorf("read embedded migrations: %w", err)
	}
	if o.lockTimeout > 0 {
		src = lockTimed{Driver: src, timeout: o.lockTimeout}
	}
	u, err := driverURL(databaseURL, o.schema)
	if err != nil {
		return err
	}
	m, err := migrate.NewWithSourceInstance("iofs", src, u)
	if err != nil {
		return fmt.Errorf("open database for migrations: %w", err)
	}
	defer m.Close()
	// Let a cancelled context stop a long migration between steps.
	done := make(chan struct{})
	defer close(done)
	go func() {
		select {
		case <-ctx.Done():
			select {
			case m.GracefulStop <- true:
			default:
			}
		case <-done:
		}
	}()
	if err := step(m); err != nil && !errors.Is(err, migrate.ErrNoChange) {
		return err
	}
	return ctx.Err()
}

// driverURL rewrites a postgres:// URL to the pgx5:// scheme the migrate driver registers,
// with the schema as the connection's only search_path: the migrations name their objects
// without a schema, so they are created there, and golang-migrate keeps its version table in
// the connection's current schema.
func driverURL(u, schema string) (string, error) {
	for _, p := range []string{"postgresql://", "postgres://"} {
		if strings.HasPrefix(u, p) {
			u = "pgx5://" + strings.TrimPrefix(u, p)
		}
	}
	parsed, err := url.Parse(u)
	if err != nil || parsed.Scheme != "pgx5" {
		return "", errors.New("migrations need the database as a postgres:// URL")
	}
	q := parsed.Query()
	q.Set("search_path", schema)
	q.Set("x-migrations-table", VersionTable)
	parsed.RawQuery = q.Encode()
	return parsed.String(), nil
}
