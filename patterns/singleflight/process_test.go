package singleflight

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/batchclaim/batchclaim/internal/dbtest"
	"github.com/batchclaim/batchclaim/internal/testutil"
)

// The fetcher in these tests is another OS process: this test binary run again as
// TestHelperProcess. Its source announces "FETCHING <epoch>" and then ignores cancellation
// and waits for a line on stdin before it returns "from-helper".
const helperEnv = "SINGLEFLIGHT_HELPER_DB"

const helperLease = 1500 * time.Millisecond

func TestHelperProcess(t *testing.T) {
	url := os.Getenv(helperEnv)
	if url == "" {
		t.Skip("only runs as the fetcher process of the SIGKILL/SIGSTOP tests")
	}
	stdin := bufio.NewReader(os.Stdin)
	src := SourceFunc(func(ctx context.Context, req Request) ([]byte, error) {
		fmt.Printf("FETCHING %d\n", req.Epoch)
		_, _ = stdin.ReadString('\n') // deaf to ctx: the result comes back late, whatever happens
		return []byte("from-helper"), nil
	})
	c, err := New(open(t, url), src, Config{Holder: "helper", LeaseTTL: helperLease})
	if err != nil {
		fmt.Println("ERR", err)
		os.Exit(1)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = c.Run(ctx) }()
	e, err := c.Get(ctx, "k")
	if err != nil {
		fmt.Println("ERR", err)
		os.Exit(1)
	}
	fmt.Printf("GOT %s %d rejected=%d\n", e.Value, e.Epoch, c.Stats().Rejected)
	os.Exit(0)
}

type helper struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan string
}

// startHelper starts the fetcher process and waits until its source is running.
func startHelper(t *testing.T, url string) (*helper, int64) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), helperEnv+"="+url)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	h := &helper{cmd: cmd, stdin: stdin, lines: make(chan string, 16)}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			h.lines <- sc.Text()
		}
		close(h.lines)
	}()
	line := h.expect(t, "FETCHING")
	var epoch int64
	if _, err := fmt.Sscanf(line, "FETCHING %d", &epoch); err != nil {
		t.Fatalf("helper said %q", line)
	}
	return h, epoch
}

// expect returns the helper's next line that starts with prefix.
func (h *helper) expect(t *testing.T, prefix string) string {
	t.Helper()
	timeout := time.After(60 * time.Second)
	for {
		select {
		case line, ok := <-h.lines:
			if !ok {
				t.Fatalf("helper exited before saying %s", prefix)
			}
			if strings.HasPrefix(line, prefix) {
				return line
			}
		case <-timeout:
			t.Fatalf("helper did not say %s within 60s", prefix)
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
	if err := h.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
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
	if err := h.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	src := newFakeSource(t, false)
	b := newCache(t, url, src, Config{LeaseTTL: helperLease}, true)
	e, err := b.Get(t.Context(), "k")
	if err != nil || e.Epoch <= oldEpoch || b.Stats().Takeovers != 1 {
		t.Fatalf("b got %+v, %v, stats %+v; want a takeover with an epoch after %d", e, err, b.Stats(), oldEpoch)
	}
	if err := h.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(h.stdin, "go\n"); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("GOT k@%d %d rejected=1", e.Epoch, e.Epoch)
	if line := h.expect(t, "GOT"); line != want {
		t.Fatalf("helper said %q, want %q", line, want)
	}
	st, err := b.lookup(t.Context(), "k")
	if err != nil || st.valueEpoch != e.Epoch || string(st.value) != string(e.Value) {
		t.Fatalf("stored %+v, %v; want b's value of epoch %d", st, err, e.Epoch)
	}
}
