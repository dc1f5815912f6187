package ui_test

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
)

// Retry and cancel from the page: each answers what happened to the batch, 409 when its state
// does not allow the action, 404 for no such batch, 400 for a bad seq, 403 from another origin,
// and 401 without a token behind the listener's authentication.
func TestBatchActions(t *testing.T) {
	t.Parallel()
	b := setup(t, false)
	halted := b.seqs["svc-c"][0]
	execSQL(t, b.pool, `UPDATE batchclaim.batches SET state = 'INVALID' WHERE seq = $1`, halted)
	queued := b.seqs["svc-b"][0]
	state := func(seq int64) (s string) {
		if err := b.pool.QueryRow(t.Context(), `SELECT state FROM batchclaim.batches WHERE seq = $1`, seq).Scan(&s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	path := func(seq int64, action string) string {
		return "/api/batches/" + strconv.FormatInt(seq, 10) + "/" + action
	}

	if code, body := b.do(t, "POST", path(queued, "cancel"), map[string]string{"Origin": "http://evil.example"}); code != http.StatusForbidden {
		t.Errorf("cross-origin cancel: %d %s, want 403", code, body)
	}
	if s := state(queued); s != "NEW" {
		t.Fatalf("a refused cancel left the batch %s", s)
	}
	code, body := b.do(t, "POST", path(queued, "cancel"), map[string]string{"Origin": b.srv.URL})
	if code != http.StatusOK || !strings.Contains(body, `"from":"NEW"`) || !strings.Contains(body, `"to":"CANCELLED"`) {
		t.Fatalf("cancel: %d %s", code, body)
	}
	if s := state(queued); s != "CANCELLED" {
		t.Fatalf("after cancel: %s", s)
	}
	if code, body := b.do(t, "POST", path(queued, "cancel"), nil); code != http.StatusConflict || !strings.Contains(body, "CANCELLED") {
		t.Errorf("cancel of a cancelled batch: %d %s, want 409 naming its state", code, body)
	}
	if code, body := b.do(t, "POST", path(b.seqs["svc-a"][0], "retry"), nil); code != http.StatusConflict {
		t.Errorf("retry of a committed batch: %d %s, want 409", code, body)
	}
	code, body = b.do(t, "POST", path(halted, "retry"), nil)
	if code != http.StatusOK || !strings.Contains(body, `"from":"INVALID"`) || !strings.Contains(body, `"to":"NEW"`) || !strings.Contains(body, `"resumed":true`) {
		t.Fatalf("retry of the batch that halted its service_id: %d %s", code, body)
	}
	if st := b.halted(t, 0); len(st.Halted) != 0 {
		t.Errorf("still halted after the retry of the batch that halted it: %+v", st.Halted)
	}
	code, body = b.do(t, "POST", path(queued, "retry"), nil)
	if code != http.StatusOK || !strings.Contains(body, `"to":"NEW"`) || strings.Contains(body, "resumed") {
		t.Fatalf("retry of the cancelled batch: %d %s", code, body)
	}
	for p, want := range map[string]int{
		"/api/batches/abc/retry":        http.StatusBadRequest,
		"/api/batches/-1/cancel":        http.StatusBadRequest,
		"/api/batches/999999999/retry":  http.StatusNotFound,
		"/api/batches/999999999/cancel": http.StatusNotFound,
	} {
		if code, body := b.do(t, "POST", p, nil); code != want {
			t.Errorf("POST %s: %d %s, want %d", p, code, body, want)
		}
	}

	a := setup(t, true)
	for _, action := range []string{"retry", "cancel"} {
		if code, body := a.do(t, "POST", path(a.seqs["svc-b"][0], action), nil); code != http.StatusUnauthorized {
			t.Errorf("%s without a token: %d %s, want 401", action, code, body)
		}
	}
	if code, body := a.do(t, "POST", path(a.seqs["svc-b"][0], "cancel"), map[string]string{"Authorization": "Bearer op-token"}); code != http.StatusOK {
		t.Errorf("cancel with the token: %d %s", code, body)
	}
}
