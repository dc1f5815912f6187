package main

import (
	"bytes"
	"strings"
	"testing"
)

// `run --pprof` stops at start, naming the flags, where the profiles would be open to the
// network; on a loopback listener, or with tokens, it goes on (to the database here).
func TestRunPprofFlag(t *testing.T) {
	t.Parallel()
	base := []string{"run", "--database-url", "postgres://x@127.0.0.1:1/x", "--dlt-url", "http://127.0.0.1:1", "--pprof"}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--listen", "0.0.0.0:0", "--insecure-listen"}, "--pprof with --listen 0.0.0.0:0, not a loopback address, needs --auth-token-file"},
		{[]string{"--listen", ""}, "--pprof serves the profiles on --listen: give a --listen address"},
		{[]string{"--listen", "127.0.0.1:0"}, "cannot reach database"},
	} {
		var stdout, stderr bytes.Buffer
		code := realMain(t.Context(), append(append([]string{}, base...), tt.args...), &stdout, &stderr)
		if code != 1 || !strings.Contains(stderr.String(), tt.want) {
			t.Errorf("run --pprof %v: exit %d, stderr %q; want exit 1 and %q", tt.args, code, stderr.String(), tt.want)
		}
	}
}
