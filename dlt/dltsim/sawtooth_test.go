package dltsim_test

import (
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/batchclaim/batchclaim"
	"github.com/batchclaim/batchclaim/dlt"
	"github.com/batchclaim/batchclaim/dlt/dltsim"
)

// badIDList is a decodable BatchList whose batch id is not hex.
func badIDList() []byte {
	var b []byte
	b = protowire.AppendTag(b, 2, protowire.BytesType)
	b = protowire.AppendString(b, "not-a-signature")
	return dlt.NewBatchList(b)
}

func TestSawtoothPostErrors(t *testing.T) {
	t.Parallel()
	_, good := dlt.FakeBatch("svc", 1)
	tests := []struct {
		name   string
		body   []byte
		header map[string]string
		code   int
	}{
		{"no content type", good, nil, 42},
		{"wrong content type", good, map[string]string{"Content-Type": "application/json"}, 42},
		{"empty body", nil, octet, 34},
		{"undecodable", []byte{0xff, 0x01}, octet, 35},
		{"bad batch id", badIDList(), octet, 30},
		{"duplicate in list", append(slices.Clone(good), good...), octet, 30},
	}
	b := setup(t, dltsim.Config{})
	for _, tt := range tests {
		a := do(t, http.MethodPost, b.url+"/batches", tt.body, tt.header)
		e := decode[sawtoothError](t, a)
		if a.status != http.StatusBadRequest || e.Error.Code != tt.code || e.Error.Title == "" || e.Error.Message == "" {
			t.Errorf("%s: %d %s, want 400 with code %d", tt.name, a.status, a.body, tt.code)
		}
	}
	for i, p := range b.sim.Posts() {
		if p.Seq != i+1 || p.BatchID != "" || p.HTTPStatus != 400 || p.Effect != dltsim.EffectRejected {
			t.Errorf("post record %d = %+v, want a rejected record without batch id", i, p)
		}
	}
	if n := len(b.sim.Posts()); n != len(tests) {
		t.Fatalf("%d post records, want %d", n, len(tests))
	}
}

func TestSawtoothAccepted(t *testing.T) {
	t.Parallel()
	b := setup(t, dltsim.Config{})
	id1, l1 := dlt.FakeBatch("svc", 1)
	id2, l2 := dlt.FakeBatch("svc", 2)
	a := b.postList(t, append(l1, l2...))
	if a.status != http.StatusAccepted {
		t.Fatalf("post: %d %s", a.status, a.body)
	}
	link := decode[map[string]string](t, a)["link"]
	if want := b.url + "/batch_statuses?id=" + id1 + "," + id2; link != want {
		t.Fatalf("link = %s, want %s", link, want)
	}
	posts := b.sim.Posts()
	if len(posts) != 2 || posts[0].Seq != 1 || posts[1].Seq != 1 || posts[0].BatchID != id1 ||
		posts[1].Service != "svc" || posts[0].HTTPStatus != 202 || posts[0].At != b.clock.Now() {
		t.Fatalf("posts = %+v", posts)
	}
}

type sawtoothStatuses struct {
	Data []struct {
		ID                  string `json:"id"`
		Status              string `json:"status"`
		InvalidTransactions []struct {
			ID           string `json:"id"`
			Message      string `json:"message"`
			ExtendedData []byte `json:"extended_data"`
		} `json:"invalid_transactions"`
	} `json:"data"`
	Link *string `json:"link"`
}

func TestSawtoothStatuses(t *testing.T) {
	t.Parallel()
	b := setup(t, dltsim.Config{CommitLatency: time.Second})
	id := b.postFake(t, "svc", 1)
	never := strings.Repeat("0", 128)
	a := do(t, http.MethodGet, b.url+"/batch_statuses?id="+id+","+never, nil, nil)
	st := decode[sawtoothStatuses](t, a)
	if a.status != 200 || len(st.Data) != 2 || st.Data[0].Status != "PENDING" || st.Data[1].Status != "UNKNOWN" ||
		st.Data[0].InvalidTransactions == nil || st.Link == nil || !strings.HasSuffix(*st.Link, never) {
		t.Fatalf("GET: %d %s", a.status, a.body)
	}
	b.clock.Add(time.Second)
	a = do(t, http.MethodPost, b.url+"/batch_statuses", []byte(`["`+id+`"]`), map[string]string{"Content-Type": "application/json"})
	st = decode[sawtoothStatuses](t, a)
	if a.status != 200 || len(st.Data) != 1 || st.Data[0].Status != "COMMITTED" || st.Link != nil {
		t.Fatalf("POST: %d %s, want COMMITTED without a link", a.status, a.body)
	}
}

func TestSawtoothStatusErrors(t *testing.T) {
	t.Parallel()
	b := setup(t, dltsim.Config{})
	tests := []struct {
		name   string
		method string
		query  string
		body   string
		code   int
	}{
		{"no id", http.MethodGet, "", "", 66},
		{"empty id", http.MethodGet, "?id=", "", 66},
		{"bad id", http.MethodGet, "?id=abc", "", 60},
		{"upper-case id", http.MethodGet, "?id=" + strings.Repeat("A", 128), "", 60},
		{"empty array", http.MethodPost, "", "[]", 66},
		{"bad id in array", http.MethodPost, "", `["abc"]`, 60},
		{"not an array", http.MethodPost, "", `{"id":1}`, 43},
	}
	for _, tt := range tests {
		a := do(t, tt.method, b.url+"/batch_statuses"+tt.query, []byte(tt.body), nil)
		if e := decode[sawtoothError](t, a); a.status != 400 || e.Error.Code != tt.code {
			t.Errorf("%s: %d %s, want 400 code %d", tt.name, a.status, a.body, tt.code)
		}
	}
}

