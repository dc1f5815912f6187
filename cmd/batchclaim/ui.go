package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/batchclaim/batchclaim/cmd/batchclaim/internal/cli"
	"github.com/batchclaim/batchclaim/cmd/batchclaim/internal/database"
	"github.com/batchclaim/batchclaim/httpguard"
	"github.com/batchclaim/batchclaim/pgdb"
	"github.com/batchclaim/batchclaim/ui"
)

func runUI(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := cli.NewFlagSet("ui", "[flags]",
		"Serves the live status page (instances, claims, unfinished batches, recent transitions and\n"+
			"takeovers, halted service_ids, the job view) from the database alone, without running an\n"+
			"instance. The page writes too: it resumes a halted service_id, and retries and cancels\n"+
			"batches. With --auth-token-file every request for its data (the /api/ reads) needs a\n"+
			"bearer token of the read scope, and every write one of the operate scope; the page\n"+
			"itself and its assets need none. The writes need a database role that may make them\n"+
			"(docs/operations.md, \"Token scopes\" and \"Least privilege\").", stderr)
	dbURL := database.Flag(fs)
	schema := database.SchemaFlag(fs)
	listen := fs.String("listen", "127.0.0.1:8090", "HTTP address of the page")
	tokenFile := fs.String("auth-token-file", "", "file of bearer tokens, one a line with its scopes (TOKEN scopes=read,operate): read for the page's data (/api/...), "+
		"operate for its writes (resume, retry, cancel) (reloaded on SIGHUP)")
	insecure := fs.Bool("insecure-listen", false, "allow a non-loopback --listen without --auth-token-file")
	allowedHosts := cli.AllowedHostsFlag(fs)
	refresh := fs.Duration("refresh", ui.RefreshDefault, "how often the page refreshes")
	cli.BoundDuration(fs, "refresh", 100*time.Millisecond, time.Hour, "")
	newLogger := cli.LogFlags(fs)
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
	if *tokenFile == "" && !*insecure && !loopbackOnly(*listen) {
		return errorf("--listen %s is not a loopback address: give --auth-token-file (or --insecure-listen to serve the page's data and its writes, resume, retry and cancel, to anyone who can connect)", *listen)
	}
	if err := cli.CheckHosts(*listen, cli.SplitList(*allowedHosts)); err != nil {
		return err
	}
	tokens, err := loadTokens(*tokenFile, logger)
	if err != nil {
		return err
	}
	switch {
	case tokens == nil:
		cli.WarnReachable(logger, *listen, false, false) // --insecure-listen on a reachable address
	case !loopbackOnly(*listen):
		// Not WarnReachable's own line, whose advice names --tls-cert: ui has no TLS of its own.
		logger.Warn("bearer tokens travel in clear text: ui serves plain HTTP; terminate TLS in front of it, or listen on loopback", "listen", *listen)
	}
	pool, err := database.OpenSchema(ctx, *dbURL, *schema, 4)
	if err != nil {
		return err
	}
	defer pool.Close()
	db, err := pgdb.Open(pool, *schema)
	if err != nil {
		return err
	}
	page, err := ui.New(db, ui.Config{Refresh: *refresh, Logger: logger})
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	page.Register(mux)
	var handler http.Handler = mux
	if tokens != nil {
		handler = tokens.Middleware(mux)
	}
	srv, ln, err := httpguard.Listen(httpguard.Config{Addr: *listen, Handler: handler, AllowedHosts: cli.SplitList(*allowedHosts),
		OpenPaths: []string{"/healthz"}, Logger: logger})
	if err != nil {
		return err
	}
	reloadOnSIGHUP(ctx, tokens, logger)
	fmt.Fprintf(stdout, "status page on http://%s/\n", ln.Addr())
	logger.Info("serving the status page", "addr", ln.Addr().String(), "auth", tokens != nil)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
