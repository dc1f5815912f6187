package heartbeat_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/batchclaim/batchclaim/patterns/heartbeat"
)

func TestPostHeartbeat(t *testing.T) {
	t.Parallel()
	b := setup(t, eventType("Heartbeat_vDNS", time.Second, 3))
	h := heartbeat.Handler(b.pool, nil)
	for _, tc := range []struct {
		name, method, body string
		code               int
		errHas             string
	}{
		{"VES event", "POST", `{"event":{"commonEventHeader":{"domain":"heartbeat","sourceName":"vnf-1","eventName":"Heartbeat_vDNS","lastEpochMicrosec":1700000000000000,"sequence":1}}}`, 200, ""},
		{"flat fields", "POST", `{"sourceName":"vnf-1","eventName":"Heartbeat_vDNS","lastEpochMicrosec":1700000000000001}`, 200, ""},
		{"bad JSON", "POST", `{"sourceName": "vnf-1",`, 400, "not valid JSON"},
		{"not an object", "POST", `[1,2]`, 400, "not valid JSON"},
		{"empty body", "POST", ``, 400, "empty body"},
		{"no sourceName", "POST", `{"eventName":"Heartbeat_vDNS","lastEpochMicrosec":1}`, 400, "sourceName is empty"},
		{"no eventName", "POST", `{"event":{"commonEventHeader":{"sourceName":"vnf-1","lastEpochMicrosec":1}}}`, 400, "eventName is empty"},
		{"no lastEpochMicrosec", "POST", `{"sourceName":"vnf-1","eventName":"Heartbeat_vDNS"}`, 400, "lastEpochMicrosec is 0"},
		{"lastEpochMicrosec a string", "POST", `{"sourceName":"vnf-1","eventName":"Heartbeat_vDNS","lastEpochMicrosec":"x"}`, 400, "lastEpochMicrosec"},
		{"event without header", "POST", `{"event":{}}`, 400, "commonEventHeader"},
		{"unknown eventName", "POST", `{"sourceName":"vnf-1","eventName":"Nope","lastEpochMicrosec":1}`, 422, `"Nope" is not a configured event type`},
		{"GET", "GET", ``, 405, "use POST"},
		{"too big", "POST", `{"sourceName":"` + strings.Repeat("x", heartbeat.MaxBodyDefault) + `"}`, 413, "body over"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(tc.method, "/heartbeat", strings.NewReader(tc.body)))
			if rec.Code != tc.code {
				t.Fatalf("status %d, want %d; body %s", rec.Code, tc.code, rec.Body)
			}
			if tc.code == http.StatusOK {
				var r heartbeat.Receipt
				if err := json.Unmarshal(rec.Body.Bytes(), &r); err != nil || r.Seq == 0 || r.ReceivedAt.IsZero() {
					t.Fatalf("receipt %s (%v)", rec.Body, err)
				}
				return
			}
			var e struct{ Error string }
			if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || !strings.Contains(e.Error, tc.errHas) {
				t.Fatalf("error body %s, want it to contain %q", rec.Body, tc.errHas)
			}
		})
	}
	var seq int64
	var us int64
	if err := b.pool.QueryRow(t.Context(), "SELECT heartbeats, last_epoch_microsec FROM batchclaim.heartbeat_sources WHERE source_name = 'vnf-1'").Scan(&seq, &us); err != nil {
		t.Fatal(err)
	}
	if seq != 2 || us != 1700000000000001 {
		t.Fatalf("stored heartbeats %d, lastEpochMicrosec %d; want the two accepted ones", seq, us)
	}
}
