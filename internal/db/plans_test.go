package db_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/batchclaim/batchclaim/internal/db"
	"github.com/batchclaim/batchclaim/testkit/dbtest"
)

// The statements that record outcomes (and a group of successes) and a poll's answers run many times a second with
// arrays of varying length. Postgres plans a prepared statement for its parameters the first
// five times, then keeps one generic plan unless that plan looks dearer than the custom ones
// did. A switch that a custom plan folds away (track_idle off removes a probe of the batches
// table per row) made every custom plan look cheaper, so each execution was planned anew: 9 %
// of the server's time on the job path (docs/performance.md). Each switch is read from a
// materialized row instead, so the plans cost the same and the generic one is kept.
func TestSetWritesKeepAGenericPlan(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	// Tables the size of a busy job runner's: 1,000 service_ids with 50 batches each.
	conn := connectWithJobs(t, dbtest.NewDB(t), 50)
	const rows = 150 // about what one group write carries on the job path
	q := db.New()
	claimant, nonce := uuid.New(), uuid.New()
	var out db.BatchesRecordOutcomesParams
	var st db.BatchesRecordStatusesParams
	for i := range rows {
		svc := fmt.Sprintf("key-%d", i)
		out.Seqs = append(out.Seqs, int64(i+1))
		out.ServiceIds = append(out.ServiceIds, svc)
		out.Epochs = append(out.Epochs, 1)
		out.Attempts = append(out.Attempts, 1)
		out.NewStates = append(out.NewStates, "COMMITTED")
		out.DltStatuses = append(out.DltStatuses, "COMMITTED")
		out.RetryAfterMs = append(out.RetryAfterMs, 0)
		out.LastErrors = append(out.LastErrors, "")
		out.InvalidDetails = append(out.InvalidDetails, "")
		out.HttpStatuses = append(out.HttpStatuses, 200)
		out.LatenciesMs = append(out.LatenciesMs, 1)
		out.Outcomes = append(out.Outcomes, "done")
		out.Chain = append(out.Chain, true)
		out.ChainMaxBytes = append(out.ChainMaxBytes, -1)
		st.Seqs = append(st.Seqs, int64(i+1))
		st.ServiceIds = append(st.ServiceIds, svc)
		st.Epochs = append(st.Epochs, 1)
		st.Attempts = append(st.Attempts, 1)
		st.FromStates = append(st.FromStates, "PENDING")
		st.NewStates = append(st.NewStates, "COMMITTED")
		st.DltStatuses = append(st.DltStatuses, "COMMITTED")
		st.Answers = append(st.Answers, true)
		st.InvalidDetails = append(st.InvalidDetails, "")
		st.Details = append(st.Details, "")
	}
	out.Claimant, out.Nonce = claimant, nonce
	st.Claimant, st.Nonce = claimant, nonce
	commits := db.BatchesRecordCommitsParams{Seqs: out.Seqs, ServiceIds: out.ServiceIds, Epochs: out.Epochs,
		Attempts: out.Attempts, RetryAfterMs: out.RetryAfterMs, HttpStatuses: out.HttpStatuses,
		LatenciesMs: out.LatenciesMs, Chain: out.Chain, ChainMaxBytes: out.ChainMaxBytes, Claimant: claimant, Nonce: nonce}
	// The switches as a node sets them by default; no claim is held, so nothing is written.
	for range 8 {
		if _, err := q.BatchesRecordOutcomes(ctx, conn, out); err != nil {
			t.Fatal(err)
		}
		if _, err := q.BatchesRecordStatuses(ctx, conn, st); err != nil {
			t.Fatal(err)
		}
		if _, err := q.BatchesRecordCommits(ctx, conn, commits); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"BatchesRecordOutcomes", "BatchesRecordStatuses", "BatchesRecordCommits"} {
		if generic, custom := plans(t, conn, name); generic == 0 {
			t.Errorf("%s: %d custom plans and no generic one after 8 executions: Postgres plans it at every execution", name, custom)
		}
	}
}

