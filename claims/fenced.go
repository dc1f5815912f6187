package claims

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// WriteFenced runs fn in a transaction that first fences c (Fence: the claim row is locked
// FOR SHARE while it is still held with c's epoch), so that fn's writes commit only while this
// instance owns c's service_id with c's epoch: no takeover can commit in between, and a claim
// lost before returns batchclaim.ErrClaimLost without running fn. It is how a job writes its
// own effect to the same database exactly under the ownership it ran under; a Submitter finds
// its job's claim with batchclaim.ClaimFrom. Like WriteTx, it retries the transaction after a
// lock timeout, deadlock or serialization failure, so fn must be safe to run again.
func (e *Engine) WriteFenced(ctx context.Context, c Claim, fn func(pgx.Tx) error) error {
	return e.WriteTx(ctx, func(tx pgx.Tx) error {
		if err := e.Fence(ctx, tx, c); err != nil {
			return err
		}
		if err := fn(tx); err != nil {
			return fmt.Errorf("fenced write for %s@%d: %w", c.ServiceID, c.Epoch, err)
		}
		return nil
	})
}
