package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/batchclaim/batchclaim/claims"
	"github.com/batchclaim/batchclaim/cmd/batchclaim/internal/cli"
	"github.com/batchclaim/batchclaim/cmd/batchclaim/internal/database"
	"github.com/batchclaim/batchclaim/cmd/batchclaim/internal/redact"
	"github.com/batchclaim/batchclaim/dlt"
	"github.com/batchclaim/batchclaim/httpauth"
	"github.com/batchclaim/batchclaim/ingest"
	"github.com/batchclaim/batchclaim/node"
	"github.com/batchclaim/batchclaim/observer"
	"github.com/batchclaim/batchclaim/pgdb"
	"github.com/batchclaim/batchclaim/queuer"
	"github.com/batchclaim/batchclaim/submitter"
)

// timingFlags registers the claim engine's timing knobs.
func timingFlags(fs *flag.FlagSet, c *claims.Config) {
	fs.DurationVar(&c.RenewInterval, "renew-interval", 0, "R: how often the lease is renewed and the claim cycle runs (default min(5s, expiry-1/6))")
	fs.DurationVar(&c.LocalDeadline, "local-deadline", 0, "D: fence this instance if no renewal succeeded for this long (default 2/3 of expiry-1)")
	fs.DurationVar(&c.Expiry1, "expiry-1", 0, "T1: idle claims of an instance silent this long may be taken (default 30s)")
	fs.DurationVar(&c.Expiry2, "expiry-2", 0, "T2: all claims of an instance silent this long may be taken (default 4 x expiry-1)")
	fs.DurationVar(&c.MaxSubmission, "submit-timeout", 0, "S: longest one submission may take (default min(60s, expiry-2 - local-deadline - margin))")
	fs.DurationVar(&c.StopTime, "stop-time", 0, "time needed to stop starting submissions once fenced (default expiry-1/10)")
	fs.DurationVar(&c.Margin, "margin", 0, "safety margin for latency and clock-rate differences (default expiry-1/10)")
	fs.IntVar(&c.ShareSlack, "share-slack", 0, "claims an instance may hold over its fair share before releasing surplus")
	fs.DurationVar(&c.DropIdleAfter, "drop-idle-after", 0, "delete the claim rows of service_ids without unfinished batches for this long, so cost follows the keys with work (0: never)")
	c.KnobNames = map[string]string{
		"RenewInterval": "--renew-interval", "LocalDeadline": "--local-deadline", "Expiry1": "--expiry-1", "Expiry2": "--expiry-2",
		"MaxSubmission": "--submit-timeout", "StopTime": "--stop-time", "Margin": "--margin",
	}
}

// runFlags are the flags of run, defined apart from running an instance so that the
// environment check of every command and the defaults test can read them.
type runFlags struct {
	fs  *flag.FlagSet
	cfg node.Config

	dbURL, dltURL, flavor, circuit, service, auth   *string
	dltCA, dltCert, dltKey, tokenFile, allowedHosts *string
	insecure, notify, claimsOnly                    *bool
	dbMaxConns                                      *int
	notifyURL, schema                               *string
	newLogger                                       func(w io.Writer) (*slog.Logger, error)
}

