package ui_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/batchclaim/batchclaim/testkit/dbtest"
	"github.com/batchclaim/batchclaim/ui"
)

// ledgerID is a 128-hex-digit batch id starting with start.
func ledgerID(start string) string { return start + strings.Repeat("0", 128-len(start)) }

// invalidBatch stores, under service_id svc, a ledger batch that the ledger found INVALID
// after two POSTs (a 503 then a 202), by instance beta, and returns its seq.
func (b *bundle) invalidBatch(t *testing.T, svc, id string) int64 {
	t.Helper()
	ctx := t.Context()
	var seq int64
	err := b.pool.QueryRow(ctx, `
		WITH k AS (INSERT INTO batchclaim.service_id_claims (service_id) VALUES ($1) ON CONFLICT DO NOTHING)
		INSERT INTO batchclaim.batches (service_id, batch_id, payload, ledger, state, attempts, invalid_details, last_error, dlt_status)
		VALUES ($1, $2, 'x', true, 'INVALID', 2, '{"message":"<b>bad</b> signature","code":17}', 'ledger said INVALID', 'INVALID')
		RETURNING seq`, svc, id).Scan(&seq)
	if err != nil {
		t.Fatal(err)
	}
	execSQL(t, b.pool, `INSERT INTO batchclaim.submission_attempts (seq, service_id, batch_id, instance_id, epoch, reason, finished_at, http_status, latency_ms, outcome, error, from_state, to_state)
		VALUES ($1, $2, $3, $4, 4, 'first', now(), 503, 12.5, 'retry', 'ledger busy', 'NEW', 'DELAYED'),
		       ($1, $2, $3, $4, 4, 'retry', now(), 202, 7.25, 'accepted', NULL, 'DELAYED', 'PENDING')`,
		seq, svc, id, b.beta.InstanceID())
	execSQL(t, b.pool, `INSERT INTO batchclaim.batch_transitions (seq, from_state, to_state, instance_id, epoch, detail) VALUES ($1, 'PENDING', 'INVALID', $2, 4, 'ledger status')`,
		seq, b.beta.InstanceID())
	return seq
}

func (b *bundle) getJSON(t *testing.T, path string, v any) (int, string) {
	t.Helper()
	code, body := b.do(t, "GET", path, nil)
	if code == http.StatusOK && v != nil {
		if err := json.Unmarshal([]byte(body), v); err != nil {
			t.Fatalf("GET %s: decode %v\n%s", path, err, body)
		}
	}
	return code, body
}

// wantCode checks that each path answers code with a JSON error whose message says want.
func (b *bundle) wantCode(t *testing.T, code int, cases map[string]string) {
	t.Helper()
	for path, want := range cases {
		got, body := b.do(t, "GET", path, nil)
		if got != code || !strings.Contains(body, want) || !strings.Contains(body, `"error"`) {
			t.Errorf("GET %s: %d %s; want %d saying %q", path, got, body, code, want)
		}
	}
}

func TestSearchAPI(t *testing.T) {
	t.Parallel()
	b := setup(t, false)
	id := ledgerID("deadbeef09")
	seq := b.invalidBatch(t, "svc-ledger", id)
	b.invalidBatch(t, "svc-ledger", ledgerID("deadbeef0a")) // sorts right after the prefix deadbeef09

	find := func(q string) ui.SearchResult {
		t.Helper()
		var r ui.SearchResult
		if code, body := b.getJSON(t, "/api/search?q="+url.QueryEscape(q), &r); code != http.StatusOK {
			t.Fatalf("search %q: %d %s", q, code, body)
		}
		return r
	}
	for _, q := range []string{id, "deadbeef09", "DEADBEEF09", " deadbeef09 ", "#" + fmt.Sprint(seq)} {
		r := find(q)
		if len(r.Batches) != 1 || r.Batches[0].Seq != seq || r.Batches[0].BatchID != id || r.Batches[0].ServiceID != "svc-ledger" {
			t.Errorf("search %q: %+v; want batch %d alone", q, r.Batches, seq)
		}
	}
	if r := find("deadbeef"); len(r.Batches) != 2 {
		t.Errorf("search by the common prefix: %+v; want both batches", r.Batches)
	}
	if r := find("deadbee"); len(r.Batches) != 0 || !strings.Contains(r.Note, "8 hex digits") {
		t.Errorf("a 7-digit prefix: %+v; want no batch search and a note", r)
	}
	if r := find("svc-"); strings.Join(r.ServiceIDs, ",") != "svc-a,svc-b,svc-c,svc-ledger" || len(r.Batches) != 0 {
		t.Errorf("search svc-: %+v", r)
	}
	if r := find("svc-b"); strings.Join(r.ServiceIDs, ",") != "svc-b" {
		t.Errorf("search svc-b: %+v", r)
	}
	if r := find("#999999999"); len(r.Batches) != 0 {
		t.Errorf("an unknown seq found %+v", r.Batches)
	}
	if r := find("nothing-like-it"); len(r.Batches)+len(r.ServiceIDs) != 0 {
		t.Errorf("found %+v", r)
	}
	b.wantCode(t, http.StatusBadRequest, map[string]string{
		"/api/search":                               "q is empty",
		"/api/search?q=++":                          "q is empty",
		"/api/search?q=%230":                        "not a batch seq",
		"/api/search?q=%23x":                        "not a batch seq",
		"/api/search?q=" + strings.Repeat("a", 513): "at most 512",
	})
}

