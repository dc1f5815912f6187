package dltsim

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/batchclaim/batchclaim/dlt"
	"github.com/batchclaim/batchclaim/httpguard"
)

// Defaults applied to zero Config fields.
const (
	CircuitDefault            = "circuit0"
	ServiceDefault            = "service0"
	SawtoothQueueHighDefault  = 100
	SawtoothQueueLowDefault   = 50
	ScabbardQueueHighDefault  = 30
	ScabbardQueueLowDefault   = 15
	HistoryLimitDefault       = 100
	InvalidMemoryDefault      = 600 * time.Second
	WaitDefault               = 300 * time.Second
	sawtoothWaitCheckInterval = 20 * time.Millisecond
	scabbardWaitCheckInterval = 100 * time.Millisecond
	maxBatchListBytes         = 64 << 20
)

// Config configures a Sim.
type Config struct {
	// Flavor selects the API. Zero means dlt.FlavorSawtooth.
	Flavor dlt.Flavor
	// Circuit and Service name the scabbard service in its paths. Empty means "circuit0" and
	// "service0". Unused for sawtooth.
	Circuit, Service string
	// Authorization, when set, is the Authorization header value every ledger request must
	// carry; others get 401. Empty means none is required.
	Authorization string
	// CommitLatency is how long a batch stays queued after it arrived. Zero means it settles
	// at the next request.
	CommitLatency time.Duration
	// InvalidRate is the fraction (0..1) of batches that come out INVALID. Zero means none.
	InvalidRate float64
	// QueueHigh is the number of queued batches at which POSTs start answering 429; QueueLow
	// the number below which they are accepted again. Zero QueueHigh means the flavour's
	// default (sawtooth 100, scabbard 30); zero QueueLow means the flavour's default when
	// QueueHigh is zero too, else QueueHigh/2 (at least 1).
	QueueHigh, QueueLow int
	// HistoryLimit is the number of batches scabbard remembers statuses of. Zero means 100;
	// negative means unlimited. Unused for sawtooth.
	HistoryLimit int
	// InvalidMemory is how long sawtooth remembers an INVALID batch. Zero means 600 s.
	InvalidMemory time.Duration
	// RetryAfter is sent as a Retry-After header (whole seconds, rounded up) with every 429
	// and 503. Zero means no header.
	RetryAfter time.Duration
	// Seed chooses which batches are INVALID.
	Seed int64
	// Now is the clock. Nil means time.Now.
	Now func() time.Time
	// AllowedHosts are the host names Start's listener answers to besides IP addresses,
	// localhost and its address's host (a name it is reached by, such as a Compose service's);
	// other Host headers get 421, so that a web page cannot reach the admin API through DNS
	// rebinding. Empty means none besides those.
	AllowedHosts []string
	// Logger receives the simulator's logs. Nil discards them.
	Logger *slog.Logger
}

// withDefaults returns a copy with every zero field filled in.
func (c Config) withDefaults() Config {
	c.Flavor = cmp.Or(c.Flavor, dlt.FlavorSawtooth)
	c.Circuit = cmp.Or(c.Circuit, CircuitDefault)
	c.Service = cmp.Or(c.Service, ServiceDefault)
	high, low := SawtoothQueueHighDefault, SawtoothQueueLowDefault
	if c.Flavor == dlt.FlavorScabbard {
		high, low = ScabbardQueueHighDefault, ScabbardQueueLowDefault
	}
	if c.QueueHigh != 0 {
		high, low = c.QueueHigh, max(c.QueueHigh/2, 1)
	}
	c.QueueHigh, c.QueueLow = high, cmp.Or(c.QueueLow, low)
	c.HistoryLimit = cmp.Or(c.HistoryLimit, HistoryLimitDefault)
	c.InvalidMemory = cmp.Or(c.InvalidMemory, InvalidMemoryDefault)
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// validate checks a Config after withDefaults.
func (c Config) validate() error {
	if _, err := dlt.ParseFlavor(string(c.Flavor)); err != nil {
		return fmt.Errorf("dltsim config: %w", err)
	}
	switch {
	case c.CommitLatency < 0:
		return fmt.Errorf("dltsim config: commit latency %v is negative", c.CommitLatency)
	case c.InvalidRate < 0 || c.InvalidRate > 1 || c.InvalidRate != c.InvalidRate:
		return fmt.Errorf("dltsim config: invalid rate %v is not between 0 and 1", c.InvalidRate)
	case c.QueueHigh < 1:
		return fmt.Errorf("dltsim config: queue high %d must be at least 1", c.QueueHigh)
	case c.QueueLow < 1 || c.QueueLow > c.QueueHigh:
		return fmt.Errorf("dltsim config: queue low %d must be between 1 and queue high %d", c.QueueLow, c.QueueHigh)
	case c.InvalidMemory < 0:
		return fmt.Errorf("dltsim config: invalid memory %v is negative", c.InvalidMemory)
	case c.RetryAfter < 0:
		return fmt.Errorf("dltsim config: retry-after %v is negative", c.RetryAfter)
	case !pathSafe(c.Circuit) || !pathSafe(c.Service):
		return errors.New("dltsim config: circuit and service must be letters, digits, '-', '_' or '.'")
	}
	if _, err := httpguard.NewHosts("", c.AllowedHosts); err != nil {
		return fmt.Errorf("dltsim config: %w", err)
	}
	return nil
}

// pathSafe reports whether s is a non-empty path element that needs no escaping.
func pathSafe(s string) bool {
	for _, r := range s {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' ||
			r == '-' || r == '_' || r == '.'
		if !ok {
			return false
		}
	}
	return s != "" && s != "." && s != ".."
}
