package main

import (
	"bytes"
	"testing"
)

// A timing rule broken by a value derived from what the user set names the flag they set and
// the flags that would fix it, in the run command's own flag names.
func TestRunTimingErrorNamesTheFlagSet(t *testing.T) {
	t.Parallel()
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--expiry-2", "1s"},
			"batchclaim run: max submission time (S) must be positive, got -22s. Not set, so from the defaults: S = min(60s, T2 - D - margin) = -22s, " +
				"D = 2/3 of T1 = 20s, T1 = 30s (default), margin = T1/10 = 3s. You set --expiry-2 = 1s: change it, or also set --submit-timeout or --expiry-1\n"},
		{[]string{"--expiry-2", "1s", "--submit-timeout", "500ms"},
			"batchclaim run: invalid claim timings: T2 > T1 violated: T2 = 1s, T1 = 30s. Not set, so from the defaults: T1 = 30s (default). " +
				"You set --expiry-2 = 1s: change it, or also set --expiry-1; T2 >= D + S + margin violated: T2 = 1s, D = 20s + S = 500ms + margin = 3s is 23.5s. " +
				"Not set, so from the defaults: D = 2/3 of T1 = 20s, T1 = 30s (default), margin = T1/10 = 3s. " +
				"You set --expiry-2 = 1s, --submit-timeout = 500ms: change them, or also set --local-deadline, --expiry-1 or --margin\n"},
		{[]string{"--expiry-1", "1s", "--expiry-2", "1s"}, // both set: the rule alone says it
			"batchclaim run: invalid claim timings: T2 > T1 violated: T2 = 1s, T1 = 1s\n"},
	}
	for _, tt := range tests {
		var stdout, stderr bytes.Buffer
		args := append([]string{"run", "--database-url", "postgres://x@127.0.0.1:1/x", "--dlt-url", "http://x"}, tt.args...)
		if code := realMain(t.Context(), args, &stdout, &stderr); code != 1 || stderr.String() != tt.want {
			t.Errorf("%v: exit %d\n got %q\nwant %q", tt.args, code, stderr.String(), tt.want)
		}
	}
}