func newRunFlags(stderr io.Writer) *runFlags {
	f := &runFlags{}
	fs := cli.NewFlagSet("run", "[flags]",
		"Runs one instance: registers it, keeps its lease, claims its fair share of service_ids,\n"+
			"submits their batches to the ledger in order and records every status, until SIGTERM or\n"+
			"SIGINT; then it stops taking work, lets submissions in flight finish and releases its\n"+
			"claims. Every flag can also be set through BATCHCLAIM_<FLAG> (e.g. BATCHCLAIM_EXPIRY_1=3s).", stderr)
	f.dbURL = database.Flag(fs)
	cfg := &f.cfg
	fs.StringVar(&cfg.Claims.Name, "instance-name", "", "name shown by status (default <host>-<pid>)")
	timingFlags(fs, &cfg.Claims)
	fs.BoolVar(&cfg.Claims.RequireSyncStandby, "require-sync-standby", false, "take no new work while the primary has no synchronous standby (a failover could lose commits, epochs included) (default: on when --database-url lists several hosts)")
	f.dltURL = fs.String("dlt-url", "", "ledger REST API base URL (Sawtooth REST API, or the Splinter node for scabbard)")
	f.flavor = fs.String("dlt-flavor", "sawtooth", "sawtooth | scabbard")
	f.circuit = fs.String("scabbard-circuit", "", "scabbard circuit id (scabbard only)")
	f.service = fs.String("scabbard-service", "", "scabbard service id (scabbard only)")
	f.auth = cli.SecretFlag(fs, "dlt-authorization", "Authorization header value for the ledger, if it needs one (visible in ps: give it with --dlt-authorization-file or BATCHCLAIM_DLT_AUTHORIZATION)",
		func(v string) bool { return v != "" })
	cli.WarnSecret(fs, "dlt-url", redact.HasSecret)
	f.dltCA = fs.String("dlt-ca", "", "PEM bundle of the CAs trusted for an https --dlt-url (default: the system's roots)")
	f.dltCert = fs.String("dlt-client-cert", "", "PEM client certificate presented to the ledger (mutual TLS; with --dlt-client-key)")
	f.dltKey = fs.String("dlt-client-key", "", "PEM private key of --dlt-client-cert")
	fs.StringVar(&cfg.Listen, "listen", "127.0.0.1:8080", "HTTP address for /healthz, /readyz, /metrics and the ingest API (empty: none)")
	f.tokenFile = fs.String("auth-token-file", "", "file of bearer tokens, one a line with its scopes (TOKEN scopes=ingest,read,operate,debug): ingest for /batches and /batch_statuses, "+
		"read for the status page's data (/api/...), operate for its resume, retry and cancel, debug for --pprof; /healthz, /readyz, /metrics and the page itself need none (reloaded on SIGHUP)")
	f.insecure = fs.Bool("insecure-listen", false, "allow a non-loopback --listen without --auth-token-file")
	f.allowedHosts = cli.AllowedHostsFlag(fs)
	fs.StringVar(&cfg.TLSCertFile, "tls-cert", "", "serve HTTPS with this PEM certificate chain (with --tls-key)")
	fs.StringVar(&cfg.TLSKeyFile, "tls-key", "", "PEM private key of --tls-cert")
	fs.DurationVar(&cfg.ReadTimeout, "read-timeout", node.ReadTimeoutDefault, "longest time to read one request, body included")
	fs.DurationVar(&cfg.ReadHeaderTimeout, "read-header-timeout", node.ReadHeaderTimeoutDefault, "longest time to read one request's headers")
	fs.IntVar(&cfg.MaxHeaderBytes, "max-header-bytes", node.MaxHeaderBytesDefault, "largest request header block in bytes")
	fs.IntVar(&cfg.MaxConnections, "max-connections", node.MaxConnectionsDefault, "open connections to the listener; 16 more serve only /healthz, /readyz and /metrics, and one more is closed at once")
	fs.IntVar(&cfg.MaxIngestRequests, "max-ingest-requests", node.MaxIngestRequestsDefault, "ingest requests worked on at once, counted once their body has arrived; more are answered 503 with Retry-After")
	fs.Int64Var(&cfg.MaxIngestMemory, "max-ingest-memory", ingest.MaxMemoryDefault, "bytes that ingest request bodies and their decoded batches may hold at once (at least 2 x --max-body; 4.2 x decodes any body, a list of tiny batches included); beyond, 503 with Retry-After")
	f.dbMaxConns = fs.Int("db-max-conns", defaultPoolConns(), "connections of the instance's database pool (ingest holds at most half; /metrics and the status page have 2 of their own, /readyz's pings 1, the lease 1)")
	fs.IntVar(&cfg.Workers, "workers", submitter.WorkersDefault, "concurrent submissions (at most one per service_id)")
	fs.Int64Var(&cfg.MaxSubmitMemory, "max-submit-memory", submitter.MaxMemoryDefault, "bytes of the payloads the running submissions may hold; a batch is handed out only while it fits (one larger batch goes alone)")
	fs.DurationVar(&cfg.PollInterval, "poll-interval", observer.PollIntervalDefault, "how often the ledger is asked about accepted batches")
	f.notify = fs.Bool("notify", true, "wake on new work through LISTEN/NOTIFY on a connection of its own, so a new batch goes out within milliseconds;\n"+
		"false: poll every held claim each --renew-interval instead (behind a pooler in transaction mode without --notify-database-url)")
	f.schema = fs.String("schema", pgdb.SchemaDefault, "Postgres schema of batchclaim's tables, as migrate created it (docs/schema.md)")
	notifyURL := cli.SecretFlag(fs, "notify-database-url", "direct (not pooled) Postgres URL for the LISTEN connection, when --database-url goes through a pooler (default: --database-url)", redact.HasSecret)
	fs.DurationVar(&cfg.UnknownGrace, "unknown-grace", queuer.UnknownGraceDefault, "resubmit a batch the ledger does not know once its last POST is this old")
	fs.IntVar(&cfg.UnknownAnswers, "unknown-answers", queuer.UnknownAnswersDefault, "... or after this many consecutive UNKNOWN answers about its last POST")
	fs.DurationVar(&cfg.BackoffBase, "backoff-base", submitter.BackoffBaseDefault, "first delay after ledger back-pressure (doubles per attempt, jittered)")
	fs.DurationVar(&cfg.BackoffMax, "backoff-max", submitter.BackoffMaxDefault, "longest delay after ledger back-pressure")
	fs.BoolVar(&cfg.HaltOnInvalid, "halt-on-invalid", false, "stop a service_id after an INVALID batch (default: skip the batch, go on)")
	fs.DurationVar(&cfg.Retention, "retention", observer.RetentionDefault, "delete finished batches (with their attempts and transitions) this long after they finished; 0 disables")
	fs.DurationVar(&cfg.RetentionInterval, "retention-interval", observer.RetentionIntervalDefault, "how often the retention job runs (one instance at a time)")
	fs.Int64Var(&cfg.MaxBody, "max-body", ingest.MaxBodyDefault, "largest ingest request body in bytes")
	fs.BoolVar(&f.cfg.Pprof, "pprof", false, "serve the runtime's profiles under /debug/pprof/ on --listen, behind --auth-token-file (without one: a loopback --listen only)")
	f.claimsOnly = fs.Bool("claims-only", false, "only hold claims (no ledger, no batches): for trying out the claim engine; serves /metrics only if --listen is given")
	f.newLogger = cli.LogFlags(fs)
	runBounds(fs)
	f.notifyURL = notifyURL
	f.fs = fs
	return f
}

