package pgdb_test

import (
	"context"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/batchclaim/batchclaim/pgdb"
	"github.com/batchclaim/batchclaim/testkit/dbtest"
)

// A pool ConfigureTypes configured sends and reads uuid.UUID as pgx's own codec would, in
// both formats, NULL and arrays included, and an AfterConnect set before still runs.
func TestConfigureTypesRoundTrip(t *testing.T) {
	t.Parallel()
	cfg, err := pgxpool.ParseConfig(dbtest.NewDB(t))
	if err != nil {
		t.Fatal(err)
	}
	ran := make(chan struct{}, 16)
	cfg.AfterConnect = func(_ context.Context, _ *pgx.Conn) error { ran <- struct{}{}; return nil }
	pgdb.ConfigureTypes(cfg)
	pool, err := pgxpool.NewWithConfig(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)

	a, b := uuid.New(), uuid.New()
	for _, format := range []int16{pgx.BinaryFormatCode, pgx.TextFormatCode} {
		var gotA, gotNull uuid.UUID
		var text string
		var list []uuid.UUID
		gotNull = uuid.New() // a NULL makes it uuid.Nil
		err := pool.QueryRow(t.Context(), `SELECT $1::uuid, $1::uuid::text, NULL::uuid, ARRAY[$1::uuid, $2::uuid]`,
			pgx.QueryResultFormats{format, pgx.TextFormatCode, format, format}, a, b).Scan(&gotA, &text, &gotNull, &list)
		if err != nil {
			t.Fatalf("format %d: %v", format, err)
		}
		if gotA != a || text != a.String() || gotNull != uuid.Nil || len(list) != 2 || list[0] != a || list[1] != b {
			t.Errorf("format %d: got %s (%s as text), NULL as %s, array %v; want %s, uuid.Nil, [%s %s]", format, gotA, text, gotNull, list, a, a, b)
		}
	}
	// Other Go types still go through pgx's codec.
	var asText string
	var asPg pgtype.UUID
	if err := pool.QueryRow(t.Context(), `SELECT $1::uuid, $2::uuid`, pgtype.UUID{Bytes: a, Valid: true}, b.String()).Scan(&asPg, &asText); err != nil {
		t.Fatal(err)
	}
	if asPg.Bytes != a || asText != b.String() {
		t.Errorf("pgtype.UUID %v, string %s: want %s, %s", asPg, asText, a, b)
	}
	if len(ran) == 0 {
		t.Error("the AfterConnect set before ConfigureTypes did not run")
	}
}

// With the codec, encoding a uuid.UUID costs no allocation of its own; pgx's default goes
// through the value's text and a failed binary encoding.
func TestRegisteredUUIDEncodesWithoutAllocating(t *testing.T) {
	u := any(uuid.New())
	buf := make([]byte, 0, 64)
	allocs := func(m *pgtype.Map) float64 {
		return testing.AllocsPerRun(100, func() {
			if _, err := m.Encode(pgtype.UUIDOID, pgtype.BinaryFormatCode, u, buf[:0]); err != nil {
				t.Fatal(err)
			}
		})
	}
	registered := pgtype.NewMap()
	pgdb.RegisterTypes(registered)
	if n, before := allocs(registered), allocs(pgtype.NewMap()); n != 0 || before == 0 {
		t.Errorf("allocations per encode: %v registered, %v with pgx's default; want 0 and more", n, before)
	}
}
