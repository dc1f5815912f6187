package periodic

import (
	"fmt"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// Schedule says when a periodic job's ticks are. Every instance must compute the same ticks
// from the same schedule: they are the jobs' ids.
type Schedule interface {
	// Next returns the first tick strictly after t.
	Next(t time.Time) time.Time
	// String is the schedule as the status page shows it.
	String() string
}

// Cron parses a standard cron expression (five fields: minute, hour, day of month, month,
// day of week; or a descriptor such as @hourly or @daily) with github.com/robfig/cron/v3.
// Its times are UTC unless the expression starts with CRON_TZ=<zone> (for example
// "CRON_TZ=Europe/Berlin 0 6 * * *"): not the instance's local zone, which may differ
// between instances. @every is refused: its ticks would depend on when each instance
// started; use Every.
func Cron(expr string) (Schedule, error) {
	expr = strings.TrimSpace(expr)
	if strings.Contains(expr, "@every") {
		return nil, fmt.Errorf("periodic: cron expression %q: @every ticks differ from instance to instance; use periodic.Every", expr)
	}
	s, err := cron.ParseStandard(expr)
	if err != nil {
		return nil, fmt.Errorf("periodic: cron expression %q: %w", expr, err)
	}
	spec, ok := s.(*cron.SpecSchedule)
	if !ok {
		return nil, fmt.Errorf("periodic: cron expression %q: not a calendar schedule", expr)
	}
	if !strings.HasPrefix(expr, "CRON_TZ=") && !strings.HasPrefix(expr, "TZ=") {
		spec.Location = time.UTC
	}
	return cronSchedule{spec: spec, expr: expr}, nil
}

// MustCron is Cron for an expression known to be valid: it panics on an error.
func MustCron(expr string) Schedule {
	s, err := Cron(expr)
	if err != nil {
		panic(err)
	}
	return s
}

type cronSchedule struct {
	spec *cron.SpecSchedule
	expr string
}

func (c cronSchedule) Next(t time.Time) time.Time { return c.spec.Next(t).UTC() }
func (c cronSchedule) String() string             { return "cron " + c.expr }

// Every ticks at each multiple of d since 1970-01-01 00:00 UTC: Every(time.Hour) on the
// hour, Every(15*time.Minute) at :00, :15, :30 and :45, the same on every instance whenever
// it started. d is a whole number of seconds, at least one (New refuses others).
func Every(d time.Duration) Schedule { return every(d) }

type every time.Duration

func (e every) Next(t time.Time) time.Time {
	d := time.Duration(e)
	if d <= 0 {
		return time.Time{}
	}
	n := t.UnixNano()
	next := (n/int64(d))*int64(d) + int64(d)
	if n < 0 && n%int64(d) != 0 { // before 1970: integer division rounds towards zero
		next -= int64(d)
	}
	return time.Unix(0, next).UTC()
}

func (e every) String() string { return "every " + time.Duration(e).String() }

func (e every) validate() error {
	d := time.Duration(e)
	if d < time.Second || d%time.Second != 0 {
		return fmt.Errorf("the interval must be a whole number of seconds, at least 1s; got %s", d)
	}
	return nil
}

// maxLookBack bounds how far back latestTick looks for a missed tick.
const maxLookBack = 400 * 24 * time.Hour

// latestTick returns the latest tick of s in (after, now], and how many earlier ticks in that
// span it passes over (the missed ticks that are not enqueued). ok is false when there is
// none. It looks back at most maxLookBack before now.
func latestTick(s Schedule, after, now time.Time) (tick time.Time, skipped int, ok bool) {
	if floor := now.Add(-maxLookBack); after.Before(floor) {
		after = floor
	}
	for t := s.Next(after); !t.IsZero() && !t.After(now); t = s.Next(t) {
		if ok {
			skipped++
		}
		tick, ok = t, true
		if e, isEvery := s.(every); isEvery { // jump straight to the last one
			last := e.Next(now.Add(-time.Duration(e)))
			if last.After(t) {
				skipped += int(last.Sub(t) / time.Duration(e))
				tick = last
			}
			break
		}
	}
	return tick, skipped, ok
}
