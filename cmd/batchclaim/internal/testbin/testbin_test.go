package testbin

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A binary named in the environment is used as it is, by its absolute path; a name that is
// missing, a directory or not executable is an error that names the variable.
func TestResolveNamedBinary(t *testing.T) {
	dir := t.TempDir()
	exe := filepath.Join(dir, "batchclaim")
	if err := os.WriteFile(exe, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	plain := filepath.Join(dir, "plain")
	if err := os.WriteFile(plain, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv(Env, exe)
	if got, err := resolve(); err != nil || got != exe {
		t.Fatalf("resolve() = %q, %v; want %q", got, err, exe)
	}
	for _, bad := range []string{filepath.Join(dir, "missing"), dir, plain} {
		t.Setenv(Env, bad)
		if got, err := resolve(); err == nil || !strings.Contains(err.Error(), Env) {
			t.Errorf("%s=%s: resolve() = %q, %v; want an error naming %s", Env, bad, got, err, Env)
		}
	}
}
