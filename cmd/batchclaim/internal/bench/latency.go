package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/batchclaim/batchclaim/claims"
	"github.com/batchclaim/batchclaim/dlt"
	"github.com/batchclaim/batchclaim/dlt/dltsim"
)

// latencyConfig is the shape of a latency run.
type latencyConfig struct {
	batches, serviceIDs int
	runFlags            []string      // given to every process of both runs
	offFlags            []string      // given to the second run's processes, when run has them
	limit               time.Duration // longest wait for one batch's POST, or its end
	gap                 time.Duration // pauses drawn from [0, gap); 0: the processes' renew interval
	keep                bool
}

// latencyRun is one of the two runs: two processes, the batches POSTed one at a time.
type latencyRun struct {
	Name          string   `json:"name"`
	RunArgs       []string `json:"run_args"`
	RenewMs       float64  `json:"renew_interval_ms"`
	Batches       int      `json:"batches"`
	GapMs         float64  `json:"pause_before_post_max_ms"`
	ToHolder      int      `json:"posted_to_holder"`
	ToOther       int      `json:"posted_to_other"`
	PostP50Ms     float64  `json:"enqueue_to_post_p50_ms"`
	PostP99Ms     float64  `json:"enqueue_to_post_p99_ms"`
	PostMaxMs     float64  `json:"enqueue_to_post_max_ms"`
	DoneP50Ms     float64  `json:"enqueue_to_done_p50_ms"`
	DoneP99Ms     float64  `json:"enqueue_to_done_p99_ms"`
	TargetP99Ms   float64  `json:"target_post_p99_ms"`
	TargetFormula string   `json:"target_formula"`
	TargetMet     bool     `json:"target_met"`
	Seconds       float64  `json:"seconds"`
}

// latencyResult is the latency scenario's JSON line.
type latencyResult struct {
	Scenario   string       `json:"scenario"`
	Instances  int          `json:"instances"`
	ServiceIDs int          `json:"service_ids"`
	Batches    int          `json:"batches"`
	OffFlags   []string     `json:"listening_off_flags"`
	RunHasOff  bool         `json:"run_has_listening_off_flag"`
	Note       string       `json:"note,omitempty"`
	Method     string       `json:"method"`
	Runs       []latencyRun `json:"runs"`
	Seconds    float64      `json:"seconds"`
}

const latencyMethod = "database clock: a batch's created_at to its first in-flight mark (batch_history) " +
	"(enqueue to POST) and to the write that recorded it COMMITTED (enqueue to done); the next batch is POSTed " +
	"once the simulator received the previous one's POST, its service_id's earlier batch is done, and a pause " +
	"drawn uniformly from [0, pause_before_post_max_ms) passed, so that batches arrive at any point of a " +
	"periodic fetch (by default the pause is below the renew interval R, at which the queuer fetches)"

func (r latencyResult) print(w io.Writer) {
	fmt.Fprintf(w, "latency: %d `batchclaim run` processes, ledger simulator at zero latency, %d single batches POSTed one at a time\n",
		r.Instances, r.Batches)
	fmt.Fprintf(w, "  to either instance for %d service_ids held by one or the other; database clock\n", r.ServiceIDs)
	if r.Note != "" {
		fmt.Fprintf(w, "  note: %s\n", r.Note)
	}
	fmt.Fprintf(w, "  %-10s %10s %10s %10s %10s %10s %16s %4s\n", "run", "post p50", "post p99", "post max", "done p50", "done p99", "target p99 ms", "met")
	for _, x := range r.Runs {
		met := map[bool]string{true: "yes", false: "no"}[x.TargetMet]
		fmt.Fprintf(w, "  %-10s %10.1f %10.1f %10.1f %10.1f %10.1f %6.0f %-9s %4s\n", x.Name, x.PostP50Ms, x.PostP99Ms, x.PostMaxMs,
			x.DoneP50Ms, x.DoneP99Ms, x.TargetP99Ms, "("+x.TargetFormula+")", met)
	}
	for _, x := range r.Runs {
		fmt.Fprintf(w, "  %s: %s\n", x.Name, strings.Join(x.RunArgs, " "))
	}
	fmt.Fprintln(w)
}