// Between a job's enqueue and its start at a steady arrival rate, each statement carries one
// service_id: the enqueue, the wake-up, the read of the head, the in-flight mark and the
// outcome. A statement whose plan for a one-element array looks cheaper than its generic plan
// is planned at every call: the head read cost about three times as much that way. Each must
// keep one generic plan for one-element calls, on tables never analyzed (as in a new
// deployment, or with autovacuum off) and once analyzed.
func TestOneKeyCallsKeepAGenericPlan(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	url := dbtest.NewDB(t)
	setup := connectWithJobs(t, url, 10)
	q := db.New()
	claimant, nonce := uuid.New(), uuid.New()
	call := 0
	// Eight one-key calls of each statement on a new connection (so planned afresh), then
	// how each was planned.
	phase := func(when string) {
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(context.Background())
		for range 8 {
			call++
			svc := fmt.Sprintf("key-%d", call%1000)
			if _, err := q.BatchInsert(ctx, conn, db.BatchInsertParams{ServiceID: svc, BatchID: fmt.Sprintf("new-%d", call),
				Payload: []byte("{}"), WakeAfterCommit: true}); err != nil {
				t.Fatal(err)
			}
			if err := q.BatchesWake(ctx, conn, []string{svc}); err != nil {
				t.Fatal(err)
			}
			// No claim is held by claimant: the marks and writes are fenced off and write nothing.
			if _, err := q.BatchesTakeHeads(ctx, conn, db.BatchesTakeHeadsParams{ServiceIds: []string{svc}, Floors: []int64{0},
				Epochs: []int64{1}, MaxJobs: 1, MaxBytes: 1 << 20, AnySize: true, Claimant: claimant, Nonce: nonce}); err != nil {
				t.Fatal(err)
			}
			if _, err := q.BatchesMarkInflight(ctx, conn, db.BatchesMarkInflightParams{Seqs: []int64{1}, ServiceIds: []string{svc},
				Epochs: []int64{1}, FromStates: []string{"NEW"}, Reasons: []string{"first"}, Claimant: claimant, Nonce: nonce}); err != nil {
				t.Fatal(err)
			}
			if _, err := q.BatchesRecordCommits(ctx, conn, db.BatchesRecordCommitsParams{Seqs: []int64{1}, ServiceIds: []string{svc},
				Epochs: []int64{1}, Attempts: []int32{1}, RetryAfterMs: []int64{0}, HttpStatuses: []int32{200},
				LatenciesMs: []float64{1}, Chain: []bool{true}, ChainMaxBytes: []int64{-1}, Outputs: []string{""},
				Claimant: claimant, Nonce: nonce}); err != nil {
				t.Fatal(err)
			}
			if _, err := q.BatchesRecordStatuses(ctx, conn, db.BatchesRecordStatusesParams{Seqs: []int64{1}, ServiceIds: []string{svc},
				Epochs: []int64{1}, Attempts: []int32{1}, FromStates: []string{"PENDING"}, NewStates: []string{"COMMITTED"},
				DltStatuses: []string{"COMMITTED"}, Answers: []bool{true}, InvalidDetails: []string{""}, Details: []string{""},
				Claimant: claimant, Nonce: nonce}); err != nil {
				t.Fatal(err)
			}
			if _, err := q.BatchesRecordOutcomes(ctx, conn, db.BatchesRecordOutcomesParams{Seqs: []int64{1}, ServiceIds: []string{svc},
				Epochs: []int64{1}, Attempts: []int32{1}, NewStates: []string{"DELAYED"}, DltStatuses: []string{""},
				RetryAfterMs: []int64{1000}, LastErrors: []string{"e"}, InvalidDetails: []string{""}, HttpStatuses: []int32{500},
				LatenciesMs: []float64{1}, Outcomes: []string{"retry"}, Chain: []bool{false}, ChainMaxBytes: []int64{-1},
				Outputs: []string{""}, Claimant: claimant, Nonce: nonce}); err != nil {
				t.Fatal(err)
			}
		}
		for _, name := range []string{"BatchInsert", "BatchesWake", "BatchesTakeHeads", "BatchesMarkInflight", "BatchesRecordCommits", "BatchesRecordOutcomes", "BatchesRecordStatuses"} {
			if generic, custom := plans(t, conn, name); generic == 0 {
				t.Errorf("%s, %s: %d custom plans and no generic one for one-key calls: Postgres plans it at every call", name, when, custom)
			}
		}
		// The generic plans probe batches and claims by key: neither table is read whole per call
		// (service_halts, usually empty, may be), and no claim is found through the claimant
		// index, which would read every claim the instance holds. The analyzed phase is the
		// case of statistics taken while every claim was free. EXPLAIN shows the generic plan
		// whatever the arguments: all NULL.
		for _, name := range []string{"BatchesTakeHeads", "BatchesWake", "BatchesMarkInflight", "BatchesRecordCommits",
			"BatchesRecordOutcomes", "BatchesRecordStatuses"} {
			var stmt string
			var params int
			if err := conn.QueryRow(ctx, `SELECT name, cardinality(parameter_types) FROM pg_prepared_statements
				WHERE statement LIKE '-- name: ' || $1 || ' %'`, name).Scan(&stmt, &params); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if _, err := conn.Exec(ctx, `SET plan_cache_mode = force_generic_plan`); err != nil {
				t.Fatal(err)
			}
			rows, err := conn.Query(ctx, `EXPLAIN EXECUTE `+stmt+`(`+strings.TrimSuffix(strings.Repeat("NULL, ", params), ", ")+`)`,
				pgx.QueryExecModeSimpleProtocol)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			for _, l := range lines {
				if strings.Contains(l, "Seq Scan on batches") || strings.Contains(l, "Seq Scan on service_id_claims") ||
					strings.Contains(l, "service_id_claims_claimant_idx") {
					t.Errorf("%s, %s: the generic plan reads a whole table, or every claim of the claimant:\n%s", name, when, strings.Join(lines, "\n"))
					break
				}
			}
			if _, err := conn.Exec(ctx, `RESET plan_cache_mode`); err != nil {
				t.Fatal(err)
			}
		}
	}
	phase("tables never analyzed")
	if _, err := setup.Exec(ctx, `ANALYZE batchclaim.batches, batchclaim.service_id_claims, batchclaim.service_halts`); err != nil {
		t.Fatal(err)
	}
	phase("tables analyzed")
}

