package history

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/batchclaim/batchclaim"
)

// The key's promise, checked from a recorded history of jobs (batches): at most one job of a
// service_id is in flight at any time, whatever wrote it (the data path, Retry, Cancel,
// run-at, Resume, retention, dropped claim rows); a job that was stored or revived by Retry is
// run (at the end it is finished or still queued, never lost); a terminal state never goes
// back except through a recorded Retry; and the attempt numbers of a job never repeat.

// InFlightStates are the states in which a job counts as in flight: INFLIGHT (marked for its
// POST or run), UNKNOWN (its outcome may have taken effect) and PENDING (accepted by a ledger
// and not settled: still in flight there). A key's next job may go only once its job in
// flight has left these states.
var InFlightStates = []batchclaim.State{batchclaim.StateInflight, batchclaim.StateUnknown, batchclaim.StatePending}

// JobChange is one recorded change of a job's state.
type JobChange struct {
	// At is when it was written, by the database clock: the now() of its transaction, the
	// same clock for every record, so that a statement that ends one job's flight and starts
	// the next job's places both at one instant.
	At   time.Time
	From batchclaim.State // the state the record says it left; empty when it does not say
	To   batchclaim.State
	// Retry: written by a Retry (a row of batch_transitions with detail 'retry').
	Retry bool
	// Src names the record, for messages: transition, attempt, outcome, batch row.
	Src string
}

// Job is the recorded history of one job.
type Job struct {
	Seq     int64
	Service string
	BatchID string
	Stored  time.Time   // when it was stored (created_at)
	Changes []JobChange // in any order: the checks order them
	// Attempts are the attempt numbers its in-flight marks drew, in commit order; nil when
	// they were not recorded (the check of attempts then skips the job).
	Attempts []int
	// Resets are the attempt counts a write set back (from, to pairs): a counter set back
	// before a new mark is how an attempt number comes to repeat.
	Resets [][2]int
	// Final is its state at the end, or when it was deleted.
	Final batchclaim.State
	// Deleted is when retention deleted it (database clock); zero while it is stored.
	Deleted time.Time
	// Queued: it is still stored and its service_id has a claim row, so that whichever
	// instance takes the row will run it. An unfinished job without one waits for nobody.
	Queued bool
	// Row is its batch row's bookkeeping as read with Final; nil when not read.
	Row *RowMarks
}

// RowMarks are the columns of a batch row that follow its state: unfinished (which the index
// of unfinished batches, and so every read of a key's head, goes by) and finished_at (which
// retention goes by). Each writer sets them with the state, and a trigger corrects any that
// does not (docs/schema.md).
type RowMarks struct {
	Unfinished bool
	FinishedAt bool // finished_at is set
}

// JobHistory is what the job checks read: every job stored during a run, deleted or not.
type JobHistory struct {
	Jobs []Job
	// End is when the history was read (database clock): a job still in flight then is in
	// flight until End.
	End time.Time
}

// The kinds of Promise.
const (
	PromiseStored  = "stored"  // an enqueue's COMMIT returned to its client
	PromiseRevived = "revived" // a Retry returned the job as changed
)

// Promise is what a client was told about a job: that it was stored, or revived by a Retry.
type Promise struct {
	Kind    string
	Seq     int64  // zero when only BatchID is known
	BatchID string // empty when Seq is known
	// At is when the client was told, by the database clock (for a Retry, the now() of its
	// transaction); zero when not known.
	At time.Time
}

// Finding is what one check found: its violations and the first few, described.
type Finding struct {
	Count    int
	Problems []string
}

func (f *Finding) add(format string, a ...any) {
	f.Count++
	if len(f.Problems) < 20 {
		f.Problems = append(f.Problems, fmt.Sprintf(format, a...))
	}
}

