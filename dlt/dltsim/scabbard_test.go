package dltsim_test

import (
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/batchclaim/batchclaim"
	"github.com/batchclaim/batchclaim/dlt"
	"github.com/batchclaim/batchclaim/dlt/dltsim"
)

var scabbardConfig = dltsim.Config{Flavor: dlt.FlavorScabbard}

func TestScabbardPostErrors(t *testing.T) {
	t.Parallel()
	_, good := dlt.FakeBatch("svc", 1)
	withVersion := func(v string) map[string]string {
		return map[string]string{"Content-Type": "application/octet-stream", "SplinterProtocolVersion": v}
	}
	tests := []struct {
		name    string
		body    []byte
		header  map[string]string
		message string
	}{
		{"wrong protocol version", good, withVersion("2"), "Unsupported SplinterProtocolVersion: 2"},
		{"wrong content type", good, map[string]string{"Content-Type": "text/plain"}, "Invalid content type: expected application/octet-stream"},
		{"empty body", nil, withVersion("1"), "No valid batches provided"},
		{"undecodable", []byte{0xff, 0x01}, octet, "Invalid body: not a valid list of batches"},
		{"bad batch id", badIDList(), octet, "Invalid body: not a valid list of batches"},
	}
	b := setup(t, scabbardConfig)
	for _, tt := range tests {
		a := do(t, http.MethodPost, b.url+b.batchesPath(), tt.body, tt.header)
		if e := decode[scabbardError](t, a); a.status != 400 || e.Code != "400" || e.Message != tt.message {
			t.Errorf("%s: %d %s, want 400 %q", tt.name, a.status, a.body, tt.message)
		}
	}
	if a := b.postList(t, good); a.status != http.StatusAccepted {
		t.Fatalf("good post without a protocol header: %d", a.status)
	}
	if a := do(t, http.MethodPost, b.url+"/scabbard/other/service0/batches", good, octet); a.status != http.StatusNotFound {
		t.Fatalf("other circuit: %d, want 404", a.status)
	}
}

func TestScabbardFaultBodies(t *testing.T) {
	t.Parallel()
	b := setup(t, dltsim.Config{Flavor: dlt.FlavorScabbard, RetryAfter: 1500 * time.Millisecond})
	b.sim.InjectStatus(500, 1)
	_, list := dlt.FakeBatch("svc", 1)
	a := b.postList(t, list)
	if e := decode[scabbardError](t, a); a.status != 500 || e.Code != "500" || e.Message != "The server encountered an error" ||
		a.header.Get("Retry-After") != "" {
		t.Fatalf("500: %d %s", a.status, a.body)
	}
	b.sim.InjectStatus(429, 1)
	a = b.postList(t, list)
	if a.status != 429 || len(a.body) != 0 || a.header.Get("Retry-After") != "2" {
		t.Fatalf("429: %d %q Retry-After %q, want an empty body and Retry-After 2", a.status, a.body, a.header.Get("Retry-After"))
	}
}

func TestScabbardAcceptedLink(t *testing.T) {
	t.Parallel()
	b := setup(t, scabbardConfig)
	id1, l1 := dlt.FakeBatch("svc", 1)
	id2, l2 := dlt.FakeBatch("svc", 2)
	a := b.postList(t, append(l1, l2...))
	link := decode[map[string]string](t, a)["link"]
	if want := "/scabbard/circuit0/service0/batch_statuses?ids=" + id1 + "," + id2; a.status != 202 || link != want {
		t.Fatalf("%d link %s, want 202 %s", a.status, link, want)
	}
}

type scabbardStatus struct {
	ID     string `json:"id"`
	Status struct {
		StatusType string `json:"statusType"`
		Message    []struct {
			TransactionID string `json:"transaction_id"`
			ErrorMessage  string `json:"error_message"`
			ErrorData     []int  `json:"error_data"`
		} `json:"message"`
	} `json:"status"`
	Timestamp struct {
		Secs  int64 `json:"secs_since_epoch"`
		Nanos int64 `json:"nanos_since_epoch"`
	} `json:"timestamp"`
}

func TestScabbardStatuses(t *testing.T) {
	t.Parallel()
	b := setup(t, dltsim.Config{Flavor: dlt.FlavorScabbard, CommitLatency: 10 * time.Second})
	id, list := dlt.FakeBatch("svc", 1)
	batches, _ := dlt.SplitBatchList(list)
	b.postList(t, list)
	never := strings.Repeat("0", 128)
	get := func() []scabbardStatus {
		t.Helper()
		a := do(t, http.MethodGet, b.url+b.statusesPath()+id+","+never, nil, nil)
		if a.status != 200 || !strings.HasPrefix(string(a.body), "[") {
			t.Fatalf("GET: %d %s, want a bare array", a.status, a.body)
		}
		return decode[[]scabbardStatus](t, a)
	}
	st := get()
	if st[0].Status.StatusType != "Pending" || st[0].Status.Message == nil || len(st[0].Status.Message) != 0 ||
		st[1].Status.StatusType != "Unknown" || st[0].Timestamp.Secs != b.clock.Now().Unix() {
		t.Fatalf("pending: %+v", st)
	}
	b.clock.Add(5 * time.Second)
	if st = get(); st[0].Status.StatusType != "Valid" || len(st[0].Status.Message) != 1 ||
		st[0].Status.Message[0].TransactionID != batches[0].TransactionIDs[0] || st[0].Timestamp.Secs != b.clock.Now().Unix() {
		t.Fatalf("valid: %+v", st)
	}
	b.clock.Add(5 * time.Second)
	if st = get(); st[0].Status.StatusType != "Committed" || len(st[0].Status.Message) != 1 {
		t.Fatalf("committed: %+v", st)
	}
}