// connectWithJobs connects to url, stores perKey batches for each of 1,000 service_ids
// (key-0 to key-999) with their claim rows, and closes the connection when t ends.
func connectWithJobs(t *testing.T, url string, perKey int) *pgx.Conn {
	t.Helper()
	ctx := t.Context()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	if _, err := conn.Exec(ctx, `INSERT INTO batchclaim.service_id_claims (service_id)
		SELECT 'key-' || i FROM generate_series(0, 999) i`); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `INSERT INTO batchclaim.batches (service_id, batch_id, payload)
		SELECT 'key-' || (i % 1000), 'job-' || i, '\x7b7d' FROM generate_series(1, $1 * 1000) i`, perKey); err != nil {
		t.Fatal(err)
	}
	return conn
}

// holdClaims registers an instance whose lease runs for an hour and gives it, at epoch 1,
// the claims of the service_ids LIKE like.
func holdClaims(t *testing.T, conn *pgx.Conn, like string) (claimant, nonce uuid.UUID) {
	t.Helper()
	ctx := t.Context()
	claimant, nonce = uuid.New(), uuid.New()
	if _, err := conn.Exec(ctx, `INSERT INTO batchclaim.instances (id, name, expiry_1, expiry_2, nonce)
		VALUES ($1, 'test', now() + interval '1 hour', now() + interval '2 hours', $2)`, claimant, nonce); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `UPDATE batchclaim.service_id_claims SET claimant = $1, epoch = 1 WHERE service_id LIKE $2`, claimant, like); err != nil {
		t.Fatal(err)
	}
	return claimant, nonce
}