// JobReport is what CheckJobs found.
type JobReport struct {
	Jobs     int // jobs in the history, deleted ones included
	Changes  int // recorded state changes
	Retries  int // changes written by Retry
	Deleted  int // jobs retention deleted
	Promises int // promises checked
	// DoubleInFlight: two jobs of one service_id in flight at one database instant.
	DoubleInFlight Finding
	// Lost: a job stored or revived that is neither finished nor queued at the end, or that
	// retention deleted unfinished.
	Lost Finding
	// TerminalRegressions: a job left a terminal state other than through a recorded Retry.
	TerminalRegressions Finding
	// RepeatedAttempts: an attempt number drawn twice by one job.
	RepeatedAttempts Finding
	// RowMarks: a job whose row's unfinished or finished_at disagrees with its state.
	RowMarks Finding
}

// CheckJobs runs the five job checks.
func CheckJobs(h JobHistory, promises []Promise) JobReport {
	r := JobReport{Jobs: len(h.Jobs), Promises: len(promises)}
	for _, j := range h.Jobs {
		r.Changes += len(j.Changes)
		for _, c := range j.Changes {
			if c.Retry {
				r.Retries++
			}
		}
		if !j.Deleted.IsZero() {
			r.Deleted++
		}
	}
	r.DoubleInFlight = CheckInFlight(h)
	r.Lost = CheckLostJobs(h, promises)
	r.TerminalRegressions = CheckTerminal(h)
	r.RepeatedAttempts = CheckAttempts(h)
	r.RowMarks = CheckRowMarks(h)
	return r
}

// CheckRowMarks counts the jobs whose row, as read, says unfinished for a terminal state or
// finished for another, or has finished_at set or not against its state: such a job is
// skipped by every read of its key's head, or read as the head when it is done, or kept or
// deleted by retention against its state.
func CheckRowMarks(h JobHistory) Finding {
	var f Finding
	for _, j := range h.Jobs {
		if j.Row == nil {
			continue
		}
		if done := j.Final.Terminal(); j.Row.Unfinished == done || j.Row.FinishedAt != done {
			f.add("%s: seq %d is %s with unfinished %t and finished_at set %t", j.Service, j.Seq, j.Final, j.Row.Unfinished, j.Row.FinishedAt)
		}
	}
	return f
}

// timeline returns a job's changes in the order they happened: by time, and within one
// instant in the order their states chain (a change that leaves the state the one before
// entered comes next). A change's time is its transaction's now(), which is when the
// transaction began, not when it wrote: an operator's transaction that began before an
// outcome committed and then changed the state that outcome wrote (a Cancel of the DELAYED
// job) carries the earlier time. So a change that says it left a state the job has not
// entered yet goes after the later change that enters that state from the current one.
func timeline(j Job) []JobChange {
	cs := slices.Clone(j.Changes)
	slices.SortStableFunc(cs, func(a, b JobChange) int { return a.At.Compare(b.At) })
	cur := batchclaim.StateNew
	for i := 0; i < len(cs); i++ {
		best := i
		for k := i; k < len(cs) && cs[k].At.Equal(cs[i].At); k++ {
			if cs[k].From == cur {
				best = k
				break
			}
		}
		if best == i && cs[i].From != "" && cs[i].From != cur {
			for k := i + 1; k < len(cs); k++ {
				if cs[k].From == cur && cs[k].To == cs[i].From {
					best = k
					break
				}
			}
		}
		if best != i {
			c := cs[best]
			copy(cs[i+1:best+1], cs[i:best])
			cs[i] = c
		}
		cur = cs[i].To
	}
	return cs
}

// flight is one stretch of a job in flight.
type flight struct {
	seq        int64
	state      batchclaim.State
	from, to   time.Time
	retriedAt  time.Time // the job's last Retry before from; zero if none
	retriedVia string
}

// flights returns the stretches in which the job was in flight, by the database clock.
func (j Job) flights(end time.Time) []flight {
	if !j.Deleted.IsZero() {
		end = j.Deleted
	}
	var out []flight
	var retried time.Time
	cs := timeline(j)
	for i, c := range cs {
		if c.Retry {
			retried = c.At
		}
		if !slices.Contains(InFlightStates, c.To) {
			continue
		}
		to := end
		if i+1 < len(cs) {
			to = cs[i+1].At
		}
		if to.After(c.At) {
			out = append(out, flight{seq: j.Seq, state: c.To, from: c.At, to: to, retriedAt: retried})
		}
	}
	return out
}

