package claims_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/batchclaim/batchclaim/claims"
	"github.com/batchclaim/batchclaim/testkit/dbtest"
	"github.com/batchclaim/batchclaim/testkit/tcpproxy"
)

// A pool set up by ConfigurePool whose every connection stopped answering (the link frozen,
// new links passing) still runs a statement within one statement's budget, T1, whether its
// connections sat idle (the pool pings them before handing one out: each ping gives up after
// PingTimeout) or were in use by statements whose contexts ended (pgx closes them, and the
// pool keeps their places until the close ends: bounded by PingTimeout too). Unbounded, the
// first ping takes the whole budget, and a closed connection keeps its place for 15 seconds.
func TestConfiguredPoolGivesUpFrozenConnections(t *testing.T) {
	t.Parallel()
	cfg, err := claims.Config{RenewInterval: 200 * time.Millisecond, Expiry1: 2 * time.Second, Expiry2: 8 * time.Second}.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	timings := cfg.Timings()
	if got := claims.PingTimeout(timings); got != 250*time.Millisecond {
		t.Fatalf("PingTimeout %s, want 250ms (T1/8 of 2s)", got)
	}
	dbURL := dbtest.NewDB(t)
	const conns = 4
	for _, tc := range []struct {
		name string
		// freeze freezes the link with every connection of the pool open, in the state
		// the case is about.
		freeze func(t *testing.T, pool *pgxpool.Pool, proxy *tcpproxy.Proxy)
	}{
		{"idle", func(t *testing.T, pool *pgxpool.Pool, proxy *tcpproxy.Proxy) {
			time.Sleep(1200 * time.Millisecond) // idle past pgxpool's 1s: the next acquire pings them
			proxy.Freeze()
		}},
		{"in use", func(t *testing.T, pool *pgxpool.Pool, proxy *tcpproxy.Proxy) {
			proxy.Freeze()
			var wg sync.WaitGroup
			for range conns { // each on a frozen connection, given up after 300ms
				wg.Go(func() {
					ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
					defer cancel()
					if _, err := pool.Exec(ctx, `SELECT 1`); err == nil {
						t.Error("a statement on a frozen connection succeeded")
					}
				})
			}
			wg.Wait()
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			proxy, viaProxy := dbtest.Proxied(t, dbURL)
			pc, err := pgxpool.ParseConfig(viaProxy)
			if err != nil {
				t.Fatal(err)
			}
			pc.MaxConns = conns
			claims.ConfigurePool(pc, timings)
			pool, err := pgxpool.NewWithConfig(t.Context(), pc)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(pool.Close)
			held := make([]*pgxpool.Conn, 0, conns) // every connection of the pool open, then idle
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
			tc.freeze(t, pool, proxy)
			defer proxy.Restore()

			ctx, cancel := context.WithTimeout(t.Context(), timings.Expiry1)
			defer cancel()
			start := time.Now()
			var one int
			if err := pool.QueryRow(ctx, `SELECT 1`).Scan(&one); err != nil {
				t.Fatalf("a statement with the pool's %d connections frozen, within T1 = %s: %v (after %s)",
					conns, timings.Expiry1, err, time.Since(start).Round(time.Millisecond))
			}
		})
	}
}
