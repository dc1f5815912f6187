package election_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/batchclaim/batchclaim"
	"github.com/batchclaim/batchclaim/patterns/election"
	"github.com/batchclaim/batchclaim/pgdb"
	"github.com/batchclaim/batchclaim/testkit/dbtest"
	"github.com/batchclaim/batchclaim/testkit/testutil"
)

func TestConfigValidation(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		cfg  election.Config
		want string // substring of the error; empty: valid
	}{
		{"defaults", election.Config{Roles: []string{"a"}}, ""},
		{"T just over 2I", election.Config{Roles: []string{"a"}, HeartbeatInterval: time.Second, Timeout: 2001 * time.Millisecond}, ""},
		{"T equal to 2I", election.Config{Roles: []string{"a"}, HeartbeatInterval: time.Second, Timeout: 2 * time.Second}, "timeout T > 2I violated: T = 2s, I = 1s"},
		{"T below 2I", election.Config{Roles: []string{"a"}, HeartbeatInterval: time.Second, Timeout: 1500 * time.Millisecond}, "T > 2I violated"},
		{"negative I", election.Config{Roles: []string{"a"}, HeartbeatInterval: -time.Second, Timeout: 5 * time.Second}, "heartbeat interval I must be positive"},
		{"no roles", election.Config{}, "no roles"},
		{"empty role", election.Config{Roles: []string{"a", ""}}, "empty role name"},
		{"role twice", election.Config{Roles: []string{"a", "b", "a"}}, `role "a" listed twice`},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := c.cfg.Resolve()
			if c.want == "" {
				if err != nil {
					t.Fatalf("want valid, got %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("want an error containing %q, got %v", c.want, err)
			}
			if _, err := election.New(pgdb.DB{}, c.cfg); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("New: want an error containing %q, got %v", c.want, err)
			}
		})
	}
	if _, err := election.New(pgdb.DB{}, election.Config{Roles: []string{"a"}}); err == nil {
		t.Fatal("New accepted the zero DB")
	}
	r, err := election.Config{Roles: []string{"a"}, Timeout: 3 * time.Second}.Resolve()
	if err != nil || r.HeartbeatInterval != 600*time.Millisecond || r.Timeout != 3*time.Second {
		t.Fatalf("Resolve with T = 3s: I = %s, T = %s, %v; want I = T/5", r.HeartbeatInterval, r.Timeout, err)
	}
}

