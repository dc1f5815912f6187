package heartbeat_test

import (
	"strings"
	"testing"
	"time"

	"github.com/batchclaim/batchclaim/patterns/heartbeat"
	"github.com/batchclaim/batchclaim/pgdb"
	"github.com/batchclaim/batchclaim/testkit/dbtest"
)

func TestNewRejectsBadConfigs(t *testing.T) {
	t.Parallel()
	db := dbtest.Unreachable(t) // New does no I/O
	for _, tc := range []struct {
		cfg  heartbeat.Config
		want string
	}{
		{heartbeat.Config{RetryBase: time.Second, RetryMax: time.Millisecond}, "RetryMax (1ms) is less than RetryBase (1s)"},
		{heartbeat.Config{WebhookURL: "ftp://x"}, "want an http:// or https:// URL"},
		{heartbeat.Config{StepInterval: -time.Second}, "StepInterval is -1s"},
		{heartbeat.Config{ElectionInterval: time.Second, ElectionTimeout: 2 * time.Second}, "T > 2I violated"},
	} {
		_, err := heartbeat.New(db, tc.cfg)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New(%+v): err %v, want %q", tc.cfg, err, tc.want)
		}
	}
	if _, err := heartbeat.New(db, heartbeat.Config{}); err != nil {
		t.Fatalf("the zero Config: %v", err)
	}
	if _, err := heartbeat.New(pgdb.DB{}, heartbeat.Config{}); err == nil || !strings.Contains(err.Error(), "heartbeat: no database") {
		t.Fatalf("the zero DB: %v, want it refused", err)
	}
}
