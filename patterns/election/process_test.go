package election_test

import (
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/batchclaim/batchclaim/testkit/dbtest"
	"github.com/batchclaim/batchclaim/testkit/testutil"
)

// A primary process is killed with SIGKILL: the standby is elected, with a greater epoch,
// no sooner than T after the dead primary's last renewal (by the database clock) and soon
// after that.
func TestSIGKILLOfPrimaryProcess(t *testing.T) {
	t.Parallel()
	pool, url := testDB(t)
	ctx := t.Context()
	h := startHelper(t, url)
	testutil.WaitFor(t, 30*time.Second, "the helper process elected", func() bool { return h.SaidPrefix("elected ") })
	b, _, _ := startElector(t, dbtest.Open(t, pool, ""), "b", []string{"r"}, nil)
	old, ok := primaryIs(t, pool, "r", "helper")
	if !ok {
		t.Fatalf("the helper is not the primary: %+v\n%s", old, h.Output())
	}

	var killedAt time.Time
	if err := pool.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&killedAt); err != nil {
		t.Fatal(err)
	}
	if err := h.Cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 30*time.Second, "b elected after the kill", func() bool { _, ok := b.CheckPrimary("r"); return ok })
	nt, _ := b.CheckPrimary("r")
	if nt.Epoch <= old.Epoch {
		t.Fatalf("epoch did not increase: %d then %d", old.Epoch, nt.Epoch)
	}
	at := electedAt(t, pool, "r", nt.Epoch)
	var lastRenewal time.Time
	if err := pool.QueryRow(ctx, `SELECT renewed_at FROM batchclaim.election_members WHERE instance_id = $1`, old.InstanceID).Scan(&lastRenewal); err != nil {
		t.Fatal(err)
	}
	if at.Sub(lastRenewal) < testTimeout {
		t.Fatalf("b was elected %s after the dead primary's last renewal; the timeout is %s", at.Sub(lastRenewal), testTimeout)
	}
	gap := at.Sub(killedAt)
	t.Logf("b elected %s after the SIGKILL (T + I = %s)", gap, testTimeout+testInterval)
	if gap > testTimeout+testInterval+3*time.Second { // the bound, plus room for a loaded machine
		t.Fatalf("b was elected %s after the SIGKILL; want about T + I = %s", gap, testTimeout+testInterval)
	}
}

// A primary process is stopped with SIGSTOP past the timeout, in the middle of a fenced
// transaction: the standby is elected all the same; when
// the process resumes it finds its deadline passed and steps down, and none of the fenced
// writes it kept trying to make is accepted after the new term began.
func TestSIGSTOPOfPrimaryProcessPastExpiry(t *testing.T) {
	t.Parallel()
	pool, url := testDB(t)
	ctx := t.Context()
	h := startHelper(t, url)
	testutil.WaitFor(t, 30*time.Second, "the helper process elected", func() bool { return h.SaidPrefix("elected ") })
	b, _, _ := startElector(t, dbtest.Open(t, pool, ""), "b", []string{"r"}, nil)
	old, ok := primaryIs(t, pool, "r", "helper")
	if !ok {
		t.Fatalf("the helper is not the primary: %+v\n%s", old, h.Output())
	}
	testutil.WaitFor(t, 10*time.Second, "fenced writes by the helper", func() bool {
		var n int
		return pool.QueryRow(ctx, `SELECT count(*) FROM test_writes WHERE epoch = $1`, old.Epoch).Scan(&n) == nil && n > 0
	})

	// Stop it in the middle of a fenced transaction (the term row locked FOR SHARE): the
	// server must end that transaction, or nobody could be elected while the pause lasts.
	stoppedInTx := false
	for range 40 {
		if err := h.Cmd.Process.Signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		if err := pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE datname = current_database()
			AND state = 'idle in transaction' AND query LIKE '%test_writes%')`).Scan(&stoppedInTx); err != nil {
			t.Fatal(err)
		}
		if stoppedInTx {
			break
		}
		if err := h.Cmd.Process.Signal(syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
		time.Sleep(37 * time.Millisecond) // a different phase of the helper's write loop
	}
	if !stoppedInTx {
		t.Fatal("could not stop the helper inside a fenced transaction")
	}
	testutil.WaitFor(t, 30*time.Second, "b elected while the helper is stopped", func() bool { _, ok := b.CheckPrimary("r"); return ok })
	nt, _ := b.CheckPrimary("r")
	if err := h.Cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	wantDown := "stepped-down " + itoa(old.Epoch) + " "
	testutil.WaitFor(t, 30*time.Second, "the resumed helper stepping down", func() bool { return h.SaidPrefix(wantDown) })
	if !h.SaidPrefix(wantDown + "deadline") {
		t.Logf("helper output:\n%s", h.Output())
		t.Fatal("the resumed helper did not step down because of its own deadline")
	}
	if _, ok := b.CheckPrimary("r"); !ok {
		t.Fatal("b is no longer primary after the helper resumed")
	}
	at := electedAt(t, pool, "r", nt.Epoch)
	var stale int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM test_writes WHERE epoch = $1 AND at > $2`, old.Epoch, at).Scan(&stale); err != nil {
		t.Fatal(err)
	}
	if stale > 0 {
		t.Fatalf("%d fenced writes of the old term accepted after the new term began", stale)
	}
	if strings.Contains(h.Output(), "elected "+itoa(old.Epoch)+"\nelected") {
		t.Fatal("the helper was elected twice in one term")
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
