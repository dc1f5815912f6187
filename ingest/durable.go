package ingest

import (
	"context"
	"fmt"

	"github.com/batchclaim/batchclaim/pgdb"
)

// durableRepeat makes the transaction on q that found a job already stored commit only once
// that job is as durable as a new one would be, before the repeat is reported stored.
//
// A commit that waits for a synchronous standby and is given up (its context ended, a cancel
// request) has committed on the primary all the same: its rows are visible there while no
// standby has them, and a failover to the standby loses them. A client that retries such an
// enqueue finds the job and is told it is stored; a transaction that only read writes no
// commit record and does not wait for the standby, so the client would be told "stored" of a
// job the next failover loses. A transactional logical message (a WAL record of a few bytes,
// no table, any role, any wal_level) makes the transaction one that wrote, and the commit of
// one that wrote waits for the standby to have all WAL up to its commit record: the repeat's
// commit returns once the first job is on the standby too. (A transaction id alone is not
// enough: a transaction that wrote no WAL before its commit does not wait.)
func durableRepeat(ctx context.Context, q pgdb.Querier) error {
	if _, err := q.Exec(ctx, "SELECT pg_logical_emit_message(true, 'batchclaim', '')"); err != nil {
		return fmt.Errorf("make the stored batch durable: %w", err)
	}
	return nil
}