// A POST in flight has no row of the attempt log yet (the row is written with its outcome):
// the batch's page shows it, and its mark, from the batch row.
func TestBatchInFlightShowsItsPOST(t *testing.T) {
	t.Parallel()
	b := setup(t, false)
	ctx := t.Context()
	var seq int64
	err := b.pool.QueryRow(ctx, `
		WITH k AS (INSERT INTO batchclaim.service_id_claims (service_id) VALUES ('svc-inflight') ON CONFLICT DO NOTHING)
		INSERT INTO batchclaim.batches (service_id, batch_id, payload, state, attempts, claimant, claim_epoch, submitted_at, attempt_reason, attempt_from)
		VALUES ('svc-inflight', 'j1', 'x', 'INFLIGHT', 2, $1, 4, now(), 'resubmit', 'UNKNOWN')
		RETURNING seq`, b.beta.InstanceID()).Scan(&seq)
	if err != nil {
		t.Fatal(err)
	}
	execSQL(t, b.pool, `INSERT INTO batchclaim.submission_attempts (seq, service_id, batch_id, instance_id, epoch, reason, started_at, from_state, marked_xid)
		VALUES ($1, 'svc-inflight', 'j1', $2, 3, 'first', now() - interval '1 minute', 'NEW', pg_current_xact_id())`, seq, b.beta.InstanceID())

	var d ui.BatchDetail
	if code, body := b.getJSON(t, fmt.Sprintf("/api/batches/%d", seq), &d); code != http.StatusOK {
		t.Fatalf("GET batch: %d %s", code, body)
	}
	if len(d.Posts) != 2 {
		t.Fatalf("attempts: %+v, want the lost first POST and the one in flight", d.Posts)
	}
	now, lost := d.Posts[0], d.Posts[1]
	if now.Number != 2 || now.Reason != "resubmit" || now.FinishedAt != nil || now.Outcome != "" || now.Instance != "beta" || now.Epoch != 4 {
		t.Errorf("POST in flight: %+v", now)
	}
	if lost.Number != 1 || lost.Reason != "first" || lost.FinishedAt != nil || lost.Epoch != 3 {
		t.Errorf("lost POST: %+v", lost)
	}
	var changes []string
	for _, tr := range d.Transitions {
		changes = append(changes, tr.From+">"+tr.To)
	}
	if fmt.Sprint(changes) != "[NEW>INFLIGHT UNKNOWN>INFLIGHT]" {
		t.Errorf("transitions %v, want both marks, the second from the batch row", changes)
	}
}

