package dltsim_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/batchclaim/batchclaim/dlt"
	"github.com/batchclaim/batchclaim/dlt/dltsim"
	"github.com/batchclaim/batchclaim/testkit/testutil"
)

func TestCommandHelp(t *testing.T) {
	t.Parallel()
	var stdout, stderr bytes.Buffer
	if err := dltsim.Command(t.Context(), []string{"-h"}, &stdout, &stderr); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Usage: batchclaim dlt-sim", "-flavor", "-listen", "-commit-latency",
		"-invalid-rate", "-queue-high", "-queue-low", "-history", "-retry-after", "-seed", "-post-log", "/_sim/inject"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("usage lacks %q", want)
		}
	}
	if stderr.Len() != 0 {
		t.Errorf("stderr = %q", stderr.String())
	}
}

func TestCommandBadFlags(t *testing.T) {
	t.Parallel()
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--flavor", "fabric"}, `unknown ledger flavor "fabric"`},
		{[]string{"--commit-latency", "soon"}, "-commit-latency"},
		{[]string{"--invalid-rate", "2"}, "--invalid-rate 2: want 0 to 1"},
		{[]string{"--queue-high", "99999999999"}, "--queue-high 99999999999: want 0 to 1000000"},
		{[]string{"--retry-after", "-1s"}, "--retry-after -1s: want 0s to 24h0m0s"},
		{[]string{"--queue-high", "10", "--queue-low", "20"}, "queue low 20"},
		{[]string{"--seed", "x"}, "-seed"},
		{[]string{"--no-such-flag"}, "no-such-flag"},
		{[]string{"extra"}, `unexpected argument "extra"`},
		{[]string{"--circuit", "a b"}, "circuit and service"},
		{[]string{"--listen", "256.0.0.1:99999"}, "listen"},
	}
	for _, tt := range tests {
		var stdout, stderr bytes.Buffer
		err := dltsim.Command(t.Context(), tt.args, &stdout, &stderr)
		if err == nil || !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%v: err = %v, want one line containing %q", tt.args, err, tt.want)
		}
		if stdout.Len() != 0 {
			t.Errorf("%v: stdout = %q", tt.args, stdout.String())
		}
	}
}

func TestCommandRuns(t *testing.T) {
	t.Parallel()
	postLog := filepath.Join(t.TempDir(), "posts.jsonl")
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var stdout, stderr testutil.SyncBuffer
	done := make(chan error, 1)
	go func() {
		done <- dltsim.Command(ctx, []string{"--flavor", "scabbard", "--listen", "127.0.0.1:0",
			"--post-log", postLog, "--retry-after", "2s"}, &stdout, &stderr)
	}()
	testutil.WaitFor(t, 10*time.Second, "the URL is printed", func() bool { return strings.HasSuffix(stdout.String(), "\n") })
	url := strings.TrimSpace(stdout.String())
	if !strings.HasPrefix(url, "http://127.0.0.1:") {
		t.Fatalf("printed %q, want a loopback URL", url)
	}
	id, list := dlt.FakeBatch("svc", 1)
	resp, err := http.Post(url+"/scabbard/circuit0/service0/batches", "application/octet-stream", bytes.NewReader(list))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("post: %s", resp.Status)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(postLog)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	var p dltsim.Post
	if len(lines) != 1 || json.Unmarshal([]byte(lines[0]), &p) != nil || p.BatchID != id || p.Effect != "accepted" || p.Service != "svc" {
		t.Fatalf("post log = %q", data)
	}
	if !strings.Contains(stderr.String(), "dlt-sim listening") {
		t.Fatalf("stderr = %q, want the listening log", stderr.String())
	}
}

func TestCommandInjectsFailuresFromFlags(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := &testutil.SyncBuffer{}
	done := make(chan error, 1)
	go func() {
		done <- dltsim.Command(ctx, []string{"--listen", "127.0.0.1:0", "--fail-count", "2", "--fail-status", "503", "--drop-responses", "1"}, out, io.Discard)
	}()
	var base string
	deadline := time.Now().Add(10 * time.Second)
	for base == "" {
		if time.Now().After(deadline) {
			t.Fatal("no base URL printed")
		}
		base = strings.TrimSpace(out.String())
		time.Sleep(10 * time.Millisecond)
	}
	var codes []int
	for i := range 4 {
		_, list := dlt.FakeBatch("svc", i)
		resp, err := http.Post(base+"/batches", "application/octet-stream", bytes.NewReader(list))
		if err != nil {
			codes = append(codes, 0) // the dropped response
			continue
		}
		resp.Body.Close()
		codes = append(codes, resp.StatusCode)
	}
	if fmt.Sprint(codes) != "[503 503 0 202]" {
		t.Fatalf("answers %v, want [503 503 0 202]", codes)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := dltsim.Command(context.Background(), []string{"--fail-status", "200"}, io.Discard, io.Discard); err == nil || !strings.Contains(err.Error(), "--fail-status must be an HTTP error status") {
		t.Fatalf("bad --fail-status: %v", err)
	}
}

// dlt-sim on an address other hosts can reach warns that its admin API is open to them; on
// the loopback it says nothing of the kind.
func TestCommandWarnsOnOpenListen(t *testing.T) {
	t.Parallel()
	for listen, warn := range map[string]bool{"0.0.0.0:0": true, "127.0.0.1:0": false} {
		ctx, cancel := context.WithCancel(t.Context())
		var stdout, stderr testutil.SyncBuffer
		done := make(chan error, 1)
		go func() { done <- dltsim.Command(ctx, []string{"--listen", listen}, &stdout, &stderr) }()
		testutil.WaitFor(t, 10*time.Second, "the URL is printed", func() bool { return strings.HasSuffix(stdout.String(), "\n") })
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		got := strings.Contains(stderr.String(), "level=WARN") && strings.Contains(stderr.String(), "admin API (/_sim/...") &&
			strings.Contains(stderr.String(), "without authentication")
		if got != warn {
			t.Errorf("--listen %s: warned %v, want %v:\n%s", listen, got, warn, stderr.String())
		}
	}
}
