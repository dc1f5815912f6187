package db_test

import (
	"context"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/batchclaim/batchclaim/testkit/dbtest"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// Every generated statement names the schema of each table, view, sequence and function it
// uses: Postgres prepares each on a connection whose search_path holds nothing of
// batchclaim's, as an application's connection or a pooled one may.
func TestStatementsNameTheirSchema(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	cfg, err := pgx.ParseConfig(dbtest.NewDB(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg.RuntimeParams["search_path"] = "pg_catalog"
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	files, err := filepath.Glob("*.sql.go")
	if err != nil || len(files) == 0 {
		t.Fatal("no generated files", err)
	}
	n := 0
	for _, name := range files {
		f, err := parser.ParseFile(token.NewFileSet(), name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(node ast.Node) bool {
			spec, ok := node.(*ast.ValueSpec)
			if !ok || len(spec.Values) != 1 {
				return true
			}
			lit, ok := spec.Values[0].(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			sql, err := strconv.Unquote(lit.Value)
			if err != nil || !strings.HasPrefix(sql, "-- name: ") {
				return true
			}
			n++
			if _, err := conn.Prepare(ctx, spec.Names[0].Name, sql); err != nil {
				t.Errorf("%s (%s): %v", spec.Names[0].Name, name, err)
			}
			return true
		})
	}
	if n < 50 {
		t.Fatalf("found %d statements, expected every query of queries/", n)
	}
}
