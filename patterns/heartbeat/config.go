package heartbeat

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"time"
)

// Defaults applied with cmp.Or to Config fields left zero.
const (
	// RoleDefault is the election role whose primary is the active instance.
	RoleDefault = "heartbeat"
	// StepIntervalDefault is how often the active instance looks for missed heartbeats and
	// fresh ones.
	StepIntervalDefault = time.Second
	// DeliveryIntervalDefault is how often the active instance looks at the outbox when
	// nothing woke it up.
	DeliveryIntervalDefault = time.Second
	// DeliveryBatchDefault bounds the events one delivery round reads.
	DeliveryBatchDefault = 100
	// WebhookTimeoutDefault bounds one webhook POST.
	WebhookTimeoutDefault = 5 * time.Second
	// RetryBaseDefault and RetryMaxDefault shape the delay before a failed delivery is tried
	// again: doubling from RetryBase, jittered, capped at RetryMax.
	RetryBaseDefault = 500 * time.Millisecond
	RetryMaxDefault  = time.Minute
	// TxTimeoutDefault bounds one step's transaction, lock waits included.
	TxTimeoutDefault = 5 * time.Second
)

// Config configures a Service. Only the election timings are shared with every other
// instance of the same role; the rest is per instance.
type Config struct {
	// Role is the election role; the instance that is primary of it is the active one. Zero
	// means RoleDefault.
	Role string
	// Name and Host identify this instance in the election's tables and in logs. Zero means
	// the election's defaults.
	Name, Host string
	// ElectionInterval (I) is how often the election lease is renewed, and ElectionTimeout
	// (T, more than 2I) how long a silent active instance keeps its role. Zero means the
	// election package's defaults.
	ElectionInterval, ElectionTimeout time.Duration

	// StepInterval is how often the active instance raises and clears events: a miss is
	// raised at most StepInterval after it became due. Zero means StepIntervalDefault.
	StepInterval time.Duration
	// DeliveryInterval is how often the outbox is read when no step woke the deliverer. Zero
	// means DeliveryIntervalDefault.
	DeliveryInterval time.Duration
	// DeliveryBatch bounds the events read per delivery round. Zero means DeliveryBatchDefault.
	DeliveryBatch int

	// OnEvent, if set, receives every stored event, on the active instance, at least once
	// and in the order written per source. An error makes the event be delivered again later.
	OnEvent func(ctx context.Context, e Event) error
	// WebhookURL, if set, receives every stored event as a JSON POST (see Event), at least
	// once, with an Idempotency-Key header naming the event. A 2xx answer is success.
	WebhookURL string
	// WebhookTimeout bounds one POST. Zero means WebhookTimeoutDefault.
	WebhookTimeout time.Duration
	// RetryBase and RetryMax shape the delay after a failed delivery. Zero means
	// RetryBaseDefault and RetryMaxDefault.
	RetryBase, RetryMax time.Duration
	// TxTimeout bounds one step's transaction. Zero means TxTimeoutDefault.
	TxTimeout time.Duration

	// Logger receives the service's logs; nil discards them.
	Logger *slog.Logger
}

// withDefaults returns c with zero fields set to their defaults.
func (c Config) withDefaults() Config {
	c.Role = cmp.Or(c.Role, RoleDefault)
	c.StepInterval = cmp.Or(c.StepInterval, StepIntervalDefault)
	c.DeliveryInterval = cmp.Or(c.DeliveryInterval, DeliveryIntervalDefault)
	c.DeliveryBatch = cmp.Or(c.DeliveryBatch, DeliveryBatchDefault)
	c.WebhookTimeout = cmp.Or(c.WebhookTimeout, WebhookTimeoutDefault)
	c.RetryBase = cmp.Or(c.RetryBase, RetryBaseDefault)
	c.RetryMax = cmp.Or(c.RetryMax, RetryMaxDefault)
	c.TxTimeout = cmp.Or(c.TxTimeout, TxTimeoutDefault)
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// validate checks a Config after withDefaults; each error names the bad field.
func (c Config) validate() error {
	var errs []error
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"StepInterval", c.StepInterval}, {"DeliveryInterval", c.DeliveryInterval}, {"WebhookTimeout", c.WebhookTimeout},
		{"RetryBase", c.RetryBase}, {"RetryMax", c.RetryMax}, {"TxTimeout", c.TxTimeout},
		{"ElectionInterval", c.ElectionInterval}, {"ElectionTimeout", c.ElectionTimeout}} {
		if d.v < 0 {
			errs = append(errs, fmt.Errorf("%s is %s: must not be negative", d.name, d.v))
		}
	}
	if c.DeliveryBatch < 0 {
		errs = append(errs, fmt.Errorf("DeliveryBatch is %d: must not be negative", c.DeliveryBatch))
	}
	if c.RetryMax < c.RetryBase {
		errs = append(errs, fmt.Errorf("RetryMax (%s) is less than RetryBase (%s)", c.RetryMax, c.RetryBase))
	}
	if c.WebhookURL != "" {
		u, err := url.Parse(c.WebhookURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs = append(errs, fmt.Errorf("WebhookURL %q: want an http:// or https:// URL", c.WebhookURL))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("heartbeat config: %w", err)
	}
	return nil
}
