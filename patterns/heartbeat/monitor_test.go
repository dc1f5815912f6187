package heartbeat_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/batchclaim/batchclaim"
	"github.com/batchclaim/batchclaim/patterns/heartbeat"
	"github.com/batchclaim/batchclaim/pgdb"
)

func TestMissesRaiseOnceAndAFreshHeartbeatClears(t *testing.T) {
	t.Parallel()
	b := setup(t, eventType("Heartbeat_vDNS", time.Second, 3))
	r := b.beat(t, "Heartbeat_vDNS", "vnf-1")
	due := r.ReceivedAt.Add(3 * time.Second)

	if raised, _ := b.step(t, at(due.Add(-time.Microsecond))); len(raised) != 0 {
		t.Fatalf("raised %d events before 3 intervals had passed", len(raised))
	}
	raised, _ := b.step(t, at(due))
	if len(raised) != 1 {
		t.Fatalf("at 3 missed intervals: raised %d events, want 1", len(raised))
	}
	e := raised[0]
	if e.Kind != heartbeat.Raised || e.Episode != 1 || e.HeartbeatSeq != 1 || !e.LastReceivedAt.Equal(r.ReceivedAt) ||
		e.InstanceID != b.id || e.ClosedLoopEventStatus != "ONSET" || e.ControlLoop.PolicyName != "Heartbeat_vDNS-policy" {
		t.Fatalf("raise = %+v", e)
	}
	for _, later := range []time.Time{due, due.Add(time.Hour)} {
		if raised, _ := b.step(t, at(later)); len(raised) != 0 {
			t.Fatalf("raised again while the source stayed silent: %+v", raised)
		}
	}

	if rec := b.beat(t, "Heartbeat_vDNS", "vnf-1"); !rec.Raised || rec.Seq != 2 {
		t.Fatalf("receipt of the fresh heartbeat = %+v, want raised, seq 2", rec)
	}
	_, cleared := b.step(t, nil)
	if len(cleared) != 1 || cleared[0].Episode != 1 || cleared[0].Reason != heartbeat.ReasonHeartbeat || cleared[0].ClosedLoopEventStatus != "ABATED" {
		t.Fatalf("after a fresh heartbeat: cleared %+v, want episode 1", cleared)
	}
	if raised, cleared := b.step(t, nil); len(raised)+len(cleared) != 0 {
		t.Fatalf("a second step wrote %d raises and %d clears, want none", len(raised), len(cleared))
	}

	// A new silence is a new episode.
	raised, _ = b.step(t, at(time.Now().Add(time.Hour)))
	if len(raised) != 1 || raised[0].Episode != 2 {
		t.Fatalf("second silence raised %+v, want episode 2", raised)
	}
	var kinds []string
	for _, e := range b.events(t) {
		kinds = append(kinds, fmt.Sprintf("%s#%d", e.Kind, e.Episode))
	}
	if fmt.Sprint(kinds) != "[raised#1 cleared#1 raised#2]" {
		t.Fatalf("stored events %v", kinds)
	}
}

// The source's clock (lastEpochMicrosec) far in the past or the future changes nothing: the
// database's received_at is what is judged.
func TestTheSourceClockIsNotJudged(t *testing.T) {
	t.Parallel()
	// An interval long enough that neither source falls silent on its own while the test
	// runs on a loaded machine; the one silence is made by moving the database's view of time.
	b := setup(t, eventType("hb", 5*time.Second, 2))
	ctx := t.Context()
	for src, us := range map[string]int64{
		"behind": time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro(),
		"ahead":  time.Now().Add(24 * time.Hour).UnixMicro(),
	} {
		if _, err := heartbeat.Record(ctx, b.pool, heartbeat.Heartbeat{SourceName: src, EventName: "hb", LastEpochMicrosec: us}); err != nil {
			t.Fatal(err)
		}
	}
	if raised, _ := b.step(t, nil); len(raised) != 0 {
		t.Fatalf("a fresh heartbeat with a skewed source clock was raised: %+v", raised)
	}
	b.age(t, "hb", "ahead", 11*time.Second)
	raised, _ := b.step(t, nil)
	if len(raised) != 1 || raised[0].SourceName != "ahead" {
		t.Fatalf("a source with its clock a day ahead, silent 2 intervals: raised %+v, want it", raised)
	}
}

