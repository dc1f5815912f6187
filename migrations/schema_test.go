package migrations_test

import (
	"context"
	"errors"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/golang-migrate/migrate/v4"
	"github.com/golang-migrate/migrate/v4/source/iofs"
	"github.com/jackc/pgx/v5"

	"github.com/batchclaim/batchclaim/migrations"
	"github.com/batchclaim/batchclaim/testkit/dbtest"
)

// lastInPublic is the newest version of the releases that kept their tables in public.
const lastInPublic = 11

// emptyDB is a database of its own with nothing of batchclaim's in it.
func emptyDB(t *testing.T) (url string, conn *pgx.Conn) {
	t.Helper()
	url = dbtest.NewDB(t)
	conn, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	if _, err := conn.Exec(t.Context(), `DROP SCHEMA batchclaim CASCADE`); err != nil {
		t.Fatal(err)
	}
	return url, conn
}

// asEarlierRelease migrates url to version as v0.1.0 and earlier did: into public, with
// golang-migrate's public.schema_migrations.
func asEarlierRelease(t *testing.T, url string, version uint) {
	t.Helper()
	src, err := iofs.New(migrations.FS(), ".")
	if err != nil {
		t.Fatal(err)
	}
	m, err := migrate.NewWithSourceInstance("iofs", src, "pgx5://"+strings.TrimPrefix(url, "postgres://"))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if err := m.Migrate(version); err != nil {
		t.Fatal(err)
	}
}

