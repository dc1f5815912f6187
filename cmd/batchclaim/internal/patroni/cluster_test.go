package patroni

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// startOrSkip starts a cluster, skipping the test when the programs are missing unless
// REQUIRE_PATRONI=1. PATRONI_KEEP=1 leaves the members' logs behind.
func startOrSkip(t *testing.T, opts Options) *Cluster {
	t.Helper()
	opts.KeepDir = os.Getenv("PATRONI_KEEP") == "1"
	if testing.Short() {
		t.Skip("a Patroni cluster takes about half a minute to start")
	}
	if _, err := Find(); err != nil {
		if os.Getenv("REQUIRE_PATRONI") == "1" {
			t.Fatalf("REQUIRE_PATRONI=1 but %v", err)
		}
		t.Skipf("%v (apt-get install patroni etcd-server postgresql)", err)
	}
	start := time.Now()
	c, err := Start(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("cluster up in %.1fs (%s)", time.Since(start).Seconds(), c.Dir())
	t.Cleanup(func() { c.Stop(context.Background()) })
	return c
}

func TestOptionsValidate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		o    Options
	}{
		{"one member", Options{Members: 1}},
		{"fractional ttl", Options{TTL: 1500 * time.Millisecond}},
		{"retry too long for ttl", Options{TTL: 10 * time.Second, RetryTimeout: 5 * time.Second}},
	} {
		if err := tc.o.withDefaults().validate(); err == nil {
			t.Errorf("%s: validate accepted %+v", tc.name, tc.o)
		}
	}
	if err := (Options{}).withDefaults().validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
}

// write commits one row through the multi-host URL and returns the server's address.
func write(ctx context.Context, t *testing.T, c *Cluster, v int) string {
	t.Helper()
	var last error
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		conn, err := pgx.Connect(ctx, c.URL("postgres")+"&connect_timeout=2")
		if err == nil {
			_, err = conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS kept (v int)`)
			if err == nil {
				_, err = conn.Exec(ctx, `INSERT INTO kept VALUES ($1)`, v)
			}
			addr := conn.PgConn().Conn().RemoteAddr().String()
			conn.Close(ctx)
			if err == nil {
				return addr
			}
		}
		last = err
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("write %d through %s: %v", v, c.URL("postgres"), last)
	return ""
}

// kept counts the rows written so far, read from the current leader.
func kept(ctx context.Context, t *testing.T, c *Cluster) int {
	t.Helper()
	conn, err := pgx.Connect(ctx, c.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var n int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM kept`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestFaults runs every fault of the harness against one cluster, one after another; after
// each, a new leader accepts writes through the multi-host URL and no committed row is lost.
func TestFaults(t *testing.T) {
	c := startOrSkip(t, Options{})
	ctx := t.Context()
	ttl, loop, _ := c.Timing()
	rows := 0
	step := func(name string, fault func(leader *Member) error) {
		t.Helper()
		leader, err := c.Leader(ctx)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		rows++
		write(ctx, t, c, rows)
		start := time.Now()
		if err := fault(leader); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
		next, at, err := c.WaitWritable(wctx, "")
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		rows++
		write(ctx, t, c, rows)
		if _, err := c.WaitHealthy(wctx); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if n := kept(ctx, t, c); n != rows {
			t.Fatalf("%s: %d rows after the fault, want %d", name, n, rows)
		}
		t.Logf("%s: leader %s -> %s, writable after %.1fs, whole after %.1fs", name, leader.Name, next.Name,
			at.Sub(start).Seconds(), time.Since(start).Seconds())
	}
	step("switchover", func(l *Member) error { return c.Switchover(ctx, l, nil) })
	step("failover", func(l *Member) error {
		st, err := c.State(ctx)
		if err != nil {
			return err
		}
		var sync, replica *Member
		for _, s := range st {
			switch s.Role {
			case "sync_standby":
				sync = c.Member(s.Name)
			case "replica":
				replica = c.Member(s.Name)
			}
		}
		if sync == nil || replica == nil {
			return fmt.Errorf("want a synchronous standby and a replica: %s", describe(st))
		}
		// In synchronous mode only the synchronous standby is sure to have every commit.
		if err := c.Failover(ctx, replica); err == nil {
			return fmt.Errorf("failover to the asynchronous replica %s was not refused", replica.Name)
		}
		return c.Failover(ctx, sync)
	})
	step("kill postmaster", func(l *Member) error {
		rewinds := l.Rewinds()
		if err := c.KillPostmaster(ctx, l); err != nil {
			return err
		}
		_, _, err := c.WaitWritable(ctx, l.Name)
		t.Logf("rewinds of %s before: %d", l.Name, rewinds)
		return err
	})
	// The leader's manager dies; its Postgres runs on unmanaged. Once a standby is promoted
	// (after ttl), the old leader, still a primary, takes a write that only it commits
	// (Diverge): its history has forked. Its Patroni, back, must rewind it (pg_rewind) to
	// rejoin.
	step("kill patroni, rejoin via pg_rewind", func(l *Member) error {
		rewinds := l.Rewinds()
		if err := c.KillPatroni(l); err != nil {
			return err
		}
		if _, _, err := c.WaitWritable(ctx, l.Name); err != nil {
			return err
		}
		if err := c.Diverge(ctx, l); err != nil {
			return err
		}
		if err := c.StartPatroni(l); err != nil {
			return err
		}
		if _, err := c.WaitHealthy(ctx); err != nil {
			return err
		}
		if l.Rewinds() <= rewinds {
			return fmt.Errorf("%s rejoined without pg_rewind (see %s)", l.Name, l.LogPath())
		}
		return nil
	})
	step("cut from etcd", func(l *Member) error {
		c.CutDCS(l)
		_, _, err := c.WaitWritable(ctx, l.Name)
		c.RestoreDCS(l)
		return err
	})
	step("etcd restart", func(l *Member) error {
		if err := c.StopEtcd(true); err != nil {
			return err
		}
		time.Sleep(ttl + loop) // the outage itself, not a wait for state
		return c.StartEtcd(ctx)
	})
	rewinds := 0
	for _, m := range c.Members() {
		rewinds += m.Rewinds()
	}
	t.Logf("pg_rewind runs: %d", rewinds)
}

// A cluster that does not come up reports the end of each unwell member's log, since Stop
// removes the directory the logs are in.
func TestUnwellLogs(t *testing.T) {
	t.Parallel()
	c := &Cluster{}
	for _, name := range []string{"m1", "m2", "m3"} {
		m := &Member{Name: name, c: c, dir: t.TempDir()}
		if err := os.WriteFile(m.LogPath(), []byte("log of "+name+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		c.members = append(c.members, m)
	}
	got := c.unwellLogs([]MemberState{
		{Name: "m1", Role: "replica", State: "start failed"},
		{Name: "m2", Role: "sync_standby", State: "streaming"},
		{Name: "m3", Role: "leader", State: "running"},
	})
	if !strings.Contains(got, "log of m1") || strings.Contains(got, "log of m2") || strings.Contains(got, "log of m3") {
		t.Fatalf("unwell logs: %q: want m1's log alone", got)
	}
	// No state at all (no REST API answered): every member's log.
	if got := c.unwellLogs(nil); strings.Count(got, "log of ") != 3 {
		t.Fatalf("unwell logs without state: %q: want all three", got)
	}
}