// unfinished returns the stretches in which the job was unfinished (stored and in no
// terminal state), by the database clock: from when it was stored to its first terminal
// state, and from each Retry that revived it to the next.
func (j Job) unfinished(end time.Time) [][2]time.Time {
	if !j.Deleted.IsZero() {
		end = j.Deleted
	}
	var out [][2]time.Time
	from := j.Stored
	for _, c := range timeline(j) {
		switch {
		case c.To.Terminal() && !from.IsZero():
			out = append(out, [2]time.Time{from, c.At})
			from = time.Time{}
		case !c.To.Terminal() && from.IsZero():
			from = c.At
		}
	}
	if !from.IsZero() && end.After(from) {
		out = append(out, [2]time.Time{from, end})
	}
	return out
}

// IdleBetween reports whether service had, at some instant in [from, to] (database clock), no
// unfinished job: a moment its claim row could be dropped as idle.
func (h JobHistory) IdleBetween(service string, from, to time.Time) bool {
	var spans [][2]time.Time
	for _, j := range h.Jobs {
		if j.Service == service {
			spans = append(spans, j.unfinished(h.End)...)
		}
	}
	slices.SortFunc(spans, func(a, b [2]time.Time) int { return a[0].Compare(b[0]) })
	t := from
	for _, s := range spans {
		if s[0].After(t) {
			break // nothing covers t
		}
		if s[1].After(t) {
			t = s[1]
		}
		if t.After(to) {
			return false
		}
	}
	return !t.After(to)
}

// CheckInFlight counts the pairs of jobs of one service_id that were in flight (INFLIGHT,
// UNKNOWN or PENDING) at one database instant. A stretch in flight runs from the change
// that entered the state to the next change of the job (or the end, or its deletion); one
// that ends at the instant another begins (one statement recorded an outcome and marked the
// next job) is no overlap.
func CheckInFlight(h JobHistory) Finding {
	var f Finding
	per := map[string][]flight{}
	for _, j := range h.Jobs {
		per[j.Service] = append(per[j.Service], j.flights(h.End)...)
	}
	for _, svc := range sortedKeys(per) {
		fs := per[svc]
		slices.SortFunc(fs, func(a, b flight) int { return cmp.Or(a.from.Compare(b.from), cmp.Compare(a.seq, b.seq)) })
		seen := map[[2]int64]bool{}
		var open []flight
		for _, x := range fs {
			open = slices.DeleteFunc(open, func(y flight) bool { return !y.to.After(x.from) })
			for _, y := range open {
				if y.seq == x.seq || seen[[2]int64{y.seq, x.seq}] {
					continue
				}
				seen[[2]int64{y.seq, x.seq}] = true
				why := ""
				if !x.retriedAt.IsZero() {
					why = fmt.Sprintf(" (seq %d was revived by a Retry at %s)", x.seq, stamp(x.retriedAt))
				} else if !y.retriedAt.IsZero() {
					why = fmt.Sprintf(" (seq %d was revived by a Retry at %s)", y.seq, stamp(y.retriedAt))
				}
				f.add("%s: seq %d %s from %s while seq %d was %s (%s to %s): two jobs of the key in flight%s",
					svc, x.seq, x.state, stamp(x.from), y.seq, y.state, stamp(y.from), stamp(y.to), why)
			}
			open = append(open, x)
		}
	}
	return f
}

