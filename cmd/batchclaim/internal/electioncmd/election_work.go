package electioncmd

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/batchclaim/batchclaim"
	"github.com/batchclaim/batchclaim/patterns/election"
	"github.com/batchclaim/batchclaim/pgdb"
)

// electionDemoSchema holds what the processes of `election demo` record, in the demo's
// scratch database only: evidence that a process acted as primary at a database instant,
// the writes it fenced with its term's epoch, and the outcome of writes it tried with an old
// term once a newer one existed.
const electionDemoSchema = `
CREATE TABLE election_demo_acting (
    id bigserial PRIMARY KEY, role text NOT NULL, epoch bigint NOT NULL, name text NOT NULL,
    at timestamptz NOT NULL DEFAULT clock_timestamp());
CREATE TABLE election_demo_writes (
    id bigserial PRIMARY KEY, role text NOT NULL, epoch bigint NOT NULL, name text NOT NULL,
    probe boolean NOT NULL DEFAULT false, at timestamptz NOT NULL DEFAULT clock_timestamp());
CREATE TABLE election_demo_probes (
    id bigserial PRIMARY KEY, role text NOT NULL, epoch bigint NOT NULL, name text NOT NULL,
    rejected boolean NOT NULL, at timestamptz NOT NULL DEFAULT clock_timestamp());
`

// actEvery is how often a demo primary records that it acts and makes a fenced write.
const actEvery = 50 * time.Millisecond

// demoWorker is what a process of `election demo` does while it is primary of a role.
type demoWorker struct {
	db  pgdb.DB // batchclaim's tables are in its schema; the demo's own in its pool's search_path
	el  *election.Elector
	log *slog.Logger
}

// act runs for one term, until its context is cancelled (the process stepped down). Then a
// probe waits for a newer term of the role and tries one more write with the old term: the
// fence must refuse it.
func (w *demoWorker) act(ctx context.Context, t election.Term) {
	w.log.Info("acting as primary", "role", t.Role, "epoch", t.Epoch)
	tick := time.NewTicker(actEvery)
	defer tick.Stop()
	for ctx.Err() == nil {
		if err := w.evidence(ctx, t); err != nil && ctx.Err() == nil {
			w.log.Warn("acting evidence not recorded", "role", t.Role, "error", err)
		}
		if err := w.fencedWrite(ctx, t); err != nil && ctx.Err() == nil {
			w.log.Warn("fenced write refused", "role", t.Role, "epoch", t.Epoch, "error", err)
		}
		select {
		case <-ctx.Done():
		case <-tick.C:
		}
	}
	w.log.Info("stopped acting as primary", "role", t.Role, "epoch", t.Epoch)
	// In the background, so that a stopping process resigns at once.
	go w.probe(context.WithoutCancel(ctx), t)
}

// evidence records, unfenced, that this process acts as primary of t's role: the row's
// database timestamp is taken between two checks that both said "primary of this epoch",
// and the transaction is rolled back unless the second check passes.
func (w *demoWorker) evidence(ctx context.Context, t election.Term) error {
	tx, err := w.db.Pool().Begin(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if cur, ok := w.el.CheckPrimary(t.Role); !ok || cur.Epoch != t.Epoch {
		return nil
	}
	if _, err := tx.Exec(ctx, `INSERT INTO election_demo_acting (role, epoch, name) VALUES ($1, $2, $3)`, t.Role, t.Epoch, t.Name); err != nil {
		return err
	}
	if cur, ok := w.el.CheckPrimary(t.Role); !ok || cur.Epoch != t.Epoch {
		return nil
	}
	return tx.Commit(ctx)
}

// fencedWrite makes one write that only the primary may make.
func (w *demoWorker) fencedWrite(ctx context.Context, t election.Term) error {
	return pgx.BeginFunc(ctx, w.db.Pool(), func(tx pgx.Tx) error {
		if cur, ok := w.el.CheckPrimary(t.Role); !ok || cur.Epoch != t.Epoch {
			return nil
		}
		if err := w.el.Fence(ctx, tx, t); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO election_demo_writes (role, epoch, name) VALUES ($1, $2, $3)`, t.Role, t.Epoch, t.Name)
		return err
	})
}

// probe waits (bounded) until the database shows a newer term of t's role, then tries a
// write fenced with the old term t (FenceTerm checks the database only, as a process that
// kept a stale Term value would). It records whether the fence refused it; an accepted one
// is also in election_demo_writes, where the demo's check counts it as stale.
func (w *demoWorker) probe(ctx context.Context, t election.Term) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		cur, err := election.GetPrimary(ctx, w.db, t.Role)
		if err == nil && cur.Epoch > t.Epoch {
			break
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(actEvery):
		}
	}
	err := pgx.BeginFunc(ctx, w.db.Pool(), func(tx pgx.Tx) error {
		if err := election.FenceTerm(ctx, w.db.In(tx), t); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO election_demo_writes (role, epoch, name, probe) VALUES ($1, $2, $3, true)`, t.Role, t.Epoch, t.Name)
		return err
	})
	rejected := errors.Is(err, batchclaim.ErrClaimLost)
	if err != nil && !rejected {
		w.log.Warn("stale-term probe failed", "role", t.Role, "epoch", t.Epoch, "error", err)
		return
	}
	w.log.Info("stale-term probe", "role", t.Role, "epoch", t.Epoch, "rejected", rejected)
	if _, err := w.db.Pool().Exec(ctx, `INSERT INTO election_demo_probes (role, epoch, name, rejected) VALUES ($1, $2, $3, $4)`,
		t.Role, t.Epoch, t.Name, rejected); err != nil {
		w.log.Warn("record probe", "error", err)
	}
}
