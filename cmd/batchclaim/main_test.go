package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/batchclaim/batchclaim/testkit/dbtest"
)

func TestMain(m *testing.M) {
	dbtest.Main(m)
	if built.dir != "" {
		_ = os.RemoveAll(built.dir)
	}
}

// built is the batchclaim program that the package's tests start as processes: built once
// per test binary and shared, since a build costs seconds of CPU and a dozen tests run it.
var built struct {
	once      sync.Once
	dir, path string
	err       error
}

// buildBinary compiles batchclaim, the first time it is called, into a directory TestMain
// removes, and returns its path. The build carries the VCS stamp (-buildvcs=auto: when the
// source is a git work tree), which TestVersionOfBuiltBinary reads.
func buildBinary(t *testing.T) string {
	t.Helper()
	built.once.Do(func() {
		if built.dir, built.err = os.MkdirTemp("", "batchclaim-test-bin-"); built.err != nil {
			return
		}
		built.path = filepath.Join(built.dir, "batchclaim")
		if out, err := exec.Command("go", "build", "-buildvcs=auto", "-o", built.path, ".").CombinedOutput(); err != nil {
			built.err = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if built.err != nil {
		t.Fatal(built.err)
	}
	return built.path
}