func TestSawtoothWait(t *testing.T) {
	t.Parallel()
	b := setup(t, dltsim.Config{CommitLatency: 50 * time.Millisecond, Now: time.Now})
	id := b.postFake(t, "svc", 1)
	a := do(t, http.MethodGet, b.url+"/batch_statuses?wait=30&id="+id, nil, nil)
	if st := decode[sawtoothStatuses](t, a); st.Data[0].Status != "COMMITTED" {
		t.Fatalf("wait=30: %s, want COMMITTED", a.body)
	}

	b.sim.SetPaused(true)
	id = b.postFake(t, "svc", 2)
	a = do(t, http.MethodGet, b.url+"/batch_statuses?wait=false&id="+id, nil, nil)
	if st := decode[sawtoothStatuses](t, a); st.Data[0].Status != "PENDING" {
		t.Fatalf("wait=false: %s, want PENDING", a.body)
	}
	a = do(t, http.MethodGet, b.url+"/batch_statuses?wait=1&id="+id, nil, nil)
	if st := decode[sawtoothStatuses](t, a); a.status != 200 || st.Data[0].Status != "PENDING" {
		t.Fatalf("wait=1 while paused: %d %s, want PENDING at the timeout", a.status, a.body)
	}
}

func TestSawtoothInvalid(t *testing.T) {
	t.Parallel()
	b := setup(t, dltsim.Config{InvalidRate: 1})
	id, list := dlt.FakeBatch("svc", 1)
	batches, _ := dlt.SplitBatchList(list)
	b.postList(t, list)
	a := do(t, http.MethodGet, b.url+"/batch_statuses?id="+id, nil, nil)
	st := decode[sawtoothStatuses](t, a)
	if len(st.Data) != 1 || st.Data[0].Status != "INVALID" || len(st.Data[0].InvalidTransactions) != 1 {
		t.Fatalf("status: %s", a.body)
	}
	it := st.Data[0].InvalidTransactions[0]
	if it.ID != batches[0].TransactionIDs[0] || it.Message == "" || string(it.ExtendedData) != "dltsim" {
		t.Fatalf("invalid transaction = %+v", it)
	}
	if got := b.sim.Committed(); len(got) != 0 {
		t.Fatalf("committed = %v, want none", got)
	}
}

func TestSawtoothInvalidMemory(t *testing.T) {
	t.Parallel()
	b := setup(t, dltsim.Config{InvalidRate: 1})
	id, list := dlt.FakeBatch("svc", 1)
	b.postList(t, list)
	if st := b.sim.Status(id); st != batchclaim.StatusInvalid {
		t.Fatalf("status %s, want INVALID", st)
	}
	b.postList(t, list) // remembered: a duplicate
	b.clock.Add(dltsim.InvalidMemoryDefault - time.Nanosecond)
	if st := b.sim.Status(id); st != batchclaim.StatusInvalid {
		t.Fatalf("just before expiry: %s, want INVALID", st)
	}
	b.clock.Add(time.Nanosecond)
	if st := b.sim.Status(id); st != batchclaim.StatusUnknown {
		t.Fatalf("after expiry: %s, want UNKNOWN", st)
	}
	b.postList(t, list) // forgotten: accepted anew, and invalid again
	if st := b.sim.Status(id); st != batchclaim.StatusInvalid {
		t.Fatalf("after re-post: %s, want INVALID", st)
	}
	want := []string{dltsim.EffectAccepted, dltsim.EffectDuplicate, dltsim.EffectAccepted}
	if got := effectsOf(b.sim); !slices.Equal(got, want) {
		t.Fatalf("effects = %v, want %v", got, want)
	}
}

func TestSawtoothRestart(t *testing.T) {
	t.Parallel()
	b := setup(t, dltsim.Config{})
	committed := b.postFake(t, "svc", 1)
	b.sim.Committed()
	b.sim.SetPaused(true)
	pending := b.postFake(t, "svc", 2)
	if st := b.sim.Status(pending); st != batchclaim.StatusPending {
		t.Fatalf("status %s, want PENDING", st)
	}
	b.sim.Restart()
	b.sim.SetPaused(false)
	if st := b.sim.Status(pending); st != batchclaim.StatusUnknown {
		t.Fatalf("pending after restart: %s, want UNKNOWN", st)
	}
	if st := b.sim.Status(committed); st != batchclaim.StatusCommitted {
		t.Fatalf("committed after restart: %s, want COMMITTED", st)
	}
	if got := b.sim.Committed(); !slices.Equal(got, []string{committed}) {
		t.Fatalf("committed = %v: the lost batch must never commit", got)
	}
	b.postFake(t, "svc", 1)
	if got := b.sim.Committed(); len(got) != 1 {
		t.Fatalf("re-posting a committed batch committed it again: %v", got)
	}
}
