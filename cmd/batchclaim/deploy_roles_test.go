package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/batchclaim/batchclaim/cmd/batchclaim/internal/testbin"
	"github.com/batchclaim/batchclaim/testkit/pglocal"
)

// The Patroni stack runs as the roles of deploy/roles.sql: the migration as the schema owner,
// the instances as the DML-only role, each with its own password; the members mount the
// script that the post-bootstrap script runs, and PgBouncer knows the role the instances use.
func TestDeployComposePatroniRoles(t *testing.T) {
	t.Parallel()
	services := at(t, readYAML(t, "compose-patroni.yaml")[0], "services").(map[string]any)
	env := func(svc string) map[string]string {
		out := map[string]string{}
		for k, v := range at(t, services[svc], "environment").(map[string]any) {
			out[k] = fmt.Sprint(v)
		}
		return out
	}
	migrate := env("migrate")
	if !strings.HasPrefix(migrate["DATABASE_URL"], "postgres://batchclaim_owner@") || !strings.Contains(migrate["PGPASSWORD"], "BATCHCLAIM_OWNER_PASSWORD") {
		t.Errorf("compose-patroni migrate: %v; want the schema owner with its own password", migrate)
	}
	for _, name := range []string{"batchclaim-1", "batchclaim-2"} {
		e := env(name)
		if !strings.HasPrefix(e["DATABASE_URL"], "postgres://batchclaim_app@") || !strings.Contains(e["PGPASSWORD"], "BATCHCLAIM_DB_PASSWORD") {
			t.Errorf("compose-patroni %s: %v; want the DML-only role", name, e)
		}
	}
	for _, m := range []string{"patroni1", "patroni2", "patroni3"} {
		if v := fmt.Sprint(at(t, services[m], "volumes")); !strings.Contains(v, "./roles.sql:/etc/patroni/roles.sql:ro") {
			t.Errorf("compose-patroni %s does not mount roles.sql: %s", m, v)
		}
	}
	if raw, err := os.ReadFile(deployDir + "patroni/userlist.txt"); err != nil || !strings.Contains(string(raw), `"batchclaim_app"`) {
		t.Errorf("patroni/userlist.txt lacks batchclaim_app (%v)", err)
	}
}

// The post-bootstrap script of the Patroni members, run on a throwaway cluster as Patroni
// runs it: batchclaim_owner may migrate and owns the tables; batchclaim_app reads and writes
// rows, with the per-role timeouts, and can change no table.
func TestPatroniPostBootstrap(t *testing.T) {
	if _, err := pglocal.Find(""); err != nil {
		if os.Getenv("REQUIRE_DB") == "1" {
			t.Fatalf("REQUIRE_DB=1 but the test needs local PostgreSQL binaries for its own cluster: %v", err)
		}
		t.Skipf("no local PostgreSQL binaries: %v", err)
	}
	if _, err := exec.LookPath("psql"); err != nil {
		t.Skipf("no psql: %v", err)
	}
	t.Parallel()
	bin := testbin.Path(t)
	ctx := context.Background()
	cluster, err := pglocal.Start(ctx, pglocal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cluster.Stop(context.Background()) })
	roles, err := filepath.Abs(deployDir + "roles.sql")
	if err != nil {
		t.Fatal(err)
	}
	script := exec.Command("sh", deployDir+"patroni/post_bootstrap.sh")
	script.Env = append(os.Environ(), "PGHOST=127.0.0.1", fmt.Sprintf("PGPORT=%d", cluster.Port()), "PGUSER=postgres",
		"ROLES_SQL="+roles, "BATCHCLAIM_OWNER_PASSWORD=owner-pw", "BATCHCLAIM_APP_PASSWORD=app-pw")
	if out, err := script.CombinedOutput(); err != nil {
		t.Fatalf("post_bootstrap.sh: %v\n%s", err, out)
	}
	roleURL := func(role string) string {
		return fmt.Sprintf("postgres://%s@127.0.0.1:%d/batchclaim?sslmode=disable", role, cluster.Port())
	}
	if out, err := exec.Command(bin, "migrate", "up", "--database-url", roleURL("batchclaim_owner")).CombinedOutput(); err != nil {
		t.Fatalf("migrate up as batchclaim_owner: %v\n%s", err, out)
	}
	app, err := pgx.Connect(ctx, roleURL("batchclaim_app"))
	if err != nil {
		t.Fatal(err)
	}
	defer app.Close(ctx)
	var lockTimeout, idleTimeout, owner string
	if err := app.QueryRow(ctx, `SELECT current_setting('lock_timeout'), current_setting('idle_in_transaction_session_timeout'),
		(SELECT tableowner FROM pg_tables WHERE schemaname = 'batchclaim' AND tablename = 'batches')`).Scan(&lockTimeout, &idleTimeout, &owner); err != nil {
		t.Fatal(err)
	}
	if lockTimeout != "5s" || idleTimeout != "6s" || owner != "batchclaim_owner" {
		t.Errorf("as batchclaim_app: lock_timeout %s, idle_in_transaction_session_timeout %s, batches owned by %s; want 5s, 6s, batchclaim_owner", lockTimeout, idleTimeout, owner)
	}
	if _, err := app.Exec(ctx, `INSERT INTO batchclaim.batches (service_id, batch_id, payload) VALUES ('svc', 'b1', '\x00')`); err != nil {
		t.Errorf("batchclaim_app may not write a row: %v", err)
	}
	for _, sql := range []string{"CREATE TABLE batchclaim.intruder (x int)", "ALTER TABLE batchclaim.batches ADD COLUMN intruder int", "DROP TABLE batchclaim.service_halts"} {
		if _, err := app.Exec(ctx, sql); err == nil {
			t.Errorf("batchclaim_app may %s", sql)
		}
	}
}
