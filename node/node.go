package node

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/batchclaim/batchclaim/claims"
	"github.com/batchclaim/batchclaim/ingest"
	"github.com/batchclaim/batchclaim/observer"
	"github.com/batchclaim/batchclaim/periodic"
	"github.com/batchclaim/batchclaim/pgdb"
	"github.com/batchclaim/batchclaim/queuer"
	"github.com/batchclaim/batchclaim/submitter"
)

// Config configures a Node. Claims holds the claim engine's identity and timings; the
// submit timeout of the pool is the engine's MaxSubmission (S). The schema of batchclaim's
// tables is not here: it is the one of the pgdb.DB given to New (docs/schema.md).
type Config struct {
	Claims claims.Config
	// SharePool runs the node on the pool of the DB given to New itself, shared with whatever
	// else uses it: right when the pool is the node's alone (the run command's case). False
	// (the default) gives the node a pool of its own, made with the given pool's settings (its
	// MaxConns too), in the DB's schema, and closed when Run returns, so that an
	// application's own work on the pool it passed cannot starve the node. A node on a shared pool that its owner's work
	// holds whole gives its claims up (docs/claims.md, "The key's promise") rather than
	// hold them idle.
	SharePool bool
	// Submitter runs batches. Required.
	Submitter submitter.Submitter
	// Statuses asks the ledger about accepted batches. Nil means no polling: use it only with
	// a Submitter whose results are final (Done, Rejected, Retry).
	Statuses observer.StatusSource
	// SkipValid: VALID fixes the order (scabbard); the next batch may go.
	SkipValid bool
	// Workers bounds concurrent submissions. Zero means submitter.WorkersDefault (1024).
	Workers int
	// MaxSubmitMemory bounds the bytes of the payloads the running submissions hold (one
	// larger batch still goes alone). Zero means submitter.MaxMemoryDefault (64 MiB).
	MaxSubmitMemory int64
	// PollInterval between status polls. Zero means observer.PollIntervalDefault.
	PollInterval time.Duration
	// NoListen turns off waking on new work through LISTEN/NOTIFY, e.g. behind a pooler in
	// transaction mode (where LISTEN does not work) without a direct ListenConnString: the
	// queuer then looks at every held claim each renew interval, which is then the latency of
	// a new batch. False (the default) listens on a connection of its own and hands a new
	// batch out within milliseconds of its commit.
	NoListen bool
	// ListenConnString is the database URL of the listening connection. Empty means the
	// pool's own connection settings. Give a direct (not pooled) URL when the pool goes
	// through a pooler in transaction mode.
	ListenConnString string
	// MaxAttempts bounds the attempts of a job whose outcome keeps being a retry (an error, or
	// Retry) or unknown: the outcome of its last allowed attempt makes it DISCARDED, which
	// frees its service_id for the next job; Retry (or batchclaim retry) runs it again. A
	// job's own limit (ingest.MaxAttempts at enqueue) comes first. Zero means
	// MaxAttemptsDefault (25) for a job runner (Statuses nil) and no limit for a ledger
	// pipeline, whose batches wait out back-pressure however long it lasts; negative means
	// no limit.
	//
	// With Statuses nil, an error returned by the Submitter is a retry: the job is DELAYED
	// for the backoff (BackoffBase, BackoffMax) and tried again. With Statuses, it is UNKNOWN:
	// the ledger is asked before the batch goes again.
	MaxAttempts int
	// UnknownGrace and UnknownAnswers: when an UNKNOWN batch is resubmitted (see queuer).
	UnknownGrace   time.Duration
	UnknownAnswers int
	// BackoffBase and BackoffMax shape the delay of DELAYED batches (see submitter).
	BackoffBase, BackoffMax time.Duration
	// HaltOnInvalid halts a service_id after an INVALID batch.
	HaltOnInvalid bool
	// Retention deletes finished batches (with their attempts and transitions) this long
	// after they finished, on one instance at a time (observer.Retention). Zero means
	// observer.RetentionDefault (7 days), as for the run command; negative disables it.
	Retention time.Duration
	// RetentionInterval between two runs of the retention job. Zero means
	// observer.RetentionIntervalDefault.
	RetentionInterval time.Duration
	// Events are hooks for embedders.
	Events observer.Events
	// Periodic are jobs stored at every tick of a schedule, once across every instance given
	// the same ones (package periodic). Nil means none.
	Periodic []periodic.Job
	// Middleware wraps every job, first outermost: before, after and on the error of each, with
	// the job's claim (key, epoch) and attempt in reach (see submitter.Middleware and
	// submitter.Hooks). The node's own tracing span and metrics of each job come first. Nil
	// means none.
	Middleware []submitter.Middleware
	// Listen is the HTTP address for /healthz, /readyz, /metrics and the ingest API. Empty
	// means no listener.
	Listen string
	// MaxBody bounds an ingest body. Zero means ingest.MaxBodyDefault.
	MaxBody int64
	// TLSCertFile and TLSKeyFile, both set, make the listener serve HTTPS with this
	// certificate chain and key (PEM files, read when Run starts). Both empty means plain HTTP.
	TLSCertFile, TLSKeyFile string
	// Auth, when set, wraps the listener's whole handler, e.g. httpauth.Tokens.Middleware.
	// Nil means no authentication.
	Auth func(http.Handler) http.Handler
	// ReadTimeout bounds reading one request, body included. Zero means ReadTimeoutDefault.
	ReadTimeout time.Duration
	// ReadHeaderTimeout bounds reading one request's headers. Zero means
	// ReadHeaderTimeoutDefault.
	ReadHeaderTimeout time.Duration
	// MaxHeaderBytes bounds the size of one request's headers. Zero means
	// MaxHeaderBytesDefault.
	MaxHeaderBytes int
	// MaxConnections bounds the listener's open connections; one more is closed at once.
	// Zero means MaxConnectionsDefault.
	MaxConnections int
	// MaxIngestRequests bounds the ingest API requests (POST /batches, GET and POST
	// /batch_statuses) worked on at once, counted from the moment a request's body has
	// arrived (a client that sends slowly holds none); one more is answered 503 with
	// Retry-After. Zero means MaxIngestRequestsDefault. The ingest API holds at most
	// IngestConns of the pool's connections at once.
	MaxIngestRequests int
	// MaxIngestMemory bounds the bytes that ingest request bodies, and the batches decoded
	// from them, hold at once (ingest.Config.MaxMemory); a request that would exceed it is
	// answered 503 with Retry-After. Zero means ingest.MaxMemoryDefault; at least 2 x MaxBody,
	// and 4.2 x MaxBody to decode any body.
	MaxIngestMemory int64
	// AllowedHosts are host names the listener answers to besides IP addresses, localhost and
	// the host of Listen; a leading dot allows a domain and its subdomains, "*" every name.
	// Other Host headers are answered 421 (a defence against DNS rebinding; see package
	// httpguard).
	AllowedHosts []string
	// Pprof serves the runtime's profiles (net/http/pprof) on the listener under
	// /debug/pprof/, behind Auth like the ingest API. It needs a listener, and Auth unless
	// Listen is a loopback address. False (the default) serves none.
	Pprof bool
	// Registry receives the metrics. Nil means a new registry (served on /metrics).
	Registry *prometheus.Registry
	// Logger; nil discards.
	Logger *slog.Logger
}