func count(t *testing.T, conn *pgx.Conn, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := conn.QueryRow(t.Context(), sql, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

// A database an earlier release migrated (tables in public) is moved into the schema by Up,
// with its rows and sequences, and goes on from its version; Version first says what to do.
func TestUpMovesAnEarlierReleasesTables(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	url, conn := emptyDB(t)
	asEarlierRelease(t, url, lastInPublic)
	if _, err := conn.Exec(ctx, `INSERT INTO public.service_id_claims (service_id) VALUES ('svc');
		INSERT INTO public.batches (service_id, batch_id, payload) VALUES ('svc', 'b1', '\x00'), ('svc', 'b2', '\x00');
		UPDATE public.batches SET state = 'COMMITTED' WHERE batch_id = 'b1'`); err != nil {
		t.Fatal(err)
	}
	if _, _, err := migrations.Version(ctx, url); !errors.Is(err, migrations.ErrInPublic) {
		t.Fatalf("Version before the move: %v, want migrations.ErrInPublic", err)
	}
	var moved uint
	if err := migrations.Up(ctx, url, migrations.OnMove(func(v uint) { moved = v })); err != nil {
		t.Fatal(err)
	}
	latest, err := migrations.Latest()
	if err != nil {
		t.Fatal(err)
	}
	if v, dirty, err := migrations.Version(ctx, url); moved != lastInPublic || v != latest || dirty || err != nil {
		t.Fatalf("after the move: migrations.OnMove(%d), version %d dirty=%v err=%v; want migrations.OnMove(%d), version %d", moved, v, dirty, err, lastInPublic, latest)
	}
	if n := count(t, conn, `SELECT count(*) FROM pg_class WHERE relnamespace = 'public'::regnamespace`); n != 0 {
		t.Fatalf("%d relations left in public", n)
	}
	if n := count(t, conn, `SELECT count(*) FROM pg_proc WHERE pronamespace = 'public'::regnamespace`); n != 0 {
		t.Fatalf("%d functions left in public", n)
	}
	// Rows, sequences and triggers came along, and work for a connection whose search_path
	// is public.
	if _, err := conn.Exec(ctx, `INSERT INTO batchclaim.batches (service_id, batch_id, payload) VALUES ('svc', 'b3', '\x00')`); err != nil {
		t.Fatal(err)
	}
	if n := count(t, conn, `SELECT count(*) FROM batchclaim.batches WHERE seq = 3 AND batch_id = 'b3'`); n != 1 {
		t.Fatal("the batches' seq did not go on from the moved sequence")
	}
	if n := count(t, conn, `SELECT count(*) FROM batchclaim.batches WHERE batch_id = 'b1' AND finished_at IS NOT NULL AND NOT unfinished`); n != 1 {
		t.Fatal("the committed batch lost its finished_at")
	}
	if n := count(t, conn, `SELECT count(*) FROM batchclaim.service_id_claims`); n != 1 {
		t.Fatal("the claim row was not moved")
	}
}

// A half-failed migration of an earlier release is not moved: Up says why and changes nothing.
func TestUpRefusesToMoveADirtyDatabase(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	url, conn := emptyDB(t)
	asEarlierRelease(t, url, lastInPublic)
	if _, err := conn.Exec(ctx, `UPDATE public.schema_migrations SET dirty = true`); err != nil {
		t.Fatal(err)
	}
	err := migrations.Up(ctx, url)
	if err == nil || !strings.Contains(err.Error(), "dirty") {
		t.Fatalf("Up on a dirty earlier database: %v, want a refusal naming dirty", err)
	}
	if n := count(t, conn, `SELECT count(*) FROM pg_class WHERE relnamespace = 'public'::regnamespace AND relkind = 'r'`); n != 25 {
		t.Fatalf("%d tables in public after the refusal, want the 25 left where they were", n)
	}
}

// Next to an application that has its own public.batches and golang-migrate's
// public.schema_migrations, Up touches neither, and keeps its version in its own schema.
func TestUpNextToAnApplication(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	url, conn := emptyDB(t)
	if _, err := conn.Exec(ctx, `CREATE TABLE public.batches (id int PRIMARY KEY, note text);
		INSERT INTO public.batches VALUES (1, 'the application''s');
		CREATE TABLE public.schema_migrations (version bigint NOT NULL PRIMARY KEY, dirty boolean NOT NULL);
		INSERT INTO public.schema_migrations VALUES (3, false)`); err != nil {
		t.Fatal(err)
	}
	if err := migrations.Up(ctx, url); err != nil {
		t.Fatal(err)
	}
	if n := count(t, conn, `SELECT count(*) FROM public.schema_migrations WHERE version = 3 AND NOT dirty`); n != 1 {
		t.Fatal("the application's schema_migrations changed")
	}
	if n := count(t, conn, `SELECT count(*) FROM public.batches WHERE note = 'the application''s'`); n != 1 {
		t.Fatal("the application's batches changed")
	}
	latest, _ := migrations.Latest()
	if v, _, err := migrations.Version(ctx, url); v != latest || err != nil {
		t.Fatalf("version %d, %v; want %d", v, err, latest)
	}
}

// Up in another schema puts everything there, and nothing in the default one.
func TestUpInAnotherSchema(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	url, conn := emptyDB(t)
	if err := migrations.Up(ctx, url, migrations.InSchema("jobs")); err != nil {
		t.Fatal(err)
	}
	latest, _ := migrations.Latest()
	if v, _, err := migrations.Version(ctx, url, migrations.InSchema("jobs")); v != latest || err != nil {
		t.Fatalf("version in jobs: %d, %v", v, err)
	}
	if v, _, err := migrations.Version(ctx, url); v != 0 || err != nil {
		t.Fatalf("version in the default schema: %d, %v; want 0", v, err)
	}
	if n := count(t, conn, `SELECT count(*) FROM pg_namespace WHERE nspname = 'batchclaim'`); n != 0 {
		t.Fatal("Up in jobs created the default schema")
	}
	if n := count(t, conn, `SELECT count(*) FROM pg_tables WHERE schemaname = 'jobs'`); n != 28 {
		t.Fatalf("%d tables in jobs, want 28 (27 and the version table)", n)
	}
	if err := migrations.Down(ctx, url, 0, migrations.InSchema("jobs")); err != nil {
		t.Fatal(err)
	}
	if n := count(t, conn, `SELECT count(*) FROM pg_tables WHERE schemaname = 'jobs'`); n != 1 {
		t.Fatalf("%d tables in jobs after down, want the version table alone", n)
	}
	if err := migrations.Up(ctx, url, migrations.InSchema("public")); err == nil {
		t.Fatal("Up in public was accepted")
	}
}

// The functions find their tables from a connection whose search_path does not name the
// schema (an application's), and every object of the schema is in the list sqlc reads.
func TestSchemaObjects(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	url := dbtest.NewDB(t)
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	// Each function that names a table either carries search_path or names the schema.
	rows, err := conn.Query(ctx, `SELECT p.proname, p.prosrc, coalesce(array_to_string(p.proconfig, ','), ''),
			ARRAY(SELECT c.relname::text FROM pg_class c WHERE c.relnamespace = p.pronamespace AND c.relkind IN ('r', 'v', 'S'))
		FROM pg_proc p WHERE p.pronamespace = 'batchclaim'::regnamespace ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for rows.Next() {
		var name, src, config string
		var relations []string
		if err := rows.Scan(&name, &src, &config, &relations); err != nil {
			t.Fatal(err)
		}
		n++
		if config == "search_path=batchclaim" {
			continue
		}
		for _, rel := range relations {
			for _, m := range regexp.MustCompile(`(\S*)\b`+rel+`\b`).FindAllStringSubmatch(src, -1) {
				if !strings.HasSuffix(m[1], "batchclaim.") {
					t.Errorf("function %s names %s without the schema and has no search_path (config %q): a later migration that replaces it must set one or the other", name, rel, config)
				}
			}
		}
	}
	if rows.Err() != nil || n < 4 {
		t.Fatal(rows.Err(), n)
	}
	// And they work there: the triggers of an INSERT, an UPDATE and a DELETE, the claims view, wake.
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	cfg.RuntimeParams["search_path"] = "pg_catalog"
	app, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer app.Close(context.Background())
	for _, sql := range []string{
		`INSERT INTO batchclaim.service_id_claims (service_id) VALUES ('svc')`,
		`INSERT INTO batchclaim.batches (service_id, batch_id, payload) VALUES ('svc', 'b1', '\x00')`,
		`INSERT INTO batchclaim.batches (service_id, batch_id, payload, ledger) VALUES ('svc', 'l1', '\x00', true)`,
		`UPDATE batchclaim.batches SET state = 'COMMITTED'`,
		`SELECT count(*) FROM batchclaim.service_id_claims_effective WHERE NOT busy`,
		`SELECT batchclaim.batchclaim_wake('svc')`,
		`DELETE FROM batchclaim.batches`,
	} {
		if _, err := app.Exec(ctx, sql); err != nil {
			t.Errorf("%s, search_path pg_catalog: %v", sql, err)
		}
	}
	// Objects the migrations create, against the sqlc-only list.
	objs, err := conn.Query(ctx, `SELECT c.relname FROM pg_class c
		WHERE c.relnamespace = 'batchclaim'::regnamespace AND c.relkind IN ('r', 'v', 'S') AND c.relname <> 'schema_migrations'
		  AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.objid = c.oid AND d.deptype IN ('a', 'i') AND d.classid = 'pg_class'::regclass AND d.refclassid = 'pg_class'::regclass)
		UNION ALL SELECT proname FROM pg_proc WHERE pronamespace = 'batchclaim'::regnamespace ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	names, err := pgx.CollectRows(objs, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	listed, err := os.ReadFile("../internal/db/schema.sql")
	if err != nil {
		t.Fatal(err)
	}
	var inList []string
	for _, m := range regexp.MustCompile(`(?m)^ALTER \w+ (\w+)[ (].*SET SCHEMA batchclaim;$`).FindAllStringSubmatch(string(listed), -1) {
		inList = append(inList, m[1])
	}
	slices.Sort(inList)
	if !slices.Equal(names, inList) {
		t.Fatalf("internal/db/schema.sql lists %v\nthe migrations create %v", inList, names)
	}
}