// benchLatency measures what one batch waits on an idle system, with listening and with
// listening turned off.
func benchLatency(ctx context.Context, c latencyConfig, info io.Writer) (latencyResult, error) {
	began := time.Now()
	r := latencyResult{Scenario: "latency", Instances: 2, ServiceIDs: c.serviceIDs, Batches: c.batches, OffFlags: c.offFlags, Method: latencyMethod}
	self, err := os.Executable()
	if err != nil {
		return r, fmt.Errorf("find own executable: %w", err)
	}
	var missing []string
	for _, f := range c.offFlags {
		ok, err := runHasFlag(self, flagName(f))
		if err != nil {
			return r, err
		}
		if !ok {
			missing = append(missing, "--"+flagName(f))
		}
	}
	r.RunHasOff = len(c.offFlags) > 0 && len(missing) == 0
	off := c.offFlags
	switch {
	case len(c.offFlags) == 0:
		r.Note = "no --latency-off-flags: both runs use the same flags, and compare only run to run"
	case !r.RunHasOff:
		off = nil
		r.Note = fmt.Sprintf("run has no %s (from --latency-off-flags): both runs use the same flags, and compare only run to run",
			strings.Join(missing, ", "))
	}
	for _, run := range []struct {
		name  string
		extra []string
	}{{"listening", c.runFlags}, {"polling", append(append([]string{}, c.runFlags...), off...)}} {
		x, err := latencyOnce(ctx, c, run.name, run.extra, info)
		if err != nil {
			return r, fmt.Errorf("%s: %w", run.name, err)
		}
		r.Runs = append(r.Runs, x)
	}
	r.Seconds = round3(time.Since(began).Seconds())
	return r, nil
}

// latencyOnce starts two processes with extra flags, POSTs the batches and measures them.
func latencyOnce(ctx context.Context, c latencyConfig, name string, extra []string, info io.Writer) (latencyRun, error) {
	began := time.Now()
	x := latencyRun{Name: name, RunArgs: shownArgs(extra), Batches: c.batches}
	db, admin, err := scratchWithAdmin(ctx, "batchclaim_bench_latency", c.keep, info)
	if err != nil {
		return x, err
	}
	defer db.Close(ctx)
	defer admin.Close()
	ids := serviceIDs("lat", c.serviceIDs)
	if err := claims.RegisterServiceIDs(ctx, admin, ids...); err != nil {
		return x, err
	}
	sim, simURL, logDir, err := startLedger("latency")
	if err != nil {
		return x, err
	}
	defer sim.Close()
	f := &fleet{admin: admin, logDir: logDir, prefix: "lat-" + name, k: c.serviceIDs, listen: true, args: func(name, listen string) []string {
		return runArgs(db.URL, simURL, name, listen, extra)
	}}
	defer f.stopAll()
	for range 2 {
		if err := f.start(); err != nil {
			return x, err
		}
	}
	fmt.Fprintf(info, "latency %s: two processes started (logs in %s); waiting for the claims to balance\n", name, logDir)
	if err := f.waitReady(ctx, 3*time.Minute); err != nil {
		return x, err
	}
	if x.RenewMs, err = logRenewMs(f.logPath(f.kids[0].Name)); err != nil {
		return x, err
	}
	x.TargetP99Ms, x.TargetFormula = 50, "50 ms"
	if name == "polling" {
		x.TargetP99Ms, x.TargetFormula = x.RenewMs+50, "R + 50 ms"
	}

	gap := c.gap
	if gap == 0 {
		gap = time.Duration(x.RenewMs * float64(time.Millisecond))
	}
	x.GapMs = float64(gap.Microseconds()) / 1000
	rng := rand.New(rand.NewPCG(1, 2))
	client := &http.Client{Timeout: 10 * time.Second}
	var seqs []int64
	last := map[string]int64{} // each service_id's previous batch
	for i := range c.batches {
		svc := ids[i%len(ids)]
		target := f.kids[(i/len(ids))%2]
		if prev, ok := last[svc]; ok {
			if err := waitDone(ctx, admin, prev, c.limit); err != nil {
				return x, err
			}
		}
		select {
		case <-ctx.Done():
			return x, ctx.Err()
		case <-time.After(time.Duration(rng.Int64N(int64(gap) + 1))):
		}
		var holder string
		if err := admin.QueryRow(ctx, `SELECT COALESCE(claimant::text, '') FROM batchclaim.service_id_claims WHERE service_id = $1`, svc).Scan(&holder); err != nil {
			return x, err
		}
		if holder == target.id.String() {
			x.ToHolder++
		} else {
			x.ToOther++
		}
		posts := len(sim.Posts())
		id, list := dlt.FakeBatch(svc, i)
		if err := postBatch(ctx, client, target.listen, svc, list); err != nil {
			return x, err
		}
		var seq int64
		if err := admin.QueryRow(ctx, `SELECT seq FROM batchclaim.batch_keys WHERE service_id = $1 AND batch_id = $2`, svc, id).Scan(&seq); err != nil {
			return x, fmt.Errorf("batch %s of %s after its POST: %w", id[:12], svc, err)
		}
		seqs = append(seqs, seq)
		last[svc] = seq
		if err := waitSimPost(ctx, sim, posts, id, c.limit); err != nil {
			return x, fmt.Errorf("%w (logs in %s)", err, logDir)
		}
	}
	for _, seq := range last {
		if err := waitDone(ctx, admin, seq, c.limit); err != nil {
			return x, err
		}
	}
	post, done, err := batchLatencies(ctx, admin, seqs)
	if err != nil {
		return x, err
	}
	x.PostP50Ms, x.PostP99Ms, x.PostMaxMs = quantiles(post)
	x.DoneP50Ms, x.DoneP99Ms, _ = quantiles(done)
	x.TargetMet = x.PostP99Ms <= x.TargetP99Ms
	x.Seconds = round3(time.Since(began).Seconds())
	fmt.Fprintf(info, "latency %s: enqueue to POST p50 %.1f ms, p99 %.1f ms; to done p50 %.1f ms, p99 %.1f ms\n",
		name, x.PostP50Ms, x.PostP99Ms, x.DoneP50Ms, x.DoneP99Ms)
	f.stopAll()
	if !c.keep {
		_ = os.RemoveAll(logDir)
	}
	return x, nil
}