// Every instance runs the claim cycle's survey every renew interval. With idle rows kept
// (idle_ms 0, the default), a custom plan folded the count of idle claims away and looked
// cheaper than the generic plan, so the survey was planned at every cycle (0.5 ms of the
// server's 1.9 ms for an instance holding 2,000 claims). It must keep one generic plan.
func TestClaimsSurveyKeepsAGenericPlan(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	url := dbtest.NewDB(t)
	setup := connectWithJobs(t, url, 1)
	claimant, nonce := holdClaims(t, setup, "%")
	for _, when := range []string{"tables never analyzed", "tables analyzed"} {
		if when == "tables analyzed" {
			if _, err := setup.Exec(ctx, `ANALYZE batchclaim.service_id_claims, batchclaim.instances, batchclaim.batches`); err != nil {
				t.Fatal(err)
			}
		}
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		for range 8 {
			s, err := db.New().ClaimsSurvey(ctx, conn, db.ClaimsSurveyParams{Claimant: claimant, Nonce: nonce, CountAll: 1, FreeCap: 1})
			if err != nil {
				t.Fatal(err)
			}
			if s.Held != 1000 || !s.Owned {
				t.Fatalf("the survey saw %d claims held (owned %t), want 1000", s.Held, s.Owned)
			}
		}
		generic, custom := plans(t, conn, "ClaimsSurvey")
		conn.Close(context.Background())
		if generic == 0 {
			t.Errorf("%s: %d custom plans and no generic one after 8 surveys: Postgres plans it at every cycle", when, custom)
		}
	}
}

// plans returns how many generic and custom plans conn made of the statement named name.
func plans(t *testing.T, conn *pgx.Conn, name string) (generic, custom int64) {
	t.Helper()
	if err := conn.QueryRow(t.Context(), `SELECT generic_plans, custom_plans FROM pg_prepared_statements
		WHERE statement LIKE '-- name: ' || $1 || ' %'`, name).Scan(&generic, &custom); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return generic, custom
}

// The planner cannot know how many heads BatchesTakeHeads will want to mark, and takes it for
// one; a step that joined two of its CTEs then scanned one of them once for each row of the
// other, which cost 60 ms for 256 heads. Each CTE must be scanned once in each place it is
// read, however many heads a call marks, in the generic plan and in a custom one.
func TestTakeHeadsScansEachCTEOnce(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	conn := connectWithJobs(t, dbtest.NewDB(t), 2)
	claimant, nonce := holdClaims(t, conn, "%")
	var ids []string
	var floors, epochs []int64
	for i := range 500 {
		ids = append(ids, fmt.Sprintf("key-%d", i))
		floors, epochs = append(floors, 0), append(epochs, 1)
	}
	// The statement's text as the generated code sends it, run under EXPLAIN ANALYZE in a
	// transaction that is rolled back.
	args := db.BatchesTakeHeadsParams{ServiceIds: ids[:1], Floors: floors[:1], Epochs: []int64{2}, MaxJobs: 1,
		MaxBytes: 1 << 20, Claimant: claimant, Nonce: nonce} // epoch 2: fenced off, nothing written
	text, _ := captured(t, conn, "BatchesTakeHeads", func(tx pgx.Tx) error {
		_, err := db.New().BatchesTakeHeads(ctx, tx, args)
		return err
	})
	for _, mode := range []string{"force_generic_plan", "force_custom_plan"} {
		marked, loops, plan := explainOnce(t, conn, text, mode, "$1, $2, $3, false, 256, 1048576, true, $4, $5, NULL",
			ids, floors, epochs, claimant.String(), nonce.String())
		if marked != 256 || loops != 0 {
			t.Errorf("%s: marked %d heads (want 256), %d CTE scans repeated per row:\n%s", mode, marked, loops, plan)
		}
		// The mark finds each head by the tuple id its probe read, not by another descent of
		// the primary key; with no service_id halted, no service_id's halt is looked up.
		if s := scans(t, plan); s["index batches_pkey"] != 0 || s["tid batches"] == 0 || s["index service_halts_pkey"] != 0 {
			t.Errorf("%s: scans %v, want no batches_pkey nor service_halts_pkey, the marks by tid:\n%s", mode, s, plan)
		}
	}
}

