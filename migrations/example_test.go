package migrations_test

import (
	"context"
	"fmt"
	"io/fs"
	"strings"
	"time"

	"github.com/batchclaim/batchclaim/migrations"
	"github.com/batchclaim/batchclaim/testkit/dbtest"
)

// Up applies the migrations into the schema InSchema names, creating it; Version reads what
// is applied there (0 before Up, with no schema yet), and Down reverts steps. Up on a database
// that is up to date changes nothing and returns nil.
func ExampleUp() {
	pool, drop := dbtest.ExamplePool() // a fresh database, migrated in the default schema
	defer drop()
	ctx := context.Background()
	url := pool.Config().ConnString()
	jobs := migrations.InSchema("jobs")
	latest, err := migrations.Latest()
	if err != nil {
		panic(err)
	}

	v, dirty, err := migrations.Version(ctx, url, jobs)
	fmt.Println("before:", v, dirty, err)
	fmt.Println("up:", migrations.Up(ctx, url, jobs))
	v, dirty, err = migrations.Version(ctx, url, jobs)
	fmt.Println("at the latest version:", v == latest, dirty, err)
	var found bool
	if err := pool.QueryRow(ctx, `SELECT to_regclass('jobs.batches') IS NOT NULL`).Scan(&found); err != nil {
		panic(err)
	}
	fmt.Println("jobs.batches exists:", found)
	fmt.Println("up again:", migrations.Up(ctx, url, jobs))

	fmt.Println("down one:", migrations.Down(ctx, url, 1, jobs))
	v, _, _ = migrations.Version(ctx, url, jobs)
	fmt.Println("one below the latest:", v == latest-1)
	v, _, _ = migrations.Version(ctx, url)
	fmt.Println("default schema untouched:", v == latest)
	// Output:
	// before: 0 false <nil>
	// up: <nil>
	// at the latest version: true false <nil>
	// jobs.batches exists: true
	// up again: <nil>
	// down one: <nil>
	// one below the latest: true
	// default schema untouched: true
}

// A schema that cannot hold batchclaim's tables is refused before anything connects to the
// database (nothing listens at this URL).
func ExampleInSchema() {
	url := "postgres://nobody@127.0.0.1:1/none?connect_timeout=1"
	for _, schema := range []string{"public", "Jobs", "pg_jobs"} {
		fmt.Println(migrations.Up(context.Background(), url, migrations.InSchema(schema)))
	}
	// Output:
	// schema "public": batchclaim's tables need a schema of their own, apart from the application's (the default is batchclaim)
	// schema "Jobs": use lower-case letters, digits and underscores (at most 63, not starting with a digit)
	// schema "pg_jobs" is reserved by Postgres
}

// FS holds the migrations as golang-migrate reads them: an up and a down file for every
// version from 1 to Latest.
func ExampleFS() {
	names, err := fs.Glob(migrations.FS(), "*.sql")
	if err != nil {
		panic(err)
	}
	latest, err := migrations.Latest()
	if err != nil {
		panic(err)
	}
	up, down := map[string]bool{}, map[string]bool{}
	for _, n := range names {
		version, _, _ := strings.Cut(n, "_")
		switch {
		case strings.HasSuffix(n, ".up.sql"):
			up[version] = true
		case strings.HasSuffix(n, ".down.sql"):
			down[version] = true
		}
	}
	complete := len(up) == int(latest) && len(down) == int(latest)
	for v := uint(1); v <= latest; v++ {
		version := fmt.Sprintf("%06d", v)
		complete = complete && up[version] && down[version]
	}
	fmt.Println(names[0])
	fmt.Println(names[1])
	fmt.Println("an up and a down file for every version:", complete)
	// Output:
	// 000001_claims.down.sql
	// 000001_claims.up.sql
	// an up and a down file for every version: true
}

// A migration waits at most LockTimeout at a time for a lock a long transaction holds, so that
// the statements queued behind it wait no longer; OnLockWait hears each time it gave up, and
// it goes in once the transaction ends.
func ExampleLockTimeout() {
	pool, drop := dbtest.ExamplePool()
	defer drop()
	ctx := context.Background()
	url := pool.Config().ConnString()
	if err := migrations.Down(ctx, url, 1); err != nil {
		panic(err)
	}
	long, err := pool.Begin(ctx) // a report that read batches and stays open
	if err != nil {
		panic(err)
	}
	if _, err := long.Exec(ctx, `SELECT count(*) FROM batchclaim.batches`); err != nil {
		panic(err)
	}
	heard := make(chan struct{})
	var once bool
	done := make(chan error)
	go func() {
		done <- migrations.Up(ctx, url, migrations.LockTimeout(100*time.Millisecond), migrations.OnLockWait(func(w migrations.LockWait) {
			if !once {
				once = true
				fmt.Println("gave up for a lock, attempt", w.Attempt, "held by", len(w.Holders), "transaction")
				close(heard)
			}
		}))
	}()
	<-heard
	var n int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM batchclaim.batches`).Scan(&n); err != nil { // not stuck behind it
		panic(err)
	}
	fmt.Println("read meanwhile:", n, "batches")
	if err := long.Commit(ctx); err != nil {
		panic(err)
	}
	fmt.Println("up:", <-done)
	// Output:
	// gave up for a lock, attempt 1 held by 1 transaction
	// read meanwhile: 0 batches
	// up: <nil>
}