// MaxAttemptsDefault is a job runner's attempt limit when Config.MaxAttempts is zero.
const MaxAttemptsDefault = 25

// StopBudget is the longest a node with these timings takes to stop once its context ends:
// submissions in flight get up to S (MaxSubmission) and, if they overrun it, StopTime more to
// end once cancelled; releasing the claims takes up to claims.ShutdownTimeout, the HTTP server
// up to 2s, and one renew interval covers the queuer's last cycle. A supervisor's kill timeout (systemd TimeoutStopSec, Kubernetes
// terminationGracePeriodSeconds) should be at least this; see docs/operations.md.
func StopBudget(t claims.Timings) time.Duration {
	return t.MaxSubmission + t.StopTime + claims.ShutdownTimeout + httpShutdownTimeout + t.RenewInterval
}

// Node is one running instance.
type Node struct {
	cfg      Config
	db       pgdb.DB   // the node's pool in its schema: every statement goes through it
	ownPool  bool      // db's pool was made by New (Config.SharePool false); Run closes it
	back     *backEdge // the hooks of the parts built first (wiring.go)
	engine   *claims.Engine
	queuer   *queuer.Queuer
	workers  *submitter.Pool
	poller   *observer.Poller    // nil without Config.Statuses
	retain   *observer.Retention // nil with retention off
	waker    *waker              // nil with Config.NoListen
	cancels  *canceller          // passes cancels of running jobs on to them (cancel.go)
	periodic *periodic.Scheduler // nil without Config.Periodic
	metrics  *metrics
	registry *prometheus.Registry
	log      *slog.Logger

	mu   sync.Mutex
	addr string
}

