package dbtest

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// recorder is a testing.TB that records how a test would have ended.
type recorder struct {
	testing.TB
	skipped, failed bool
	msg             string
}

func (r *recorder) Helper() {}
func (r *recorder) Skipf(format string, args ...any) {
	r.skipped, r.msg = true, fmt.Sprintf(format, args...)
}
func (r *recorder) Fatalf(format string, args ...any) {
	r.failed, r.msg = true, fmt.Sprintf(format, args...)
}

// TestMissingServerSkipsUnlessRequired documents REQUIRE_DB: without it a missing server
// skips the test; with REQUIRE_DB=1 (CI) it fails it.
func TestMissingServerSkipsUnlessRequired(t *testing.T) {
	reason := errors.New("no server here")
	for _, tt := range []struct {
		require             string
		wantSkip, wantFatal bool
	}{
		{"", true, false},
		{"0", true, false},
		{"1", false, true},
	} {
		t.Run("REQUIRE_DB="+tt.require, func(t *testing.T) {
			t.Setenv(EnvRequire, tt.require)
			r := &recorder{TB: t}
			skipOrFail(r, reason)
			if r.skipped != tt.wantSkip || r.failed != tt.wantFatal {
				t.Fatalf("skipped=%v failed=%v, want skipped=%v failed=%v", r.skipped, r.failed, tt.wantSkip, tt.wantFatal)
			}
			if !strings.Contains(r.msg, reason.Error()) {
				t.Fatalf("message %q does not give the reason %q", r.msg, reason)
			}
		})
	}
}

func TestDatabaseURL(t *testing.T) {
	got, err := databaseURL("postgres://u:p@h:5/postgres?sslmode=disable", "bct_1")
	if err != nil || got != "postgres://u:p@h:5/bct_1?sslmode=disable" {
		t.Fatalf("databaseURL = %q, %v", got, err)
	}
	if _, err := databaseURL("host=h dbname=postgres", "bct_1"); err == nil {
		t.Fatal("databaseURL accepted a keyword/value string")
	}
}
