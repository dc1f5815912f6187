package electioncmd

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/batchclaim/batchclaim/cmd/batchclaim/internal/subproc"
	"github.com/batchclaim/batchclaim/patterns/election"
	"github.com/batchclaim/batchclaim/pgdb"
	"github.com/batchclaim/batchclaim/testkit/dbtest"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// GET /primary against a real elector: the role's live primary as JSON, 404 for a role
// without one, 400 without a role.
func TestPrimaryEndpoint(t *testing.T) {
	t.Parallel()
	url := dbtest.NewDB(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	db, err := pgdb.Open(pool, "")
	if err != nil {
		t.Fatal(err)
	}
	el, err := election.New(db, election.Config{Roles: []string{"scheduler"}, Name: "s1", Host: "host-a",
		HeartbeatInterval: 300 * time.Millisecond, Timeout: 1500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = el.Run(ctx) }()
	defer func() { cancel(); <-done }()
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, ok := el.CheckPrimary("scheduler"); ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the elector was not elected")
		}
		time.Sleep(20 * time.Millisecond)
	}

	addr, err := subproc.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	srv, err := servePrimary(ctx, addr, nil, el, db, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	get := func(path string) (int, string) {
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	code, body := get("/primary?role=scheduler")
	var p primaryJSON
	if code != http.StatusOK || json.Unmarshal([]byte(body), &p) != nil || p.Name != "s1" || p.Host != "host-a" || p.Epoch < 1 || !p.ThisInstance {
		t.Fatalf("GET /primary?role=scheduler: %d %s", code, body)
	}
	if code, body := get("/primary?role=nobody"); code != http.StatusNotFound {
		t.Fatalf("GET /primary?role=nobody: %d %s", code, body)
	}
	if code, body := get("/primary"); code != http.StatusBadRequest {
		t.Fatalf("GET /primary: %d %s", code, body)
	}
}
