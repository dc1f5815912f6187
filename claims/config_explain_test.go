package claims_test

import (
	"strings"
	"testing"
	"time"

	"github.com/batchclaim/batchclaim/claims"
	"github.com/batchclaim/batchclaim/testkit/dbtest"
)

// flagNames are the run command's names of the timing knobs.
var flagNames = map[string]string{
	"RenewInterval": "--renew-interval", "LocalDeadline": "--local-deadline", "Expiry1": "--expiry-1",
	"Expiry2": "--expiry-2", "MaxSubmission": "--submit-timeout", "StopTime": "--stop-time", "Margin": "--margin",
}

// A rule that fails on values the caller did not set says where they came from, which knobs
// the caller set, and which to set instead; a rule on set values only says no more than before.
func TestConfigErrorNamesWhatWasSet(t *testing.T) {
	t.Parallel()
	sec, ms := time.Second, time.Millisecond
	tests := []struct {
		name  string
		cfg   claims.Config
		names map[string]string
		want  string // the whole message after the rule and its values
	}{
		{"S derived negative from a small T2", claims.Config{Expiry2: sec}, flagNames,
			"max submission time (S) must be positive, got -22s. Not set, so from the defaults: S = min(60s, T2 - D - margin) = -22s, D = 2/3 of T1 = 20s, T1 = 30s (default), margin = T1/10 = 3s. You set --expiry-2 = 1s: change it, or also set --submit-timeout or --expiry-1"},
		{"the same for a library caller: field names", claims.Config{Expiry2: sec}, nil,
			"You set Expiry2 = 1s: change it, or also set MaxSubmission or Expiry1"},
		{"T2 under the default T1", claims.Config{Expiry2: sec, MaxSubmission: 100 * ms}, flagNames,
			"T2 > T1 violated: T2 = 1s, T1 = 30s. Not set, so from the defaults: T1 = 30s (default). You set --expiry-2 = 1s: change it, or also set --expiry-1"},
		{"two set knobs and derived ones in one rule", claims.Config{Expiry2: sec, MaxSubmission: 100 * ms}, flagNames,
			"T2 >= D + S + margin violated: T2 = 1s, D = 20s + S = 100ms + margin = 3s is 23.1s. Not set, so from the defaults: D = 2/3 of T1 = 20s, T1 = 30s (default), margin = T1/10 = 3s. You set --expiry-2 = 1s, --submit-timeout = 100ms: change them, or also set --local-deadline, --expiry-1 or --margin"},
		{"D derived from a set T1", claims.Config{Expiry1: 3 * sec, RenewInterval: 2 * sec}, flagNames,
			"local deadline D >= 2R violated: D = 2s, R = 2s (2R = 4s). Not set, so from the defaults: D = 2/3 of T1 = 2s. You set --expiry-1 = 3s, --renew-interval = 2s: change them, or also set --local-deadline"},
		{"T2 derived through T1 against a set S", claims.Config{MaxSubmission: 100 * sec}, flagNames,
			"T2 >= D + S + margin violated: T2 = 2m0s, D = 20s + S = 1m40s + margin = 3s is 2m3s. Not set, so from the defaults: T2 = 4 x T1 = 2m0s, T1 = 30s (default), D = 2/3 of T1 = 20s, margin = T1/10 = 3s. You set --submit-timeout = 1m40s: change it, or also set --expiry-2, --expiry-1, --local-deadline or --margin"},
		{"stop time against derived D and default T1", claims.Config{StopTime: 15 * sec}, flagNames,
			"D + stop time < T1 violated: D = 20s + stop time = 15s is 35s, T1 = 30s. Not set, so from the defaults: D = 2/3 of T1 = 20s, T1 = 30s (default). You set --stop-time = 15s: change it, or also set --local-deadline or --expiry-1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.cfg.KnobNames = tt.names
			_, err := tt.cfg.Resolve()
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %q\nwant it to contain %q", err, tt.want)
			}
			if _, err := claims.New(dbtest.Unreachable(t), tt.cfg); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("New: error %v, want the same explanation", err)
			}
		})
	}

	// Rules broken by set values alone keep their plain message.
	for _, cfg := range []claims.Config{
		{RenewInterval: 11 * sec, LocalDeadline: 22 * sec, Expiry1: 30 * sec},
		{Expiry1: 30 * sec, Expiry2: 30 * sec, MaxSubmission: 5 * sec, LocalDeadline: 20 * sec, Margin: sec, StopTime: sec, RenewInterval: sec},
		{Margin: -sec},
	} {
		cfg.KnobNames = flagNames
		if _, err := cfg.Resolve(); err == nil || strings.Contains(err.Error(), "Not set") || strings.Contains(err.Error(), "You set") {
			t.Errorf("%+v: error %v, want a plain rule message", cfg, err)
		}
	}
}
