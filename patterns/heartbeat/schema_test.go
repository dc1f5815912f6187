package heartbeat_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/batchclaim/batchclaim/patterns/heartbeat"
	"github.com/batchclaim/batchclaim/pgdb"
	"github.com/batchclaim/batchclaim/testkit/dbtest"
	"github.com/batchclaim/batchclaim/testkit/testutil"
)

// A Service in a schema other than batchclaim: the database has no batchclaim schema at all,
// so its election, its handler, its steps and its delivery must all find their tables in the
// configured one.
func TestServiceInSchema(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool, err := pgxpool.New(ctx, dbtest.NewDBInSchema(t, "pat"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	inPat := dbtest.Open(t, pool, "pat")
	if _, err := heartbeat.Reconfigure(ctx, inPat, []heartbeat.EventType{eventType("Heartbeat_vDNS", 100*time.Millisecond, 2)}); err != nil {
		t.Fatal(err)
	}
	hooks := &hookLog{}
	cfg := childConfig("a", "", nil)
	cfg.OnEvent = hooks.hook
	svc, err := heartbeat.New(inPat, cfg)
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- svc.Run(runCtx) }()
	t.Cleanup(func() { cancel(); <-done })

	srv := httptest.NewServer(svc.Handler())
	t.Cleanup(srv.Close)
	resp, err := http.Post(srv.URL+"/heartbeat", "application/json",
		strings.NewReader(`{"sourceName": "vdns-1", "eventName": "Heartbeat_vDNS", "lastEpochMicrosec": 1700000000000000}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST /heartbeat: %s", resp.Status)
	}
	// The source falls silent: two intervals later the active instance raises, and delivers.
	testutil.WaitFor(t, 10*time.Second, "the raise of vdns-1 delivered", func() bool {
		return hooks.keys()["Heartbeat_vDNS/vdns-1/1/raised"] == 1
	})
	if _, ok := svc.Active(); !ok {
		t.Fatal("the only instance is not the active one")
	}
	es, err := heartbeat.ListEvents(ctx, inPat, 0, 10)
	if err != nil || len(es) != 1 || es[0].Kind != heartbeat.Raised || es[0].HeartbeatSeq != 1 {
		t.Fatalf("events in pat: %+v %v", es, err)
	}
	if bad, err := heartbeat.AuditWriters(ctx, inPat, heartbeat.RoleDefault); err != nil || len(bad) != 0 {
		t.Fatalf("audit of the writers: %+v %v", bad, err)
	}

	if _, err := heartbeat.New(pgdb.DB{}, cfg); err == nil || !strings.Contains(err.Error(), "heartbeat: no database") {
		t.Fatalf("New with the zero DB: %v, want it refused", err)
	}
}
