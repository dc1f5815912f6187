package bench

import (
	"os/exec"
	"path/filepath"
	"testing"
)

// buildProgram compiles batchclaim, whose run command the bench starts as processes.
func buildProgram(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "batchclaim")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/batchclaim/batchclaim/cmd/batchclaim").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// runHasFlag reads run's flags from the binary's help.
func TestRunHasFlag(t *testing.T) {
	t.Parallel()
	bin := buildProgram(t)
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