// An attempt that committed its batch writes no row of the attempt log: the batch row keeps
// it. The batch's page, the newest state changes and the chart show it from there, once, and
// not for a batch whose last attempt has its row (a ledger's acceptance, committed by a poll).
func TestCommittedJobShowsItsLastPOST(t *testing.T) {
	t.Parallel()
	b := setup(t, false)
	ctx := t.Context()
	var seq, ledgerSeq int64
	err := b.pool.QueryRow(ctx, `
		WITH k AS (INSERT INTO batchclaim.service_id_claims (service_id) VALUES ('svc-done') ON CONFLICT DO NOTHING)
		INSERT INTO batchclaim.batches (service_id, batch_id, payload, state, attempts, claimant, claim_epoch, submitted_at, finished_at,
			attempt_reason, attempt_from, attempt_latency_ms)
		VALUES ('svc-done', 'j1', 'x', 'COMMITTED', 2, $1, 4, now() - interval '1 second', now(), 'retry', 'DELAYED', 3.5)
		RETURNING seq`, b.beta.InstanceID()).Scan(&seq)
	if err != nil {
		t.Fatal(err)
	}
	execSQL(t, b.pool, `INSERT INTO batchclaim.submission_attempts (seq, service_id, batch_id, instance_id, epoch, reason, started_at, finished_at,
			latency_ms, outcome, error, from_state, to_state)
		VALUES ($1, 'svc-done', 'j1', $2, 4, 'first', now() - interval '3 seconds', now() - interval '2 seconds', 9, 'retry', 'busy', 'NEW', 'DELAYED')`,
		seq, b.beta.InstanceID())
	// A ledger batch: its POST's row was written with its acceptance, a poll committed it.
	err = b.pool.QueryRow(ctx, `
		INSERT INTO batchclaim.batches (service_id, batch_id, payload, state, attempts, claimant, claim_epoch, submitted_at, finished_at,
			attempt_reason, attempt_from)
		VALUES ('svc-done', 'l1', 'x', 'COMMITTED', 1, $1, 4, now() - interval '1 second', now(), 'first', 'NEW')
		RETURNING seq`, b.beta.InstanceID()).Scan(&ledgerSeq)
	if err != nil {
		t.Fatal(err)
	}
	execSQL(t, b.pool, `INSERT INTO batchclaim.submission_attempts (seq, service_id, batch_id, instance_id, epoch, reason, started_at, finished_at,
			http_status, outcome, from_state, to_state)
		SELECT seq, service_id, batch_id, claimant, claim_epoch, 'first', submitted_at, submitted_at + interval '100 ms', 202, 'accepted', 'NEW', 'PENDING'
		FROM batchclaim.batches WHERE seq = $1`, ledgerSeq)
	execSQL(t, b.pool, `INSERT INTO batchclaim.batch_transitions (seq, from_state, to_state, instance_id, epoch, detail) VALUES ($1, 'PENDING', 'COMMITTED', $2, 4, 'ledger status')`,
		ledgerSeq, b.beta.InstanceID())

	changesOf := func(ts []ui.Transition, seq int64) string {
		var changes []string
		for _, tr := range ts {
			if tr.Seq == seq {
				changes = append(changes, tr.From+">"+tr.To)
			}
		}
		return fmt.Sprint(changes)
	}
	var d ui.BatchDetail
	if code, body := b.getJSON(t, fmt.Sprintf("/api/batches/%d", seq), &d); code != http.StatusOK {
		t.Fatalf("GET batch: %d %s", code, body)
	}
	if len(d.Posts) != 2 {
		t.Fatalf("attempts: %+v, want the failed first POST and the one that committed", d.Posts)
	}
	last, first := d.Posts[0], d.Posts[1]
	if last.Number != 2 || last.Reason != "retry" || last.FinishedAt == nil || last.Outcome != "done" || last.LatencyMs == nil || *last.LatencyMs != 3.5 ||
		last.HTTPStatus != nil || last.Instance != "beta" || last.Epoch != 4 {
		t.Errorf("the POST that committed: %+v", last)
	}
	if first.Number != 1 || first.Outcome != "retry" || first.Error != "busy" {
		t.Errorf("the first POST: %+v", first)
	}
	if got := changesOf(d.Transitions, seq); got != "[NEW>INFLIGHT INFLIGHT>DELAYED DELAYED>INFLIGHT INFLIGHT>COMMITTED]" {
		t.Errorf("transitions %s, want both attempts' marks and outcomes, the second's from the batch row", got)
	}
	if code, body := b.getJSON(t, fmt.Sprintf("/api/batches/%d", ledgerSeq), &d); code != http.StatusOK {
		t.Fatalf("GET ledger batch: %d %s", code, body)
	}
	if len(d.Posts) != 1 || d.Posts[0].Outcome != "accepted" {
		t.Errorf("ledger batch's attempts: %+v, want its one row", d.Posts)
	}
	if got := changesOf(d.Transitions, ledgerSeq); got != "[NEW>INFLIGHT INFLIGHT>PENDING PENDING>COMMITTED]" {
		t.Errorf("ledger batch's transitions %s, want each once", got)
	}

	st := b.status(t)
	if got := changesOf(st.Transitions, seq); got != "[INFLIGHT>COMMITTED DELAYED>INFLIGHT INFLIGHT>DELAYED NEW>INFLIGHT]" {
		t.Errorf("newest changes of the job %s, want its four, newest first", got)
	}
	if got := changesOf(st.Transitions, ledgerSeq); got != "[PENDING>COMMITTED INFLIGHT>PENDING NEW>INFLIGHT]" {
		t.Errorf("newest changes of the ledger batch %s, want its three, newest first", got)
	}
	// setup's own commit, the job's and the ledger batch's; the job's two marks and the ledger's one.
	if st.Chart.Totals["COMMITTED"] != 3 || st.Chart.Totals["INFLIGHT"] != 3 || st.Chart.Totals["DELAYED"] != 1 {
		t.Errorf("chart totals %v, want 3 COMMITTED, 3 INFLIGHT, 1 DELAYED", st.Chart.Totals)
	}
}

