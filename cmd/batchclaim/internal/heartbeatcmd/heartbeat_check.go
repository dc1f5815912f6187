package heartbeatcmd

import (
	"context"
	"math"
	"sort"
	"time"

	"github.com/batchclaim/batchclaim/patterns/heartbeat"
)

// Tolerances of the check. A pause is measured between two heartbeats' database stamps;
// the service judges with the same stamps, so a pause of K intervals is raised exactly. The
// tolerance covers a heartbeat stored whose answer was lost (its stamp is unknown here).
const (
	hbLostTolerance     = 100 * time.Millisecond
	hbSpuriousTolerance = 250 * time.Millisecond
)

// check compares each source's accepted heartbeats with the stored events. end is the
// database time up to which pauses are judged; a removed type's pauses end at its removal.
func (d *hbDemo) check(ctx context.Context, end, removedAt time.Time) error {
	events, err := heartbeat.ListEvents(ctx, d.db, 0, 100000)
	if err != nil {
		return err
	}
	type key struct{ event, source string }
	bySource := map[key][]heartbeat.Event{}
	for _, e := range events {
		bySource[key{e.EventName, e.SourceName}] = append(bySource[key{e.EventName, e.SourceName}], e)
		switch {
		case e.Kind == heartbeat.Raised:
			d.sum.Raises++
		case e.Reason == heartbeat.ReasonRemoved:
			d.sum.Clears++
			d.sum.ClearsOfRemovedType++
		default:
			d.sum.Clears++
		}
		if n := d.hook.received(e.Key()); n == 0 {
			d.sum.Undelivered++
			d.sum.problem("%s stored but never received by the webhook", e.Key())
		} else if n > 1 {
			d.sum.WebhookRepeats += n - 1
		}
	}
	for _, s := range d.sources {
		s.mu.Lock()
		beats := append([]heartbeat.Receipt(nil), s.beats...)
		d.sum.Heartbeats += len(beats)
		d.sum.HeartbeatsRejected += s.rejected
		s.mu.Unlock()
		stop := end
		if s.event == "Heartbeat_old" && !removedAt.IsZero() {
			stop = removedAt
		}
		d.checkSource(s, beats, bySource[key{s.event, s.name}], stop)
	}
	bad, err := heartbeat.AuditWriters(ctx, d.db, heartbeat.RoleDefault)
	if err != nil {
		return err
	}
	d.sum.RaisedByStandby = len(bad)
	for _, e := range bad {
		d.sum.problem("%s written by %s (epoch %d) at %s while it was not the active instance", e.Key(), e.InstanceID, e.TermEpoch, e.WrittenAt.Format(time.RFC3339Nano))
	}
	if err := d.db.QueryRow(ctx, "SELECT count(*) FROM batchclaim.election_events WHERE role = $1 AND event = 'elected'", heartbeat.RoleDefault).Scan(&d.sum.Terms); err != nil {
		return err
	}
	d.hook.mu.Lock()
	d.sum.WebhookPosts, d.sum.WebhookRefused = d.hook.posts, d.hook.refused
	d.hook.mu.Unlock()
	d.mu.Lock()
	d.sum.PostsRetried = d.retried
	d.mu.Unlock()
	return nil
}

// checkSource judges one source. Its pauses are the intervals between consecutive accepted
// heartbeats; the last one has no end. Each raise names the heartbeat before its pause
// (HeartbeatSeq), which places it in exactly one pause. Pauses are judged for loss only up to
// stop (the service had time to raise what came due before it), and a raise counts as
// cleared-or-lost only if its source beat again before stop.
func (d *hbDemo) checkSource(s *hbDemoSource, beats []heartbeat.Receipt, events []heartbeat.Event, stop time.Time) {
	if len(beats) == 0 {
		return
	}
	sort.Slice(beats, func(i, j int) bool { return beats[i].Seq < beats[j].Seq })
	k := time.Duration(s.missed) * s.interval
	const unbounded = time.Duration(math.MaxInt64)
	// gap is the pause after heartbeat i, as long as the database's stamps say.
	gap := func(i int) time.Duration {
		if i+1 < len(beats) {
			return beats[i+1].ReceivedAt.Sub(beats[i].ReceivedAt)
		}
		return unbounded
	}
	// judged is how much of that pause lies before stop.
	judged := func(i int) time.Duration { return min(gap(i), stop.Sub(beats[i].ReceivedAt)) }
	// pauseOf returns the index of the accepted heartbeat a raise follows (-1: before the
	// first one known).
	pauseOf := func(seq int64) int {
		return sort.Search(len(beats), func(i int) bool { return beats[i].Seq > seq }) - 1
	}
	raises := make([]int, len(beats))
	cleared := map[int64]bool{}
	for _, e := range events {
		if e.Kind == heartbeat.Cleared {
			cleared[e.Episode] = true
		}
	}
	for _, e := range events {
		if e.Kind != heartbeat.Raised {
			continue
		}
		i := pauseOf(e.HeartbeatSeq)
		if i < 0 {
			continue
		}
		raises[i]++
		if i+1 < len(beats) && e.WrittenAt.After(beats[i+1].ReceivedAt) {
			d.sum.LateRaises++ // raised after its pause ended (a pause during the failover)
		}
		// A raise whose source beat again before stop must be cleared.
		if i+1 < len(beats) && beats[i+1].ReceivedAt.Before(stop) && !cleared[e.Episode] {
			d.sum.LostClears++
			d.sum.problem("%s/%s episode %d: beat again at %s, never cleared", s.event, s.name, e.Episode, beats[i+1].ReceivedAt.Format(time.RFC3339Nano))
		}
		if gap(i) < k-hbSpuriousTolerance {
			d.sum.SpuriousRaises++
			d.sum.problem("%s/%s episode %d raised for a pause of %s (K intervals: %s)", s.event, s.name, e.Episode, gap(i), k)
		}
	}
	for i := range beats {
		g := judged(i)
		if g >= k {
			d.sum.Silences++
		}
		switch {
		case g >= k+hbLostTolerance && raises[i] == 0:
			d.sum.LostRaises++
			d.sum.problem("%s/%s silent for %s after heartbeat %d (K intervals: %s), no raise stored", s.event, s.name, g.Round(time.Millisecond), beats[i].Seq, k)
		case raises[i] > 1:
			d.sum.DuplicateRaises += raises[i] - 1
			d.sum.problem("%s/%s: %d raises for one pause after heartbeat %d", s.event, s.name, raises[i], beats[i].Seq)
		}
	}
}
