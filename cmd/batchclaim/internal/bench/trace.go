package bench

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/batchclaim/batchclaim/cmd/batchclaim/internal/database"
)

// StmtCounter counts, on the client side, every statement the pools it is attached to send:
// queries, execs, the statements of a pgx.Batch, COPY, and the BEGIN, COMMIT and ROLLBACK
// that pgx sends as statements of their own. pg_stat_statements would count the same on the
// server, but it must be loaded at server start and usually is not. A pool's pings are not
// counted (pgx sends them below the tracer); they carry no work.
type StmtCounter struct {
	mu    sync.Mutex
	stats map[string]*stmtStat
}

// stmtStat is one statement's calls and the time spent in them, from the client's side
// (round trip included).
type stmtStat struct {
	Name      string  `json:"name"`
	Calls     int64   `json:"calls"`
	PerUnit   float64 `json:"per_unit"`
	TotalMs   float64 `json:"total_ms"`
	MeanMs    float64 `json:"mean_ms"`
	txControl bool
}

type traceStartKey struct{}

// NewStmtCounter returns a counter with nothing counted.
func NewStmtCounter() *StmtCounter { return &StmtCounter{stats: map[string]*stmtStat{}} }

// stmtName names a statement: the sqlc query name when there is one ("-- name: X :one"),
// BEGIN/COMMIT/ROLLBACK, else the first 60 characters of its text on one line.
func stmtName(sql string) string {
	s := strings.TrimSpace(sql)
	if rest, ok := strings.CutPrefix(s, "-- name: "); ok {
		if name, _, ok := strings.Cut(rest, " "); ok {
			return name
		}
	}
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 60 {
		s = s[:60]
	}
	return s
}

func isTxControl(name string) bool {
	w, _, _ := strings.Cut(strings.ToLower(name), " ")
	switch w {
	case "begin", "commit", "rollback", "savepoint", "release":
		return true
	}
	return false
}

func (c *StmtCounter) add(sql string, d time.Duration) {
	name := stmtName(sql)
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.stats[name]
	if s == nil {
		s = &stmtStat{Name: name, txControl: isTxControl(name)}
		c.stats[name] = s
	}
	s.Calls++
	s.TotalMs += float64(d.Microseconds()) / 1000
}

func (c *StmtCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	return context.WithValue(ctx, traceStartKey{}, traceStart{sql: d.SQL, at: time.Now()})
}

func (c *StmtCounter) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryEndData) {
	// The SQL is only in the start data; pgx passes the start's context to the end.
	if st, ok := ctx.Value(traceStartKey{}).(traceStart); ok {
		c.add(st.sql, time.Since(st.at))
	}
}

func (c *StmtCounter) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return ctx
}

func (c *StmtCounter) TraceBatchQuery(_ context.Context, _ *pgx.Conn, d pgx.TraceBatchQueryData) {
	c.add(d.SQL, 0)
}

func (c *StmtCounter) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

func (c *StmtCounter) TraceCopyFromStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceCopyFromStartData) context.Context {
	return context.WithValue(ctx, traceStartKey{}, traceStart{sql: "COPY " + d.TableName.Sanitize(), at: time.Now()})
}

func (c *StmtCounter) TraceCopyFromEnd(ctx context.Context, _ *pgx.Conn, _ pgx.TraceCopyFromEndData) {
	if st, ok := ctx.Value(traceStartKey{}).(traceStart); ok {
		c.add(st.sql, time.Since(st.at))
	}
}

type traceStart struct {
	sql string
	at  time.Time
}

// Totals returns the statements counted, those of them that were transaction control, and
// every statement with its share per unit of work (job or batch), most called first.
func (c *StmtCounter) Totals(units int) (all, txControl int64, list []stmtStat) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, s := range c.stats {
		all += s.Calls
		if s.txControl {
			txControl += s.Calls
		}
		cp := *s
		cp.PerUnit = round3(float64(s.Calls) / float64(max(units, 1)))
		cp.MeanMs = round3(s.TotalMs / float64(s.Calls))
		cp.TotalMs = round3(s.TotalMs)
		list = append(list, cp)
	}
	slices.SortFunc(list, func(a, b stmtStat) int {
		if a.Calls != b.Calls {
			return int(b.Calls - a.Calls)
		}
		return strings.Compare(a.Name, b.Name)
	})
	return all, txControl, list
}

// Calls is how many statements whose name contains part the counter saw.
func (c *StmtCounter) Calls(part string) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	var n int64
	for name, s := range c.stats {
		if strings.Contains(name, part) {
			n += s.Calls
		}
	}
	return n
}

// openCountedPool is database.Open with every statement of the pool counted by c.
func openCountedPool(ctx context.Context, dbURL string, maxConns int32, c *StmtCounter, options ...func(*pgxpool.Config)) (*pgxpool.Pool, error) {
	return database.Open(ctx, dbURL, maxConns, append([]func(*pgxpool.Config){func(cfg *pgxpool.Config) { cfg.ConnConfig.Tracer = c }}, options...)...)
}

func round3(f float64) float64 { return float64(int64(f*1000+0.5)) / 1000 }
