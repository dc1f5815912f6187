package dbtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/batchclaim/batchclaim/migrations"
	"github.com/batchclaim/batchclaim/testkit/pglocal"
	"github.com/batchclaim/batchclaim/testkit/pgsource"
)

const (
	// EnvURL names the variable holding the server to test against (an admin URL: the tests
	// create and drop databases there).
	EnvURL = "TEST_DATABASE_URL"
	// EnvRequire names the variable that, set to 1, turns a missing server into a failure.
	EnvRequire = "REQUIRE_DB"

	setupTimeout   = 5 * time.Minute
	cleanupTimeout = 30 * time.Second
)

// Per test binary state, set up by the first test that needs a database.
var (
	setupOnce   sync.Once
	source      *pgsource.Source
	template    string // name of the migrated template database, once created
	unavailable error  // no server: skip, or fail with REQUIRE_DB=1
	broken      error  // a server, but the template could not be made: always fail

	mainCalled atomic.Bool
	// runID makes this binary's database names unique on a shared server.
	runID = fmt.Sprintf("%d_%s", os.Getpid(), randomHex(4))
)

// Main runs the tests of a package that uses dbtest; call it from TestMain:
//
//	func TestMain(m *testing.M) { dbtest.Main(m) }
//
// After the tests it drops the template database and stops a throwaway server, if the tests
// made them. The test binary's exit code is m.Run's (Go passes it on when TestMain returns).
func Main(m *testing.M) {
	mainCalled.Store(true)
	m.Run()
	if source == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	if template != "" {
		if err := adminExec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{template}.Sanitize()+" WITH (FORCE)"); err != nil {
			fmt.Fprintf(os.Stderr, "dbtest: drop template database %s: %v\n", template, err)
		}
	}
	if err := source.Close(ctx); err != nil {
		fmt.Fprintf(os.Stderr, "dbtest: stop %s postgres: %v\n", source.Kind, err)
	}
}

// AdminURL returns a superuser-or-CREATEDB URL for the server, for tests that create their
// own databases or terminate backends. It skips or fails the test when there is no server.
func AdminURL(t testing.TB) string {
	t.Helper()
	ensure(t)
	return source.URL
}

// Cluster returns the throwaway cluster the tests run against, so that fault tests can
// restart Postgres; nil when the server came from TEST_DATABASE_URL or Docker (such tests
// can start their own pglocal cluster). It skips or fails the test when there is no server.
func Cluster(t testing.TB) *pglocal.Cluster {
	t.Helper()
	ensure(t)
	return source.Cluster
}

// ensure makes the template once per test binary and stops t when that is impossible.
func ensure(t testing.TB) {
	t.Helper()
	if !mainCalled.Load() {
		t.Fatal("dbtest: call dbtest.Main(m) from this package's TestMain, so that the template database and any throwaway server are removed")
	}
	setupOnce.Do(setup)
	switch {
	case broken != nil:
		t.Fatalf("dbtest: %v", broken)
	case unavailable != nil:
		skipOrFail(t, unavailable)
	}
}

// skipOrFail applies the REQUIRE_DB policy to a missing server.
func skipOrFail(t testing.TB, err error) {
	t.Helper()
	if os.Getenv(EnvRequire) == "1" {
		t.Fatalf("dbtest: %s=1 and no postgres server: %v", EnvRequire, err)
		return
	}
	t.Skipf("dbtest: no postgres server, skipping (%s=1 makes this a failure): %v", EnvRequire, err)
}

// setup finds the server and creates and migrates this binary's template database.
func setup() {
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	src, err := pgsource.Server(ctx, nil, EnvURL)
	if err != nil {
		unavailable = err
		return
	}
	source = src
	if _, err := databaseURL(src.URL, "x"); err != nil {
		broken = fmt.Errorf("%s: %w", EnvURL, err)
		return
	}
	if err := ping(ctx, src.URL); err != nil {
		unavailable = fmt.Errorf("connect to the %s server: %w", src.Kind, err)
		return
	}
	name := "bctpl_" + runID
	if err := adminExec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		broken = fmt.Errorf("create template database (the %s server must allow CREATE DATABASE): %w", src.Kind, err)
		return
	}
	template = name
	tplURL, _ := databaseURL(src.URL, name)
	if err := migrations.Up(ctx, tplURL); err != nil {
		broken = fmt.Errorf("migrate template database %s: %w", name, err)
		return
	}
	// Copies need a template nobody is connected to; migrations.Up closed its connections,
	// and from now on nobody can open one by mistake.
	if err := adminExec(ctx, "ALTER DATABASE "+pgx.Identifier{name}.Sanitize()+" WITH ALLOW_CONNECTIONS false"); err != nil {
		broken = fmt.Errorf("close template database %s: %w", name, err)
	}
}

func ping(ctx context.Context, url string) error {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	return conn.Ping(ctx)
}

// adminExec runs one statement on a new connection to the server's admin URL. A new
// connection each time keeps working across a Postgres restart in a fault test.
func adminExec(ctx context.Context, sql string) error {
	conn, err := pgx.Connect(ctx, source.URL)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, sql)
	return err
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
