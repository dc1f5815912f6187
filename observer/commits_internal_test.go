package observer

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/batchclaim/batchclaim"
	"github.com/batchclaim/batchclaim/claims"
	"github.com/batchclaim/batchclaim/ingest"
	"github.com/batchclaim/batchclaim/internal/db"
	"github.com/batchclaim/batchclaim/pgdb"
	"github.com/batchclaim/batchclaim/testkit/dbtest"
)

// A group of successes is written by BatchesRecordCommits, any other group by
// BatchesRecordOutcomes. Two twin sets of service_ids, the same outcomes recorded through
// each statement, must come out the same: the rows returned (fenced, recorded, the chained
// next batch) and every column of the batch rows, the attempt log, the halts and the claims.
// The cases cover each branch of the statements: a next batch chained, none left, one not yet
// due, one too big to chain, a halted service_id, chaining not asked for, a stale epoch, and
// an outcome of an earlier attempt.
func TestCommitsWriteWhatOutcomesWrite(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := dbtest.NewPool(t)
	type key struct {
		name       string
		next       []byte // payload of a second batch; nil: none
		later      bool   // the second batch waits for its run-at time
		chain      bool
		maxBytes   int64
		stale      bool // the claim is taken over after the mark
		oldAttempt bool // the outcome is of an earlier attempt
		halted     bool
	}
	keys := []key{
		{name: "chained", next: []byte("n"), chain: true, maxBytes: -1},
		{name: "last", chain: true, maxBytes: -1},
		{name: "later", next: []byte("n"), later: true, chain: true, maxBytes: -1},
		{name: "big", next: []byte("0123456789"), chain: true, maxBytes: 4},
		{name: "halted", next: []byte("n"), chain: true, maxBytes: -1, halted: true},
		{name: "unchained", next: []byte("n"), maxBytes: -1},
		{name: "stale", next: []byte("n"), chain: true, maxBytes: -1, stale: true},
		{name: "old", next: []byte("n"), chain: true, maxBytes: -1, oldAttempt: true},
	}
	twins := []string{"general", "commits"}
	first := map[string]int64{}
	for _, twin := range twins {
		for _, k := range keys {
			svc := twin + "-" + k.name
			s, err := ingest.Enqueue(ctx, pool, svc, "b1", []byte("p"))
			if err != nil {
				t.Fatal(err)
			}
			first[svc] = s.Seq
			if k.next != nil {
				var opts []ingest.EnqueueOption
				if k.later {
					opts = append(opts, ingest.RunAt(time.Now().Add(time.Hour)))
				}
				if _, err := ingest.Enqueue(ctx, pool, svc, "b2", k.next, opts...); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	eng := claimAll(t, pool)
	rec, err := NewRecorder(dbtest.Open(t, pool, ""), eng, RecorderConfig{})
	if err != nil {
		t.Fatal(err)
	}
	var jobs []batchclaim.Job
	for _, twin := range twins {
		for _, k := range keys {
			svc := twin + "-" + k.name
			c, ok := eng.Holds(svc)
			if !ok {
				t.Fatalf("engine does not hold %s", svc)
			}
			jobs = append(jobs, batchclaim.Job{Claim: c, FromState: batchclaim.StateNew, Reason: batchclaim.ReasonFirst,
				Batch: batchclaim.Batch{Seq: first[svc], ServiceID: svc, BatchID: "b1"}})
		}
	}
	marked, err := rec.Mark(ctx, jobs)
	if err != nil || len(marked) != len(jobs) {
		t.Fatalf("marked %d of %d: %v", len(marked), len(jobs), err)
	}
	for _, twin := range twins {
		for _, k := range keys {
			svc := twin + "-" + k.name
			switch {
			case k.halted:
				_, err = pool.Exec(ctx, `INSERT INTO batchclaim.service_halts (service_id, seq, reason) VALUES ($1, $2, 'test')`, svc, first[svc])
			case k.stale:
				_, err = pool.Exec(ctx, `UPDATE batchclaim.service_id_claims SET epoch = nextval('batchclaim.service_id_claim_epochs') WHERE service_id = $1`, svc)
			}
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	params := func(twin string) db.BatchesRecordOutcomesParams {
		p := db.BatchesRecordOutcomesParams{Claimant: eng.InstanceID(), Nonce: eng.Nonce()}
		for i, k := range keys {
			j := marked[slices.IndexFunc(marked, func(j batchclaim.Job) bool { return j.Claim.ServiceID == twin+"-"+k.name })]
			attempt := int32(j.Batch.Attempts + 1)
			if k.oldAttempt {
				attempt--
			}
			p.Seqs = append(p.Seqs, j.Batch.Seq)
			p.ServiceIds = append(p.ServiceIds, j.Claim.ServiceID)
			p.Epochs = append(p.Epochs, j.Claim.Epoch)
			p.Attempts = append(p.Attempts, attempt)
			p.NewStates = append(p.NewStates, string(batchclaim.Done.State()))
			p.DltStatuses = append(p.DltStatuses, string(batchclaim.Done.Status()))
			p.RetryAfterMs = append(p.RetryAfterMs, int64(1000+i))
			p.LastErrors = append(p.LastErrors, "")
			p.InvalidDetails = append(p.InvalidDetails, "")
			p.HttpStatuses = append(p.HttpStatuses, int32(200+i))
			p.LatenciesMs = append(p.LatenciesMs, 1.5+float64(i))
			p.Outcomes = append(p.Outcomes, batchclaim.Done.String())
			p.Chain = append(p.Chain, k.chain)
			p.ChainMaxBytes = append(p.ChainMaxBytes, k.maxBytes)
		}
		return p
	}
	general, err := rec.q.BatchesRecordOutcomes(ctx, pool, params("general"))
	if err != nil {
		t.Fatal(err)
	}
	commitRows, err := rec.q.BatchesRecordCommits(ctx, pool, commitsParams(params("commits")))
	if err != nil {
		t.Fatal(err)
	}
	commits := make([]db.BatchesRecordOutcomesRow, len(commitRows))
	for i, row := range commitRows {
		commits[i] = db.BatchesRecordOutcomesRow(row)
	}
	if len(general) != len(keys) || len(commits) != len(keys) {
		t.Fatalf("rows: %d and %d, want %d each", len(general), len(commits), len(keys))
	}
	// What each twin's rows say, by case (a seq is in one twin's parameters only).
	returned := func(rows []db.BatchesRecordOutcomesRow) map[string]string {
		out := map[string]string{}
		for _, row := range rows {
			i := slices.Index(params("general").Seqs, row.Seq) + slices.Index(params("commits").Seqs, row.Seq) + 1
			next := row.NextSeq != 0
			out[keys[i].name] = fmt.Sprintf("fenced=%t recorded=%t next=%t %s %q attempts=%d/%d aged=%t drained=%t",
				row.Fenced, row.Recorded, next, row.NextBatchID, row.NextPayload, row.NextAttempts, row.NextMaxAttempts, row.AgeSeconds > 0 || !row.Recorded,
				row.Drained)
		}
		return out
	}
	g, c := returned(general), returned(commits)
	for _, k := range keys {
		if g[k.name] != c[k.name] {
			t.Errorf("%s: the general statement returned %s, the commits statement %s", k.name, g[k.name], c[k.name])
		}
	}
	if !strings.Contains(g["chained"], "next=true") || !strings.Contains(g["later"], "next=false") ||
		!strings.Contains(g["big"], "next=false") || !strings.Contains(g["halted"], "next=false") ||
		!strings.Contains(g["unchained"], "next=false") ||
		!strings.Contains(g["stale"], "fenced=false") || !strings.Contains(g["old"], "recorded=false") {
		t.Fatalf("the cases did not take their branches: %v", g)
	}
	// Only the key whose one batch finished is left without work.
	for _, k := range keys {
		if drained := strings.HasSuffix(g[k.name], "drained=true"); drained != (k.name == "last") {
			t.Errorf("%s: %s; only \"last\" is drained", k.name, g[k.name])
		}
	}
	// Every column of every batch row, times as offsets from the row's own status time.
	state := func(twin string) map[string]string {
		rows, err := pool.Query(ctx, `
			SELECT substr(service_id, length($1) + 2) || '/' || batch_id,
			       (to_jsonb(b) - 'seq' - 'pos' - 'service_id' - 'created_at' - 'updated_at' - 'status_updated_at' - 'submitted_at'
			        - 'finished_at' - 'next_attempt_at' - 'attempt_xid' - 'claim_epoch' - 'run_at')::text,
			       claim_epoch IS NOT NULL, finished_at - status_updated_at, next_attempt_at - status_updated_at,
			       submitted_at IS NOT NULL, attempt_xid IS NOT NULL,
			       (SELECT count(*) FROM batchclaim.submission_attempts a WHERE a.seq = b.seq),
			       (SELECT count(*) FROM batchclaim.service_halts h WHERE h.service_id = b.service_id),
			       (SELECT c.active_at IS NOT NULL FROM batchclaim.service_id_claims c WHERE c.service_id = b.service_id)
			FROM batchclaim.batches b WHERE service_id LIKE $1 || '-%'`, twin)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		out := map[string]string{}
		for rows.Next() {
			var name, cols string
			var rest [8]any
			if err := rows.Scan(append([]any{&name, &cols}, sliceOfPointers(rest[:])...)...); err != nil {
				t.Fatal(err)
			}
			cols = strings.ReplaceAll(cols, twin+"-", "")
			out[name] = fmt.Sprint(cols, rest)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return out
	}
	gs, cs := state("general"), state("commits")
	if len(gs) != len(cs) || len(gs) == 0 {
		t.Fatalf("batch rows: %d and %d", len(gs), len(cs))
	}
	for name, want := range gs {
		if cs[name] != want {
			t.Errorf("batch %s:\n general: %s\n commits: %s", name, want, cs[name])
		}
	}
}

// claimAll returns a registered engine that has claimed every service_id with a batch.
func claimAll(t *testing.T, pool *pgxpool.Pool) *claims.Engine {
	t.Helper()
	eng, err := claims.New(dbtest.Open(t, pool, ""), claims.Config{Name: t.Name()})
	if err != nil {
		t.Fatal(err)
	}
	if err := eng.Register(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := eng.Cycle(t.Context()); err != nil {
		t.Fatal(err)
	}
	return eng
}

func sliceOfPointers(v []any) []any {
	out := make([]any, len(v))
	for i := range v {
		out[i] = &v[i]
	}
	return out
}

// named passes statements through to the database and notes the name of each.
type named struct {
	pgdb.Querier
	mu    sync.Mutex
	names []string
}

func (n *named) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	n.mu.Lock()
	name, _, _ := strings.Cut(strings.TrimPrefix(sql, "-- name: "), " ")
	n.names = append(n.names, name)
	n.mu.Unlock()
	return n.Querier.Query(ctx, sql, args...)
}

// Finish writes a group of successes with BatchesRecordCommits, and a group with any other
// outcome (a success with details of invalid transactions included), or any group when the
// idle clock is kept, with BatchesRecordOutcomes.
func TestFinishPicksTheStatementByTheGroup(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := dbtest.NewPool(t)
	for _, svc := range []string{"a", "b", "c", "d"} {
		if _, err := ingest.Enqueue(ctx, pool, svc, "b1", []byte("p")); err != nil {
			t.Fatal(err)
		}
	}
	eng := claimAll(t, pool)
	finish := func(cfg RecorderConfig, svc string, res batchclaim.Result) string {
		t.Helper()
		rec, err := NewRecorder(dbtest.Open(t, pool, ""), eng, cfg)
		if err != nil {
			t.Fatal(err)
		}
		q := &named{Querier: rec.db}
		rec.db = q
		job := markOnly(t, pool, eng, rec, svc)
		if _, _, err := rec.Finish(ctx, batchclaim.Outcome{Job: job, Result: res}); err != nil {
			t.Fatal(err)
		}
		var state string
		if err := pool.QueryRow(ctx, `SELECT state FROM batchclaim.batches WHERE seq = $1`, job.Batch.Seq).Scan(&state); err != nil {
			t.Fatal(err)
		}
		if state != string(res.Verdict.State()) {
			t.Fatalf("%s: state %s after %s", svc, state, res.Verdict)
		}
		return q.names[len(q.names)-1]
	}
	for _, c := range []struct {
		svc  string
		cfg  RecorderConfig
		res  batchclaim.Result
		want string
	}{
		{"a", RecorderConfig{}, batchclaim.Result{Verdict: batchclaim.Done}, "BatchesRecordCommits"},
		{"b", RecorderConfig{}, batchclaim.Result{Verdict: batchclaim.Accepted}, "BatchesRecordOutcomes"},
		{"c", RecorderConfig{TrackIdle: true}, batchclaim.Result{Verdict: batchclaim.Done}, "BatchesRecordOutcomes"},
		// Details of invalid transactions are kept on the batch row, which only the general
		// statement writes.
		{"d", RecorderConfig{}, batchclaim.Result{Verdict: batchclaim.Done, Invalid: []byte(`[{"id":"t1"}]`)}, "BatchesRecordOutcomes"},
	} {
		if got := finish(c.cfg, c.svc, c.res); got != c.want {
			t.Errorf("%s: %s (track_idle %t) written by %s, want %s", c.svc, c.res.Verdict, c.cfg.TrackIdle, got, c.want)
		}
	}
}
