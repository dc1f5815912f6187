package periodic

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/batchclaim/batchclaim"
	"github.com/batchclaim/batchclaim/ingest"
)

// Job is one periodic job: at each tick of Schedule, one job is stored under ServiceID with
// the id TickID(Name, tick) and the payload Payload (or PayloadFunc's), once across all
// instances.
type Job struct {
	// Name identifies the schedule across instances and restarts: every instance configured
	// with a job of this name takes part in storing its ticks, and its ticks' job ids are
	// made from it. Required; at most MaxNameLen bytes, visible characters only.
	Name string
	// Schedule says when the ticks are (Cron or Every). Required.
	Schedule Schedule
	// ServiceID is the key the ticks' jobs are stored under; they run one at a time in tick
	// order, after any other job of the key stored before them. Empty means "periodic/" +
	// Name, a key of their own.
	ServiceID string
	// Payload is every tick's job's payload; PayloadFunc, when set, makes it for each tick
	// instead (an error skips the tick for this instance; another instance may store it).
	Payload     []byte
	PayloadFunc func(tick time.Time) ([]byte, error)
	// Options are passed to each tick's enqueue (ingest.MaxAttempts, or a kind's option).
	Options []ingest.EnqueueOption
}

// MaxNameLen bounds a periodic job's name, in bytes.
const MaxNameLen = 200

// TickID is the id of the job stored for name's tick: "periodic/<name>/<tick, RFC 3339 in
// UTC>". A second enqueue of the same tick is a repeat of the same job id, which changes
// nothing.
func TickID(name string, tick time.Time) string {
	return "periodic/" + name + "/" + tick.UTC().Format(time.RFC3339)
}

func (j Job) serviceID() string { return cmp.Or(j.ServiceID, "periodic/"+j.Name) }

// IntervalDefault bounds how long a Scheduler sleeps between two looks at its schedules.
const IntervalDefault = time.Minute

// Config configures a Scheduler.
type Config struct {
	// Jobs are the periodic jobs. Every instance should be given the same ones: a job's
	// row on the status page shows the schedule and key of the instance that registered it
	// last.
	Jobs []Job
	// Interval bounds the sleep between two looks at the schedules when no tick comes sooner
	// (a look after a failed one, or after the database's clock moved). Zero means
	// IntervalDefault.
	Interval time.Duration
	// LockTimeout and IdleTimeout bound, inside a tick's transaction, a wait for a lock and
	// the time the server keeps the transaction open while this process is silent
	// (pgdb.GuardTx). Zero means 5s and 10s.
	LockTimeout, IdleTimeout time.Duration
	// Enqueued, when set, is called after a tick's job was stored (or found stored: new is
	// false) by this instance, once the transaction committed.
	Enqueued func(name string, tick time.Time, st ingest.Stored)
	// Logger; nil discards.
	Logger *slog.Logger
}

// withDefaults returns c with every zero field filled in.
func (c Config) withDefaults() Config {
	c.Interval = cmp.Or(c.Interval, IntervalDefault)
	c.LockTimeout = cmp.Or(c.LockTimeout, 5*time.Second)
	c.IdleTimeout = cmp.Or(c.IdleTimeout, 10*time.Second)
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// validate checks c with its defaults filled in.
func (c Config) validate() error {
	var errs []error
	names := map[string]bool{}
	for i, j := range c.Jobs {
		switch {
		case j.Name == "":
			errs = append(errs, fmt.Errorf("job %d has no name", i))
		case len(j.Name) > MaxNameLen:
			errs = append(errs, fmt.Errorf("job %q: the name is %d bytes, at most %d allowed", j.Name[:32]+"...", len(j.Name), MaxNameLen))
		case names[j.Name]:
			errs = append(errs, fmt.Errorf("job %q is configured twice", j.Name))
		}
		names[j.Name] = true
		if err := batchclaim.ValidateServiceID(j.Name); err != nil {
			errs = append(errs, fmt.Errorf("job %q: the name: %w", j.Name, err))
		}
		if j.Schedule == nil {
			errs = append(errs, fmt.Errorf("job %q has no schedule", j.Name))
		} else if e, ok := j.Schedule.(every); ok {
			if err := e.validate(); err != nil {
				errs = append(errs, fmt.Errorf("job %q: %w", j.Name, err))
			}
		}
		if err := batchclaim.ValidateServiceID(j.serviceID()); err != nil {
			errs = append(errs, fmt.Errorf("job %q: %w", j.Name, err))
		}
	}
	if c.Interval < 0 || c.LockTimeout < 0 || c.IdleTimeout < 0 {
		errs = append(errs, fmt.Errorf("Interval %s, LockTimeout %s and IdleTimeout %s must not be negative", c.Interval, c.LockTimeout, c.IdleTimeout))
	}
	return errors.Join(errs...)
}
