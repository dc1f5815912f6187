package history_test

import (
	"strings"
	"testing"
	"time"

	"github.com/batchclaim/batchclaim"
	"github.com/batchclaim/batchclaim/testkit/history"
)

// Small histories built by hand: each check passes on a good one and counts the violation in
// a bad one.

var t0 = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

func ms(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }

func change(at int, from, to batchclaim.State) history.JobChange {
	return history.JobChange{At: ms(at), From: from, To: to, Src: "attempt"}
}

func retry(at int, from, to batchclaim.State) history.JobChange {
	return history.JobChange{At: ms(at), From: from, To: to, Retry: true, Src: "transition"}
}

const (
	sNew       = batchclaim.StateNew
	sInflight  = batchclaim.StateInflight
	sPending   = batchclaim.StatePending
	sUnknown   = batchclaim.StateUnknown
	sDelayed   = batchclaim.StateDelayed
	sCommitted = batchclaim.StateCommitted
	sInvalid   = batchclaim.StateInvalid
	sCancelled = batchclaim.StateCancelled
)

// committed is a job that ran once, from mark to settlement, between the two times.
func committed(seq int64, svc string, mark, settle int) history.Job {
	return history.Job{Seq: seq, Service: svc, BatchID: svc + "-" + string(rune('a'+seq)), Stored: ms(0), Final: sCommitted, Queued: true,
		Attempts: []int{1},
		Changes: []history.JobChange{change(mark, sNew, sInflight), change(mark+10, sInflight, sPending),
			{At: ms(settle), From: sPending, To: sCommitted, Src: "transition"}}}
}

func TestCheckInFlight(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		jobs []history.Job
		want int
	}{
		{"one after the other", []history.Job{committed(1, "s", 100, 200), committed(2, "s", 200, 300)}, 0},
		{"other keys are independent", []history.Job{committed(1, "s", 100, 200), committed(2, "t", 150, 300)}, 0},
		{"the next job marked while the first is pending", []history.Job{committed(1, "s", 100, 200), committed(2, "s", 150, 300)}, 1},
		{"a revived job marked while a later one is in flight", []history.Job{
			{Seq: 1, Service: "s", Stored: ms(0), Final: sInvalid, Changes: []history.JobChange{
				change(10, sNew, sInflight), change(20, sInflight, sInvalid), retry(140, sInvalid, sNew),
				change(150, sNew, sInflight), change(160, sInflight, sInvalid)}},
			committed(2, "s", 100, 200),
		}, 1},
		{"unknown until the end overlaps a later mark", []history.Job{
			{Seq: 1, Service: "s", Stored: ms(0), Final: sUnknown, Queued: true, Changes: []history.JobChange{change(10, sNew, sInflight), change(20, sInflight, sUnknown)}},
			committed(2, "s", 500, 600),
		}, 1},
		{"a job deleted by retention is no longer in flight", []history.Job{
			{Seq: 1, Service: "s", Stored: ms(0), Final: sNew, Deleted: ms(50), Changes: []history.JobChange{change(10, sNew, sInflight)}},
			committed(2, "s", 500, 600),
		}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := history.CheckInFlight(history.JobHistory{Jobs: tc.jobs, End: ms(10_000)})
			if f.Count != tc.want {
				t.Fatalf("double in flight = %d, want %d: %v", f.Count, tc.want, f.Problems)
			}
		})
	}
}

