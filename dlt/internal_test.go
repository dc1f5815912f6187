package dlt

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/batchclaim/batchclaim"
)

func TestParseRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		in   string
		want time.Duration
	}{
		{"", 0},
		{"5", 5 * time.Second},
		{" 7 ", 7 * time.Second},
		{"0", 0},
		{"-3", 0},
		{"soon", 0},
		{"99999999999", maxRetryAfter},
		{now.Add(30 * time.Second).Format(http.TimeFormat), 30 * time.Second},
		{now.Add(-time.Minute).Format(http.TimeFormat), 0},
		{now.Add(72 * time.Hour).Format(http.TimeFormat), maxRetryAfter},
		{now.Add(90 * time.Second).Format(time.RFC850), 90 * time.Second},
	}
	for _, tt := range tests {
		if got := parseRetryAfter(tt.in, now); got != tt.want {
			t.Errorf("parseRetryAfter(%q) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

func TestFlexBytes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in      string
		want    string
		wantErr bool
	}{
		{`"ZGx0c2lt"`, "dltsim", false},
		{`[100,108,116]`, "dlt", false},
		{`null`, "", false},
		{`[]`, "", false},
		{`"not base64!"`, "", true},
		{`[300]`, "", true},
		{`{}`, "", true},
	}
	for _, tt := range tests {
		var f flexBytes
		err := json.Unmarshal([]byte(tt.in), &f)
		if (err != nil) != tt.wantErr || string(f) != tt.want {
			t.Errorf("unmarshal %s = %q, %v; want %q, error %v", tt.in, f, err, tt.want, tt.wantErr)
		}
	}
}

// Only an answer that proves the batches were not taken is retried blind; every other
// non-final answer is an unknown outcome that the ledger is asked about first.
func TestClassify(t *testing.T) {
	t.Parallel()
	sawtooth := func(code int) string {
		return fmt.Sprintf(`{"error": {"code": %d, "title": "t", "message": "m"}}`, code)
	}
	tests := []struct {
		code    int
		body    string
		verdict batchclaim.Verdict
	}{
		{200, "", batchclaim.Accepted}, {202, `{"link": "x"}`, batchclaim.Accepted},
		{400, sawtooth(30), batchclaim.Rejected},
		{413, "", batchclaim.Rejected}, {422, "", batchclaim.Rejected}, // the batch is at fault
		{401, "", batchclaim.Retry}, {403, "", batchclaim.Retry}, {404, "", batchclaim.Retry}, // configuration
		{429, sawtooth(31), batchclaim.Retry}, {429, "", batchclaim.Retry},
		{503, sawtooth(15), batchclaim.Retry},   // validator not ready: never passed on
		{503, sawtooth(17), batchclaim.Unknown}, // validator timed out: may have been taken
		{503, sawtooth(18), batchclaim.Unknown}, // validator disconnected after receiving it
		{503, "", batchclaim.Unknown},           // no proof of refusal
		{408, sawtooth(19), batchclaim.Unknown},
		{500, "", batchclaim.Unknown}, {502, "", batchclaim.Unknown}, {504, "", batchclaim.Unknown},
	}
	for _, tt := range tests {
		r := classify(tt.code, []byte(tt.body))
		if r.Verdict != tt.verdict || r.HTTPStatus != tt.code {
			t.Errorf("classify(%d, %s) = %+v, want %v", tt.code, tt.body, r, tt.verdict)
		}
	}
}

func TestWaitSeconds(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		deadline time.Time
		want     int
	}{
		{time.Time{}, 0},
		{now, 0},
		{now.Add(-time.Second), 0},
		{now.Add(time.Nanosecond), 1},
		{now.Add(time.Second), 1},
		{now.Add(time.Second + time.Millisecond), 2},
		{now.Add(5 * time.Minute), 300},
	}
	for _, tt := range tests {
		if got := waitSeconds(tt.deadline, now); got != tt.want {
			t.Errorf("waitSeconds(now+%v) = %d, want %d", tt.deadline.Sub(now), got, tt.want)
		}
	}
	if waitParam(0) != "" || waitParam(7) != "&wait=7" {
		t.Errorf("waitParam(0), waitParam(7) = %q, %q", waitParam(0), waitParam(7))
	}
}

func TestEndpointEscapes(t *testing.T) {
	t.Parallel()
	s, err := NewScabbard(ScabbardConfig{URL: "http://node:8085/prefix/", Circuit: "a b", Service: "s/1"})
	if err != nil {
		t.Fatal(err)
	}
	got := s.t.endpoint("scabbard", s.circuit, s.service, "batches")
	if want := "http://node:8085/prefix/scabbard/a%20b/s%2F1/batches"; got != want {
		t.Fatalf("endpoint = %s, want %s", got, want)
	}
}
