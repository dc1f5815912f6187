package election_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/batchclaim/batchclaim"
	"github.com/batchclaim/batchclaim/patterns/election"
	"github.com/batchclaim/batchclaim/pgdb"
)

// The timeout must exceed twice the heartbeat interval; a knob left unset follows from the
// other. An Elector with these timings steps down T - I after the send of its last
// confirmed heartbeat.
func ExampleConfig_Resolve() {
	c, err := election.Config{Roles: []string{"scheduler"}, Timeout: 5 * time.Second}.Resolve()
	fmt.Println(c.HeartbeatInterval, c.Timeout, err)
	fmt.Println("steps down after:", c.Timeout-c.HeartbeatInterval)

	_, err = election.Config{Roles: []string{"scheduler", "broker"}, HeartbeatInterval: time.Second, Timeout: 2 * time.Second}.Resolve()
	fmt.Println(err)
	// Output:
	// 1s 5s <nil>
	// steps down after: 4s
	// invalid election config: timeout T > 2I violated: T = 2s, I = 1s (2I = 2s)
}

// Embedding: stand for a role, do the primary's work while the term's context lives, and
// fence every write that only the primary may make.
func ExampleNew() {
	run := func(ctx context.Context, db pgdb.DB) error {
		var el *election.Elector
		el, err := election.New(db, election.Config{
			Roles:             []string{"scheduler"},
			HeartbeatInterval: time.Second,
			Timeout:           5 * time.Second,
			OnElected: func(ctx context.Context, t election.Term) {
				// Primary of t.Role until ctx is cancelled, which happens before anyone else
				// can be elected.
				for ctx.Err() == nil {
					err := pgx.BeginFunc(ctx, db.Pool(), func(tx pgx.Tx) error {
						if err := el.Fence(ctx, tx, t); err != nil {
							return err // wraps batchclaim.ErrClaimLost: this term is over
						}
						_, err := tx.Exec(ctx, "UPDATE schedule SET owner_epoch = $1", t.Epoch)
						return err
					})
					if errors.Is(err, batchclaim.ErrClaimLost) {
						return
					}
					time.Sleep(time.Second)
				}
			},
		})
		if err != nil {
			return err
		}
		return el.Run(ctx) // until ctx ends; then the term is resigned
	}
	_ = run
}