func TestCheckLostJobs(t *testing.T) {
	t.Parallel()
	revived := func(final batchclaim.State, queued bool, deleted int, after ...history.JobChange) history.Job {
		j := history.Job{Seq: 7, Service: "s", BatchID: "b7", Stored: ms(0), Final: final, Queued: queued,
			Changes: append([]history.JobChange{change(10, sNew, sCancelled), retry(100, sCancelled, sNew)}, after...)}
		if deleted > 0 {
			j.Deleted = ms(deleted)
		}
		return j
	}
	ran := []history.JobChange{change(200, sNew, sInflight), change(210, sInflight, sPending), change(300, sPending, sCommitted)}
	revival := []history.Promise{{Kind: history.PromiseRevived, Seq: 7, At: ms(100)}}
	for _, tc := range []struct {
		name     string
		jobs     []history.Job
		promises []history.Promise
		want     int
	}{
		{"revived and run", []history.Job{revived(sCommitted, false, 0, ran...)}, revival, 0},
		{"revived and still queued", []history.Job{revived(sNew, true, 0)}, revival, 0},
		{"revived and finished before retention deleted it", []history.Job{revived(sCommitted, false, 400, ran...)}, revival, 0},
		{"revived without a claim row", []history.Job{revived(sNew, false, 0)}, revival, 1},
		{"revived and deleted by retention before it ran", []history.Job{revived(sNew, false, 150)}, revival, 1},
		{"revived but no retry recorded", []history.Job{{Seq: 7, Service: "s", Final: sCancelled, Changes: []history.JobChange{change(10, sNew, sCancelled)}}}, revival, 1},
		{"revived but finished without running again", []history.Job{revived(sCancelled, false, 0)}, revival, 1},
		{"stored and gone without a deletion", nil, []history.Promise{{Kind: history.PromiseStored, BatchID: "b7", At: ms(5)}}, 1},
		{"stored and there", []history.Job{committed(1, "s", 10, 20)}, []history.Promise{{Kind: history.PromiseStored, BatchID: "s-b", At: ms(5)}}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := history.CheckLostJobs(history.JobHistory{Jobs: tc.jobs, End: ms(10_000)}, tc.promises)
			if f.Count != tc.want {
				t.Fatalf("lost = %d, want %d: %v", f.Count, tc.want, f.Problems)
			}
		})
	}
}

func TestCheckTerminal(t *testing.T) {
	t.Parallel()
	job := func(final batchclaim.State, cs ...history.JobChange) history.Job {
		return history.Job{Seq: 3, Service: "s", Final: final, Changes: cs}
	}
	for _, tc := range []struct {
		name string
		job  history.Job
		want int
	}{
		{"committed stays", job(sCommitted, change(10, sNew, sInflight), change(20, sInflight, sCommitted)), 0},
		{"invalid, retried, run again", job(sInvalid, change(10, sNew, sInflight), change(20, sInflight, sInvalid),
			retry(30, sInvalid, sNew), change(40, sNew, sInflight), change(50, sInflight, sInvalid)), 0},
		{"a delayed job cancelled", job(sCancelled, change(10, sNew, sInflight), change(20, sInflight, sDelayed), change(30, sDelayed, sCancelled)), 0},
		{"one instant, recorded in the other order", job(sCommitted, change(10, sInflight, sCommitted), change(10, sNew, sInflight)), 0},
		{"a late outcome after the commit", job(sUnknown, change(10, sNew, sInflight), change(20, sInflight, sCommitted), change(30, sInflight, sUnknown)), 1},
		{"cancelled, then marked without a retry", job(sCancelled, change(10, sNew, sCancelled), change(20, sNew, sInflight), change(30, sInflight, sCancelled)), 1},
		{"the table left the terminal state unrecorded", job(sNew, change(10, sNew, sInflight), change(20, sInflight, sInvalid)), 1},
		// A Cancel in a transaction that began (its now()) before the outcome it cancelled
		// committed: recorded earlier than the DELAYED it left.
		{"a cancel begun before the outcome it cancelled", job(sCancelled, change(10, sNew, sInflight),
			change(20, sDelayed, sCancelled), change(22, sInflight, sDelayed)), 0},
		{"an outcome written over a cancel", job(sDelayed, change(10, sNew, sInflight),
			change(20, sInflight, sCancelled), change(22, sInflight, sDelayed)), 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := history.CheckTerminal(history.JobHistory{Jobs: []history.Job{tc.job}})
			if f.Count != tc.want {
				t.Fatalf("terminal regressions = %d, want %d: %v", f.Count, tc.want, f.Problems)
			}
		})
	}
}

func TestCheckAttempts(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		attempts []int
		resets   [][2]int
		want     int
	}{
		{"counting on after a retry", []int{1, 2, 3, 4}, nil, 0},
		{"not recorded", nil, nil, 0},
		{"reset by a retry", []int{1, 2, 1, 2}, [][2]int{{2, 0}}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := history.JobHistory{Jobs: []history.Job{{Seq: 1, Service: "s", Attempts: tc.attempts, Resets: tc.resets}}}
			f := history.CheckAttempts(h)
			if f.Count != tc.want {
				t.Fatalf("repeated attempts = %d, want %d: %v", f.Count, tc.want, f.Problems)
			}
			if tc.resets != nil && !strings.Contains(f.Problems[0], "set back 2 -> 0") {
				t.Errorf("problem does not name the reset: %s", f.Problems[0])
			}
		})
	}
}