func runDaemon(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f := newRunFlags(stderr)
	fs, cfg := f.fs, &f.cfg
	dbURL, dltURL, flavor, circuit, service, auth := f.dbURL, f.dltURL, f.flavor, f.circuit, f.service, f.auth
	dltCA, dltCert, dltKey, tokenFile, allowedHosts := f.dltCA, f.dltCert, f.dltKey, f.tokenFile, f.allowedHosts
	insecure, notify, claimsOnly, dbMaxConns, newLogger := f.insecure, f.notify, f.claimsOnly, f.dbMaxConns, f.newLogger
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	logger, err := newLogger(stderr)
	if err != nil {
		return err
	}
	cfg.ListenConnString = *f.notifyURL
	if err := checkTimingFlags(fs); err != nil {
		return err
	}
	if cfg.MaxIngestMemory < 2*cfg.MaxBody {
		return fmt.Errorf("--max-ingest-memory %d is under 2 x --max-body %d: a body of the largest size and its decoded batches could never be held", cfg.MaxIngestMemory, cfg.MaxBody)
	}
	schema := *f.schema
	if err := pgdb.ValidateSchema(schema); err != nil {
		return fmt.Errorf("--schema: %w", err)
	}
	if cfg.Retention == 0 { // --retention 0 disables; the library's zero is the default
		cfg.Retention = -1
	}
	cfg.AllowedHosts = cli.SplitList(*allowedHosts)
	cfg.Logger, cfg.Claims.Logger, cfg.Claims.Version = logger, logger, version
	cfg.NoListen = !*notify
	if !flagGiven(fs, "require-sync-standby") {
		cfg.Claims.RequireSyncStandby = multiHost(*dbURL)
	}
	resolved, err := cfg.Claims.Resolve()
	if err != nil {
		return err
	}
	timings := resolved.Timings()
	if err := checkResolvedTimings(timings); err != nil {
		return err
	}
	var tokens *httpauth.Tokens
	if *claimsOnly {
		if cfg.Pprof {
			return errorf("--pprof is not served with --claims-only: its listener serves /healthz and /metrics only, without tokens; " +
				"profile an instance that runs the whole pipeline, or leave --pprof out")
		}
		if err := cli.CheckReadOnlyListen(cfg.Listen, *insecure, "/healthz and /metrics"); err != nil {
			return err
		}
	} else {
		if err := checkListen(cfg.Listen, *tokenFile, *insecure); err != nil {
			return err
		}
		if err := checkTLSFlags(cfg.TLSCertFile, cfg.TLSKeyFile); err != nil {
			return err
		}
		if tokens, err = loadTokens(*tokenFile, logger); err != nil {
			return err
		}
		if tokens != nil {
			cfg.Auth = tokens.Middleware
		}
		if err := checkPprof(cfg.Pprof, cfg.Listen, tokens != nil); err != nil {
			return err
		}
		if cfg.Pprof && tokens != nil && !tokens.Granted(httpauth.ScopeDebug) {
			logger.Warn("--pprof: no token of --auth-token-file has the debug scope, so every request for the profiles is refused (403)", "path", tokens.Path())
		}
	}
	if err := cli.CheckHosts(cfg.Listen, cfg.AllowedHosts); err != nil {
		return err
	}
	cli.WarnReachable(logger, cfg.Listen, tokens != nil, cfg.TLSCertFile != "")
	var client dlt.Client
	if !*claimsOnly {
		if *dltURL == "" {
			return errorf("--dlt-url is required (the ledger to submit to), or --claims-only")
		}
		fl, err := dlt.ParseFlavor(*flavor)
		if err != nil {
			return fmt.Errorf("--dlt-flavor: %w", err)
		}
		client, err = dlt.NewClient(dlt.Config{Flavor: fl, URL: *dltURL, Circuit: *circuit, Service: *service,
			Authorization: *auth, RequestTimeout: timings.MaxSubmission, Logger: logger,
			CAFile: *dltCA, ClientCertFile: *dltCert, ClientKeyFile: *dltKey,
			// A connection kept for each worker's POST and each status request beside them.
			IdleConns: cfg.Workers + observer.PollConcurrency*dlt.StatusConcurrencyDefault})
		if err != nil {
			return fmt.Errorf("ledger (%s): %w", strings.Join(givenFlags(fs, "dlt-url", "dlt-flavor", "dlt-ca", "dlt-client-cert", "dlt-client-key", "scabbard-circuit", "scabbard-service"), ", "), err)
		}
	}
	stopTracing, err := startTracing(ctx, os.Getenv, stderr, logger) // on when OTEL_* asks for traces (docs/observability.md)
	if err != nil {
		return err
	}
	defer stopTracing()
	var stmts *stmtMetric
	cfg.Registry, stmts = runRegistry()
	pooled := false
	pool, err := database.OpenNoted(ctx, *dbURL, int32(*dbMaxConns), func(msg string) { pooled = true; logger.Warn(msg) },
		stmts.attach, func(pc *pgxpool.Config) { claims.ConfigurePool(pc, timings) })
	if err != nil {
		return err
	}
	defer pool.Close()
	if err := database.CheckSchema(ctx, pool, schema); err != nil {
		return err
	}
	db, err := pgdb.Open(pool, schema)
	if err != nil {
		return err
	}
	if pooled && !cfg.NoListen && cfg.ListenConnString == "" {
		// A pooler in transaction mode hands the listening session's server connection to
		// other clients after each statement: notifications would never arrive.
		cfg.NoListen = true
		logger.Warn("--database-url goes through a pooler and no --notify-database-url is given: not listening for new work; "+
			"every held claim is looked at each --renew-interval instead (give a direct URL with --notify-database-url to wake within milliseconds)",
			"renew_interval", timings.RenewInterval)
	}
	if *claimsOnly {
		if !flagGiven(fs, "listen") {
			cfg.Listen = ""
		}
		return database.Explain(schema, runClaimsOnly(ctx, db, cfg.Claims, logger, cfg.Listen, cfg.AllowedHosts, cfg.Registry))
	}
	cfg.Submitter, cfg.Statuses, cfg.SkipValid = client, client, client.OrderedOnValid()
	cfg.SharePool = true // the pool is the node's alone: --db-max-conns is its budget
	n, err := node.New(db, *cfg)
	if err != nil {
		return err
	}
	bound, limit := setMemoryLimit(*cfg, int32(*dbMaxConns))
	registerGuardMetrics(cfg.Registry, n.Engine())
	logger.Info("starting", "instance_id", n.Engine().InstanceID().String(), "name", n.Engine().Name(), "pid", os.Getpid(),
		"version", version, "database", redact.URL(*dbURL), "dlt", redact.URL(*dltURL), "flavor", *flavor,
		"renew_interval", timings.RenewInterval, "local_deadline", timings.LocalDeadline,
		"expiry_1", timings.Expiry1, "expiry_2", timings.Expiry2, "submit_timeout", timings.MaxSubmission,
		"stop_budget", node.StopBudget(timings), "workers", cfg.Workers, "db_max_conns", *dbMaxConns,
		"schema", schema, "notify", !cfg.NoListen, "memory_bound", bound, "memory_limit", limit)
	reloadOnSIGHUP(ctx, tokens, logger)
	return database.Explain(schema, n.Run(ctx))
}

func runClaimsOnly(ctx context.Context, db pgdb.DB, cfg claims.Config, logger *slog.Logger, listen string, allowedHosts []string, reg *prometheus.Registry) error {
	engine, err := claims.New(db, cfg)
	if err != nil {
		return err
	}
	stopHTTP, err := serveClaimsOnly(listen, allowedHosts, reg, engine, logger)
	if err != nil {
		return err
	}
	defer stopHTTP()
	logger.Info("starting (claims only)", "instance_id", engine.InstanceID().String(), "name", engine.Name(), "pid", os.Getpid())
	err = engine.Run(ctx)
	if ctx.Err() == nil {
		return err
	}
	logger.Info("stopping: releasing claims")
	return engine.Shutdown(ctx)
}

func fmtTime(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.Format("15:04:05.000")
}
