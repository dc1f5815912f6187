package election

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/batchclaim/batchclaim"
	"github.com/batchclaim/batchclaim/internal/db"
	"github.com/batchclaim/batchclaim/pgdb"
)

// Term is one instance's tenure as primary of a role. Epoch is its fencing token: it grows
// by one on every election of the role and is never reused.
type Term struct {
	Role       string
	Epoch      int64
	InstanceID uuid.UUID
	Name, Host string
}

// GetPrimary returns the term of role's live primary: the source design's GetPrimary. The
// primary is live while its lease has not expired by the database's clock. It returns an
// error wrapping batchclaim.ErrNotFound when the role has no live primary. q is the pgdb.DB
// the electors use (or a transaction of the caller's moved into its schema by DB.In).
func GetPrimary(ctx context.Context, q pgdb.Querier, role string) (Term, error) {
	st, err := readTerms(ctx, q, []string{role}, nil)
	if err != nil {
		return Term{}, fmt.Errorf("get primary of %q: %w", role, err)
	}
	if len(st) == 0 || !st[0].live {
		return Term{}, fmt.Errorf("primary of %q: %w", role, batchclaim.ErrNotFound)
	}
	return st[0].term, nil
}

// FenceTerm makes the caller's transaction conditional on t still being the live term of
// its role: it locks the role's term row FOR SHARE until tx ends, so that no new term can
// begin before tx commits, and returns an error wrapping batchclaim.ErrClaimLost if t is
// over (a newer term exists, the term was resigned, or its holder's lease expired by the
// database clock). It checks only the database; Elector.Fence also checks the instance's
// own deadline. Call it first in the transaction, before the writes it guards, and bound
// the transaction (idle_in_transaction_session_timeout, as Elector.Fence sets it): a
// takeover waits for it. tx is the caller's transaction moved into the electors' schema by
// pgdb.DB.In.
func FenceTerm(ctx context.Context, tx pgdb.Querier, t Term) error {
	return fenceTerm(ctx, tx, t, nil)
}

func fenceTerm(ctx context.Context, tx pgdb.Querier, t Term, now *time.Time) error {
	_, err := db.New().ElectionTermFence(ctx, tx, db.ElectionTermFenceParams{
		Role: t.Role, InstanceID: t.InstanceID, Epoch: t.Epoch, Now: now,
	})
	if pgdb.NoRows(err) {
		return fmt.Errorf("fence %s@%d: %w", t.Role, t.Epoch, batchclaim.ErrClaimLost)
	}
	if err != nil {
		return fmt.Errorf("fence %s@%d: %w", t.Role, t.Epoch, err)
	}
	return nil
}

// roleState is one role's term as the database sees it now.
type roleState struct {
	term      Term // InstanceID is zero when nobody holds the role
	live      bool
	expiresIn time.Duration // how long the holder's lease still runs; 0 when not live
}

func readTerms(ctx context.Context, q pgdb.Querier, roles []string, now *time.Time) ([]roleState, error) {
	rows, err := db.New().ElectionTermsRead(ctx, q, db.ElectionTermsReadParams{Roles: roles, Now: now})
	if err != nil {
		return nil, err
	}
	out := make([]roleState, 0, len(rows))
	for _, r := range rows {
		st := roleState{live: r.Live, expiresIn: time.Duration(r.ExpiresInMs) * time.Millisecond}
		st.term = Term{Role: r.Role, Epoch: r.Epoch, Name: r.Name, Host: r.Host}
		if r.InstanceID != nil {
			st.term.InstanceID = *r.InstanceID
		}
		out = append(out, st)
	}
	return out, nil
}
