package heartbeat

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/batchclaim/batchclaim"
	"github.com/batchclaim/batchclaim/patterns/election"
	"github.com/batchclaim/batchclaim/pgdb"
)

// Service is one heartbeat-service instance. Every instance accepts heartbeats (Handler,
// Record); the one that is primary of Config.Role in the election is the active instance
// and the only one that raises and clears events and delivers them.
type Service struct {
	db      pgdb.DB // every statement goes through it
	cfg     Config
	elector *election.Elector
	out     *deliverer
	wake    chan struct{}
	stats   stats
}

// stats are the Service's counters.
type stats struct {
	steps, stepErrors, raised, cleared, delivered, deliveryFailures, terms atomic.Int64
}

// Stats is a snapshot of a Service's counters since it started.
type Stats struct {
	Terms            int64 // times this instance became active
	Steps            int64 // monitoring steps committed
	StepErrors       int64 // steps that failed (fenced out, database errors)
	Raised, Cleared  int64 // events this instance wrote
	Delivered        int64 // events this instance delivered
	DeliveryFailures int64 // failed delivery attempts
}

// New checks cfg and returns a Service on db, whose statements run in db's schema (every
// instance of the role uses the same one); it does no I/O. Run starts it.
func New(db pgdb.DB, cfg Config) (*Service, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if err := db.Err(); err != nil {
		return nil, fmt.Errorf("heartbeat: %w", err)
	}
	s := &Service{db: db, cfg: cfg, wake: make(chan struct{}, 1)}
	el, err := election.New(db, election.Config{
		Roles: []string{cfg.Role}, Name: cfg.Name, Host: cfg.Host,
		HeartbeatInterval: cfg.ElectionInterval, Timeout: cfg.ElectionTimeout,
		OnElected: s.lead, Logger: cfg.Logger,
	})
	if err != nil {
		return nil, fmt.Errorf("heartbeat: %w", err)
	}
	s.elector = el
	s.out = &deliverer{pool: s.db, hook: cfg.OnEvent, webhookURL: cfg.WebhookURL,
		client: newHTTPClient(cfg), batch: cfg.DeliveryBatch,
		retryBase: cfg.RetryBase, retryMax: cfg.RetryMax, logger: cfg.Logger, stats: &s.stats}
	return s, nil
}

func newHTTPClient(cfg Config) *http.Client { return &http.Client{Timeout: cfg.WebhookTimeout} }

// Run takes part in the election until ctx ends; while this instance is the active one it
// runs the monitoring steps and the delivery of events. It blocks.
func (s *Service) Run(ctx context.Context) error {
	err := s.elector.Run(ctx)
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// Active reports whether this instance believes it is the active one, and its term.
func (s *Service) Active() (election.Term, bool) { return s.elector.CheckPrimary(s.cfg.Role) }

// Stats returns the counters.
func (s *Service) Stats() Stats {
	return Stats{Terms: s.stats.terms.Load(), Steps: s.stats.steps.Load(), StepErrors: s.stats.stepErrors.Load(),
		Raised: s.stats.raised.Load(), Cleared: s.stats.cleared.Load(), Delivered: s.stats.delivered.Load(),
		DeliveryFailures: s.stats.deliveryFailures.Load()}
}

// Handler serves POST /heartbeat (see the package function Handler), GET /healthz and GET
// /active, which answers 200 with this instance's term while it is the active one and 503
// otherwise.
func (s *Service) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/heartbeat", Handler(s.db, s.cfg.Logger))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	mux.HandleFunc("GET /active", func(w http.ResponseWriter, _ *http.Request) {
		t, ok := s.Active()
		if !ok {
			writeError(w, http.StatusServiceUnavailable, "standby")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, "{\"role\":%q,\"epoch\":%d,\"instanceId\":%q}\n", t.Role, t.Epoch, t.InstanceID)
	})
	return mux
}

// lead is the election's OnElected: it runs while this instance is the active one, until
// ctx is cancelled on step-down.
func (s *Service) lead(ctx context.Context, t election.Term) {
	s.stats.terms.Add(1)
	log := s.cfg.Logger.With("role", t.Role, "epoch", t.Epoch)
	log.Info("active: raising and clearing missed-heartbeat events")
	w := writer{instanceID: t.InstanceID, epoch: t.Epoch}
	mon := s.monitorFor(t)
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.deliverLoop(ctx)
	}()
	tick := time.NewTicker(s.cfg.StepInterval)
	defer tick.Stop()
	for {
		s.runStep(ctx, mon, w, log)
		select {
		case <-ctx.Done():
			<-done
			log.Info("standby: no longer active")
			return
		case <-tick.C:
		}
	}
}

// monitorFor returns the monitor of term t: its steps are fenced by the election and,
// besides, by t still being this instance's current term (a step of an old term that has
// not yet seen its context cancelled must not write under a newer term's fence).
func (s *Service) monitorFor(t election.Term) *monitor {
	return &monitor{pool: s.db, fence: termFence{el: s.elector, term: t}, role: s.cfg.Role, txTimeout: s.cfg.TxTimeout}
}

// termFence is the election's Fence for one term.
type termFence struct {
	el   *election.Elector
	term election.Term
}

func (f termFence) Fence(ctx context.Context, tx pgdb.Querier, role string) error {
	if role != f.term.Role {
		return fmt.Errorf("fence %s: the monitor's term is of role %s: %w", role, f.term.Role, batchclaim.ErrClaimLost)
	}
	return f.el.Fence(ctx, tx, f.term)
}

func (s *Service) runStep(ctx context.Context, mon *monitor, w writer, log *slog.Logger) {
	res, err := mon.step(ctx, w, nil)
	if err != nil {
		if ctx.Err() == nil {
			s.stats.stepErrors.Add(1)
			if errors.Is(err, batchclaim.ErrClaimLost) {
				log.Warn("fenced out: no longer the active instance", "err", err)
			} else {
				log.Warn("monitor step failed", "err", err)
			}
		}
		return
	}
	s.stats.steps.Add(1)
	s.stats.raised.Add(int64(len(res.Raised)))
	s.stats.cleared.Add(int64(len(res.Cleared)))
	for _, e := range res.Raised {
		log.Info("raised", "event_name", e.EventName, "source_name", e.SourceName, "episode", e.Episode, "event_id", e.ID)
	}
	for _, e := range res.Cleared {
		log.Info("cleared", "event_name", e.EventName, "source_name", e.SourceName, "episode", e.Episode, "event_id", e.ID, "reason", e.Reason)
	}
	if len(res.Raised)+len(res.Cleared) > 0 {
		select {
		case s.wake <- struct{}{}:
		default:
		}
	}
}

// deliverLoop drains the outbox when a step stored events and every DeliveryInterval
// (failed deliveries come due again; a new active instance finds its predecessor's).
func (s *Service) deliverLoop(ctx context.Context) {
	tick := time.NewTicker(s.cfg.DeliveryInterval)
	defer tick.Stop()
	for {
		if _, err := s.out.drain(ctx); err != nil && ctx.Err() == nil {
			s.cfg.Logger.Warn("deliver events", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-s.wake:
		}
	}
}
