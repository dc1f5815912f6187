package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/batchclaim/batchclaim"
	"github.com/batchclaim/batchclaim/observer"
)

// opCancelRunning cancels a batch while its POST runs (INFLIGHT), from the harness's own
// connection as an operator would: the request reaches the instance that runs it (notified,
// or by its poll), which cancels the POST's context. The batch then ends as its outcome and
// the request say: CANCELLED for an answer that leaves it to be sent again, UNKNOWN or
// PENDING when the ledger may have taken it, COMMITTED never from the cancel. The history
// checks judge the rest (never two of a key in flight, no terminal state left, no attempt
// number twice). A POST lasts milliseconds unless the ledger is slow, so it looks for a
// running batch for a while.
func (r *run) opCancelRunning(ctx context.Context, rng *rand.Rand) OpRecord {
	rec := OpRecord{Kind: OpCancelRunning}
	var cands []candidate
	for end := time.Now().Add(3 * time.Second); len(cands) == 0 && time.Now().Before(end) && ctx.Err() == nil; {
		var err error
		if cands, err = r.candidates(ctx, batchclaim.StateInflight); err != nil {
			rec.Result, rec.Err = "no candidates read", err.Error()
			return rec
		}
		if len(cands) == 0 {
			r.sleep(ctx, 20*time.Millisecond)
		}
	}
	if len(cands) == 0 {
		rec.Result = "no batch running"
		return rec
	}
	c := cands[rng.IntN(len(cands))]
	rec.Seq, rec.Service = c.seq, c.service
	var ch observer.Change
	err := pgx.BeginFunc(ctx, r.pool, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, `SELECT now()`).Scan(&rec.At); err != nil {
			return err
		}
		var err error
		ch, err = observer.Cancel(ctx, tx, c.seq, "chaos: cancel while running")
		return err
	})
	switch {
	case errors.Is(err, batchclaim.ErrStateChanged):
		rec.Result, rec.Acted = fmt.Sprintf("seq %d finished its POST first: %v", c.seq, err), true
	case err != nil:
		rec.Result, rec.Err = fmt.Sprintf("seq %d not cancelled", c.seq), err.Error()
	case ch.CancelRequested:
		rec.Result, rec.Acted = fmt.Sprintf("seq %d of %s: cancel requested while its POST runs", c.seq, c.service), true
	default:
		rec.Result, rec.Acted = fmt.Sprintf("seq %d of %s: its POST ended first, cancelled from %s", c.seq, c.service, ch.From), true
	}
	return rec
}