// CheckLostJobs counts jobs that were stored or revived and are neither finished nor queued
// at the end: an unfinished job whose service_id has no claim row (nobody will ever take
// it), a job retention deleted while it was unfinished (a Retry had revived it), a promised
// job that is gone without a record of its deletion, and a job a Retry reported revived that
// has no record of the retry or did not run again.
func CheckLostJobs(h JobHistory, promises []Promise) Finding {
	var f Finding
	bySeq := map[int64]*Job{}
	byID := map[string]*Job{}
	for i := range h.Jobs {
		j := &h.Jobs[i]
		bySeq[j.Seq] = j
		if j.BatchID != "" { // a job without an id is promised by its seq
			byID[j.BatchID] = j
		}
		switch {
		case !j.Deleted.IsZero() && !j.Final.Terminal():
			f.add("%s: seq %d deleted by retention at %s while %s%s: it will never run", j.Service, j.Seq, stamp(j.Deleted), j.Final, revivedNote(*j))
		case j.Deleted.IsZero() && !j.Final.Terminal() && !j.Queued:
			f.add("%s: seq %d is %s at the end and its service_id has no claim row%s: nobody will take it", j.Service, j.Seq, j.Final, revivedNote(*j))
		}
	}
	for _, p := range promises {
		j := bySeq[p.Seq]
		if p.Seq == 0 {
			j = byID[p.BatchID]
		}
		if j == nil {
			f.add("%s job %s (seq %d) at %s is gone: neither stored nor deleted by retention", p.Kind, short(p.BatchID), p.Seq, stamp(p.At))
			continue
		}
		if p.Kind != PromiseRevived {
			continue
		}
		cs := timeline(*j)
		k := slices.IndexFunc(cs, func(c JobChange) bool { return c.Retry && !c.At.Before(p.At) })
		switch {
		case k < 0:
			f.add("%s: seq %d was reported revived by a Retry at %s, but no retry of it is recorded", j.Service, j.Seq, stamp(p.At))
		case k == len(cs)-1 && j.Final.Terminal() && j.Deleted.IsZero():
			f.add("%s: seq %d was revived by a Retry at %s and is %s at the end without having run again", j.Service, j.Seq, stamp(p.At), j.Final)
		}
	}
	return f
}

func revivedNote(j Job) string {
	cs := timeline(j)
	for i := len(cs) - 1; i >= 0; i-- {
		if cs[i].Retry {
			return fmt.Sprintf(" (revived by a Retry at %s, from %s)", stamp(cs[i].At), cs[i].From)
		}
	}
	return ""
}

// CheckTerminal counts jobs that left a terminal state (COMMITTED, INVALID, DISCARDED,
// CANCELLED) other than through a recorded Retry: a recorded change out of it, a record that
// starts from another state than the terminal one the job was in (the state went back
// unrecorded), or an end state that differs from the terminal state the history ends in.
func CheckTerminal(h JobHistory) Finding {
	var f Finding
	for _, j := range h.Jobs {
		cur := batchclaim.StateNew
		var at time.Time
		for _, c := range timeline(j) {
			if cur.Terminal() && !c.Retry && (c.To != cur || (c.From != "" && c.From != cur)) {
				from := ""
				if c.From != "" && c.From != cur {
					from = fmt.Sprintf(", recorded as from %s", c.From)
				}
				f.add("%s: seq %d went from %s (at %s) to %s at %s without a Retry (%s%s)",
					j.Service, j.Seq, cur, stamp(at), c.To, stamp(c.At), c.Src, from)
			}
			cur, at = c.To, c.At
		}
		if cur.Terminal() && j.Final != cur {
			where := "at the end"
			if !j.Deleted.IsZero() {
				where = "when retention deleted it"
			}
			f.add("%s: seq %d is %s %s, but its history ends in %s (at %s) and records no Retry after it",
				j.Service, j.Seq, j.Final, where, cur, stamp(at))
		}
	}
	return f
}

// CheckAttempts counts attempt numbers a job drew more than once.
func CheckAttempts(h JobHistory) Finding {
	var f Finding
	for _, j := range h.Jobs {
		seen := map[int]int{}
		for _, n := range j.Attempts {
			seen[n]++
			if seen[n] == 2 {
				reset := ""
				if len(j.Resets) > 0 {
					reset = fmt.Sprintf(" (its count was set back %d -> %d)", j.Resets[0][0], j.Resets[0][1])
				}
				f.add("%s: seq %d drew attempt number %d twice%s", j.Service, j.Seq, n, reset)
			}
		}
	}
	return f
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return "?"
	}
	return t.Format("15:04:05.000000")
}
