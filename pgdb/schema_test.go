package pgdb

import (
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
)

func TestRewriterMovesOnlyTheSchemaPrefix(t *testing.T) {
	r := rewriterFor("jobs")
	for _, tt := range []struct{ in, want string }{
		{"SELECT * FROM batchclaim.batches b JOIN batchclaim.instances i ON true",
			`SELECT * FROM "jobs".batches b JOIN "jobs".instances i ON true`},
		{"SELECT nextval('batchclaim.service_id_claim_epochs')", `SELECT nextval('"jobs".service_id_claim_epochs')`},
		{"SELECT batchclaim.batchclaim_wake($1)", `SELECT "jobs".batchclaim_wake($1)`},
		{"(batchclaim.batches)", `("jobs".batches)`},
		// Not the schema: a longer name, a column of a table called batchclaim, a channel.
		{"SELECT x FROM mybatchclaim.t, t.batchclaim.c", "SELECT x FROM mybatchclaim.t, t.batchclaim.c"},
		{"SELECT pg_notify('batchclaim_free', '')", "SELECT pg_notify('batchclaim_free', '')"},
		{"SELECT 1", "SELECT 1"},
	} {
		if got := r.sql(tt.in); got != tt.want {
			t.Errorf("%q:\n got %q\nwant %q", tt.in, got, tt.want)
		}
		if got := r.sql(tt.in); got != tt.want { // from the cache
			t.Errorf("%q again: got %q", tt.in, got)
		}
	}
}

func TestInSchemaWrapsOnlyForAnotherSchema(t *testing.T) {
	var b Beginner // nil is enough: nothing is run
	if InSchema(b, "") != nil || InSchema(b, SchemaDefault) != nil {
		t.Fatal("the default schema must leave the pool as it is")
	}
	w := InSchema(b, "jobs")
	if w == nil || SchemaOf(w) != "jobs" || Unwrap(w) != nil {
		t.Fatalf("InSchema(jobs): %v, schema %q, unwrapped %v", w, SchemaOf(w), Unwrap(w))
	}
	if SchemaOf(b) != SchemaDefault || SchemaOf(QuerierInSchema(nil, "other")) != "other" {
		t.Fatal("SchemaOf")
	}
}

func TestValidateSchema(t *testing.T) {
	for name, ok := range map[string]bool{
		"batchclaim": true, "jobs_2": true, "_x": true,
		"": false, "public": false, "Jobs": false, "2jobs": false, "a-b": false, `a"b`: false,
		"pg_temp": false, "information_schema": false, strings.Repeat("a", 64): false,
	} {
		if err := ValidateSchema(name); (err == nil) != ok {
			t.Errorf("ValidateSchema(%q) = %v, want ok=%v", name, err, ok)
		}
	}
}

func TestOpen(t *testing.T) {
	if _, err := Open(nil, ""); err == nil {
		t.Fatal("Open(nil) must fail")
	}
	if (DB{}).Err() == nil {
		t.Fatal("the zero DB must say it is not usable")
	}
	pool := new(pgxpool.Pool) // nothing is run
	if _, err := Open(pool, "public"); err == nil {
		t.Fatal("Open must check the schema's name")
	}
	d, err := Open(pool, "")
	if err != nil || d.Schema() != SchemaDefault || d.Pool() != pool || d.Err() != nil || SchemaOf(d) != SchemaDefault {
		t.Fatalf("Open(pool, \"\") = %+v, %v", d, err)
	}
	d, err = Open(pool, "jobs")
	if err != nil || d.Schema() != "jobs" || SchemaOf(d) != "jobs" || SchemaOf(d.In(nil)) != "jobs" || Unwrap(d) != Querier(pool) {
		t.Fatalf("Open(pool, jobs) = %+v, %v", d, err)
	}
	other := new(pgxpool.Pool)
	if w := d.WithPool(other); w.Pool() != other || w.Schema() != "jobs" || d.Pool() != pool {
		t.Fatal("WithPool must keep the schema and leave d as it was")
	}
}
