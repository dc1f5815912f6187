package main

import (
	"context"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/batchclaim/batchclaim/cmd/batchclaim/internal/testbin"
	"github.com/batchclaim/batchclaim/patterns/heartbeat"
	"github.com/batchclaim/batchclaim/testkit/dbtest"
)

// listenerSite is one place in the source that starts an HTTP server, and how the binary
// starts it.
type listenerSite struct {
	file string // from the repository's root
	// args start the server from the binary; ADDR is replaced by its address, DB by the
	// database's URL. Nil when nothing outside the process can start it alone (why says
	// which process starts it).
	args []string
	why  string
	// ready answers 200 once the server is up; write is a path the server takes a POST at.
	ready, write string
}

// listenerSites are every server the binary can start. Each goes through httpguard.Listen
// (or Start, which calls it): the Host check, the refusal of cross-origin writes, the
// read, header and idle timeouts, the header size limit and the connection cap.
var listenerSites = []listenerSite{
	{file: "node/http.go", args: []string{"run", "--database-url", "DB", "--dlt-url", "http://127.0.0.1:1", "--listen", "ADDR"},
		ready: "/healthz", write: "/batches?service_id=svc"},
	{file: "cmd/batchclaim/stmt_metric.go", args: []string{"run", "--claims-only", "--database-url", "DB", "--listen", "ADDR"},
		ready: "/healthz", write: "/healthz"},
	{file: "cmd/batchclaim/ui.go", args: []string{"ui", "--database-url", "DB", "--listen", "ADDR"},
		ready: "/healthz", write: "/api/halts/svc/resume"},
	{file: "cmd/batchclaim/internal/electioncmd/election.go", args: []string{"election", "run", "--roles", "r", "--database-url", "DB", "--listen", "ADDR"},
		ready: "/healthz", write: "/primary?role=r"},
	{file: "cmd/batchclaim/internal/heartbeatcmd/heartbeat.go", args: []string{"heartbeat", "run", "--database-url", "DB", "--listen", "ADDR"},
		ready: "/healthz", write: "/heartbeat"},
	{file: "dlt/dltsim/sim.go", args: []string{"dlt-sim", "--listen", "ADDR"},
		ready: "/_sim/posts", write: "/_sim/restart"},
	{file: "cmd/batchclaim/internal/heartbeatcmd/heartbeat_demo.go",
		why: "the webhook receiver of `heartbeat demo`, on a port the demo picks, for the instances it starts"},
}

// serverPatterns start or build an HTTP server without httpguard.Listen.
var serverPatterns = regexp.MustCompile(`http\.Server\s*\{|http\.ListenAndServe|http\.Serve\(|\.ListenAndServe(TLS)?\(|httptest\.NewServer|fcgi\.Serve`)

var guardedPattern = regexp.MustCompile(`httpguard\.(Listen|Start)\(`)

// Every HTTP server in the source (both modules, tests aside) is built by httpguard.Listen,
// and every call of it is in listenerSites: a server added without the guard, or a site
// missing from the table, fails here.
func TestEveryServerIsGuarded(t *testing.T) {
	t.Parallel()
	root := filepath.Join("..", "..")
	calls := map[string]int{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "testdata" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if rel != "httpguard/listen.go" {
			for _, m := range serverPatterns.FindAllIndex(src, -1) {
				line := 1 + strings.Count(string(src[:m[0]]), "\n")
				t.Errorf("%s:%d starts an HTTP server with %q, not through httpguard.Listen: it lacks the listener guard or its limits",
					rel, line, src[m[0]:m[1]])
			}
			if n := len(guardedPattern.FindAll(src, -1)); n > 0 {
				calls[rel] = n
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]int{}
	for _, s := range listenerSites {
		listed[s.file]++
	}
	for file, n := range calls {
		if listed[file] != n {
			t.Errorf("%s starts %d servers through httpguard, listenerSites lists %d: add each to the table, with how the binary starts it", file, n, listed[file])
		}
	}
	for file := range listed {
		if calls[file] == 0 {
			t.Errorf("listenerSites lists %s, which starts no server (any more)", file)
		}
	}
	if len(calls) < 6 {
		t.Fatalf("found servers in %d files only (%v): is the walk looking at the source?", len(calls), calls)
	}
}

// Each server the binary starts, started as the binary starts it, answers a DNS-rebinding
// request 421 and a cross-site write 403 before its handler runs, and a header block over
// the listener's limit 431 (the sign that its limits are set: net/http's own allows 1 MiB).
// The forged heartbeat of a page the operator opens is not stored.
func TestEveryServerRefusesRebindingAndCrossSite(t *testing.T) {
	t.Parallel()
	bin := testbin.Path(t)
	ctx := context.Background()
	dbURL := dbtest.NewDB(t)
	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if err := heartbeat.AddEventType(ctx, pool, heartbeat.EventType{Name: "Heartbeat_vDNS", Interval: time.Minute, MissedCount: 3}); err != nil {
		t.Fatal(err)
	}
	for _, site := range listenerSites {
		if site.args == nil {
			continue
		}
		t.Run(site.file, func(t *testing.T) {
			t.Parallel()
			addr := mustFreeAddr(t)
			args := slices.Clone(site.args)
			for i, a := range args {
				args[i] = strings.NewReplacer("ADDR", addr, "DB", dbURL).Replace(a)
			}
			startHostile(t, bin, args...)
			waitHTTP(t, "http://"+addr+site.ready)
			post := func(source, host string, headers map[string]string) int {
				t.Helper()
				body := fmt.Sprintf(`{"sourceName": %q, "eventName": "Heartbeat_vDNS", "lastEpochMicrosec": 1700000000000000}`, source)
				req, err := http.NewRequest("POST", "http://"+addr+site.write, strings.NewReader(body))
				if err != nil {
					t.Fatal(err)
				}
				req.Host = host
				req.Header.Set("Content-Type", "text/plain")
				for k, v := range headers {
					req.Header.Set(k, v)
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				return resp.StatusCode
			}
			evil := map[string]string{"Origin": "http://rebind.evil.example", "Sec-Fetch-Site": "cross-site"}
			if code := post("forged-rebind", "rebind.evil.example", evil); code != http.StatusMisdirectedRequest {
				t.Errorf("POST %s as text/plain with Host and Origin rebind.evil.example: %d, want 421", site.write, code)
			}
			if code := post("forged-cross-site", addr, evil); code != http.StatusForbidden {
				t.Errorf("POST %s from another origin (Sec-Fetch-Site: cross-site): %d, want 403", site.write, code)
			}
			req, err := http.NewRequest("GET", "http://"+addr+site.ready, nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("X-Big", strings.Repeat("a", 100<<10))
			if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
				t.Errorf("a 100 KiB header: %v, %v; want 431 (the listener's 64 KiB limit)", resp, err)
			} else {
				resp.Body.Close()
			}
			if site.write != "/heartbeat" {
				return
			}
			if code := post("honest", addr, nil); code != http.StatusOK {
				t.Fatalf("a heartbeat from a client that is not a browser: %d, want 200", code)
			}
			var forged, honest int
			if err := pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE source_name LIKE 'forged-%'), count(*) FILTER (WHERE source_name = 'honest')
				FROM batchclaim.heartbeat_sources`).Scan(&forged, &honest); err != nil {
				t.Fatal(err)
			}
			if forged != 0 || honest != 1 {
				t.Errorf("heartbeat sources stored: %d forged, %d honest; want 0 and 1", forged, honest)
			}
		})
	}
}
