package bench

import (
	"fmt"
	"os"
	"testing"

	"github.com/batchclaim/batchclaim/cmd/batchclaim/internal/testbin"
	"github.com/batchclaim/batchclaim/testkit/dbtest"
)

func TestMain(m *testing.M) {
	dbtest.Main(m) // m.Run's exit code is the binary's when TestMain returns
	if err := testbin.Cleanup(); err != nil {
		fmt.Fprintln(os.Stderr, "remove the built program:", err)
	}
}

// runHasFlag reads run's flags from the binary's help.
func TestRunHasFlag(t *testing.T) {
	t.Parallel()
	bin := testbin.Path(t)
	for name, want := range map[string]bool{"workers": true, "renew-interval": true, "no-such-flag": false, "work": false} {
		got, err := runHasFlag(bin, name)
		if err != nil || got != want {
			t.Errorf("runHasFlag(%q) = %v, %v; want %v", name, got, err, want)
		}
	}
	help := "Flags:\n  -notify-channel string\n    \tchannel\n  -poll\n    \tpoll\n  -workers int\n"
	for name, want := range map[string]bool{"notify": false, "notify-channel": true, "poll": true, "workers": true, "channel": false} {
		if got := helpHasFlag(help, name); got != want {
			t.Errorf("helpHasFlag(%q) = %v, want %v", name, got, want)
		}
	}
	if flagName("--notify=false") != "notify" || flagName("-workers") != "workers" {
		t.Errorf("flagName: %q, %q", flagName("--notify=false"), flagName("-workers"))
	}
}
