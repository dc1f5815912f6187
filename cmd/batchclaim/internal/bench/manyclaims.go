package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/batchclaim/batchclaim/claims"
)

// manyClaimsConfig is the shape of a many-claims run.
type manyClaimsConfig struct {
	claims, last int
	runFlags     []string
	firstLimit   time.Duration // longest wait for the first round to commit
	limit        time.Duration // longest wait for the last keys' batches to be POSTed
	claimLimit   time.Duration // longest wait for the process to hold every claim
	keep         bool
}

// manyClaimsRound is what one round of batches came to.
type manyClaimsRound struct {
	Batches   int     `json:"batches"`
	Submitted int     `json:"submitted"`
	Committed int     `json:"committed"`
	TimedOut  bool    `json:"timed_out"`
	Seconds   float64 `json:"seconds"`
	// Over the batches submitted; null when none was.
	PostP50Ms *float64 `json:"enqueue_to_post_p50_ms"`
	PostP99Ms *float64 `json:"enqueue_to_post_p99_ms"`
	PostMaxMs *float64 `json:"enqueue_to_post_max_ms"`
}

// latencies is the round's enqueue-to-POST figures as text.
func (x manyClaimsRound) latencies() string {
	if x.PostP50Ms == nil {
		return "nothing POSTed"
	}
	return fmt.Sprintf("enqueue to POST p50 %.1f ms, p99 %.1f ms, max %.1f ms", *x.PostP50Ms, *x.PostP99Ms, *x.PostMaxMs)
}

// manyClaimsResult is the many-claims scenario's JSON line.
type manyClaimsResult struct {
	Scenario      string          `json:"scenario"`
	Claims        int             `json:"claims"`
	LastKeys      int             `json:"last_keys"`
	RunArgs       []string        `json:"run_args"`
	SecondsToHold float64         `json:"seconds_to_hold_all"`
	First         manyClaimsRound `json:"first_round"`
	FirstLimitS   float64         `json:"first_round_timeout_seconds"`
	Last          manyClaimsRound `json:"last_keys_round"`
	LastLimitS    float64         `json:"last_keys_timeout_seconds"`
	Method        string          `json:"method"`
	Seconds       float64         `json:"seconds"`
}

const manyClaimsMethod = "one batch stored on every key (one INSERT into batches for the round, as an embedder's SQL may store work), waited for until " +
	"COMMITTED; then one more on each of the keys that sort last; submitted = batches with a submission attempt; " +
	"enqueue to POST by the database clock over the batches submitted"

func (r manyClaimsResult) print(w io.Writer) {
	fmt.Fprintf(w, "many-claims: one `batchclaim run` holding %d claims (all after %.1f s), ledger simulator at zero latency\n", r.Claims, r.SecondsToHold)
	for _, x := range []struct {
		name  string
		round manyClaimsRound
		limit float64
	}{{"first round, one batch on every key", r.First, r.FirstLimitS}, {fmt.Sprintf("one batch on each of the %d keys that sort last", r.LastKeys), r.Last, r.LastLimitS}} {
		timedOut := ""
		if x.round.TimedOut {
			timedOut = fmt.Sprintf(" (timed out after %.0f s)", x.limit)
		}
		fmt.Fprintf(w, "  %-48s %d of %d submitted, %d committed in %.1f s%s; %s\n",
			x.name+":", x.round.Submitted, x.round.Batches, x.round.Committed, x.round.Seconds, timedOut, x.round.latencies())
	}
	fmt.Fprintf(w, "  %s\n\n", strings.Join(r.RunArgs, " "))
}

