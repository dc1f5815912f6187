package dbtest_test

import (
	"context"
	"fmt"
	"log"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/batchclaim/batchclaim/pgdb"
	"github.com/batchclaim/batchclaim/testkit/dbtest"
)

// A package whose tests need Postgres calls Main from TestMain, and each test takes its own
// fresh, migrated database:
//
//	func TestMain(m *testing.M) { dbtest.Main(m) }
//
//	func TestShipments(t *testing.T) {
//		pool := dbtest.NewPool(t)        // or dbtest.NewDB(t) for just the URL
//		db := dbtest.Open(t, pool, "")   // or dbtest.NewOpen(t) for both at once
//		...
//	}
//
// An example has no *testing.T, so it takes the pool from ExamplePool and opens it with
// pgdb.Open, which is what dbtest.Open does for a test. The database already holds
// batchclaim's tables, empty.
func Example() {
	pool, done := dbtest.ExamplePool() // in a test: dbtest.NewPool(t)
	defer done()
	db, err := pgdb.Open(pool, "") // in a test: dbtest.Open(t, pool, "")
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	var claims int
	if err := db.QueryRow(ctx, "SELECT count(*) FROM batchclaim.service_id_claims").Scan(&claims); err != nil {
		log.Fatal(err)
	}
	fmt.Println("schema:", db.Schema())
	fmt.Println("claims:", claims)
	// Output:
	// schema: batchclaim
	// claims: 0
}

// ExamplePool's database belongs to the example alone, and the func it returns closes the
// pool and drops the database, as the end of a test does for NewPool's.
func ExampleExamplePool() {
	pool, done := dbtest.ExamplePool()
	ctx := context.Background()
	var name string
	if err := pool.QueryRow(ctx, "SELECT current_database()").Scan(&name); err != nil {
		log.Fatal(err)
	}
	fmt.Println("a copy of the template:", strings.HasPrefix(name, "bct_"))
	cfg := pool.Config().ConnConfig.Copy() // to try the database again after done

	done()
	_, err := pgx.ConnectConfig(ctx, cfg)
	fmt.Println("dropped:", pgdb.Code(err) == "3D000") // invalid_catalog_name
	// Output:
	// a copy of the template: true
	// dropped: true
}

// Two databases from ExamplePool (or from NewPool in two tests) share nothing: a table made
// in one is not in the other.
func ExampleExamplePool_isolated() {
	a, doneA := dbtest.ExamplePool()
	defer doneA()
	b, doneB := dbtest.ExamplePool()
	defer doneB()
	ctx := context.Background()
	if _, err := a.Exec(ctx, "CREATE TABLE shipments (id int)"); err != nil {
		log.Fatal(err)
	}
	has := func(p *pgxpool.Pool) (ok bool) {
		if err := p.QueryRow(ctx, "SELECT to_regclass('shipments') IS NOT NULL").Scan(&ok); err != nil {
			log.Fatal(err)
		}
		return ok
	}
	fmt.Println("in a:", has(a))
	fmt.Println("in b:", has(b))
	// Output:
	// in a: true
	// in b: false
}
