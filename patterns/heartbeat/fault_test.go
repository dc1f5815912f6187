package heartbeat_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/batchclaim/batchclaim/patterns/heartbeat"
	"github.com/batchclaim/batchclaim/testkit/dbtest"
	"github.com/batchclaim/batchclaim/testkit/testutil"
)

// startProc runs an instance in a separate OS process (this test binary, see childMain).
func startProc(t *testing.T, dbURL, name, webhook string) *testutil.Child {
	t.Helper()
	return testutil.StartChild(t, testutil.ChildConfig{Name: "process " + name,
		Env: []string{envChild + "=" + dbURL, "HEARTBEAT_TEST_NAME=" + name, "HEARTBEAT_TEST_WEBHOOK=" + webhook}})
}

// faultSetup: a database of its own (the processes connect to it), one event type with
// I = 1s and K = 3 (silences are made by moving a source's last heartbeat back, not by
// waiting), and a webhook that refuses everything, for the process that will fail: what it
// stores it cannot deliver, so its successor must.
func faultSetup(t *testing.T) (bundle, string, string) {
	t.Helper()
	dbURL := dbtest.NewDB(t)
	pool, err := pgxpool.New(t.Context(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if _, err := heartbeat.Reconfigure(t.Context(), pool, []heartbeat.EventType{eventType("hb", time.Second, 3)}); err != nil {
		t.Fatal(err)
	}
	refuse := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "down", http.StatusServiceUnavailable)
	}))
	t.Cleanup(refuse.Close)
	return bundle{pool: pool}, dbURL, refuse.URL
}

// The active process is SIGKILLed. The standby takes over after the election timeout; it
// delivers the raise the dead one stored, raises once the source that fell silent while
// nobody was active, raises and clears the silence that began and ended during the
// failover, clears the earlier raise when its source beats again, and repeats nothing.
func TestSIGKILLOfTheActiveProcess(t *testing.T) {
	t.Parallel()
	b, dbURL, refuse := faultSetup(t)
	a := startProc(t, dbURL, "a", refuse)
	termA := waitPrimary(t, b.pool, "a")
	next := startInstance(t, b.pool, "b", &hookLog{})
	for _, src := range []string{"s1", "s2", "s3"} {
		b.beat(t, "hb", src)
	}
	b.age(t, "hb", "s1", 10*time.Second)
	b.waitEvents(t, "a to raise s1", func(es []heartbeat.Event) bool { return has(es, "hb/s1/1/raised") != nil })

	if err := a.Cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	b.beat(t, "hb", "s2")
	b.age(t, "hb", "s2", 10*time.Second) // silent while nobody is active
	b.beat(t, "hb", "s3")
	b.age(t, "hb", "s3", 10*time.Second)
	b.beat(t, "hb", "s3") // a silence that ends before anyone is active again

	termB := waitPrimary(t, b.pool, "b")
	if termB.Epoch <= termA.Epoch {
		t.Fatalf("new term %d not after the killed one's %d", termB.Epoch, termA.Epoch)
	}
	b.beat(t, "hb", "s1")
	want := []string{"hb/s1/1/raised", "hb/s2/1/raised", "hb/s3/1/raised", "hb/s3/1/cleared", "hb/s1/1/cleared"}
	es := b.waitEvents(t, "every event", func(es []heartbeat.Event) bool {
		for _, k := range want {
			if has(es, k) == nil {
				return false
			}
		}
		return true
	})
	for _, k := range want {
		e := has(es, k)
		if wantEpoch := termB.Epoch; k == "hb/s1/1/raised" {
			if e.TermEpoch != termA.Epoch {
				t.Errorf("%s by epoch %d, want the killed process's %d", k, e.TermEpoch, termA.Epoch)
			}
		} else if e.TermEpoch != wantEpoch {
			t.Errorf("%s by epoch %d, want the new active instance's %d", k, e.TermEpoch, wantEpoch)
		}
	}
	if len(es) != len(want) {
		t.Errorf("stored %v, want exactly %v", keysOf(es), want)
	}
	testutil.WaitFor(t, 20*time.Second, "the new active instance to deliver everything", func() bool {
		n, err := heartbeat.PendingDeliveries(t.Context(), b.pool)
		return err == nil && n == 0 && next.hooks.keys()["hb/s1/1/raised"] > 0
	})
	b.checkOnce(t)
}

// The active process is SIGSTOPped past its election timeout and resumed. The standby takes
// over and raises what came due; the resumed process notices it is no longer active and
// writes nothing, although a raise was due when it resumed.
func TestSIGSTOPOfTheActiveProcessPastExpiry(t *testing.T) {
	t.Parallel()
	b, dbURL, refuse := faultSetup(t)
	a := startProc(t, dbURL, "a", refuse)
	termA := waitPrimary(t, b.pool, "a")
	startInstance(t, b.pool, "b", &hookLog{})
	b.beat(t, "hb", "s1")
	b.beat(t, "hb", "s2")

	if err := a.Cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	b.age(t, "hb", "s1", 10*time.Second) // due while a is frozen
	termB := waitPrimary(t, b.pool, "b")
	es := b.waitEvents(t, "b to raise s1", func(es []heartbeat.Event) bool { return has(es, "hb/s1/1/raised") != nil })
	if e := has(es, "hb/s1/1/raised"); e.TermEpoch != termB.Epoch {
		t.Fatalf("s1 raised by epoch %d, want %d", e.TermEpoch, termB.Epoch)
	}

	b.age(t, "hb", "s2", 10*time.Second) // due again as a resumes: only b may raise it
	if err := a.Cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 20*time.Second, "the resumed process to step down", func() bool {
		return strings.Contains(a.Output(), "standby: no longer active")
	})
	b.beat(t, "hb", "s1")
	es = b.waitEvents(t, "s2 raised and s1 cleared", func(es []heartbeat.Event) bool {
		return has(es, "hb/s2/1/raised") != nil && has(es, "hb/s1/1/cleared") != nil
	})
	for _, e := range es {
		if e.InstanceID == termA.InstanceID {
			t.Errorf("%s written by the frozen process", e.Key())
		}
	}
	b.checkOnce(t)
}