// explainOnce runs the statement text under EXPLAIN ANALYZE with the plan cache mode given,
// in a transaction it rolls back, with params (the EXECUTE's parameter list) bound to args
// through the simple protocol. It returns the rows its data-modifying steps wrote, the CTE
// scans that ran more than once, and the plan.
func explainOnce(t *testing.T, conn *pgx.Conn, text, mode, params string, args ...any) (modified, loops int, plan []byte) {
	t.Helper()
	ctx := t.Context()
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background()) //nolint:errcheck
	if _, err := tx.Exec(ctx, `SET LOCAL plan_cache_mode = `+mode); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `PREPARE explained AS `+text); err != nil {
		t.Fatal(err)
	}
	defer conn.Exec(context.Background(), `DEALLOCATE explained`) //nolint:errcheck // a prepared statement outlives its transaction
	if err := tx.QueryRow(ctx, `EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE explained(`+params+`)`,
		append([]any{pgx.QueryExecModeSimpleProtocol}, args...)...).Scan(&plan); err != nil {
		t.Fatal(err)
	}
	walkPlan(t, plan, func(n planNode) {
		if n.Type == "ModifyTable" {
			modified += n.Rows
		}
		if n.Type == "CTE Scan" && n.Loops > 1 {
			loops++
		}
	})
	return modified, loops, plan
}

// walkPlan calls visit with every node of plan (EXPLAIN (FORMAT JSON)), parents first.
func walkPlan(t *testing.T, plan []byte, visit func(planNode)) {
	t.Helper()
	var root []struct{ Plan planNode }
	if err := json.Unmarshal(plan, &root); err != nil || len(root) != 1 {
		t.Fatalf("plan %s: %v", plan, err)
	}
	var walk func(n planNode)
	walk = func(n planNode) {
		visit(n)
		for _, c := range n.Plans {
			walk(c)
		}
	}
	walk(root[0].Plan)
}

// planNode is a node of EXPLAIN (ANALYZE, FORMAT JSON).
type planNode struct {
	Type     string     `json:"Node Type"`
	Relation string     `json:"Relation Name"`
	Index    string     `json:"Index Name"`
	Rows     int        `json:"Actual Rows"`
	Loops    int        `json:"Actual Loops"`
	Plans    []planNode `json:"Plans"`
}

// scans returns how many times the plan (EXPLAIN (ANALYZE, FORMAT JSON)) read each index
// ("index batches_pkey") and each table by tuple id ("tid batches"): the loops of its scans.
func scans(t *testing.T, plan []byte) map[string]int {
	t.Helper()
	out := map[string]int{}
	walkPlan(t, plan, func(n planNode) {
		switch {
		case n.Index != "":
			out["index "+n.Index] += n.Loops
		case n.Type == "Tid Scan":
			out["tid "+n.Relation] += n.Loops
		}
	})
	return out
}

// statementText keeps the text and arguments of the last statement named name.
type statementText struct {
	name string
	sql  string
	args []any
}

func (s *statementText) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	if strings.HasPrefix(d.SQL, "-- name: "+s.name+" ") {
		s.sql, s.args = d.SQL, d.Args
	}
	return ctx
}

