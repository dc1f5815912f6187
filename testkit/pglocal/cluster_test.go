package pglocal

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// startOrSkip starts a cluster, skipping the test without local binaries unless REQUIRE_DB=1.
func startOrSkip(t *testing.T) *Cluster {
	t.Helper()
	if _, err := Find(""); err != nil {
		if os.Getenv("REQUIRE_DB") == "1" {
			t.Fatalf("REQUIRE_DB=1 but %v", err)
		}
		t.Skipf("no local PostgreSQL binaries: %v", err)
	}
	c, err := Start(t.Context(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop(context.Background()) })
	return c
}

func TestStartRestartStop(t *testing.T) {
	ctx := t.Context()
	c := startOrSkip(t)

	conn, err := pgx.Connect(ctx, c.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE TABLE survives (id int); INSERT INTO survives VALUES (42)"); err != nil {
		t.Fatal(err)
	}
	var maxConns string
	if err := conn.QueryRow(ctx, "SHOW max_connections").Scan(&maxConns); err != nil || maxConns != "200" {
		t.Fatalf("max_connections = %q, %v; want 200", maxConns, err)
	}

	pid := c.proc.cmd.Process.Pid
	if err := c.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if err := conn.Ping(ctx); err == nil {
		t.Fatal("a connection opened before Restart still works; want it cut")
	}
	if err := syscall.Kill(-pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Fatalf("process group of the old postmaster %d: %v, want ESRCH", pid, err)
	}
	conn2, err := pgx.Connect(ctx, c.URL())
	if err != nil {
		t.Fatalf("connect after Restart on the same URL: %v", err)
	}
	var id int
	if err := conn2.QueryRow(ctx, "SELECT id FROM survives").Scan(&id); err != nil || id != 42 {
		t.Fatalf("data after Restart: %d, %v; want 42", id, err)
	}
	conn2.Close(ctx)

	pid = c.proc.cmd.Process.Pid
	if err := c.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(-pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Fatalf("processes of postmaster %d left after Stop: %v, want ESRCH", pid, err)
	}
	if _, err := os.Stat(c.dir); !os.IsNotExist(err) {
		t.Fatalf("cluster directory %s left after Stop: %v", c.dir, err)
	}
	if _, err := pgx.Connect(ctx, c.URL()); err == nil {
		t.Fatal("still accepting connections after Stop")
	}
	if err := c.Stop(ctx); err != nil {
		t.Fatalf("second Stop: %v, want nil", err)
	}
	if err := c.Restart(ctx); err == nil {
		t.Fatal("Restart after Stop succeeded, want an error")
	}
}

func TestStopKillsAfterPostmasterIsGone(t *testing.T) {
	ctx := t.Context()
	c := startOrSkip(t)
	pid := c.proc.cmd.Process.Pid
	// A crashed server: pg_ctl stop finds nothing, Stop still cleans up.
	if err := syscall.Kill(-pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-c.proc.done
	if err := c.Stop(ctx); err != nil {
		t.Fatalf("Stop after a crash: %v", err)
	}
	if _, err := os.Stat(c.dir); !os.IsNotExist(err) {
		t.Fatalf("cluster directory %s left after Stop: %v", c.dir, err)
	}
}

func TestFindNamesWhatIsMissing(t *testing.T) {
	_, err := Find(t.TempDir())
	if !errors.Is(err, ErrNotFound) {
		t.Fatalf("Find(empty dir) = %v, want ErrNotFound", err)
	}
	for _, b := range []string{"initdb", "pg_ctl", "postgres"} {
		if !strings.Contains(err.Error(), b) {
			t.Errorf("error %q does not name %s", err, b)
		}
	}
	if _, err := Start(t.Context(), Options{BinDir: t.TempDir()}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Start without binaries = %v, want ErrNotFound", err)
	}
}

func TestNewestFirst(t *testing.T) {
	root := t.TempDir()
	for _, v := range []string{"9.6", "15", "13", "16"} {
		if err := os.MkdirAll(root+"/pg-"+v+"/bin", 0o755); err != nil {
			t.Fatal(err)
		}
	}
	got := newestFirst(root + "/pg-*/bin")
	want := []string{"16", "15", "13", "9.6"}
	for i, w := range want {
		if i >= len(got) || got[i] != root+"/pg-"+w+"/bin" {
			t.Fatalf("newestFirst = %v, want versions %v", got, want)
		}
	}
}

// TestPostmasterDiesWithItsParent runs a copy of this test binary that starts a cluster and
// exits without calling Stop, as a test binary killed by -timeout does.
func TestPostmasterDiesWithItsParent(t *testing.T) {
	if os.Getenv("PGLOCAL_ORPHAN_HELPER") == "1" {
		c, err := Start(context.Background(), Options{})
		if err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		fmt.Println(c.proc.cmd.Process.Pid, c.dir)
		os.Exit(0)
	}
	startOrSkip(t) // skips without binaries; also proves a cluster can start here
	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestPostmasterDiesWithItsParent$")
	cmd.Env = append(os.Environ(), "PGLOCAL_ORPHAN_HELPER=1")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("helper: %v: %s", err, out)
	}
	var pid int
	var dir string
	if _, err := fmt.Sscan(string(out), &pid, &dir); err != nil {
		t.Fatalf("helper output %q: %v", out, err)
	}
	defer os.RemoveAll(dir)
	deadline := time.Now().Add(20 * time.Second)
	for syscall.Kill(-pid, 0) == nil {
		if time.Now().After(deadline) {
			_ = syscall.Kill(-pid, syscall.SIGKILL)
			t.Fatalf("postmaster %d of an exited parent still running", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
