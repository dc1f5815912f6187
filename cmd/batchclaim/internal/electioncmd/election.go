package electioncmd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/batchclaim/batchclaim"
	"github.com/batchclaim/batchclaim/cmd/batchclaim/internal/cli"
	"github.com/batchclaim/batchclaim/cmd/batchclaim/internal/database"
	"github.com/batchclaim/batchclaim/httpguard"
	"github.com/batchclaim/batchclaim/patterns/election"
	"github.com/batchclaim/batchclaim/pgdb"
)

// Command is `batchclaim election run|demo`.
func Command(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 {
		switch args[0] {
		case "run":
			return electionRun(ctx, args[1:], stdout, stderr)
		case "demo":
			return electionDemo(ctx, args[1:], stdout, stderr)
		}
	}
	fmt.Fprintf(stderr, "Usage: batchclaim election run|demo [flags]\n\n"+
		"  run   stand for one or more roles: become primary of each role that has none, keep the\n"+
		"        terms alive, step down before anyone else can be elected; GET /primary?role=R\n"+
		"  demo  three processes, two roles, SIGKILL and SIGSTOP of primaries and a cut database\n"+
		"        link; checks that no role ever had two primaries, that no stale fenced write was\n"+
		"        accepted and that every failure was followed by an election within T + I\n")
	if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
		return nil
	}
	return cli.ErrUsage
}

func electionRun(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := cli.NewFlagSet("election run", "--roles R1,R2 [flags]",
		"Stands for the roles: becomes primary of each role that has no live primary and keeps its\n"+
			"terms alive with a heartbeat every --interval; a primary that cannot confirm a heartbeat\n"+
			"within timeout - interval of sending it steps down on its own. Serves GET /primary?role=R\n"+
			"(the role's live primary as JSON, 404 when none) on --listen. Stops on SIGTERM or SIGINT,\n"+
			"resigning its terms so that a standby takes over at once.", stderr)
	dbURL := database.Flag(fs)
	schema := database.SchemaFlag(fs)
	roles := fs.String("roles", "", "comma-separated roles to stand for (required)")
	var cfg election.Config
	fs.StringVar(&cfg.Name, "name", "", "this instance's name (default <host>-<pid>)")
	fs.StringVar(&cfg.Host, "host", "", "this instance's host, as batchclaim primary compares it (default: the hostname)")
	fs.DurationVar(&cfg.HeartbeatInterval, "interval", 0, "I: heartbeat interval (default timeout/5, or 1s)")
	fs.DurationVar(&cfg.Timeout, "timeout", 0, "T: a primary silent this long may be replaced; must be > 2I (default 5 x interval, or 5s)")
	listen := fs.String("listen", "", "HTTP address for GET /primary?role=R and /healthz (empty: none; a non-loopback address needs --insecure-listen)")
	insecure := fs.Bool("insecure-listen", false, "allow a non-loopback --listen (it serves who is primary to anyone who can reach it, without authentication)")
	allowedHosts := cli.AllowedHostsFlag(fs)
	demoWrites := fs.Bool("demo-writes", false, "while primary, record acting evidence and fenced writes in the demo's tables (used by election demo)")
	workURL := fs.String("demo-work-database-url", "", "with --demo-writes: make those writes through this URL instead of --database-url, so that cutting the elector's link leaves the work's link up")
	newLogger := cli.LogFlags(fs)
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	for _, r := range strings.Split(*roles, ",") {
		if r = strings.TrimSpace(r); r != "" {
			cfg.Roles = append(cfg.Roles, r)
		}
	}
	if len(cfg.Roles) == 0 {
		fmt.Fprintln(stderr, "batchclaim election run: --roles is required")
		return cli.ErrUsage
	}
	logger, err := newLogger(stderr)
	if err != nil {
		return err
	}
	if err := cli.CheckReadOnlyListen(*listen, *insecure, "/primary and /healthz"); err != nil {
		return err
	}
	if err := cli.CheckHosts(*listen, cli.SplitList(*allowedHosts)); err != nil {
		return err
	}
	cli.WarnReachable(logger, *listen, false, false)
	cfg.Logger = logger
	if _, err := cfg.Resolve(); err != nil {
		return err
	}
	pool, err := database.OpenSchema(ctx, *dbURL, *schema, 8)
	if err != nil {
		return err
	}
	defer pool.Close()
	db, err := pgdb.Open(pool, *schema)
	if err != nil {
		return err
	}
	var w *demoWorker
	if *demoWrites {
		w = &demoWorker{db: db, log: logger}
		if *workURL != "" {
			work, err := database.Open(ctx, *workURL, 8)
			if err != nil {
				return err
			}
			defer work.Close()
			w.db = db.WithPool(work)
		}
		cfg.OnElected = w.act
	}
	el, err := election.New(db, cfg)
	if err != nil {
		return err
	}
	if w != nil {
		w.el = el
	}
	if *listen != "" {
		srv, err := servePrimary(ctx, *listen, cli.SplitList(*allowedHosts), el, db, logger)
		if err != nil {
			return err
		}
		defer srv.Close()
	}
	i, t := el.Timings()
	logger.Info("standing for election", "roles", strings.Join(cfg.Roles, ","), "name", el.Name(), "host", el.Host(),
		"interval", i, "timeout", t, "instance_id", el.InstanceID(), "schema", db.Schema())
	err = el.Run(ctx)
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return database.Explain(db.Schema(), err)
}

// primaryJSON is the answer of GET /primary?role=R.
type primaryJSON struct {
	Role       string `json:"role"`
	Epoch      int64  `json:"epoch"`
	InstanceID string `json:"instance_id"`
	Name       string `json:"name"`
	Host       string `json:"host"`
	// ThisInstance: the primary is the instance answering, and it is primary by its own
	// conservative view as well as by the database's.
	ThisInstance bool `json:"this_instance"`
}

// servePrimary serves GET /primary?role=R and GET /healthz on addr until ctx ends, behind
// the listener guard.
func servePrimary(ctx context.Context, addr string, allowedHosts []string, el *election.Elector, db pgdb.DB, logger *slog.Logger) (*http.Server, error) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok\n") })
	mux.HandleFunc("GET /primary", func(w http.ResponseWriter, r *http.Request) {
		role := r.URL.Query().Get("role")
		if role == "" {
			http.Error(w, "missing ?role=", http.StatusBadRequest)
			return
		}
		qctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
		defer cancel()
		t, err := election.GetPrimary(qctx, db, role)
		switch {
		case errors.Is(err, batchclaim.ErrNotFound):
			http.Error(w, fmt.Sprintf("role %s has no live primary", role), http.StatusNotFound)
			return
		case err != nil:
			httpguard.Logger(r.Context(), logger).Debug("GET /primary: database", "error", err)
			http.Error(w, "the database cannot be read; try again", http.StatusServiceUnavailable)
			return
		}
		mine, ok := el.CheckPrimary(role)
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(primaryJSON{Role: t.Role, Epoch: t.Epoch, InstanceID: t.InstanceID.String(),
			Name: t.Name, Host: t.Host, ThisInstance: ok && mine.Epoch == t.Epoch})
	})
	srv, bound, err := httpguard.Start(httpguard.Config{Addr: addr, Handler: mux, AllowedHosts: allowedHosts,
		OpenPaths: []string{"/healthz"}, Logger: logger})
	if err != nil {
		return nil, err
	}
	go func() { <-ctx.Done(); _ = srv.Close() }()
	logger.Info("listening", "addr", bound)
	return srv, nil
}