// Three electors stand for three roles: every role gets a primary, at no sampled moment do
// two electors believe they are primary of one role, and the one that believes it agrees
// with the database.
func TestOnePrimaryPerRole(t *testing.T) {
	t.Parallel()
	pool, _ := testDB(t)
	roles := []string{"scheduler", "broker", "reporter"}
	var els []*election.Elector
	for i := range 3 {
		el, _, _ := startElector(t, dbtest.Open(t, pool, ""), fmt.Sprintf("e%d", i), roles, nil)
		els = append(els, el)
	}
	ctx := t.Context()
	testutil.WaitFor(t, 20*time.Second, "a primary for every role", func() bool {
		for _, r := range roles {
			if _, err := election.GetPrimary(ctx, pool, r); err != nil {
				return false
			}
		}
		return true
	})
	believers := 0
	for range 30 {
		for _, r := range roles {
			var who []string
			for _, el := range els {
				if tm, ok := el.CheckPrimary(r); ok {
					who = append(who, el.Name())
					if tm.InstanceID != el.InstanceID() || tm.Role != r {
						t.Fatalf("CheckPrimary(%s) of %s returned %+v", r, el.Name(), tm)
					}
				}
			}
			if len(who) > 1 {
				t.Fatalf("role %s has two primaries at once: %v", r, who)
			}
			if len(who) == 1 {
				believers++
				// The database must agree (a later term would mean who stepped down late).
				if p, err := election.GetPrimary(ctx, pool, r); err == nil && p.Name != who[0] {
					if _, still := findElector(els, who[0]).CheckPrimary(r); still {
						t.Fatalf("role %s: %s believes it is primary but the database says %s (epoch %d)", r, who[0], p.Name, p.Epoch)
					}
				}
			}
		}
		time.Sleep(testInterval / 3) // sampling pace, not waiting for a state
	}
	if believers == 0 {
		t.Fatal("no elector ever believed it was primary")
	}
	var regressions int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM (SELECT epoch, lag(epoch) OVER (PARTITION BY role ORDER BY id) AS prev
		FROM batchclaim.election_events WHERE event = 'elected') x WHERE x.epoch <= x.prev`).Scan(&regressions); err != nil || regressions > 0 {
		t.Fatalf("epochs not strictly increasing: %d regressions (%v)", regressions, err)
	}
}

func findElector(els []*election.Elector, name string) *election.Elector {
	for _, el := range els {
		if el.Name() == name {
			return el
		}
	}
	return nil
}

// A primary whose database link goes silent (a blackhole: no error, no answer) steps down
// on its own, strictly before the standby is elected; the standby's term has a greater
// epoch. When the link comes back the old primary stays a standby; when the new primary
// stops, it resigns and the old one is elected at once, with a greater epoch again.
func TestStepDownBeforeReelection(t *testing.T) {
	t.Parallel()
	pool, dbURL := testDB(t)
	p, via := dbtest.Proxied(t, dbURL)
	poolA, err := pgxpool.New(context.Background(), via)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(poolA.Close)

	a, recA, _ := startElector(t, dbtest.Open(t, poolA, ""), "a", []string{"r"}, nil)
	testutil.WaitFor(t, 20*time.Second, "a elected", func() bool { _, ok := a.CheckPrimary("r"); return ok })
	termA, _ := a.CheckPrimary("r")
	b, recB, stopB := startElector(t, dbtest.Open(t, pool, ""), "b", []string{"r"}, nil)

	p.Blackhole()
	// The hook that records an election may run just after CheckPrimary starts answering.
	testutil.WaitFor(t, 20*time.Second, "b elected", func() bool {
		_, ok := b.CheckPrimary("r")
		elected, _ := recB.snapshot()
		return ok && len(elected) > 0
	})
	termB, _ := b.CheckPrimary("r")
	_, downA := recA.snapshot()
	electedB, _ := recB.snapshot()
	if len(downA) == 0 {
		t.Fatal("b was elected but a never stepped down")
	}
	if downA[0].term != termA || downA[0].why != election.StepDownDeadline {
		t.Fatalf("a stepped down from %+v because %s; want %+v because of its deadline", downA[0].term, downA[0].why, termA)
	}
	if gap := electedB[0].at.Sub(downA[0].at); gap <= 0 {
		t.Fatalf("b was elected %s before a stepped down", -gap)
	} else {
		t.Logf("a stepped down %s before b was elected (I = %s)", gap, testInterval)
	}
	if termB.Epoch <= termA.Epoch {
		t.Fatalf("epoch did not increase: a had %d, b has %d", termA.Epoch, termB.Epoch)
	}

	p.Restore()
	testutil.WaitFor(t, 20*time.Second, "a back as a standby", func() bool {
		var live bool
		err := pool.QueryRow(context.Background(), `SELECT expires_at > now() FROM batchclaim.election_members WHERE instance_id = $1`, a.InstanceID()).Scan(&live)
		return err == nil && live
	})
	if _, ok := a.CheckPrimary("r"); ok {
		t.Fatal("a believes it is primary again while b is")
	}

	stopB()
	testutil.WaitFor(t, 20*time.Second, "a elected after b resigned", func() bool { _, ok := a.CheckPrimary("r"); return ok })
	termA2, _ := a.CheckPrimary("r")
	if termA2.Epoch <= termB.Epoch {
		t.Fatalf("epoch did not increase: b had %d, a now has %d", termB.Epoch, termA2.Epoch)
	}
	var resigned int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM batchclaim.election_events WHERE event = 'resigned' AND role = 'r' AND epoch = $1`,
		termB.Epoch).Scan(&resigned); err != nil || resigned != 1 {
		t.Fatalf("b's term was not resigned on stop: %d events (%v)", resigned, err)
	}
}

