package httpguard

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// LogIntervalDefault is a Throttle's interval when none is given.
const LogIntervalDefault = 10 * time.Second

// Throttle keeps the log lines a client can cause at will (a handler's error during a
// database outage, a refusal it can repeat) from filling the log: each site, named by its
// message, writes its first line in full, then counts the lines that follow, and at the end
// of every interval in which it counted some writes one line saying so ("MSG: N more like
// this in the last 10s", with the attributes of the last one counted). An interval with
// nothing counted ends the site's flood: its next line is written in full again. A site
// writes at most 1 + elapsed/interval lines however many requests arrive.
type Throttle struct {
	log      *slog.Logger
	interval time.Duration
	after    func(time.Duration, func()) (stop func() bool)

	mu    sync.Mutex
	sites map[string]*floodSite
}

// floodSite is one site: its current flood, if any.
type floodSite struct {
	open    bool // in an interval that began with a line written in full
	written bool // a line was written since the last Clear
	count   int  // lines counted since the last one written
	level   slog.Level
	args    []any // the attributes of the last line counted
	stop    func() bool
	gen     int // the interval the armed timer ends; a timer of an earlier one does nothing
}

// NewThrottle returns a Throttle writing to log (nil discards) with the interval (zero means
// LogIntervalDefault).
func NewThrottle(log *slog.Logger, interval time.Duration) *Throttle {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Throttle{log: log, interval: cmp.Or(interval, LogIntervalDefault), sites: map[string]*floodSite{},
		after: func(d time.Duration, f func()) func() bool { return time.AfterFunc(d, f).Stop }}
}

// Log writes msg at level with args, and the request id of ctx (Logger), unless its site
// wrote in the current interval; then the line is counted instead. msg names the site: give
// each site a message of its own that does not vary (variable parts go in args).
func (t *Throttle) Log(ctx context.Context, level slog.Level, msg string, args ...any) {
	t.mu.Lock()
	s := t.sites[msg]
	if s == nil {
		s = &floodSite{}
		t.sites[msg] = s
	}
	if s.open {
		s.count++
		s.level, s.args = level, args
		t.mu.Unlock()
		return
	}
	s.open, s.written = true, true
	t.arm(msg, s)
	t.mu.Unlock()
	Logger(ctx, t.log).Log(ctx, level, msg, args...)
}

// arm starts an interval of s; t.mu is held.
func (t *Throttle) arm(msg string, s *floodSite) {
	s.gen++
	gen := s.gen
	s.stop = t.after(t.interval, func() { t.tick(msg, s, gen) })
}

// tick ends interval gen of s: it writes what was counted and starts another interval, or,
// with nothing counted, ends the flood.
func (t *Throttle) tick(msg string, s *floodSite, gen int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !s.open || s.gen != gen {
		return // cleared meanwhile
	}
	if s.count == 0 {
		s.open = false
		return
	}
	t.summarize(msg, s)
	t.arm(msg, s)
}

// summarize writes the count of s and resets it; t.mu is held.
func (t *Throttle) summarize(msg string, s *floodSite) {
	t.log.Log(context.Background(), s.level, fmt.Sprintf("%s: %d more like this in the last %s", msg, s.count, t.interval), s.args...)
	s.count, s.args = 0, nil
}

// Clear ends the flood of the site msg at once (when what it reports is over, such as a
// database that answers again): what it counted is written, and its next line is written in
// full. It reports whether the site wrote a line since it was last cleared.
func (t *Throttle) Clear(msg string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.sites[msg]
	if s == nil {
		return false
	}
	if s.open {
		s.stop()
		if s.count > 0 {
			t.summarize(msg, s)
		}
		s.open = false
	}
	written := s.written
	s.written = false
	return written
}
