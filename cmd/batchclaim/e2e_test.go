package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/batchclaim/batchclaim/cmd/batchclaim/internal/subproc"
	"github.com/batchclaim/batchclaim/cmd/batchclaim/internal/testbin"
	"github.com/batchclaim/batchclaim/dlt"
	"github.com/batchclaim/batchclaim/testkit/dbtest"
	"github.com/batchclaim/batchclaim/testkit/history"
)

type proc struct {
	cmd *exec.Cmd
	out *bytes.Buffer // read only after the process ended
}

func startProc(t *testing.T, bin string, args ...string) *proc {
	t.Helper()
	p := &proc{cmd: exec.Command(bin, args...), out: &bytes.Buffer{}}
	w := &syncWriter{w: p.out}
	p.cmd.Stdout, p.cmd.Stderr = w, w
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = p.cmd.Process.Signal(syscall.SIGCONT)
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = p.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = p.cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("output of %v:\n%s", args[:1], p.out.String())
		}
	})
	return p
}

// TestEndToEnd runs the real binary: a dlt-sim process, two run processes, batches through
// the ingest API, one run process SIGKILLed midway; everything must be committed in order.
func TestEndToEnd(t *testing.T) {
	t.Parallel()
	bin := testbin.Path(t)
	dbURL := dbtest.NewDB(t)
	ctx := context.Background()

	simAddr := mustFreeAddr(t)
	sim := startProc(t, bin, "dlt-sim", "--flavor", "sawtooth", "--listen", simAddr, "--commit-latency", "20ms")
	simURL := "http://" + simAddr
	waitHTTP(t, simURL+"/_sim/posts")

	addrs := []string{mustFreeAddr(t), mustFreeAddr(t)}
	var runs []*proc
	for i, addr := range addrs {
		runs = append(runs, startProc(t, bin, "run", "--database-url", dbURL, "--dlt-url", simURL,
			"--instance-name", fmt.Sprintf("e2e-%d", i), "--listen", addr, "--renew-interval", "100ms",
			"--expiry-1", "1s", "--expiry-2", "4s", "--poll-interval", "100ms", "--unknown-answers", "2"))
	}
	for _, addr := range addrs {
		waitHTTP(t, "http://"+addr+"/readyz")
	}

	// 10 service_ids x 6 batches through the ingest API of the first instance.
	const services, perService = 10, 6
	for n := range perService {
		for s := range services {
			_, list := dlt.FakeBatch(fmt.Sprintf("e2e-%02d", s), n)
			resp, err := http.Post(fmt.Sprintf("http://%s/batches?service_id=e2e-%02d", addrs[0], s), "application/octet-stream", bytes.NewReader(list))
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusAccepted {
				t.Fatalf("ingest: %d %s", resp.StatusCode, body)
			}
		}
	}

	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	committed := func() int {
		var n int
		_ = pool.QueryRow(ctx, `SELECT count(*) FROM batchclaim.batches WHERE state = 'COMMITTED'`).Scan(&n)
		return n
	}
	deadline := time.Now().Add(60 * time.Second)
	for committed() < 10 {
		if time.Now().After(deadline) {
			t.Fatalf("nothing committed after 60s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := runs[0].cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for committed() < services*perService {
		if time.Now().After(deadline) {
			t.Fatalf("only %d of %d committed after 60s", committed(), services*perService)
		}
		time.Sleep(50 * time.Millisecond)
	}

	rep, err := history.Check(ctx, pool, simRecord(t, simURL))
	if err != nil {
		t.Fatal(err)
	}
	if rep.Lost != 0 || rep.OrderViolations != 0 || rep.DuplicatePostsUnexplained != 0 || rep.Committed != services*perService {
		t.Fatalf("after the kill: %+v", rep)
	}
	_ = sim
}

// simRecord reads the ledger's record over the simulator's admin API.
func simRecord(t *testing.T, base string) history.Ledger {
	t.Helper()
	var posts []struct {
		BatchID string `json:"batch_id"`
		Effect  string `json:"effect"`
	}
	var committed []string
	getJSON(t, base+"/_sim/posts", &posts)
	getJSON(t, base+"/_sim/committed", &committed)
	l := history.SimLedger(committed, func(yield func(string, string) bool) {
		for _, p := range posts {
			if !yield(p.BatchID, p.Effect) {
				return
			}
		}
	})
	return l
}

func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(body, v); err != nil {
		t.Fatalf("GET %s: %v: %.200s", url, err, body)
	}
}

func waitHTTP(t *testing.T, url string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not ready after 30s (last error %v)", url, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func mustFreeAddr(t *testing.T) string {
	t.Helper()
	a, err := subproc.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// TestCLIErrors: bad URLs and unreachable databases give one clear line and exit 1.
func TestCLIErrors(t *testing.T) {
	tests := []struct {
		args []string
		want *regexp.Regexp
		code int
	}{
		{[]string{"status", "--database-url", "postgres://u@127.0.0.1:1/x?connect_timeout=2"}, regexp.MustCompile(`^batchclaim status: cannot reach database at 127\.0\.0\.1:1/x: .*\n$`), 1},
		{[]string{"migrate", "up", "--database-url", "not a url%%"}, regexp.MustCompile(`^batchclaim migrate: bad database URL: .*\n$`), 1},
		{[]string{"status"}, regexp.MustCompile(`^batchclaim status: no database: set --database-url or DATABASE_URL\n$`), 1},
		{[]string{"run", "--database-url", "postgres://x@127.0.0.1:1/x", "--dlt-url", "http://127.0.0.1:1", "--expiry-1", "3s", "--renew-interval", "2s"}, regexp.MustCompile(`^batchclaim run: invalid claim timings: renew interval R <= T1/3 violated: R = 2s, T1 = 3s \(T1/3 = 1s\); local deadline D >= 2R violated: D = 2s, R = 2s \(2R = 4s\)\. Not set, so from the defaults: D = 2/3 of T1 = 2s\. You set --expiry-1 = 3s, --renew-interval = 2s: change them, or also set --local-deadline\n$`), 1},
		{[]string{"run", "--database-url", "postgres://x@127.0.0.1:1/x"}, regexp.MustCompile(`^batchclaim run: --dlt-url is required`), 1},
		{[]string{"nosuch"}, regexp.MustCompile(`unknown command "nosuch"`), 2},
	}
	t.Setenv("DATABASE_URL", "")
	for _, tt := range tests {
		var stdout, stderr bytes.Buffer
		code := realMain(t.Context(), tt.args, &stdout, &stderr)
		if code != tt.code || !tt.want.MatchString(stderr.String()) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d and %s", tt.args, code, stderr.String(), tt.code, tt.want)
		}
	}
}

// TestHelp: every command answers --help with its usage and exit 0.
func TestHelp(t *testing.T) {
	for name := range commands {
		var stdout, stderr bytes.Buffer
		if code := realMain(t.Context(), []string{name, "--help"}, &stdout, &stderr); code != 0 {
			t.Errorf("%s --help: exit %d", name, code)
		}
		if !strings.Contains(stderr.String()+stdout.String(), "Usage") && !strings.Contains(stderr.String()+stdout.String(), "usage") {
			t.Errorf("%s --help printed no usage: %q", name, stderr.String())
		}
	}
}

type syncWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}
