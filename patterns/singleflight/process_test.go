package singleflight

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/batchclaim/batchclaim/pgdb"
	"github.com/batchclaim/batchclaim/testkit/dbtest"
	"github.com/batchclaim/batchclaim/testkit/testutil"
)

// The fetcher in these tests is another OS process: this test binary run again, which
// TestMain turns into fetcherMain when helperEnv is set. Its source announces
// "FETCHING <epoch>" and then ignores cancellation and waits for a line on stdin before it
// returns "from-helper".
const helperEnv = "SINGLEFLIGHT_HELPER_DB"

const helperLease = 1500 * time.Millisecond

// fetcherMain is the fetcher process: it gets key "k" through a Cache on url and prints
// "GOT <value> <epoch> rejected=<n>", or "ERR <error>".
func fetcherMain(url string) int {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		fmt.Println("ERR", err)
		return 1
	}
	defer pool.Close()
	stdin := bufio.NewReader(os.Stdin)
	src := SourceFunc(func(ctx context.Context, req Request) ([]byte, error) {
		fmt.Printf("FETCHING %d\n", req.Epoch)
		_, _ = stdin.ReadString('\n') // deaf to ctx: the result comes back late, whatever happens
		return []byte("from-helper"), nil
	})
	db, err := pgdb.Open(pool, "")
	if err != nil {
		fmt.Println("ERR", err)
		return 1
	}
	c, err := New(db, src, Config{Holder: "helper", LeaseTTL: helperLease})
	if err != nil {
		fmt.Println("ERR", err)
		return 1
	}
	go func() { _ = c.Run(ctx) }()
	e, err := c.Get(ctx, "k")
	if err != nil {
		fmt.Println("ERR", err)
		return 1
	}
	fmt.Printf("GOT %s %d rejected=%d\n", e.Value, e.Epoch, c.Stats().Rejected)
	return 0
}

// startHelper starts the fetcher process and waits until its source is running.
func startHelper(t *testing.T, url string) (*testutil.Child, int64) {
	t.Helper()
	h := testutil.StartChild(t, testutil.ChildConfig{Name: "fetcher", Env: []string{helperEnv + "=" + url}, OwnStderr: true})
	line := expect(t, h, "FETCHING")
	var epoch int64
	if _, err := fmt.Sscanf(line, "FETCHING %d", &epoch); err != nil {
		t.Fatalf("helper said %q", line)
	}
	return h, epoch
}

// expect returns the first line of h that starts with prefix, waiting up to 60s for it.
func expect(t *testing.T, h *testutil.Child, prefix string) string {
	t.Helper()
	for i := 0; ; i++ {
		line, ok := h.Line(i, 60*time.Second)
		if !ok {
			t.Fatalf("helper did not say %s (it said %q)", prefix, h.Output())
		}
		if strings.HasPrefix(line, prefix) {
			return line
		}
	}
}

// A fetcher process SIGKILLed mid-fetch: a waiter that was already waiting takes the lease
// over once it expires and fetches with a newer epoch.
func TestFetcherSIGKILL(t *testing.T) {
	t.Parallel()
	url := dbtest.NewDB(t)
	h, oldEpoch := startHelper(t, url)
	src := newFakeSource(t, false)
	b := newCache(t, url, src, Config{LeaseTTL: helperLease}, true)
	got := getAsync(t.Context(), b, "k")
	testutil.WaitFor(t, 30*time.Second, "b to wait for the helper's fetch", func() bool { return b.Stats().Waits > 0 })
	h.Signal(t, syscall.SIGKILL)
	r := recv(t, got)
	if r.err != nil || r.e.Epoch <= oldEpoch || string(r.e.Value) != fmt.Sprintf("k@%d", r.e.Epoch) {
		t.Fatalf("b got %+v, %v; want its own fetch with an epoch after %d", r.e, r.err, oldEpoch)
	}
	if st := b.Stats(); st.Takeovers != 1 || st.Fetches != 1 {
		t.Fatalf("b's stats %+v: want one takeover", st)
	}
}

// A fetcher process SIGSTOPped past its lease: a waiter takes over and stores a newer value;
// when the stopped process resumes and its source returns, its old-epoch result is dropped
// and it serves the newer value instead.
func TestFetcherSIGSTOPPastLease(t *testing.T) {
	t.Parallel()
	url := dbtest.NewDB(t)
	h, oldEpoch := startHelper(t, url)
	h.Signal(t, syscall.SIGSTOP)
	src := newFakeSource(t, false)
	b := newCache(t, url, src, Config{LeaseTTL: helperLease}, true)
	e, err := b.Get(t.Context(), "k")
	if err != nil || e.Epoch <= oldEpoch || b.Stats().Takeovers != 1 {
		t.Fatalf("b got %+v, %v, stats %+v; want a takeover with an epoch after %d", e, err, b.Stats(), oldEpoch)
	}
	h.Signal(t, syscall.SIGCONT)
	if _, err := io.WriteString(h.Stdin(), "go\n"); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("GOT k@%d %d rejected=1", e.Epoch, e.Epoch)
	if line := expect(t, h, "GOT"); line != want {
		t.Fatalf("helper said %q, want %q", line, want)
	}
	st, err := b.lookup(t.Context(), "k")
	if err != nil || st.valueEpoch != e.Epoch || string(st.value) != string(e.Value) {
		t.Fatalf("stored %+v, %v; want b's value of epoch %d", st, err, e.Epoch)
	}
}