func (s *statementText) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// The statements that record outcomes chain each finished job's next batch and say whether
// its service_id is left without work, through CTEs the planner takes for one row each. A
// group of 256 outcomes must scan each CTE once in each place it is read, in the generic plan
// and in a custom one (a CTE scanned once per row of another cost tens of milliseconds).
func TestOutcomeWritesScanEachCTEOnce(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	conn := connectWithJobs(t, dbtest.NewDB(t), 2)
	claimant, nonce := holdClaims(t, conn, "%")
	const n = 256
	var p db.BatchesRecordOutcomesParams
	if err := conn.QueryRow(ctx, `WITH heads AS (
			UPDATE batchclaim.batches SET state = 'INFLIGHT', claimant = $1, claim_epoch = 1, attempts = 1, submitted_at = now()
			WHERE seq IN (SELECT seq FROM batchclaim.batches ORDER BY seq LIMIT $2) RETURNING seq, service_id)
		SELECT array_agg(seq ORDER BY service_id), array_agg(service_id ORDER BY service_id) FROM heads`, claimant, n).Scan(&p.Seqs, &p.ServiceIds); err != nil {
		t.Fatal(err)
	}
	for range n {
		p.Epochs, p.Attempts, p.RetryAfterMs = append(p.Epochs, 1), append(p.Attempts, 1), append(p.RetryAfterMs, 0)
		p.HttpStatuses, p.LatenciesMs = append(p.HttpStatuses, 200), append(p.LatenciesMs, 1)
		p.Chain, p.ChainMaxBytes, p.Outputs = append(p.Chain, true), append(p.ChainMaxBytes, -1), append(p.Outputs, "")
		p.NewStates, p.DltStatuses, p.Outcomes = append(p.NewStates, "COMMITTED"), append(p.DltStatuses, "COMMITTED"), append(p.Outcomes, "done")
		p.LastErrors, p.InvalidDetails = append(p.LastErrors, ""), append(p.InvalidDetails, "")
	}
	p.Claimant, p.Nonce, p.TrackIdle = claimant, nonce, true
	for _, name := range []string{"BatchesRecordCommits", "BatchesRecordOutcomes"} {
		text, args := statementOf(t, conn, name, p)
		params := make([]string, len(args))
		for i := range args {
			params[i] = fmt.Sprintf("$%d", i+1)
		}
		for _, mode := range []string{"force_generic_plan", "force_custom_plan"} {
			written, loops, plan := explainOnce(t, conn, text, mode, strings.Join(params, ", "), args...)
			// 256 outcomes and 256 next batches marked.
			if written != 2*n || loops != 0 {
				t.Errorf("%s, %s: wrote %d rows (want %d), %d CTE scans repeated per row:\n%s", name, mode, written, 2*n, loops, plan)
			}
			// Each outcome's batch is found by its seq; the next batch by the tuple id the probe
			// of its service_id read, not by another descent of the primary key; with no
			// service_id halted, no service_id's halt is looked up.
			if s := scans(t, plan); s["index batches_pkey"] > n || s["tid batches"] == 0 || s["index service_halts_pkey"] != 0 {
				t.Errorf("%s, %s: scans %v, want batches_pkey at most %d times, no service_halts_pkey, the marks by tid:\n%s", name, mode, s, n, plan)
			}
		}
	}
}

// statementOf returns the text and arguments the generated code sends for the outcome
// statement named name with p.
func statementOf(t *testing.T, conn *pgx.Conn, name string, p db.BatchesRecordOutcomesParams) (string, []any) {
	t.Helper()
	ctx := t.Context()
	q := db.New()
	return captured(t, conn, name, func(tx pgx.Tx) (err error) {
		switch name {
		case "BatchesRecordCommits":
			_, err = q.BatchesRecordCommits(ctx, tx, db.BatchesRecordCommitsParams{Seqs: p.Seqs, ServiceIds: p.ServiceIds, Epochs: p.Epochs,
				Attempts: p.Attempts, RetryAfterMs: p.RetryAfterMs, HttpStatuses: p.HttpStatuses, LatenciesMs: p.LatenciesMs, Chain: p.Chain,
				ChainMaxBytes: p.ChainMaxBytes, Outputs: p.Outputs, Claimant: p.Claimant, Nonce: p.Nonce})
		default:
			_, err = q.BatchesRecordOutcomes(ctx, tx, p)
		}
		return err
	})
}

// captured returns the text and arguments of the statement named name that run sends, on a
// connection like conn's, in a transaction that is rolled back.
func captured(t *testing.T, conn *pgx.Conn, name string, run func(pgx.Tx) error) (string, []any) {
	t.Helper()
	ctx := t.Context()
	seen := &statementText{name: name}
	cfg := conn.Config().Copy()
	cfg.Tracer = seen
	c2, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close(context.Background())
	tx, err := c2.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background()) //nolint:errcheck
	if err := run(tx); err != nil || seen.sql == "" {
		t.Fatalf("%s: no statement seen: %v", name, err)
	}
	return seen.sql, seen.args
}