// A silence that ended before any step saw it (no active instance meanwhile) is still
// raised, by the next step, and cleared in the same step.
func TestALateSilenceIsRaisedAndCleared(t *testing.T) {
	t.Parallel()
	b := setup(t, eventType("hb", time.Second, 3))
	first := b.beat(t, "hb", "vnf-1")
	b.age(t, "hb", "vnf-1", 10*time.Second)
	b.beat(t, "hb", "vnf-1") // ends the silence; no step ran during it
	raised, cleared := b.step(t, nil)
	if len(raised) != 1 || raised[0].HeartbeatSeq != 1 || !raised[0].LastReceivedAt.Equal(first.ReceivedAt.Add(-10*time.Second)) {
		t.Fatalf("late silence: raised %+v, want episode 1 after heartbeat 1", raised)
	}
	if len(cleared) != 1 || cleared[0].Episode != 1 || cleared[0].HeartbeatSeq != 2 {
		t.Fatalf("late silence: cleared %+v, want episode 1 by heartbeat 2", cleared)
	}
	if raised, cleared := b.step(t, nil); len(raised)+len(cleared) != 0 {
		t.Fatalf("the late silence was written again: %+v %+v", raised, cleared)
	}
}

// A step whose fence fails writes nothing: the state stays for the next active instance.
func TestAFencedOutStepWritesNothing(t *testing.T) {
	t.Parallel()
	b := setup(t, eventType("hb", time.Second, 1))
	b.beat(t, "hb", "vnf-1")
	b.age(t, "hb", "vnf-1", 10*time.Second)
	lost := heartbeat.FenceFunc(func(context.Context, pgdb.Querier, string) error {
		return fmt.Errorf("fence: %w", batchclaim.ErrClaimLost)
	})
	_, _, _, err := heartbeat.Step(t.Context(), b.pool, lost, b.id, 1, nil)
	if !errors.Is(err, batchclaim.ErrClaimLost) {
		t.Fatalf("fenced-out step: err %v, want ErrClaimLost", err)
	}
	if es := b.events(t); len(es) != 0 {
		t.Fatalf("a fenced-out step stored %d events", len(es))
	}
	if raised, _ := b.step(t, nil); len(raised) != 1 {
		t.Fatalf("the next active step raised %d, want 1", len(raised))
	}
}

// The unique key makes a second raise of an episode impossible, whoever writes it.
func TestAnEpisodeCannotBeStoredTwice(t *testing.T) {
	t.Parallel()
	b := setup(t, eventType("hb", time.Second, 1))
	b.beat(t, "hb", "vnf-1")
	b.age(t, "hb", "vnf-1", 10*time.Second)
	if raised, _ := b.step(t, nil); len(raised) != 1 {
		t.Fatal("no raise")
	}
	_, err := b.pool.Exec(t.Context(), `INSERT INTO batchclaim.heartbeat_events (event_name, source_name, episode, kind, reason,
		last_received_at, last_epoch_microsec, heartbeat_seq, interval_ms, missed_count, control_loop, instance_id, term_epoch)
		SELECT event_name, source_name, episode, kind, reason, last_received_at, last_epoch_microsec, heartbeat_seq,
		       interval_ms, missed_count, control_loop, gen_random_uuid(), term_epoch + 1 FROM batchclaim.heartbeat_events`)
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "23505" {
		t.Fatalf("a second raise of episode 1: err %v, want a unique violation", err)
	}
}

