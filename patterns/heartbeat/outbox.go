package heartbeat

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/batchclaim/batchclaim/internal/db"
	"github.com/batchclaim/batchclaim/pgdb"
)

// deliverer empties the outbox: every stored event not yet delivered goes to the hook and
// the webhook, oldest first and in order per source, and is marked delivered once both took
// it. Only the active instance runs it; a new active instance therefore delivers what the
// old one stored and did not deliver. Delivery is at least once: an instance that dies
// between a delivery and its mark makes its successor deliver that event again (the webhook
// sees the same Idempotency-Key).
type deliverer struct {
	pool       pgdb.Beginner
	hook       func(ctx context.Context, e Event) error
	webhookURL string
	client     *http.Client
	batch      int
	retryBase  time.Duration
	retryMax   time.Duration
	logger     *slog.Logger
	stats      *stats
}

// drain runs delivery rounds until one finds nothing due, and returns the number delivered.
func (d *deliverer) drain(ctx context.Context) (int, error) {
	total := 0
	for {
		n, due, err := d.round(ctx)
		total += n
		if err != nil || due == 0 || n == 0 {
			return total, err
		}
	}
}

// round delivers the due events: for each source only its oldest undelivered one, so that a
// clear never overtakes its raise. It returns how many were delivered and how many were due.
func (d *deliverer) round(ctx context.Context) (delivered, due int, err error) {
	q := db.New()
	rows, err := q.HeartbeatOutboxDue(ctx, d.pool, int32(d.batch))
	if err != nil {
		return 0, 0, fmt.Errorf("read outbox: %w", err)
	}
	for _, r := range rows {
		e, err := eventFromRow(r)
		if err != nil {
			return delivered, len(rows), err
		}
		if derr := d.deliver(ctx, e); derr != nil {
			if ctx.Err() != nil {
				return delivered, len(rows), ctx.Err()
			}
			delay := d.retryDelay(e.Attempts + 1)
			d.logger.Warn("event delivery failed", "event_id", e.ID, "key", e.Key(), "attempts", e.Attempts+1, "retry_in", delay, "err", derr)
			d.stats.deliveryFailures.Add(1)
			if _, err := q.HeartbeatOutboxFailed(ctx, d.pool, db.HeartbeatOutboxFailedParams{
				ID: e.ID, LastError: truncate(derr.Error(), 500), DelayMs: delay.Milliseconds(),
			}); err != nil {
				return delivered, len(rows), fmt.Errorf("record failed delivery of event %d: %w", e.ID, err)
			}
			continue
		}
		if _, err := q.HeartbeatOutboxDelivered(ctx, d.pool, e.ID); err != nil {
			return delivered, len(rows), fmt.Errorf("mark event %d delivered: %w", e.ID, err)
		}
		delivered++
		d.stats.delivered.Add(1)
	}
	return delivered, len(rows), nil
}

// deliver hands e to the hook, then to the webhook.
func (d *deliverer) deliver(ctx context.Context, e Event) error {
	if d.hook != nil {
		if err := d.hook(ctx, e); err != nil {
			return fmt.Errorf("hook: %w", err)
		}
	}
	if d.webhookURL == "" {
		return nil
	}
	body, err := json.Marshal(e)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.webhookURL, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", e.Key())
	resp, err := d.client.Do(req)
	if err != nil {
		return fmt.Errorf("webhook: %w", err)
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("webhook: %s: %s", resp.Status, bytes.TrimSpace(msg))
	}
	return nil
}

// retryDelay is the delay before the attempt after the given number of failed ones:
// doubling from retryBase, jittered by ±20%, capped at retryMax.
func (d *deliverer) retryDelay(failures int) time.Duration {
	b := backoff.NewExponentialBackOff()
	b.InitialInterval, b.MaxInterval, b.Multiplier, b.RandomizationFactor = d.retryBase, d.retryMax, 2, 0.2
	b.MaxElapsedTime = 0
	b.Reset()
	delay := d.retryBase
	for range min(failures, 64) {
		delay = b.NextBackOff()
	}
	return delay
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}
