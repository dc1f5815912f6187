package dltsim

import (
	"net/http/httptest"
	"testing"
	"time"
)

func TestParseWait(t *testing.T) {
	t.Parallel()
	tests := []struct {
		query string
		want  time.Duration
	}{
		{"", 0},
		{"?wait=", 0},
		{"?wait=false", 0},
		{"?wait=FALSE", 0},
		{"?wait=0", 0},
		{"?wait=-5", 0},
		{"?wait=7", 7 * time.Second},
		{"?wait=301", WaitDefault},
		{"?wait=9223372036854775807", WaitDefault},
		{"?wait=true", WaitDefault},
		{"?wait=1.5", WaitDefault},
		{"?wait=soon", WaitDefault},
	}
	for _, tt := range tests {
		r := httptest.NewRequest("GET", "/batch_statuses"+tt.query, nil)
		if got := parseWait(r); got != tt.want {
			t.Errorf("parseWait(%q) = %v, want %v", tt.query, got, tt.want)
		}
	}
}

func TestConfigDefaults(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in        Config
		high, low int
	}{
		{Config{}, SawtoothQueueHighDefault, SawtoothQueueLowDefault},
		{Config{Flavor: "scabbard"}, ScabbardQueueHighDefault, ScabbardQueueLowDefault},
		{Config{QueueHigh: 10}, 10, 5},
		{Config{QueueHigh: 1}, 1, 1},
		{Config{QueueHigh: 10, QueueLow: 3}, 10, 3},
	}
	for _, tt := range tests {
		c := tt.in.withDefaults()
		if c.QueueHigh != tt.high || c.QueueLow != tt.low || c.validate() != nil {
			t.Errorf("%+v: high %d low %d err %v; want %d %d", tt.in, c.QueueHigh, c.QueueLow, c.validate(), tt.high, tt.low)
		}
	}
}