func TestScabbardInvalid(t *testing.T) {
	t.Parallel()
	b := setup(t, dltsim.Config{Flavor: dlt.FlavorScabbard, InvalidRate: 1, CommitLatency: 10 * time.Second})
	id := b.postFake(t, "svc", 1)
	b.clock.Add(5 * time.Second) // executed: invalid at once
	a := do(t, http.MethodGet, b.url+b.statusesPath()+id, nil, nil)
	st := decode[[]scabbardStatus](t, a)
	m := st[0].Status.Message
	if st[0].Status.StatusType != "Invalid" || len(m) != 1 || m[0].ErrorMessage == "" ||
		!slices.Equal(m[0].ErrorData, []int{'d', 'l', 't', 's', 'i', 'm'}) {
		t.Fatalf("invalid: %s", a.body)
	}
	if b.sim.Queued() != 0 {
		t.Fatalf("an invalid batch stayed queued")
	}
}

func TestScabbardStatusErrors(t *testing.T) {
	t.Parallel()
	b := setup(t, scabbardConfig)
	a := do(t, http.MethodGet, b.url+b.statusesPath(), nil, nil)
	if e := decode[scabbardError](t, a); a.status != 400 || e.Message != "No batch IDs specified" {
		t.Fatalf("no ids: %d %s", a.status, a.body)
	}
	a = do(t, http.MethodGet, b.url+b.statusesPath()+strings.Repeat("0", 128), nil, map[string]string{"SplinterProtocolVersion": "0"})
	if a.status != 400 {
		t.Fatalf("protocol version 0: %d, want 400", a.status)
	}
}

func TestScabbardWait(t *testing.T) {
	t.Parallel()
	b := setup(t, dltsim.Config{Flavor: dlt.FlavorScabbard, Now: time.Now, CommitLatency: 50 * time.Millisecond})
	id := b.postFake(t, "svc", 1)
	a := do(t, http.MethodGet, b.url+b.statusesPath()+id+"&wait=30", nil, nil)
	if st := decode[[]scabbardStatus](t, a); st[0].Status.StatusType != "Committed" {
		t.Fatalf("wait=30: %s, want Committed", a.body)
	}
	b.sim.SetPaused(true)
	id = b.postFake(t, "svc", 2)
	a = do(t, http.MethodGet, b.url+b.statusesPath()+id+"&wait=1", nil, nil)
	if st := decode[[]scabbardStatus](t, a); a.status != 200 || st[0].Status.StatusType != "Pending" {
		t.Fatalf("wait=1 while paused: %d %s, want Pending at the timeout", a.status, a.body)
	}
	done := make(chan answer, 1)
	go func() { done <- get(b.url + b.statusesPath() + id + "&wait=soon") }()
	b.sim.CommitNext(1) // an unparseable wait waits (300 s) until the batch settles
	if st := decode[[]scabbardStatus](t, <-done); st[0].Status.StatusType != "Committed" {
		t.Fatalf("wait=soon: %+v, want Committed", st)
	}
}

func TestScabbardEvictionAndRestart(t *testing.T) {
	t.Parallel()
	b := setup(t, dltsim.Config{Flavor: dlt.FlavorScabbard, HistoryLimit: 3})
	var ids []string
	for i := range 5 {
		ids = append(ids, b.postFake(t, "svc", i))
	}
	for i, id := range ids {
		want := batchclaim.StatusCommitted
		if i < 2 {
			want = batchclaim.StatusUnknown
		}
		if st := b.sim.Status(id); st != want {
			t.Errorf("batch %d: %s, want %s", i, st, want)
		}
	}
	b.postFake(t, "svc", 0) // on the chain, evicted: comes back as Committed
	if st := b.sim.Status(ids[0]); st != batchclaim.StatusCommitted {
		t.Fatalf("re-posted evicted batch: %s, want COMMITTED", st)
	}
	b.sim.Restart()
	for _, id := range ids {
		if st := b.sim.Status(id); st != batchclaim.StatusUnknown {
			t.Fatalf("after restart: %s, want Unknown (history lost)", st)
		}
	}
	if got := b.sim.Committed(); !slices.Equal(got, ids) {
		t.Fatalf("committed = %v, want %v (the chain survives)", got, ids)
	}
}

func TestScabbardEvictedPendingCommitsOnce(t *testing.T) {
	t.Parallel()
	b := setup(t, dltsim.Config{Flavor: dlt.FlavorScabbard, HistoryLimit: 1})
	b.sim.SetPaused(true)
	first := b.postFake(t, "svc", 1)
	b.postFake(t, "svc", 2) // evicts first from the history while it is queued
	if st := b.sim.Status(first); st != batchclaim.StatusUnknown {
		t.Fatalf("evicted: %s, want Unknown", st)
	}
	b.postFake(t, "svc", 1) // still queued: a duplicate
	if n := b.sim.Queued(); n != 2 {
		t.Fatalf("queued = %d, want 2", n)
	}
	b.sim.SetPaused(false)
	if got := b.sim.Committed(); len(got) != 2 || got[0] != first {
		t.Fatalf("committed = %v, want first once, then the second", got)
	}
}