func TestBatchAPI(t *testing.T) {
	t.Parallel()
	b := setup(t, false)
	id := ledgerID("abcdef12")
	seq := b.invalidBatch(t, "svc-ledger", id)

	var d ui.BatchDetail
	if code, body := b.getJSON(t, fmt.Sprintf("/api/batches/%d", seq), &d); code != http.StatusOK {
		t.Fatalf("GET batch: %d %s", code, body)
	}
	if d.BatchID != id || d.ServiceID != "svc-ledger" || d.State != "INVALID" || !d.Ledger || d.DLTStatus != "INVALID" || d.LastError != "ledger said INVALID" {
		t.Errorf("batch: %+v", d)
	}
	var details map[string]any
	if err := json.Unmarshal(d.InvalidDetails, &details); err != nil || details["message"] != "<b>bad</b> signature" || details["code"] != float64(17) {
		t.Errorf("invalid details %s (%v)", d.InvalidDetails, err)
	}
	if len(d.Posts) != 2 || d.Attempts != 2 {
		t.Fatalf("attempts: %d, %+v", d.Attempts, d.Posts)
	}
	// Newest first, numbered from the first.
	a2, a1 := d.Posts[0], d.Posts[1]
	if a2.Number != 2 || *a2.HTTPStatus != 202 || *a2.LatencyMs != 7.25 || a2.Outcome != "accepted" || a2.Instance != "beta" || a2.Epoch != 4 || a2.Reason != "retry" {
		t.Errorf("second attempt: %+v", a2)
	}
	if a1.Number != 1 || *a1.HTTPStatus != 503 || a1.Error != "ledger busy" {
		t.Errorf("first attempt: %+v", a1)
	}
	var changes []string
	for _, tr := range d.Transitions {
		changes = append(changes, tr.From+">"+tr.To)
		if tr.Seq != seq || tr.BatchID != id || tr.Instance != "beta" {
			t.Errorf("transition %+v", tr)
		}
	}
	// The attempts' marks and outcomes and the logged change, in time order (the attempts'
	// rows share a transaction time, so only the set of the first four is fixed).
	if len(changes) != 5 || changes[4] != "PENDING>INVALID" {
		t.Errorf("transitions %v; want the 4 changes of the attempts, then PENDING>INVALID", changes)
	}

	// A batch never sent: no attempts, no details.
	var n ui.BatchDetail
	if code, body := b.getJSON(t, fmt.Sprintf("/api/batches/%d", b.seqs["svc-b"][0]), &n); code != http.StatusOK || len(n.Posts) != 0 || n.Attempts != 0 || n.InvalidDetails != nil || n.State != "NEW" {
		t.Errorf("a new batch: %d %s", code, body)
	}

	b.wantCode(t, http.StatusBadRequest, map[string]string{
		"/api/batches/abc":                  "not a batch seq",
		"/api/batches/0":                    "not a batch seq",
		"/api/batches/-3":                   "not a batch seq",
		"/api/batches/99999999999999999999": "not a batch seq",
	})
	b.wantCode(t, http.StatusNotFound, map[string]string{"/api/batches/999999999": "not found"})
}

