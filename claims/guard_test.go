package claims_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/batchclaim/batchclaim/claims"
	"github.com/batchclaim/batchclaim/migrations"
	"github.com/batchclaim/batchclaim/testkit/pglocal"
	"github.com/batchclaim/batchclaim/testkit/tcpproxy"
)

// pair is a throwaway primary with an asynchronous standby that streams through a proxy (so
// that replication can be held), and a pool on both through a multi-host URL.
type pair struct {
	primary, standby *pglocal.Cluster
	repl             *tcpproxy.Proxy
	pool             *pgxpool.Pool
}

func startPair(t *testing.T) *pair {
	t.Helper()
	if _, err := pglocal.Find(""); err != nil {
		if os.Getenv("REQUIRE_DB") == "1" {
			t.Fatalf("REQUIRE_DB=1 but the failover guard's test needs local PostgreSQL binaries: %v", err)
		}
		t.Skipf("no local PostgreSQL binaries: %v", err)
	}
	ctx := t.Context()
	p := &pair{}
	var err error
	if p.primary, err = pglocal.Start(ctx, pglocal.Options{Settings: map[string]string{"synchronous_commit": "on", "wal_receiver_status_interval": "1s"}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.primary.Stop(context.Background()) })
	if p.repl, err = tcpproxy.Start("127.0.0.1:0", fmt.Sprintf("127.0.0.1:%d", p.primary.Port())); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.repl.Close() })
	if err := migrations.Up(ctx, p.primary.URL()); err != nil {
		t.Fatal(err)
	}
	if p.standby, err = p.primary.StartStandbyVia(ctx, 0, p.repl.Addr()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.standby.Stop(context.Background()) })
	if err := p.primary.WaitStreaming(ctx, false); err != nil {
		t.Fatal(err)
	}
	url := fmt.Sprintf("postgres://postgres@127.0.0.1:%d,127.0.0.1:%d/postgres?sslmode=disable&target_session_attrs=read-write&connect_timeout=2",
		p.primary.Port(), p.standby.Port())
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	if p.pool, err = pgxpool.NewWithConfig(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.pool.Close)
	return p
}