// Fence holds the term row so that a takeover waits for the fenced transaction, and after
// the takeover the old term's writes are refused, both by Fence and by FenceTerm. B's view
// of the database clock is moved past A's timeout, so B sees A's lease as expired at once.
func TestFenceRejectsOldTerm(t *testing.T) {
	t.Parallel()
	pool, _ := testDB(t)
	ctx := t.Context()
	a, recA, _ := startElector(t, dbtest.Open(t, pool, ""), "a", []string{"r"}, nil)
	testutil.WaitFor(t, 20*time.Second, "a elected", func() bool { _, ok := a.CheckPrimary("r"); return ok })
	termA, _ := a.CheckPrimary("r")

	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if err := a.Fence(ctx, tx, termA); err != nil {
		t.Fatalf("fence of the current term: %v", err)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO test_writes (name, epoch) VALUES ('a', $1)`, termA.Epoch); err != nil {
		t.Fatal(err)
	}

	b, _, _ := startElector(t, dbtest.Open(t, pool, ""), "b", []string{"r"}, nil)
	b.ShiftDBTime(testTimeout + time.Second)
	// Keep the fenced transaction busy (Fence ends it on the server if it idles for I).
	testutil.WaitFor(t, 20*time.Second, "b's takeovers blocked by the fenced transaction", func() bool {
		if _, err := tx.Exec(ctx, "SELECT 1"); err != nil {
			t.Fatalf("the fenced transaction ended: %v", err)
		}
		return b.Stats().RacesLost >= 3
	})
	if _, ok := b.CheckPrimary("r"); ok {
		t.Fatal("b was elected while a's fenced transaction was open")
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 20*time.Second, "b elected", func() bool { _, ok := b.CheckPrimary("r"); return ok })
	termB, _ := b.CheckPrimary("r")
	if termB.Epoch != termA.Epoch+1 {
		t.Fatalf("b's epoch is %d, want %d", termB.Epoch, termA.Epoch+1)
	}
	var writtenAt time.Time
	if err := pool.QueryRow(ctx, `SELECT at FROM test_writes WHERE name = 'a'`).Scan(&writtenAt); err != nil {
		t.Fatal(err)
	}
	if at := electedAt(t, pool, "r", termB.Epoch); !writtenAt.Before(at) {
		t.Fatalf("a's fenced write at %s is not before b's election at %s", writtenAt, at)
	}

	// The old term, held as a value by anybody: the database refuses it.
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return election.FenceTerm(ctx, tx, termA) })
	if !errors.Is(err, batchclaim.ErrClaimLost) {
		t.Fatalf("FenceTerm with the old term: %v, want ErrClaimLost", err)
	}
	// A itself: refused, and it steps down if it had not yet.
	ran := false
	err = a.WriteFenced(ctx, termA, func(pgx.Tx) error { ran = true; return nil })
	if !errors.Is(err, batchclaim.ErrClaimLost) || ran {
		t.Fatalf("a.WriteFenced after the takeover: %v (its write ran: %v), want ErrClaimLost and no write", err, ran)
	}
	if _, ok := a.CheckPrimary("r"); ok {
		t.Fatal("a still believes it is primary after its fence was refused")
	}
	if _, down := recA.snapshot(); len(down) == 0 || down[0].term != termA {
		t.Fatalf("a's step-down not reported: %+v", down)
	}
	// The new term fences fine; a fenced transaction left idle is ended by the server.
	tx2, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx2.Rollback(ctx) }()
	if err := b.WriteFenced(ctx, termB, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `INSERT INTO test_writes (name, epoch) VALUES ('b', $1)`, termB.Epoch)
		return err
	}); err != nil {
		t.Fatalf("b.WriteFenced: %v", err)
	}
	if err := a.Fence(ctx, tx2, termB); !errors.Is(err, batchclaim.ErrClaimLost) {
		t.Fatalf("a.Fence with b's term: %v, want ErrClaimLost (it is not a's)", err)
	}
	if err := b.Fence(ctx, tx2, termB); err != nil {
		t.Fatalf("b.Fence: %v", err)
	}
	var pid int
	if err := tx2.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 20*time.Second, "the idle fenced transaction ended by the server", func() bool {
		var alive bool
		return pool.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE pid = $1)", pid).Scan(&alive) == nil && !alive
	})
}

func TestGetPrimaryNone(t *testing.T) {
	t.Parallel()
	pool, _ := testDB(t)
	_, err := election.GetPrimary(context.Background(), pool, "nobody")
	if !errors.Is(err, batchclaim.ErrNotFound) {
		t.Fatalf("GetPrimary of a role nobody stands for: %v, want ErrNotFound", err)
	}
}