func TestServiceAPI(t *testing.T) {
	t.Parallel()
	b := setup(t, false)
	page := func(path string) ui.ServicePage {
		t.Helper()
		var p ui.ServicePage
		if code, body := b.getJSON(t, path, &p); code != http.StatusOK {
			t.Fatalf("GET %s: %d %s", path, code, body)
		}
		return p
	}
	a := page("/api/services/svc-a")
	open := b.seqs["svc-a"][1:] // the first is COMMITTED
	var epoch int64
	if err := b.pool.QueryRow(t.Context(), `SELECT epoch FROM batchclaim.service_id_claims WHERE service_id = 'svc-a'`).Scan(&epoch); err != nil {
		t.Fatal(err)
	}
	if a.Owner != "beta" || a.Epoch != epoch || epoch <= b.alphaEpoch["svc-a"] || a.Phase != "held" || a.Unfinished != 2 || a.Halt != nil || a.NextAfter != 0 {
		t.Errorf("svc-a: %+v", a)
	}
	if len(a.Queue) != 2 || a.Queue[0].Seq != open[0] || a.Queue[1].Seq != open[1] || a.Queue[0].State != "NEW" {
		t.Errorf("queue: %+v; want %v in seq order", a.Queue, open)
	}
	var events []string
	for _, e := range a.Ownership {
		events = append(events, fmt.Sprintf("%s:%s:%d", e.Event, e.Instance, e.Epoch))
	}
	if got, want := strings.Join(events, " "), fmt.Sprintf("acquired:beta:%d voided_expired:alpha:%[2]d acquired:alpha:%[2]d", epoch, b.alphaEpoch["svc-a"]); got != want {
		t.Errorf("ownership, newest first: %s", got)
	}

	// Keyset pages of one batch.
	p1 := page("/api/services/svc-a?limit=1")
	if len(p1.Queue) != 1 || p1.Queue[0].Seq != open[0] || p1.NextAfter != open[0] {
		t.Fatalf("first page: %+v", p1)
	}
	p2 := page(fmt.Sprintf("/api/services/svc-a?limit=1&after=%d", p1.NextAfter))
	if len(p2.Queue) != 1 || p2.Queue[0].Seq != open[1] {
		t.Fatalf("second page: %+v", p2)
	}
	if p3 := page(fmt.Sprintf("/api/services/svc-a?limit=1&after=%d", p2.NextAfter)); len(p3.Queue) != 0 || p3.NextAfter != 0 {
		t.Errorf("past the end: %+v", p3)
	}

	c := page("/api/services/svc-c")
	if c.Halt == nil || c.Halt.Seq != b.seqs["svc-c"][0] || c.Halt.Reason != "batch INVALID: bad signature" {
		t.Errorf("svc-c's halt: %+v", c.Halt)
	}
	// Odd characters travel escaped in the path and come back as they are.
	odd := `svc/<i>"odd"</i>&?#%`
	b.invalidBatch(t, odd, ledgerID("0dd"))
	if p := page("/api/services/" + url.PathEscape(odd)); p.ServiceID != odd || p.Unfinished != 0 {
		t.Errorf("odd service_id: %+v", p)
	}

	b.wantCode(t, http.StatusBadRequest, map[string]string{
		"/api/services/svc%00":                                 "bad service_id",
		"/api/services/svc%E2%80%AE":                           "bad service_id",
		"/api/services/" + strings.Repeat("s", 257):            "bad service_id",
		"/api/services/svc-a?limit=0":                          "limit",
		"/api/services/svc-a?limit=201":                        "give 1 to 200",
		"/api/services/svc-a?limit=x":                          "limit",
		"/api/services/svc-a?after=-1":                         "not a batch seq",
		"/api/services/svc-a?after=" + strings.Repeat("9", 30): "not a batch seq",
	})
	b.wantCode(t, http.StatusNotFound, map[string]string{"/api/services/svc-nobody-knows": "not found"})
}

