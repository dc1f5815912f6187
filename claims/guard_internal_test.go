package claims

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/batchclaim/batchclaim/testkit/dbtest"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// noPool is a pgdb.Beginner no statement reaches.
type noPool struct{}

func (noPool) Exec(context.Context, string, ...any) (pgconn.CommandTag, error) {
	return pgconn.CommandTag{}, nil
}
func (noPool) Query(context.Context, string, ...any) (pgx.Rows, error) { return nil, nil }
func (noPool) QueryRow(context.Context, string, ...any) pgx.Row        { return nil }
func (noPool) BeginTx(context.Context, pgx.TxOptions) (pgx.Tx, error)  { return nil, nil }

// The guard's verdicts from what it observes: a new timeline with this instance's commits is
// fine; an older timeline (a former primary still taking sessions) refuses while it is
// reached; a new timeline without the last renewal refuses for good; a missing synchronous
// standby refuses while it is missing, when one is required.
func TestGuardJudge(t *testing.T) {
	t.Parallel()
	e, err := New(dbtest.Unreachable(t), Config{RequireSyncStandby: true})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	at := func(s int) *time.Time { v := time.Date(2030, 1, 1, 0, 0, s, 0, time.UTC); return &v }
	obs := func(tl int64, sync bool, hb *time.Time) observation {
		return observation{timeline: tl, sync: sync, epochs: 100, heartbeat: hb}
	}
	steps := []struct {
		name string
		o    observation
		want string // part of Refusal; empty: none
	}{
		{"first sight", obs(3, true, at(1)), ""},
		{"no synchronous standby", obs(3, false, at(2)), "synchronous standby"},
		{"standby back", obs(3, true, at(3)), ""},
		{"promotion that kept everything", obs(4, true, at(4)), ""},
		{"a former primary reached", obs(3, true, at(3)), "older than timeline 4"},
		{"the leader again", obs(4, true, at(5)), ""},
		{"promotion that lost the last renewal", obs(5, true, at(4)), "lost commits"},
		{"everything fine afterwards", obs(5, true, at(9)), "lost commits"},
	}
	for _, s := range steps {
		e.judge(ctx, noPool{}, s.o)
		e.renewedAt(*s.o.heartbeat) // as if a renewal committed now, with that stamp
		got := e.Refusal()
		if (s.want == "") != (got == "") || !strings.Contains(got, s.want) {
			t.Fatalf("%s: refusal %q, want %q", s.name, got, s.want)
		}
	}
	if n := e.Refusals(); n != 3 {
		t.Fatalf("%d refusals counted, want 3 (no standby, former primary, lost commits)", n)
	}
}
