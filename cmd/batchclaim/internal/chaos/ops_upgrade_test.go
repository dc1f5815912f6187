package chaos

import (
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/batchclaim/batchclaim/migrations"
	"github.com/batchclaim/batchclaim/testkit/dbtest"
)

// A run with the upgrade operation starts one migration down, and the operation applies the
// latest migration once: a second finds nothing to do.
func TestUpgradeOperation(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dbURL := dbtest.NewDB(t)
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	r := &run{db: &servers{addrs: []string{u.Host}, dbName: strings.TrimPrefix(u.Path, "/"), admin: dbURL}, pool: pool}
	latest, err := migrations.Latest()
	if err != nil {
		t.Fatal(err)
	}
	if v, err := r.startOnPreviousSchema(ctx); err != nil || v != latest-1 {
		t.Fatalf("start: version %d (%v), want %d", v, err, latest-1)
	}
	rec := r.opUpgrade(ctx, nil)
	if want := fmt.Sprintf("schema version %d -> %d ", latest-1, latest); !rec.Acted || !strings.HasPrefix(rec.Result, want) || rec.At.IsZero() || rec.End.Before(rec.At) {
		t.Fatalf("upgrade: %+v, want acted, %q", rec, want)
	}
	if v, dirty, err := migrations.Version(ctx, dbURL); err != nil || dirty || v != latest {
		t.Fatalf("after the upgrade: version %d dirty %v (%v)", v, dirty, err)
	}
	if rec := r.opUpgrade(ctx, nil); rec.Acted || rec.Result != fmt.Sprintf("schema at version %d already", latest) {
		t.Fatalf("second upgrade: %+v", rec)
	}
}