// benchManyClaims runs one process holding many claims, gives every key a batch, then the
// keys that sort last one more each, and counts what was submitted.
func benchManyClaims(ctx context.Context, c manyClaimsConfig, info io.Writer) (manyClaimsResult, error) {
	began := time.Now()
	r := manyClaimsResult{Scenario: "many-claims", Claims: c.claims, LastKeys: c.last, RunArgs: shownArgs(c.runFlags),
		FirstLimitS: c.firstLimit.Seconds(), LastLimitS: c.limit.Seconds(), Method: manyClaimsMethod}
	db, admin, err := scratchWithAdmin(ctx, "batchclaim_bench_many_claims", c.keep, info)
	if err != nil {
		return r, err
	}
	defer db.Close(ctx)
	defer admin.Close()
	ids := serviceIDs("mc", c.claims)
	for i := 0; i < len(ids); i += 10000 {
		if err := claims.RegisterServiceIDs(ctx, admin, ids[i:min(i+10000, len(ids))]...); err != nil {
			return r, err
		}
	}
	sim, simURL, logDir, err := startLedger("many-claims")
	if err != nil {
		return r, err
	}
	defer sim.Close()
	f := &fleet{admin: admin, logDir: logDir, prefix: "mc", k: c.claims, args: func(name, _ string) []string {
		return runArgs(db.URL, simURL, name, "", c.runFlags)
	}}
	defer f.stopAll()
	if err := f.start(); err != nil {
		return r, err
	}
	fmt.Fprintf(info, "many-claims: one process over %d service_ids (log in %s); waiting until it holds them all\n", c.claims, logDir)
	if err := f.waitReady(ctx, c.claimLimit); err != nil {
		return r, err
	}
	r.SecondsToHold = round3(time.Since(began).Seconds())

	if r.First, err = roundOfBatches(ctx, admin, ids, 1, c.firstLimit); err != nil {
		return r, err
	}
	fmt.Fprintf(info, "many-claims: first round: %d of %d committed in %.1f s\n", r.First.Committed, r.First.Batches, r.First.Seconds)
	if r.Last, err = roundOfBatches(ctx, admin, ids[len(ids)-c.last:], 2, c.limit); err != nil {
		return r, err
	}
	fmt.Fprintf(info, "many-claims: last %d keys: %d submitted, %d committed in %.1f s\n", c.last, r.Last.Submitted, r.Last.Committed, r.Last.Seconds)
	if k := f.kids[0]; k.Exited() {
		return r, fmt.Errorf("%s exited during the run (%v); see %s", k.Name, k.Err, logDir)
	}
	r.Seconds = round3(time.Since(began).Seconds())
	f.stopAll()
	if !c.keep {
		_ = os.RemoveAll(logDir)
	}
	return r, nil
}

// roundOfBatches stores batch n of every key in svcs and waits until every one of them
// is COMMITTED, or limit passed; then reads what was submitted and how soon.
func roundOfBatches(ctx context.Context, admin *pgxpool.Pool, svcs []string, n int, limit time.Duration) (manyClaimsRound, error) {
	x := manyClaimsRound{Batches: len(svcs)}
	var from int64
	if err := admin.QueryRow(ctx, `SELECT COALESCE(max(seq), 0) FROM batchclaim.batches`).Scan(&from); err != nil {
		return x, err
	}
	start := time.Now()
	if _, err := storeBatches(ctx, admin, svcs, n); err != nil {
		return x, err
	}
	deadline := start.Add(limit)
	for {
		err := admin.QueryRow(ctx, `SELECT count(*) FILTER (WHERE state = 'COMMITTED'),
			count(*) FILTER (WHERE b.attempts > 0)
			FROM batchclaim.batches b WHERE b.seq > $1`, from).Scan(&x.Committed, &x.Submitted)
		if err != nil {
			return x, err
		}
		if x.Committed == x.Batches {
			break
		}
		if time.Now().After(deadline) {
			x.TimedOut = true
			break
		}
		select {
		case <-ctx.Done():
			return x, ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
	x.Seconds = round3(time.Since(start).Seconds())
	rows, err := admin.Query(ctx, `SELECT seq FROM batchclaim.batches WHERE seq > $1`, from)
	if err != nil {
		return x, err
	}
	seqs, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return x, err
	}
	post, _, err := batchLatencies(ctx, admin, seqs)
	if err != nil {
		return x, err
	}
	if len(post) > 0 {
		p50, p99, pmax := quantiles(post)
		x.PostP50Ms, x.PostP99Ms, x.PostMaxMs = &p50, &p99, &pmax
	}
	return x, nil
}