// Concurrent heartbeats and steps: every silence is raised at most once per episode and
// every raise is eventually cleared by a heartbeat.
func TestStepsRacingHeartbeatsKeepEpisodesWhole(t *testing.T) {
	t.Parallel()
	b := setup(t, eventType("hb", 50*time.Millisecond, 1))
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		for i := 0; ctx.Err() == nil; i++ {
			_, err := heartbeat.Record(ctx, b.pool, heartbeat.Heartbeat{SourceName: fmt.Sprint("vnf-", i%3), EventName: "hb", LastEpochMicrosec: 1})
			if err != nil && ctx.Err() == nil {
				errc <- err
				return
			}
			if i%7 == 0 {
				time.Sleep(70 * time.Millisecond) // a silence of more than one interval now and then
			}
		}
		errc <- nil
	}()
	for ctx.Err() == nil {
		if _, _, _, err := heartbeat.Step(ctx, b.pool, noFence, b.id, 1, nil); err != nil && ctx.Err() == nil {
			t.Fatal(err)
		}
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	// Long intervals from now on, a heartbeat from each source and a step: every open
	// episode must be cleared.
	if err := heartbeat.AddEventType(t.Context(), b.pool, eventType("hb", time.Hour, 1)); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		b.beat(t, "hb", fmt.Sprint("vnf-", i))
	}
	b.step(t, nil)
	open := map[string]int64{}
	raises := 0
	for _, e := range b.events(t) {
		k := e.SourceName
		switch e.Kind {
		case heartbeat.Raised:
			raises++
			if open[k] != 0 {
				t.Fatalf("%s: episode %d raised while %d open", k, e.Episode, open[k])
			}
			open[k] = e.Episode
		case heartbeat.Cleared:
			if open[k] != e.Episode {
				t.Fatalf("%s: cleared %d, open %d", k, e.Episode, open[k])
			}
			open[k] = 0
		}
	}
	for k, ep := range open {
		if ep != 0 {
			t.Fatalf("%s: episode %d left raised after fresh heartbeats", k, ep)
		}
	}
	if raises == 0 {
		t.Fatal("no silence was raised: the test did not exercise raising")
	}
}

// A source that beats once after its raise and falls silent again gets its episode cleared
// and a new one raised in the same step; a second silence that ends before any step, while
// the first one's episode is still open, is still raised (late) and cleared.
func TestSilencesBackToBack(t *testing.T) {
	t.Parallel()
	b := setup(t, eventType("hb", time.Second, 2))
	b.beat(t, "hb", "vnf-1")
	b.age(t, "hb", "vnf-1", 10*time.Second)
	if raised, _ := b.step(t, nil); len(raised) != 1 {
		t.Fatalf("first silence: raised %d", len(raised))
	}
	b.beat(t, "hb", "vnf-1")
	b.age(t, "hb", "vnf-1", 10*time.Second)
	raised, cleared := b.step(t, nil)
	if len(cleared) != 1 || cleared[0].Episode != 1 || len(raised) != 1 || raised[0].Episode != 2 || raised[0].HeartbeatSeq != 2 {
		t.Fatalf("silent again after one heartbeat: raised %v, cleared %v; want 1 cleared, 2 raised", keysOf(raised), keysOf(cleared))
	}
	b.beat(t, "hb", "vnf-1") // seq 3: ends episode 2's silence, no step
	b.age(t, "hb", "vnf-1", 10*time.Second)
	b.beat(t, "hb", "vnf-1") // seq 4: ends a second silence, no step
	raised, cleared = b.step(t, nil)
	if len(raised) != 1 || raised[0].Episode != 3 || raised[0].HeartbeatSeq != 3 || len(cleared) != 2 {
		t.Fatalf("two silences between steps: raised %v, cleared %v; want episode 3 after heartbeat 3, episodes 2 and 3 cleared",
			keysOf(raised), keysOf(cleared))
	}
}
