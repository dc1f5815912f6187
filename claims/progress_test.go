package claims_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/batchclaim/batchclaim/claims"
	"github.com/batchclaim/batchclaim/testkit/dbtest"
)

// While Config.Progress refuses, the lease is not renewed. The refusal is a stall (the
// instance is stuck, not cut off) only while the database answers the lease's own
// connection; cut off, the same refusal counts as failed renewals, so that an outage does not
// page as a stuck instance (alert BatchclaimStalled).
func TestProgressRefusalIsAStallOnlyWhenTheDatabaseAnswers(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewDB(t)
	for _, tc := range []struct {
		name string
		cut  bool
		n    int // the instance
	}{
		{"database answers", false, 1},
		{"database cut off", true, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			proxy, viaProxy := dbtest.Proxied(t, dbURL)
			pool, err := pgxpool.New(t.Context(), viaProxy)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(pool.Close)
			e, _ := newEngine(t, pool, tc.n, func(c *claims.Config) {
				c.Progress = func() error { return errors.New("the data path does not move") }
			})
			if tc.cut {
				proxy.Cut()
			}
			ctx, cancel := context.WithCancel(t.Context())
			ran := make(chan struct{})
			go func() { defer close(ran); _ = e.Run(ctx) }()
			t.Cleanup(func() {
				cancel()
				<-ran
				_ = e.ShutdownKeeping(t.Context(), nil)
			})
			// Wait until the lease loop has asked several times: the local deadline passed
			// without a renewal (registration started it), and, cut off, renewals failed.
			deadline := time.Now().Add(20 * time.Second)
			for {
				s := e.Stats()
				if !e.Healthy() && (!tc.cut || s.RenewErrors >= 3) {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("no fence after 20s: healthy=%v stats=%+v", e.Healthy(), s)
				}
				time.Sleep(20 * time.Millisecond)
			}
			s := e.Stats()
			switch {
			case !tc.cut && (s.Stalls != 1 || s.RenewErrors != 0):
				t.Errorf("database answering: stalls=%d renew errors=%d; want one stall and no failed renewal", s.Stalls, s.RenewErrors)
			case tc.cut && s.Stalls != 0:
				t.Errorf("database cut off: stalls=%d (renew errors %d); want none: an outage is no stall", s.Stalls, s.RenewErrors)
			}
		})
	}
}
