package patroni

import (
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The machine lock: a second taker waits while the first holds it, gives up with ctx, and
// gets it once the first lets go.
func TestLockMachine(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), machineLockName)
	log := slog.New(slog.DiscardHandler)
	first, err := lockMachine(t.Context(), path, log)
	if err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(t.Context(), 3*lockPollInterval)
	defer cancel()
	if f, err := lockMachine(ctx, path, log); err == nil {
		f.Close()
		t.Fatal("a second taker got the lock while the first held it")
	} else if !strings.Contains(err.Error(), "another cluster") {
		t.Fatalf("error %q does not say what it waited for", err)
	}

	got := make(chan error, 1)
	go func() {
		f, err := lockMachine(t.Context(), path, log)
		if err == nil {
			f.Close()
		}
		got <- err
	}()
	select {
	case err := <-got:
		t.Fatalf("the lock was taken while held: %v", err)
	case <-time.After(2 * lockPollInterval):
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the waiting taker did not get the lock after it was released")
	}
}