func TestBatchListAPI(t *testing.T) {
	t.Parallel()
	b := setup(t, false)
	list := func(query string) ui.BatchList {
		t.Helper()
		var l ui.BatchList
		if code, body := b.getJSON(t, "/api/batches?"+query, &l); code != http.StatusOK {
			t.Fatalf("list %s: %d %s", query, code, body)
		}
		return l
	}
	seqs := func(l ui.BatchList) (out []int64) {
		for _, x := range l.Batches {
			out = append(out, x.Seq)
		}
		return out
	}
	all := list("")
	if len(all.Batches) != 6 || all.WindowSeconds != 3600 || all.NextBefore != 0 {
		t.Fatalf("all: %+v", all)
	}
	for i := 1; i < len(all.Batches); i++ {
		if all.Batches[i-1].Seq <= all.Batches[i].Seq {
			t.Fatalf("not newest first: %v", seqs(all))
		}
	}
	if l := list("state=committed"); len(l.Batches) != 1 || l.Batches[0].Seq != b.seqs["svc-a"][0] || l.State != "COMMITTED" {
		t.Errorf("COMMITTED: %v", seqs(l))
	}
	if l := list("service_id=svc-c"); fmt.Sprint(seqs(l)) != fmt.Sprint([]int64{b.seqs["svc-c"][1], b.seqs["svc-c"][0]}) {
		t.Errorf("svc-c: %v", seqs(l))
	}
	if l := list("service_id=svc-a&state=NEW"); len(l.Batches) != 2 {
		t.Errorf("svc-a NEW: %v", seqs(l))
	}

	// Keyset pages of two.
	var paged []int64
	q := "limit=2"
	for range 10 {
		l := list(q)
		paged = append(paged, seqs(l)...)
		if l.NextBefore == 0 {
			break
		}
		q = fmt.Sprintf("limit=2&before=%d", l.NextBefore)
	}
	if fmt.Sprint(paged) != fmt.Sprint(seqs(all)) {
		t.Errorf("pages %v, want %v", paged, seqs(all))
	}

	// History beyond the default hour comes with a wider window.
	old := b.seqs["svc-b"][0]
	execSQL(t, b.pool, `UPDATE batchclaim.batches SET updated_at = now() - interval '3 hours' WHERE seq = $1`, old)
	has := func(l ui.BatchList) bool {
		for _, s := range seqs(l) {
			if s == old {
				return true
			}
		}
		return false
	}
	if has(list("")) || has(list("window=2h")) {
		t.Error("a batch last changed 3 hours ago is in the last hour's list")
	}
	if !has(list("window=4h")) || !has(list("window=7d")) {
		t.Error("a batch last changed 3 hours ago is missing from the 4h and 7d lists")
	}

	b.wantCode(t, http.StatusBadRequest, map[string]string{
		"/api/batches?state=DONE":          "not a batch state",
		"/api/batches?service_id=a%20b":    "service_id",
		"/api/batches?limit=1000":          "give 1 to 200",
		"/api/batches?limit=-1":            "limit",
		"/api/batches?before=0":            "not a batch seq",
		"/api/batches?window=30s":          "window",
		"/api/batches?window=31d":          "window",
		"/api/batches?window=forever":      "window",
		"/api/batches?window=99999999999d": "window",
	})
}

// The overview's transitions carry the batch's seq and its full id, for the link to its page.
func TestStatusTransitionsLinkBatches(t *testing.T) {
	t.Parallel()
	b := setup(t, false)
	st := b.status(t)
	if len(st.Transitions) != 1 || st.Transitions[0].Seq != b.seqs["svc-a"][0] || st.Transitions[0].BatchID != "svc-a-0" {
		t.Errorf("transitions: %+v", st.Transitions)
	}
}

// A page of the batch list reads at most Config.Scan batches by seq: a rare filter gives short
// (even empty) pages that still lead on, and paging reaches every match.
func TestBatchListScanBound(t *testing.T) {
	t.Parallel()
	b := setup(t, false)
	h, err := ui.New(dbtest.Open(t, b.pool, ""), ui.Config{Scan: 2})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	h.Register(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	var got []int64
	pages := 0
	for q := "/api/batches?service_id=svc-a"; q != ""; pages++ {
		if pages > 10 {
			t.Fatal("the pages do not end")
		}
		resp, err := http.Get(srv.URL + q)
		if err != nil {
			t.Fatal(err)
		}
		var l ui.BatchList
		err = json.NewDecoder(resp.Body).Decode(&l)
		resp.Body.Close()
		if err != nil || len(l.Batches) > 2 {
			t.Fatalf("GET %s: %+v (%v); want at most 2 batches read", q, l, err)
		}
		for _, x := range l.Batches {
			got = append(got, x.Seq)
		}
		q = ""
		if l.NextBefore != 0 {
			q = fmt.Sprintf("/api/batches?service_id=svc-a&before=%d", l.NextBefore)
		}
	}
	want := []int64{b.seqs["svc-a"][2], b.seqs["svc-a"][1], b.seqs["svc-a"][0]}
	if fmt.Sprint(got) != fmt.Sprint(want) || pages < 3 {
		t.Errorf("svc-a over %d pages: %v, want %v over at least 3 (6 batches, 2 a page)", pages, got, want)
	}
}
