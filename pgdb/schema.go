package pgdb

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// SchemaDefault is the Postgres schema that holds batchclaim's tables, sequences, views and
// functions unless configured otherwise. Every statement the library runs names its objects
// with this schema (batchclaim.batches), so that it works whatever the connection's
// search_path, behind a pooler in transaction mode and inside an application's own
// transaction alike.
const SchemaDefault = "batchclaim"

var schemaName = regexp.MustCompile(`^[a-z_][a-z0-9_]*$`)

// ValidateSchema reports whether name can be the schema: lower-case letters, digits and
// underscores, not starting with a digit, at most 63 bytes, not public (where applications
// keep their own tables, and golang-migrate its schema_migrations) and not a pg_ schema.
func ValidateSchema(name string) error {
	switch {
	case !schemaName.MatchString(name) || len(name) > 63:
		return fmt.Errorf("schema %q: use lower-case letters, digits and underscores (at most 63, not starting with a digit)", name)
	case name == "public":
		return fmt.Errorf("schema %q: batchclaim's tables need a schema of their own, apart from the application's (the default is %s)", name, SchemaDefault)
	case strings.HasPrefix(name, "pg_") || name == "information_schema":
		return fmt.Errorf("schema %q is reserved by Postgres", name)
	}
	return nil
}

// InSchema returns b with every statement's objects moved from SchemaDefault to schema: the
// statements it runs, and those of the transactions it starts, name schema where they named
// batchclaim. With SchemaDefault (or "") it returns b itself. The rewritten text of each
// statement is computed once. SchemaOf tells the schema back and Unwrap gives b.
func InSchema(b Beginner, schema string) Beginner {
	if schema == "" || schema == SchemaDefault {
		return b
	}
	return &schemaBeginner{schemaQuerier{q: b, r: rewriterFor(schema)}, b}
}

// QuerierInSchema is InSchema for a Querier that starts no transactions, such as a pgx.Tx.
func QuerierInSchema(q Querier, schema string) Querier {
	if schema == "" || schema == SchemaDefault {
		return q
	}
	return &schemaQuerier{q: q, r: rewriterFor(schema)}
}

// SchemaOf is the schema q's statements run in: the one InSchema gave it, or SchemaDefault.
func SchemaOf(q any) string {
	if s, ok := q.(interface{ schema() string }); ok {
		return s.schema()
	}
	return SchemaDefault
}

// Unwrap returns what InSchema or QuerierInSchema wrapped (q itself otherwise), for the
// methods of a *pgxpool.Pool the wrapper does not carry, such as Acquire and Config.
func Unwrap(q any) any {
	if w, ok := q.(interface{ unwrap() Querier }); ok {
		return w.unwrap()
	}
	return q
}

// rewriter replaces the default schema in statement texts, remembering its answers.
type rewriter struct {
	name   string
	prefix string // quoted schema and the dot
	done   sync.Map
}

var (
	rewritersMu sync.Mutex
	rewriters   = map[string]*rewriter{}
)

// rewriterFor shares one rewriter, and so one cache, per schema across the process.
func rewriterFor(schema string) *rewriter {
	rewritersMu.Lock()
	defer rewritersMu.Unlock()
	r := rewriters[schema]
	if r == nil {
		r = &rewriter{name: schema, prefix: pgx.Identifier{schema}.Sanitize() + "."}
		rewriters[schema] = r
	}
	return r
}

// qualified matches the default schema's name followed by a dot where it starts a word.
var qualified = regexp.MustCompile(`(^|[^A-Za-z0-9_$."])` + SchemaDefault + `\.`)

func (r *rewriter) sql(s string) string {
	if v, ok := r.done.Load(s); ok {
		return v.(string)
	}
	out := s
	if strings.Contains(s, SchemaDefault+".") {
		out = qualified.ReplaceAllString(s, "${1}"+strings.ReplaceAll(r.prefix, "$", "$$"))
	}
	r.done.Store(s, out)
	return out
}

type schemaQuerier struct {
	q Querier
	r *rewriter
}

func (s *schemaQuerier) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	return s.q.Exec(ctx, s.r.sql(sql), args...)
}

func (s *schemaQuerier) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	return s.q.Query(ctx, s.r.sql(sql), args...)
}

func (s *schemaQuerier) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return s.q.QueryRow(ctx, s.r.sql(sql), args...)
}

func (s *schemaQuerier) schema() string  { return s.r.name }
func (s *schemaQuerier) unwrap() Querier { return s.q }

type schemaBeginner struct {
	schemaQuerier
	b Beginner
}

func (s *schemaBeginner) BeginTx(ctx context.Context, opts pgx.TxOptions) (pgx.Tx, error) {
	tx, err := s.b.BeginTx(ctx, opts)
	if err != nil {
		return nil, err
	}
	return &schemaTx{tx, s.r}, nil
}

// schemaTx is a pgx.Tx whose statements are rewritten; nested transactions are too.
type schemaTx struct {
	pgx.Tx
	r *rewriter
}

func (t *schemaTx) Begin(ctx context.Context) (pgx.Tx, error) {
	tx, err := t.Tx.Begin(ctx)
	if err != nil {
		return nil, err
	}
	return &schemaTx{tx, t.r}, nil
}

func (t *schemaTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	return t.Tx.Exec(ctx, t.r.sql(sql), args...)
}

func (t *schemaTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	return t.Tx.Query(ctx, t.r.sql(sql), args...)
}

func (t *schemaTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return t.Tx.QueryRow(ctx, t.r.sql(sql), args...)
}

func (t *schemaTx) Prepare(ctx context.Context, name, sql string) (*pgconn.StatementDescription, error) {
	return t.Tx.Prepare(ctx, name, t.r.sql(sql))
}

func (t *schemaTx) schema() string  { return t.r.name }
func (t *schemaTx) unwrap() Querier { return t.Tx }
