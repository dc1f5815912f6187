package pgdb_test

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/batchclaim/batchclaim/pgdb"
)

// A schema name is checked before anything opens it.
func ExampleValidateSchema() {
	for _, name := range []string{"batchclaim", "jobs_2", "public", "Jobs"} {
		fmt.Println(name, pgdb.ValidateSchema(name) == nil)
	}
	// Output:
	// batchclaim true
	// jobs_2 true
	// public false
	// Jobs false
}

// A pool of the application's own that the library's nodes share gets the library's
// identifier codec on each connection (claims.ConfigurePool does this and more).
func ExampleConfigureTypes() {
	cfg, err := pgxpool.ParseConfig("postgres://app@db.internal:5432/app")
	if err != nil {
		panic(err)
	}
	pgdb.ConfigureTypes(cfg)
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg) // connects lazily
	if err != nil {
		panic(err)
	}
	defer pool.Close()
	db, err := pgdb.Open(pool, "")
	fmt.Println(db.Schema(), err)
	// Output: batchclaim <nil>
}

// RegisterTypes does the same for one connection's type map: a uuid.UUID is written as its
// 16 bytes.
func ExampleRegisterTypes() {
	m := pgtype.NewMap()
	pgdb.RegisterTypes(m)
	id := uuid.MustParse("6db7c1b6-36be-4f72-be82-1cd61a8748b1")
	buf, err := m.Encode(pgtype.UUIDOID, pgtype.BinaryFormatCode, id, nil)
	fmt.Println(len(buf), err)
	// Output: 16 <nil>
}
