package claims_test

import (
	"strings"
	"testing"
	"time"

	"github.com/batchclaim/batchclaim/claims"
	"github.com/batchclaim/batchclaim/pgdb"
	"github.com/batchclaim/batchclaim/testkit/dbtest"
)

func TestConfigDefaults(t *testing.T) {
	t.Parallel()
	got, err := claims.Config{}.Resolve()
	if err != nil {
		t.Fatalf("defaults rejected: %v", err)
	}
	want := claims.Timings{
		RenewInterval: 5 * time.Second, LocalDeadline: 20 * time.Second, Expiry1: 30 * time.Second,
		Expiry2: 120 * time.Second, MaxSubmission: 60 * time.Second, StopTime: 3 * time.Second, Margin: 3 * time.Second,
	}
	if got := got.Timings(); got != want {
		t.Fatalf("defaults = %+v, want %+v", got, want)
	}
}

func TestConfigDerivesUnsetKnobs(t *testing.T) {
	t.Parallel()
	got, err := claims.Config{RenewInterval: 500 * time.Millisecond, Expiry1: 3 * time.Second, Expiry2: 15 * time.Second}.Resolve()
	if err != nil {
		t.Fatalf("R=500ms T1=3s T2=15s rejected: %v", err)
	}
	if got.LocalDeadline != 2*time.Second {
		t.Errorf("D = %s, want 2/3 T1 = 2s", got.LocalDeadline)
	}
	if want := 15*time.Second - 2*time.Second - 300*time.Millisecond; got.MaxSubmission != want {
		t.Errorf("S = %s, want T2 - D - margin = %s", got.MaxSubmission, want)
	}
}

func TestConfigRejectsEveryBrokenRule(t *testing.T) {
	t.Parallel()
	sec := time.Second
	tests := []struct {
		name string
		cfg  claims.Config
		want string
	}{
		{"negative knob", claims.Config{RenewInterval: -sec}, "renew interval (R) must be positive, got -1s"},
		{"R over T1/3", claims.Config{RenewInterval: 11 * sec, LocalDeadline: 22 * sec, Expiry1: 30 * sec}, "renew interval R <= T1/3 violated: R = 11s, T1 = 30s (T1/3 = 10s)"},
		{"D under 2R", claims.Config{RenewInterval: 5 * sec, LocalDeadline: 9 * sec}, "local deadline D >= 2R violated: D = 9s, R = 5s (2R = 10s)"},
		{"D plus stop time reaches T1", claims.Config{LocalDeadline: 28 * sec, StopTime: 2 * sec}, "D + stop time < T1 violated: D = 28s + stop time = 2s is 30s, T1 = 30s"},
		{"T2 not over T1", claims.Config{Expiry1: 30 * sec, Expiry2: 30 * sec, MaxSubmission: 5 * sec}, "T2 > T1 violated: T2 = 30s, T1 = 30s"},
		{"T2 under D+S+margin", claims.Config{MaxSubmission: 100 * sec}, "T2 >= D + S + margin violated: T2 = 2m0s, D = 20s + S = 1m40s + margin = 3s is 2m3s"},
		{"negative slack", claims.Config{ShareSlack: -1}, "share slack must not be negative, got -1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := tt.cfg.Resolve()
			if err == nil {
				t.Fatalf("accepted %+v", tt.cfg)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %q does not contain %q", err, tt.want)
			}
			if _, err := claims.New(dbtest.Unreachable(t), tt.cfg); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("New error = %v, want it to contain %q", err, tt.want)
			}
		})
	}
}

// An engine needs a DB made by pgdb.Open.
func TestNewRefusesTheZeroDB(t *testing.T) {
	t.Parallel()
	if _, err := claims.New(pgdb.DB{}, claims.Config{}); err == nil || !strings.Contains(err.Error(), "pgdb.Open") {
		t.Fatalf("New(zero DB) = %v, want an error saying to use pgdb.Open", err)
	}
}