// withDefaults returns c with every zero value replaced by the value it stands for. These are
// the defaults of the run command's flags: an embedded node and a daemon given no options
// behave alike. Two fields differ on purpose: Listen (empty: an embedder serves no HTTP unless
// it asks; run listens on 127.0.0.1:8080) and Claims.RequireSyncStandby (false; run turns it on
// when its URL lists several hosts). MaxAttempts depends on Statuses: run is a ledger
// pipeline (no limit), a node without Statuses a job runner (MaxAttemptsDefault). Claims' own
// zero values are resolved by the claim engine (claims.Config.Resolve), the same for both.
func (c Config) withDefaults() Config {
	c.Workers = cmp.Or(c.Workers, submitter.WorkersDefault)
	c.MaxSubmitMemory = cmp.Or(c.MaxSubmitMemory, submitter.MaxMemoryDefault)
	c.PollInterval = cmp.Or(c.PollInterval, observer.PollIntervalDefault)
	if c.MaxAttempts == 0 && c.Statuses == nil {
		c.MaxAttempts = MaxAttemptsDefault
	}
	c.UnknownGrace = cmp.Or(c.UnknownGrace, queuer.UnknownGraceDefault)
	c.UnknownAnswers = cmp.Or(c.UnknownAnswers, queuer.UnknownAnswersDefault)
	c.BackoffBase = cmp.Or(c.BackoffBase, submitter.BackoffBaseDefault)
	c.BackoffMax = cmp.Or(c.BackoffMax, submitter.BackoffMaxDefault)
	c.Retention = cmp.Or(c.Retention, observer.RetentionDefault)
	c.RetentionInterval = cmp.Or(c.RetentionInterval, observer.RetentionIntervalDefault)
	c.MaxBody = cmp.Or(c.MaxBody, ingest.MaxBodyDefault)
	c.ReadTimeout = cmp.Or(c.ReadTimeout, ReadTimeoutDefault)
	c.ReadHeaderTimeout = cmp.Or(c.ReadHeaderTimeout, ReadHeaderTimeoutDefault)
	c.MaxHeaderBytes = cmp.Or(c.MaxHeaderBytes, MaxHeaderBytesDefault)
	c.MaxConnections = cmp.Or(c.MaxConnections, MaxConnectionsDefault)
	c.MaxIngestRequests = cmp.Or(c.MaxIngestRequests, MaxIngestRequestsDefault)
	c.MaxIngestMemory = cmp.Or(c.MaxIngestMemory, ingest.MaxMemoryDefault)
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Resolve returns c with its defaults filled in (see withDefaults), checked: the values a node
// made with c works with. Claims is left as given; claims.Config.Resolve resolves it.
func (c Config) Resolve() (Config, error) {
	c = c.withDefaults()
	if err := c.validate(); err != nil {
		return Config{}, err
	}
	return c, nil
}

// New builds a Node working in db (its pool, or one made with its settings: Config.SharePool,
// and its schema). It does no I/O.
func New(db pgdb.DB, cfg Config) (_ *Node, err error) {
	if err := db.Err(); err != nil {
		return nil, fmt.Errorf("node: %w", err)
	}
	if cfg.Submitter == nil {
		return nil, errors.New("node: a Submitter is required")
	}
	if cfg, err = cfg.Resolve(); err != nil {
		return nil, err
	}
	if !cfg.SharePool {
		pc := db.Pool().Config() // a copy
		pc.MinConns, pc.MinIdleConns = 0, 0
		// With no connection kept open, making the pool does no I/O (its context would bound
		// only the dials of those connections): the first statement dials, once Run starts.
		own, perr := pgxpool.NewWithConfig(context.Background(), pc)
		if perr != nil {
			return nil, fmt.Errorf("node: a pool of its own: %w", perr)
		}
		defer func() {
			if err != nil { // New failed: Run, which would close it, never will
				own.Close()
			}
		}()
		db = db.WithPool(own)
	}
	// The parts in dependency order; the hooks that point back are back's (wiring.go).
	back := &backEdge{}
	m := newMetrics(db)
	cc := cfg.Claims
	cc.Logger = cmp.Or(cc.Logger, cfg.Logger)
	cc.OnGained = chain1(cc.OnGained, cfg.Events.ClaimGained, back.gained)
	cc.OnLost = chain2(cc.OnLost, cfg.Events.ClaimLost)
	cc.Progress = back.progress
	if cfg.Events.InstancePresumedDead != nil {
		dead := cfg.Events.InstancePresumedDead
		cc.OnVoided = func(v claims.Voided) { dead(v.Owner, v.ServiceID, v.Phase) }
	}
	eng, err := claims.New(db, cc)
	if err != nil {
		return nil, err
	}
	timings := eng.Timings()

	events := cfg.Events
	events.StatusChanged = func(t observer.Transition) {
		m.transition(t)
		if cfg.Events.StatusChanged != nil {
			cfg.Events.StatusChanged(t)
		}
		back.statusChanged(t)
	}
	recorder, err := observer.NewRecorder(db, eng, observer.RecorderConfig{
		HaltOnInvalid: cfg.HaltOnInvalid, SkipValid: cfg.SkipValid, TrackIdle: cc.DropIdleAfter > 0,
		FlushTimeout: timings.LocalDeadline, Events: &events, Recorded: back.recorded, Drained: back.drained, Logger: cfg.Logger,
	})
	if err != nil {
		return nil, err
	}
	workers, err := submitter.New(cfg.Submitter, recorder, back.done, submitter.Config{
		Workers: cfg.Workers, MaxMemory: cfg.MaxSubmitMemory, Timeout: timings.MaxSubmission,
		BackoffBase: cfg.BackoffBase, BackoffMax: cfg.BackoffMax,
		RetryErrors: cfg.Statuses == nil, MaxAttempts: max(cfg.MaxAttempts, 0),
		Lease:      eng,
		Middleware: append([]submitter.Middleware{submitter.MiddlewareFunc(m.measure)}, cfg.Middleware...),
		MayChain:   back.mayChain,
		Chained:    back.chained,
		Logger:     cfg.Logger,
	})
	if err != nil {
		return nil, err
	}
	q, err := queuer.New(db, eng, workers, recorder, queuer.Config{
		Interval: timings.RenewInterval, SweepAll: cfg.NoListen, StatementTimeout: timings.LocalDeadline,
		UnknownGrace: cfg.UnknownGrace, UnknownAnswers: cfg.UnknownAnswers, SkipValid: cfg.SkipValid, Awaiting: back.awaiting, Logger: cfg.Logger,
	})
	if err != nil {
		return nil, err
	}
	var poller *observer.Poller // none without Statuses
	if cfg.Statuses != nil {
		poller, err = observer.NewPoller(db, eng, recorder, cfg.Statuses, observer.PollerConfig{Interval: cfg.PollInterval, Wait: pollWait(cfg.SkipValid),
			StatementTimeout: timings.LocalDeadline, Logger: cfg.Logger})
		if err != nil {
			return nil, err
		}
	}
	cancels := newCanceller(db, eng.InstanceID(), workers, timings.RenewInterval, cfg.Logger)
	var wake *waker // none with NoListen
	if !cfg.NoListen {
		if wake, err = newWaker(db.Pool(), cfg.ListenConnString, eng, q, cancels.kick, cfg.Logger); err != nil {
			return nil, err
		}
	}
	var sched *periodic.Scheduler // none without Periodic
	if len(cfg.Periodic) > 0 {
		sched, err = periodic.New(db, periodic.Config{Jobs: cfg.Periodic, LockTimeout: timings.RenewInterval,
			IdleTimeout: timings.Expiry1 / 5, Logger: cfg.Logger})
		if err != nil {
			return nil, err
		}
	}
	var retain *observer.Retention // none with a negative Retention
	if cfg.Retention > 0 {
		retain, err = observer.NewRetention(db, observer.RetentionConfig{
			MaxAge: cfg.Retention, Interval: cfg.RetentionInterval, InstanceID: eng.InstanceID(), Logger: cfg.Logger,
		})
		if err != nil {
			return nil, err
		}
	}
	back.connect(eng, workers, q, poller)

	registry := cmp.Or(cfg.Registry, prometheus.NewRegistry())
	m.register(registry, eng, workers.Busy, retain)
	registry.MustRegister(buildInfo(cc.Version), poolStats{node: db.Pool(), probe: m.states.probe.Load, readiness: m.readiness.Load})
	if cfg.Registry == nil {
		registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	n := &Node{cfg: cfg, db: db, ownPool: !cfg.SharePool, back: back, engine: eng, queuer: q, workers: workers, poller: poller,
		retain: retain, waker: wake, cancels: cancels, periodic: sched, metrics: m, registry: registry, log: cfg.Logger}
	return n, nil
}

// Engine returns the node's claim engine.
func (n *Node) Engine() *claims.Engine { return n.engine }

// Addr is the HTTP listener's address once Run has started it ("" before, or without one).
func (n *Node) Addr() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.addr
}

// InFlight is the number of submissions running.
func (n *Node) InFlight() int { return n.workers.Busy() }

// Run registers the instance and works until ctx ends, then stops gracefully.
func (n *Node) Run(ctx context.Context) error {
	if n.ownPool {
		defer n.db.Pool().Close()
	}
	n.metrics.states.ctx.Store(&ctx)
	if err := n.engine.Register(ctx); err != nil {
		return err
	}
	srv, err := n.listen(ctx)
	if err != nil {
		_ = n.engine.Shutdown(ctx)
		return err
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _ = n.engine.Run(ctx) }() // claim cycles; its lease loop runs until stop releases
	if n.poller != nil {
		wg.Add(1)
		go func() { defer wg.Done(); _ = n.poller.Run(ctx) }()
	}
	if n.retain != nil {
		wg.Add(1)
		go func() { defer wg.Done(); _ = n.retain.Run(ctx) }()
	}
	if n.waker != nil {
		wg.Add(1)
		go func() { defer wg.Done(); n.waker.run(ctx) }()
	}
	wg.Add(1)
	go func() { defer wg.Done(); n.cancels.run(ctx) }()
	if n.periodic != nil {
		wg.Add(1)
		go func() { defer wg.Done(); _ = n.periodic.Run(ctx) }()
	}
	runErr := n.queuer.Run(ctx)
	wg.Wait()
	return errors.Join(ignoreCanceled(runErr), n.stop(ctx, srv))
}

// stop lets running submissions finish (bounded by the submit timeout) while the lease is
// kept alive, then cancels the ones still running and waits for them briefly, then releases
// the claims whose submissions have ended. A claim whose submission is still running is left
// to expire: releasing it would let another instance adopt and resend the batch while the old
// POST may still reach the ledger.
func (n *Node) stop(ctx context.Context, srv *http.Server) error {
	n.back.stopping.Store(true)
	t := n.engine.Timings()
	n.log.Info("stopping: no new work; waiting for submissions in flight", "in_flight", n.workers.Busy())
	base := context.WithoutCancel(ctx) // the engine's lease loop keeps renewing meanwhile
	wctx, cancel := context.WithTimeout(base, t.MaxSubmission)
	werr := n.workers.Wait(wctx)
	cancel()
	if werr != nil {
		n.log.Warn("submissions still running at the stop deadline; cancelling them", "in_flight", n.workers.Busy())
		n.workers.Cancel()
		wctx, cancel := context.WithTimeout(base, t.StopTime)
		_ = n.workers.Wait(wctx)
		cancel()
	}
	err := n.engine.ShutdownKeeping(ctx, n.workers.Running())
	if srv != nil {
		sctx, cancel := context.WithTimeout(base, httpShutdownTimeout)
		_ = srv.Shutdown(sctx)
		cancel()
	}
	return err
}

func chain1[T any](fs ...func(T)) func(T) {
	return func(v T) {
		for _, f := range fs {
			if f != nil {
				f(v)
			}
		}
	}
}

func chain2[A, B any](fs ...func(A, B)) func(A, B) {
	return func(a A, b B) {
		for _, f := range fs {
			if f != nil {
				f(a, b)
			}
		}
	}
}

// pollWait is the poller's wait: the default, except where VALID matters (SkipValid), since
// a ledger's wait parameter holds the answer until a batch is COMMITTED or INVALID and would
// hide a VALID one.
func pollWait(skipValid bool) time.Duration {
	if skipValid {
		return -1
	}
	return 0
}

func ignoreCanceled(err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return nil
	}
	return err
}