// postBatch POSTs a BatchList to an instance's ingest API.
func postBatch(ctx context.Context, client *http.Client, addr, svc string, list []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+"/batches?service_id="+svc, bytes.NewReader(list))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/octet-stream")
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("POST /batches?service_id=%s to %s: %s: %s", svc, addr, resp.Status, body)
	}
	return nil
}

// waitSimPost waits until the simulator received a POST of batch id, looking at the POSTs
// from index from on (in memory: no load on the database while the batch waits).
func waitSimPost(ctx context.Context, sim *dltsim.Sim, from int, id string, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		posts := sim.Posts()
		for _, p := range posts[min(from, len(posts)):] {
			if p.BatchID == id {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("batch %s not POSTed within %s", id[:12], limit)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(2 * time.Millisecond):
		}
	}
}

// waitDone waits until the batch is COMMITTED or INVALID.
func waitDone(ctx context.Context, q *pgxpool.Pool, seq int64, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		var state string
		if err := q.QueryRow(ctx, `SELECT state FROM batchclaim.batches WHERE seq = $1`, seq).Scan(&state); err != nil {
			return err
		}
		if state == "COMMITTED" || state == "INVALID" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("batch seq %d still %s after %s", seq, state, limit)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// batchLatencies reads, by the database clock, each batch's enqueue to first POST and,
// for those COMMITTED, enqueue to the write that recorded it (ms). Batches not POSTed have
// no first figure.
func batchLatencies(ctx context.Context, q *pgxpool.Pool, seqs []int64) (post, done []float64, err error) {
	rows, err := q.Query(ctx, `SELECT
		(SELECT EXTRACT(EPOCH FROM min(h.at) - b.created_at) * 1000 FROM batchclaim.batch_history h WHERE h.seq = b.seq AND h.to_state = 'INFLIGHT')::float8,
		CASE WHEN b.state = 'COMMITTED' THEN EXTRACT(EPOCH FROM b.updated_at - b.created_at) * 1000 END::float8
		FROM batchclaim.batches b WHERE b.seq = ANY($1)`, seqs)
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var p, d *float64
		if err := rows.Scan(&p, &d); err != nil {
			return nil, nil, err
		}
		if p != nil {
			post = append(post, *p)
		}
		if d != nil {
			done = append(done, *d)
		}
	}
	return post, done, rows.Err()
}

// logRenewMs reads the renew interval a process logged at its start (JSON logs).
func logRenewMs(path string) (float64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		var l struct {
			Msg   string          `json:"msg"`
			Renew json.RawMessage `json:"renew_interval"`
		}
		if json.Unmarshal([]byte(line), &l) != nil || l.Msg != "starting" || l.Renew == nil {
			continue
		}
		var ns int64
		if json.Unmarshal(l.Renew, &ns) == nil {
			return float64(ns) / 1e6, nil
		}
		var s string
		if json.Unmarshal(l.Renew, &s) == nil {
			if d, err := time.ParseDuration(s); err == nil {
				return float64(d.Microseconds()) / 1000, nil
			}
		}
	}
	return 0, errors.New("no renew_interval in the start line of " + path)
}
