package pgsource

import (
	"context"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/batchclaim/batchclaim/testkit/testutil"
)

func TestServerPrefersTheEnvironment(t *testing.T) {
	const url = "postgres://someone@db.example:5432/app?sslmode=disable"
	t.Setenv("PGSOURCE_TEST_URL", url)
	src, err := Server(t.Context(), nil, "PGSOURCE_TEST_URL")
	if err != nil {
		t.Fatal(err)
	}
	if src.URL != url || src.Kind != KindEnv || src.Cluster != nil {
		t.Fatalf("Server = %+v, want the environment's URL, kind env, no cluster", src)
	}
	if err := src.Close(t.Context()); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

func TestServerNamesTheThreeWaysWhenNothingWorks(t *testing.T) {
	t.Setenv("PGSOURCE_TEST_URL", "")
	t.Setenv("DOCKER_HOST", "unix://"+filepath.Join(t.TempDir(), "no-docker.sock"))
	_, err := server(t.Context(), nil, "PGSOURCE_TEST_URL", t.TempDir())
	if err == nil {
		t.Fatal("server found a postgres with no variable, no binaries and no docker")
	}
	want := "set PGSOURCE_TEST_URL, install PostgreSQL server binaries (initdb, pg_ctl), or start Docker"
	if !dockerFallback {
		want = "set PGSOURCE_TEST_URL or install PostgreSQL server binaries (initdb, pg_ctl); this build has no Docker fallback"
	}
	if !strings.Contains(err.Error(), want) {
		t.Fatalf("error %q does not contain %q", err, want)
	}
}

func TestDockerReachable(t *testing.T) {
	serve := func(t *testing.T, status int) string {
		sock := filepath.Join(t.TempDir(), "d.sock")
		l, err := net.Listen("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/_ping" {
				http.NotFound(w, r)
				return
			}
			w.WriteHeader(status)
		})}
		go func() { _ = srv.Serve(l) }()
		t.Cleanup(func() { _ = srv.Close() })
		return "unix://" + sock
	}
	tests := []struct {
		name string
		host func(t *testing.T) string
		want bool
	}{
		{"engine answers", func(t *testing.T) string { return serve(t, http.StatusOK) }, true},
		{"engine errors", func(t *testing.T) string { return serve(t, http.StatusInternalServerError) }, false},
		{"no socket", func(t *testing.T) string { return "unix://" + filepath.Join(t.TempDir(), "none.sock") }, false},
		{"closed tcp port", func(t *testing.T) string {
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			addr := l.Addr().String()
			l.Close()
			return "tcp://" + addr
		}, false},
		{"ssh left to testcontainers", func(*testing.T) string { return "ssh://user@host" }, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("DOCKER_HOST", tt.host(t))
			if _, got := dockerReachable(context.Background()); got != tt.want {
				t.Fatalf("dockerReachable = %v, want %v", got, tt.want)
			}
		})
	}
}

// A build with the nodocker tag (the release image's daemon) has no Docker fallback and says
// so when nothing else is found. This runs the test above in such a build.
func TestServerWithoutTheDockerFallback(t *testing.T) {
	if !dockerFallback {
		t.Skip("this is the nodocker build: TestServerNamesTheThreeWaysWhenNothingWorks checks its message")
	}
	cmd := exec.CommandContext(t.Context(), testutil.GoTool(t), "test", "-count=1", "-tags", "nodocker", "-v",
		"-run", "^(TestServerNamesTheThreeWaysWhenNothingWorks|TestServerWithoutTheDockerFallback)$", ".")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go test -tags nodocker: %v\n%s", err, out)
	}
	for _, want := range []string{"--- PASS: TestServerNamesTheThreeWaysWhenNothingWorks", "--- SKIP: TestServerWithoutTheDockerFallback"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("go test -tags nodocker did not report %q:\n%s", want, out)
		}
	}
}
