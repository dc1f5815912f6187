package failover_test

import (
	"strings"
	"testing"
	"time"

	"github.com/batchclaim/batchclaim/patterns/failover"
	"github.com/batchclaim/batchclaim/pgdb"
)

func TestConfigResolve(t *testing.T) {
	t.Parallel()
	c, err := failover.Config{Shard: "s", NodeID: "n"}.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	if c.HeartbeatInterval != failover.HeartbeatIntervalDefault || c.PrimaryLease != failover.PrimaryLeaseDefault ||
		c.Patience != failover.PatienceDefault || c.LockTTL != failover.LockTTLDefault || c.PollInterval != failover.PollIntervalDefault ||
		c.PatienceJitter != c.Patience/2 || c.ConfirmTimeout != c.Patience || c.Logger == nil {
		t.Fatalf("defaults: %+v", c)
	}
	// One knob set: the others follow from it.
	c, err = failover.Config{Shard: "s", NodeID: "n", PrimaryLease: 600 * time.Millisecond}.Resolve()
	if err != nil || c.HeartbeatInterval != 200*time.Millisecond || c.Patience != time.Second || c.LockTTL != 2*time.Second {
		t.Fatalf("from the lease: %+v %v", c, err)
	}
	for _, tc := range []struct {
		name string
		cfg  failover.Config
		want string
	}{
		{"no shard", failover.Config{NodeID: "n"}, "shard is required"},
		{"no node", failover.Config{Shard: "s"}, "node id is required"},
		{"heartbeat too slow", failover.Config{Shard: "s", NodeID: "n", HeartbeatInterval: time.Second, PrimaryLease: 2 * time.Second}, "N <= primary lease/3"},
		{"impatient", failover.Config{Shard: "s", NodeID: "n", PrimaryLease: 3 * time.Second, Patience: 3 * time.Second}, "patience > primary lease + N"},
		{"short lock", failover.Config{Shard: "s", NodeID: "n", LockTTL: 2 * time.Second}, "lock ttl >= 3N"},
		{"negative", failover.Config{Shard: "s", NodeID: "n", PollInterval: -time.Second}, "poll interval must be positive"},
	} {
		if _, err := tc.cfg.Resolve(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
		if _, err := failover.New(pgdb.DB{}, tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: New: %v, want %q", tc.name, err, tc.want)
		}
	}
}
