package testbin

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// Env names a batchclaim binary built from this source for the tests to use instead of
// building one. A stale binary tests stale code: make test builds it right before.
const Env = "TEST_BATCHCLAIM_BINARY"

const pkg = "github.com/batchclaim/batchclaim/cmd/batchclaim"

var built struct {
	once      sync.Once
	dir, path string
	err       error
}

// Path returns the program's path, building it the first time it is called unless Env names
// one. The build carries the VCS stamp (-buildvcs=auto: when the source is a git work tree),
// which the version test reads. Call Cleanup from TestMain to remove what was built.
func Path(t testing.TB) string {
	t.Helper()
	built.once.Do(func() { built.path, built.err = resolve() })
	if built.err != nil {
		t.Fatal(built.err)
	}
	return built.path
}

func resolve() (string, error) {
	if p := os.Getenv(Env); p != "" {
		abs, err := filepath.Abs(p)
		if err != nil {
			return "", fmt.Errorf("%s=%s: %w", Env, p, err)
		}
		fi, err := os.Stat(abs)
		switch {
		case err != nil:
			return "", fmt.Errorf("%s=%s: %w", Env, p, err)
		case fi.IsDir() || fi.Mode().Perm()&0o111 == 0:
			return "", fmt.Errorf("%s=%s: not an executable file", Env, p)
		}
		return abs, nil
	}
	dir, err := os.MkdirTemp("", "batchclaim-test-bin-")
	if err != nil {
		return "", err
	}
	built.dir = dir
	path := filepath.Join(dir, "batchclaim")
	if out, err := exec.Command("go", "build", "-buildvcs=auto", "-o", path, pkg).CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build %s: %v\n%s", pkg, err, out)
	}
	return path, nil
}

// Cleanup removes the program Path built, if it built one; TestMain calls it after the tests.
func Cleanup() error {
	if built.dir == "" {
		return nil
	}
	return os.RemoveAll(built.dir)
}