// cycleUntil runs cycles of e until ok or a deadline; cycles that fail (the database is away)
// are run again.
func cycleUntil(t *testing.T, e *claims.Engine, what string, ok func(claims.CycleReport) bool) claims.CycleReport {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		rep, err := e.Cycle(t.Context())
		if err == nil && ok(rep) {
			return rep
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %s not reached after 30s (last error %v)", e.Name(), what, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// An asynchronous failover staged on purpose: the standby is held behind while the instances
// renew and acquire, then the primary is killed and the standby promoted, without those
// commits. The instances see the change of timeline, find their last renewals and epochs
// gone, and refuse to go on; they move the epoch sequence past what they were granted, so
// that an instance started afterwards grants no epoch twice.
func TestGuardRefusesAfterAsyncFailover(t *testing.T) {
	p := startPair(t)
	ctx := t.Context()
	registerServiceIDs(t, p.pool, 8)
	a, aev := newEngine(t, p.pool, 1, nil)
	b, bev := newEngine(t, p.pool, 2, nil)
	cycleUntil(t, a, "a holding claims", func(r claims.CycleReport) bool { return len(a.Held()) > 0 })
	cycleUntil(t, b, "b holding claims", func(r claims.CycleReport) bool { return len(b.Held()) > 0 })

	// Hold replication; everything from here on is on the primary alone.
	p.repl.Blackhole()
	more := make([]string, 8)
	for i := range more {
		more[i] = fmt.Sprintf("late-%02d", i)
	}
	if err := claims.RegisterServiceIDs(ctx, p.pool, more...); err != nil {
		t.Fatal(err)
	}
	granted := map[string]int64{} // service_id -> epoch, granted on the primary alone
	var highest int64
	for range 5 {
		for _, e := range []*claims.Engine{a, b} {
			cycle(t, e)
			for _, c := range e.Held() {
				highest = max(highest, c.Epoch)
				if strings.HasPrefix(c.ServiceID, "late-") {
					granted[c.ServiceID] = c.Epoch
				}
			}
		}
	}
	if len(granted) == 0 {
		t.Fatal("no claim was acquired while replication was held")
	}
	if err := p.primary.Kill(ctx); err != nil {
		t.Fatal(err)
	}
	if err := p.standby.Promote(ctx); err != nil {
		t.Fatal(err)
	}

	for _, e := range []*claims.Engine{a, b} {
		cycleUntil(t, e, "a refusal", func(claims.CycleReport) bool { return e.Refusal() != "" })
		why := e.Refusal()
		if !strings.Contains(why, "changed timeline") || !strings.Contains(why, "lease renewal committed at") {
			t.Errorf("%s refuses for %q, want the lost renewal named", e.Name(), why)
		}
		if len(e.Held()) != 0 || e.Healthy() {
			t.Errorf("%s still offers work after refusing: held %d, healthy %t", e.Name(), len(e.Held()), e.Healthy())
		}
		for range 5 {
			if rep := cycle(t, e); len(rep.Gained) > 0 {
				t.Errorf("%s acquired %v after refusing", e.Name(), rep.Gained)
			}
		}
		if e.Refusals() != 1 {
			t.Errorf("%s counted %d refusals, want 1", e.Name(), e.Refusals())
		}
	}
	// Their claims were dropped as they began to refuse: nothing works under them.
	for _, ev := range []*events{aev, bev} {
		ev.mu.Lock()
		n := len(ev.lost[claims.LossRefusing])
		ev.mu.Unlock()
		if n == 0 {
			t.Errorf("no claim reported lost for %q when the refusal began", claims.LossRefusing)
		}
	}
	// A newcomer knows nothing of the lost epochs (nor of the service_ids registered while
	// replication was held); the sequence does, so it repeats none.
	after := []string{"after-00", "after-01", "after-02"}
	if err := claims.RegisterServiceIDs(ctx, p.pool, after...); err != nil {
		t.Fatal(err)
	}
	c, _ := newEngine(t, p.pool, 3, nil)
	cycleUntil(t, c, "the newcomer holding the new service_ids", func(claims.CycleReport) bool { return len(c.Held()) == len(after) })
	for _, h := range c.Held() {
		if h.Epoch <= highest {
			t.Errorf("%s: epoch %d granted again after the failover (epochs up to %d were granted before it)", h.ServiceID, h.Epoch, highest)
		}
	}
	if c.Refusal() != "" {
		t.Errorf("the newcomer refuses: %s", c.Refusal())
	}
}

// With RequireSyncStandby, an instance takes no work while the primary commits without
// waiting for a synchronous standby, and takes it once one is there.
func TestGuardRequiresSyncStandby(t *testing.T) {
	p := startPair(t)
	registerServiceIDs(t, p.pool, 4)
	e, _ := newEngine(t, p.pool, 1, func(c *claims.Config) { c.RequireSyncStandby = true })
	for range 3 {
		if rep := cycle(t, e); len(rep.Gained) > 0 {
			t.Fatalf("acquired %v without a synchronous standby", rep.Gained)
		}
	}
	if !strings.Contains(e.Refusal(), "synchronous standby") {
		t.Fatalf("refusal %q, want the missing synchronous standby named", e.Refusal())
	}
	if err := p.primary.SetSynchronousStandbys(t.Context(), "*"); err != nil {
		t.Fatal(err)
	}
	if err := p.primary.WaitStreaming(t.Context(), true); err != nil {
		t.Fatal(err)
	}
	// The next check comes a new connection or Expiry1 later.
	cycleUntil(t, e, "claims with a synchronous standby", func(claims.CycleReport) bool { return len(e.Held()) > 0 })
	if e.Refusal() != "" {
		t.Fatalf("still refusing: %s", e.Refusal())
	}
}