// CheckJobs counts each check apart and sums the history's size.
func TestCheckJobs(t *testing.T) {
	t.Parallel()
	h := history.JobHistory{End: ms(10_000), Jobs: []history.Job{
		committed(1, "s", 100, 200),
		committed(2, "s", 150, 300), // marked while 1 is pending
		{Seq: 3, Service: "s", Final: sNew, Deleted: ms(900), Attempts: []int{1, 1},
			Changes: []history.JobChange{change(400, sNew, sInflight), change(410, sInflight, sInvalid), retry(800, sInvalid, sNew)}},
	}}
	r := history.CheckJobs(h, nil)
	if r.Jobs != 3 || r.Retries != 1 || r.Deleted != 1 || r.DoubleInFlight.Count != 1 || r.Lost.Count != 1 ||
		r.TerminalRegressions.Count != 0 || r.RepeatedAttempts.Count != 1 || r.RowMarks.Count != 0 {
		t.Fatalf("report: %+v", r)
	}
}

// A row's marks must follow its state: unfinished and no finished_at while it is not
// terminal, the reverse once it is; a job whose row was not read is not judged.
func TestCheckRowMarks(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		final      history.Job
		unfinished bool
		finishedAt bool
		bad        bool
	}{
		{history.Job{Final: sNew}, true, false, false},
		{history.Job{Final: sInflight}, true, false, false},
		{history.Job{Final: sCommitted}, false, true, false},
		{history.Job{Final: sInvalid}, false, true, false},
		{history.Job{Final: sCommitted}, true, true, true},   // read as a head though done
		{history.Job{Final: sNew}, false, false, true},       // never read as a head
		{history.Job{Final: sCommitted}, false, false, true}, // never deleted by retention
		{history.Job{Final: sInflight}, true, true, true},    // deleted by retention while it runs
	} {
		j := tt.final
		j.Seq, j.Service, j.Row = 1, "s", &history.RowMarks{Unfinished: tt.unfinished, FinishedAt: tt.finishedAt}
		if got := history.CheckRowMarks(history.JobHistory{Jobs: []history.Job{j}}).Count; got != 0 != tt.bad {
			t.Errorf("%s, unfinished %t, finished_at %t: %d found, want bad %t", j.Final, tt.unfinished, tt.finishedAt, got, tt.bad)
		}
	}
	if got := history.CheckRowMarks(history.JobHistory{Jobs: []history.Job{{Seq: 1, Final: sCommitted}}}).Count; got != 0 {
		t.Errorf("a job whose row was not read: %d found", got)
	}
}

// A key is idle at an instant none of its jobs is stored and unfinished; a Retry makes its
// job unfinished again and retention's deletion ends it.
func TestIdleBetween(t *testing.T) {
	t.Parallel()
	revived := history.Job{Seq: 3, Service: "s", Stored: ms(600), Final: sCommitted, Changes: []history.JobChange{
		change(610, sNew, sInflight), change(620, sInflight, sInvalid), retry(800, sInvalid, sNew),
		change(810, sNew, sInflight), {At: ms(900), From: sInflight, To: sCommitted, Src: "transition"}}}
	open := history.Job{Seq: 4, Service: "s", Stored: ms(1000), Final: sNew, Deleted: ms(1100)}
	h := history.JobHistory{End: ms(2000), Jobs: []history.Job{
		committed(1, "s", 100, 300), // unfinished 0-300
		{Seq: 2, Service: "s", Stored: ms(250), Final: sNew, // stored at 250, cancelled at 500
			Changes: []history.JobChange{{At: ms(500), From: sNew, To: sCancelled, Src: "transition"}}},
		revived, open,
		committed(5, "t", 100, 1900), // another key's work counts for nothing
	}}
	for _, tc := range []struct {
		from, to int
		want     bool
	}{
		{0, 499, false},   // job 1, then job 2 from 250
		{0, 500, true},    // job 2 cancelled at 500
		{100, 650, true},  // idle from 500 to 600
		{610, 619, false}, // job 3 runs until it is invalid at 620
		{610, 700, true},  // idle from 620
		{630, 790, true},
		{810, 899, false},
		{1000, 1099, false}, // job 4 stored, deleted at 1100
		{1050, 1200, true},
		{2000, 3000, true}, // after everything
	} {
		if got := h.IdleBetween("s", ms(tc.from), ms(tc.to)); got != tc.want {
			t.Errorf("IdleBetween(%d, %d) = %t, want %t", tc.from, tc.to, got, tc.want)
		}
	}
}
