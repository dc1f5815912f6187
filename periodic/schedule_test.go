package periodic_test

import (
	"testing"
	"time"

	"github.com/batchclaim/batchclaim/periodic"
	"github.com/batchclaim/batchclaim/pgdb"
)

func at(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}

// Every instance computes the same ticks: cron in UTC unless CRON_TZ says otherwise, Every at
// multiples of its interval since the epoch; and after a gap only the latest tick that came is
// taken, with the ones passed over counted.
func TestSchedules(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name        string
		s           periodic.Schedule
		after, now  string
		tick        string // "" for none
		skipped     int
		next, nextT string // Next(nextT) = next
	}{
		{name: "hourly cron, no tick yet", s: periodic.MustCron("0 * * * *"), after: "2026-03-01T10:00:00Z", now: "2026-03-01T10:59:59Z",
			nextT: "2026-03-01T10:00:00Z", next: "2026-03-01T11:00:00Z"},
		{name: "hourly cron, one tick", s: periodic.MustCron("0 * * * *"), after: "2026-03-01T10:00:00Z", now: "2026-03-01T11:00:00Z",
			tick: "2026-03-01T11:00:00Z", nextT: "2026-03-01T11:00:00Z", next: "2026-03-01T12:00:00Z"},
		{name: "hourly cron after a day down", s: periodic.MustCron("@hourly"), after: "2026-03-01T10:00:00Z", now: "2026-03-02T10:30:00Z",
			tick: "2026-03-02T10:00:00Z", skipped: 23, nextT: "2026-03-02T10:30:00Z", next: "2026-03-02T11:00:00Z"},
		{name: "cron in a zone", s: periodic.MustCron("CRON_TZ=Europe/Berlin 0 6 * * *"), after: "2026-03-01T00:00:00Z", now: "2026-03-01T05:00:00Z",
			tick: "2026-03-01T05:00:00Z", nextT: "2026-03-01T05:00:00Z", next: "2026-03-02T05:00:00Z"},
		{name: "every 15 minutes", s: periodic.Every(15 * time.Minute), after: "2026-03-01T10:07:00Z", now: "2026-03-01T10:20:00Z",
			tick: "2026-03-01T10:15:00Z", nextT: "2026-03-01T10:15:00Z", next: "2026-03-01T10:30:00Z"},
		{name: "every 15 minutes after a day down", s: periodic.Every(15 * time.Minute), after: "2026-03-01T10:15:00Z", now: "2026-03-02T10:20:00Z",
			tick: "2026-03-02T10:15:00Z", skipped: 95, nextT: "2026-03-01T23:59:59Z", next: "2026-03-02T00:00:00Z"},
		{name: "every 7 seconds, at the tick", s: periodic.Every(7 * time.Second), after: "1970-01-01T00:00:00Z", now: "1970-01-01T00:00:14Z",
			tick: "1970-01-01T00:00:14Z", skipped: 1, nextT: "1970-01-01T00:00:14Z", next: "1970-01-01T00:00:21Z"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tick, skipped, ok := periodic.LatestTick(tc.s, at(tc.after), at(tc.now))
			switch {
			case tc.tick == "" && ok:
				t.Errorf("latest tick in (%s, %s]: %s; want none", tc.after, tc.now, tick)
			case tc.tick != "" && (!ok || !tick.Equal(at(tc.tick)) || skipped != tc.skipped):
				t.Errorf("latest tick in (%s, %s]: %s (ok %v), %d skipped; want %s, %d skipped", tc.after, tc.now, tick, ok, skipped, tc.tick, tc.skipped)
			}
			if got := tc.s.Next(at(tc.nextT)); !got.Equal(at(tc.next)) {
				t.Errorf("Next(%s) = %s; want %s", tc.nextT, got, tc.next)
			}
		})
	}
}

func TestCronRefusesWhatDiffersBetweenInstances(t *testing.T) {
	t.Parallel()
	for _, expr := range []string{"@every 5m", "61 * * * *", "* * *"} {
		if _, err := periodic.Cron(expr); err == nil {
			t.Errorf("Cron(%q) accepted", expr)
		}
	}
	if _, err := periodic.New(pgdb.DB{}, periodic.Config{}); err == nil {
		t.Error("New without a database accepted")
	}
}

func TestTickID(t *testing.T) {
	t.Parallel()
	tick := time.Date(2026, 3, 1, 7, 0, 0, 0, time.FixedZone("CET", 3600))
	if got, want := periodic.TickID("report", tick), "periodic/report/2026-03-01T06:00:00Z"; got != want {
		t.Errorf("TickID = %q; want %q", got, want)
	}
}
