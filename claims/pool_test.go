package claims_test

import (
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/batchclaim/batchclaim/claims"
	"github.com/batchclaim/batchclaim/internal/dbtest"
	"github.com/batchclaim/batchclaim/internal/tcpproxy"
)

// A pool set up by ConfigurePool whose idle connections all stopped answering (their link
// frozen, new links passing) still runs a statement within one statement's budget, T1: the
// pool's ping of each unresponsive idle connection gives up after PingTimeout and a new
// connection is dialled. Unbounded, the first ping takes the whole budget and the statement
// fails, cycle after cycle, as long as frozen idle connections are left.
func TestConfiguredPoolGivesUpFrozenIdleConnections(t *testing.T) {
	t.Parallel()
	u, err := url.Parse(dbtest.NewDB(t))
	if err != nil {
		t.Fatal(err)
	}
	proxy, err := tcpproxy.Start("127.0.0.1:0", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = proxy.Close() })
	u.Host = proxy.Addr()
	timings, err := claims.Config{RenewInterval: 200 * time.Millisecond, Expiry1: 2 * time.Second, Expiry2: 8 * time.Second}.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	pc, err := pgxpool.ParseConfig(u.String())
	if err != nil {
		t.Fatal(err)
	}
	const conns = 4
	pc.MaxConns = conns + 1
	claims.ConfigurePool(pc, timings)
	if got, want := pc.PingTimeout, claims.PingTimeout(timings); got != want || want != 250*time.Millisecond {
		t.Fatalf("PingTimeout %s, want %s (T1/8 of 2s)", got, want)
	}
	pool, err := pgxpool.NewWithConfig(t.Context(), pc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)

	// Open conns connections at once and give them back: they sit idle in the pool.
	held := make([]*pgxpool.Conn, 0, conns)
	for range conns {
		c, err := pool.Acquire(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
	}
	for _, c := range held {
		c.Release()
	}
	time.Sleep(1200 * time.Millisecond) // idle past pgxpool's 1s: the next acquire pings them
	proxy.Freeze()
	defer proxy.Restore()

	ctx, cancel := context.WithTimeout(t.Context(), timings.Expiry1)
	defer cancel()
	start := time.Now()
	var one int
	if err := pool.QueryRow(ctx, `SELECT 1`).Scan(&one); err != nil {
		t.Fatalf("a statement with %d frozen idle connections in the pool, within T1 = %s: %v (after %s)",
			conns, timings.Expiry1, err, time.Since(start).Round(time.Millisecond))
	}
}
