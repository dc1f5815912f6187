package ui

import (
	"bytes"
	"cmp"
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/batchclaim/batchclaim"
	"github.com/batchclaim/batchclaim/httpguard"
	"github.com/batchclaim/batchclaim/observer"
	"github.com/batchclaim/batchclaim/pgdb"
)

// Defaults for Config's zero values.
const (
	RefreshDefault  = 2 * time.Second
	WindowDefault   = 10 * time.Minute
	BucketsDefault  = 30
	RecentDefault   = 15
	ServicesDefault = 20
	ScanDefault     = 100_000
)

// writeTimeout bounds one write of the page (resume, retry, cancel), as readContext bounds a
// read, and with the same 5s: a write changes one row, which a healthy database does in
// milliseconds. Without it a write stuck behind a row lock, or on a database that stopped
// answering, would hang its request for minutes and hold one of the page's connections (two
// in run, shared with /metrics). It does not follow Refresh, which paces the reads only.
const writeTimeout = 5 * time.Second

//go:embed assets
var assets embed.FS

// Config configures the status page. Every zero value means the default.
type Config struct {
	// Refresh is how often the page asks for new data. Answers are reused for half of it,
	// so any number of open pages cost one read per half Refresh. Zero means RefreshDefault;
	// at least 100ms.
	Refresh time.Duration
	// Window is the span of the chart of state changes. Zero means WindowDefault.
	Window time.Duration
	// Buckets is the number of bars in the chart; Window/Buckets must be at least a second.
	// Zero means BucketsDefault.
	Buckets int
	// Recent is how many recent transitions and takeovers are listed. Zero means RecentDefault.
	Recent int
	// Services is how many service_ids with unfinished batches are listed (oldest first).
	// Zero means ServicesDefault.
	Services int
	// Scan bounds the newest rows of the transition and ownership logs read for the chart and
	// the takeovers, so that a busy database is not scanned at every refresh, and the batches
	// (by seq) one page of the batch list reads. Zero means ScanDefault.
	Scan int
	// Logger; nil discards.
	Logger *slog.Logger
}

// withDefaults returns c with every zero field filled in.
func (c Config) withDefaults() Config {
	c.Refresh = cmp.Or(c.Refresh, RefreshDefault)
	c.Window = cmp.Or(c.Window, WindowDefault)
	c.Buckets = cmp.Or(c.Buckets, BucketsDefault)
	c.Recent = cmp.Or(c.Recent, RecentDefault)
	c.Services = cmp.Or(c.Services, ServicesDefault)
	c.Scan = cmp.Or(c.Scan, ScanDefault)
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// validate checks c with its defaults filled in.
func (c Config) validate() error {
	switch {
	case c.Refresh < 100*time.Millisecond:
		return fmt.Errorf("refresh %s is under 100ms", c.Refresh)
	case c.Buckets < 1 || c.Recent < 1 || c.Services < 1 || c.Scan < 1:
		return fmt.Errorf("buckets %d, recent %d, services %d and scan %d must be positive (zero means the default)", c.Buckets, c.Recent, c.Services, c.Scan)
	case c.Window/time.Duration(c.Buckets) < time.Second:
		return fmt.Errorf("window %s over %d buckets is under a second a bucket", c.Window, c.Buckets)
	}
	return nil
}

// Handler serves the status page and its JSON API.
type Handler struct {
	db     pgdb.DB
	cfg    Config
	log    *slog.Logger
	page   []byte
	static fs.FS

	// quiet throttles the lines a client can cause: every failed read or write during a
	// database outage would otherwise write one.
	quiet *httpguard.Throttle
	// writeTimeout is the constant writeTimeout; tests shorten it.
	writeTimeout time.Duration

	mu     sync.Mutex
	last   []byte
	lastAt time.Time
}

// New returns the status page's handler over db. It does no I/O.
func New(db pgdb.DB, cfg Config) (*Handler, error) {
	if err := db.Err(); err != nil {
		return nil, fmt.Errorf("ui: %w", err)
	}
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("ui: %w", err)
	}
	page, err := renderPage(cfg.Refresh)
	if err != nil {
		return nil, err
	}
	static, err := fs.Sub(assets, "assets")
	if err != nil {
		return nil, fmt.Errorf("ui: assets: %w", err)
	}
	return &Handler{db: db, cfg: cfg, log: cfg.Logger, page: page, static: static,
		quiet: httpguard.NewThrottle(cfg.Logger, httpguard.LogIntervalDefault), writeTimeout: writeTimeout}, nil
}

// Register adds the page's routes to mux. Only the POSTs (resume, retry, cancel) change
// anything, each bounded by writeTimeout; an authentication middleware around mux protects
// them (the handler does not authenticate).
//
//	GET  /                                   the page
//	GET  /assets/{file}                      its stylesheet and script
//	GET  /api/status                         everything the page shows, as JSON (Status)
//	GET  /api/search?q=                      batches by id, id prefix or #seq; service_ids (SearchResult)
//	GET  /api/batches?state=&service_id=&window=&before=&limit=
//	                                         batches changed within window, newest first (BatchList)
//	GET  /api/batches/{seq}                  one batch, its attempts and transitions (BatchDetail)
//	GET  /api/services/{service_id}?after=&limit=
//	                                         a service_id's queue, owner history and halt (ServicePage)
//	POST /api/halts/{service_id}/resume      lift a halt; 404 if the service_id is not halted
//	POST /api/batches/{seq}/retry            run a DISCARDED, CANCELLED or INVALID batch again, a DELAYED one now
//	POST /api/batches/{seq}/cancel           cancel a batch, or ask its running attempt to stop
//
// Bad parameters are answered 400 with what is wrong, an unknown batch or service_id 404.
func (h *Handler) Register(mux *http.ServeMux) {
	mux.HandleFunc("GET /{$}", h.index)
	mux.HandleFunc("GET /assets/{file}", h.asset)
	mux.HandleFunc("GET /api/status", h.status)
	mux.HandleFunc("GET /api/search", onceEach(h.search))
	mux.HandleFunc("GET /api/batches", onceEach(h.batches))
	mux.HandleFunc("GET /api/batches/{seq}", h.batch)
	mux.HandleFunc("GET /api/services/{service_id}", onceEach(h.service))
	mux.HandleFunc("POST /api/halts/{service_id}/resume", h.resume)
	mux.HandleFunc("POST /api/batches/{seq}/retry", h.change("retry", observer.Retry))
	mux.HandleFunc("POST /api/batches/{seq}/cancel", h.change("cancel", func(ctx context.Context, q pgdb.Querier, seq int64) (observer.Change, error) {
		return observer.Cancel(ctx, q, seq, "cancelled from the status page")
	}))
}

func renderPage(refresh time.Duration) ([]byte, error) {
	t, err := template.ParseFS(assets, "assets/index.html")
	if err != nil {
		return nil, fmt.Errorf("ui: page template: %w", err)
	}
	var b bytes.Buffer
	if err := t.Execute(&b, struct{ RefreshMs int64 }{refresh.Milliseconds()}); err != nil {
		return nil, fmt.Errorf("ui: page template: %w", err)
	}
	return b.Bytes(), nil
}

// pagePolicy lets the page load only its own script, stylesheet and data, and keeps it out
// of other sites' frames (where a click on Resume could be tricked).
const pagePolicy = "default-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"

func (h *Handler) index(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Security-Policy", pagePolicy)
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Cache-Control", "no-cache")
	_, _ = w.Write(h.page)
}

// asset serves the stylesheet and the script (the page itself only at /).
func (h *Handler) asset(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("file")
	if name == "index.html" {
		http.NotFound(w, r)
		return
	}
	// Not from the system's MIME tables, which differ between machines.
	switch {
	case strings.HasSuffix(name, ".js"):
		w.Header().Set("Content-Type", "text/javascript; charset=utf-8")
	case strings.HasSuffix(name, ".css"):
		w.Header().Set("Content-Type", "text/css; charset=utf-8")
	}
	http.ServeFileFS(w, r, h.static, name)
}

func (h *Handler) status(w http.ResponseWriter, r *http.Request) {
	b, err := h.read(r.Context())
	h.noteRead(r, err)
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, "database unavailable", "The status could not be read from the database; try again")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(b)
}

// statusFailed is the site of a failed read of the status.
const statusFailed = "status page: the database cannot be read"

// noteRead logs a failed read of the status through the throttle (any client can ask for
// the status as often as it likes), and the recovery once reads work again.
func (h *Handler) noteRead(r *http.Request, err error) {
	if err != nil {
		h.quiet.Log(r.Context(), slog.LevelWarn, statusFailed, "error", err)
		return
	}
	if h.quiet.Clear(statusFailed) {
		httpguard.Logger(r.Context(), h.log).Info("status page: the database can be read again")
	}
}

// read returns the encoded Status, reusing one younger than half the refresh interval.
func (h *Handler) read(ctx context.Context) ([]byte, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.last != nil && time.Since(h.lastAt) < h.cfg.Refresh/2 {
		return h.last, nil
	}
	ctx, cancel := context.WithTimeout(ctx, max(h.cfg.Refresh, 2*time.Second))
	defer cancel()
	st, err := readStatus(ctx, h.db, readOptions{
		services: h.cfg.Services, recent: h.cfg.Recent, scan: h.cfg.Scan, buckets: h.cfg.Buckets, window: h.cfg.Window,
	})
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(st)
	if err != nil {
		return nil, fmt.Errorf("encode status: %w", err)
	}
	h.last, h.lastAt = b, time.Now()
	return b, nil
}

// answer writes v, or the error: 400 with its text for the client's mistakes, 404 for what
// does not exist, else 503 without the database's error (logged).
func (h *Handler) answer(w http.ResponseWriter, r *http.Request, what string, v any, err error) {
	switch {
	case errors.Is(err, errBadRequest):
		writeError(w, http.StatusBadRequest, "bad request", strings.TrimPrefix(err.Error(), errBadRequest.Error()+": "))
	case errors.Is(err, batchclaim.ErrNotFound):
		writeError(w, http.StatusNotFound, "not found", err.Error())
	case err != nil:
		h.quiet.Log(r.Context(), slog.LevelWarn, "status page: "+what, "error", err)
		writeError(w, http.StatusServiceUnavailable, "database unavailable", "The "+what+" could not be read from the database; try again")
	default:
		w.Header().Set("Cache-Control", "no-store")
		writeJSON(w, http.StatusOK, v)
	}
}

// readContext bounds one read of the job view.
func (h *Handler) readContext(r *http.Request) (context.Context, context.CancelFunc) {
	return context.WithTimeout(r.Context(), max(h.cfg.Refresh, 5*time.Second))
}

// write runs one write of the page in a transaction bounded by h.writeTimeout
// (pgdb.BoundedTx): a write that timed out holds no row for long, and is not committed after
// its 503.
func (h *Handler) write(r *http.Request, fn func(context.Context, pgx.Tx) error) error {
	return pgdb.BoundedTx(r.Context(), h.db, h.writeTimeout, fn)
}

// writeFailed is the message of a write's 503. A write that ran out of time (a lock wait past
// lock_timeout, or the deadline) says so; past the deadline its commit may have been on its
// way, so the operator is told to look before trying again. failed says what failed; row is
// what another transaction may hold, made what to look for.
func (h *Handler) writeFailed(err error, failed, row, made string) string {
	if !pgdb.TimedOut(err) {
		return failed + "; try again"
	}
	return fmt.Sprintf("%s within %s (another transaction may hold %s, or the database is unreachable); "+
		"reload to see whether %s, then try again", failed, h.writeTimeout, row, made)
}

// onceEach refuses a request that gives a query parameter twice (service_id=a&service_id=b):
// which one was meant would be a guess.
func onceEach(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		for k, vs := range r.URL.Query() {
			if len(vs) > 1 {
				writeError(w, http.StatusBadRequest, "bad request", fmt.Sprintf("the query parameter %s is given %d times; give it once", strconv.QuoteToASCII(k), len(vs)))
				return
			}
		}
		next(w, r)
	}
}

func (h *Handler) search(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := h.readContext(r)
	defer cancel()
	res, err := search(ctx, h.db, r.URL.Query().Get("q"))
	h.answer(w, r, "search", res, err)
}

func (h *Handler) batch(w http.ResponseWriter, r *http.Request) {
	seq, err := parseSeq("batch", r.PathValue("seq"))
	if err != nil {
		h.answer(w, r, "batch", nil, err)
		return
	}
	ctx, cancel := h.readContext(r)
	defer cancel()
	d, err := readBatch(ctx, h.db, seq)
	h.answer(w, r, "batch", d, err)
}

func (h *Handler) batches(w http.ResponseWriter, r *http.Request) {
	o, err := parseListOptions(r.URL.Query().Get)
	o.scan = h.cfg.Scan
	if err != nil {
		h.answer(w, r, "batch list", nil, err)
		return
	}
	ctx, cancel := h.readContext(r)
	defer cancel()
	l, err := listBatches(ctx, h.db, o)
	h.answer(w, r, "batch list", l, err)
}

func (h *Handler) service(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("service_id")
	if err := batchclaim.ValidateServiceID(id); err != nil {
		writeError(w, http.StatusBadRequest, "bad service_id", err.Error())
		return
	}
	var after int64
	if s := r.URL.Query().Get("after"); s != "" {
		var err error
		if after, err = parseSeq("after", s); err != nil {
			h.answer(w, r, "service_id", nil, err)
			return
		}
	}
	limit, err := parseLimit(r.URL.Query().Get("limit"))
	if err != nil {
		h.answer(w, r, "service_id", nil, err)
		return
	}
	ctx, cancel := h.readContext(r)
	defer cancel()
	p, err := readService(ctx, h.db, id, after, limit)
	h.answer(w, r, "service_id", p, err)
}

func (h *Handler) resume(w http.ResponseWriter, r *http.Request) {
	if !sameOrigin(r) {
		writeError(w, http.StatusForbidden, "cross-origin request refused", "the request's Origin is not this server")
		return
	}
	id := r.PathValue("service_id")
	if err := batchclaim.ValidateServiceID(id); err != nil {
		writeError(w, http.StatusBadRequest, "bad service_id", err.Error())
		return
	}
	log := httpguard.Logger(r.Context(), h.log)
	var halt observer.Halt
	err := h.write(r, func(ctx context.Context, tx pgx.Tx) (err error) {
		halt, err = observer.Resume(ctx, tx, id)
		return err
	})
	switch {
	case errors.Is(err, batchclaim.ErrNotFound):
		writeError(w, http.StatusNotFound, "not halted", fmt.Sprintf("service_id %q is not halted", id))
		return
	case pgdb.PermissionDenied(err):
		h.refused(w, r, "resume", err)
		return
	case err != nil:
		h.quiet.Log(r.Context(), slog.LevelWarn, "status page: resume", "service_id", id, "error", err)
		writeError(w, http.StatusServiceUnavailable, "database unavailable",
			h.writeFailed(err, "The halt could not be lifted", "the halt", "it was lifted"))
		return
	}
	log.Info("service_id resumed from the status page", "service_id", id, "seq", halt.Seq, "remote", r.RemoteAddr)
	h.mu.Lock()
	h.last = nil // the next read shows the halt gone
	h.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]observer.Halt{"resumed": halt})
}

// change answers a POST that changes one batch's state (retry, cancel): 200 with the change,
// 404 for no such batch, 409 when the batch is in a state the action does not apply to.
func (h *Handler) change(action string, do func(context.Context, pgdb.Querier, int64) (observer.Change, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !sameOrigin(r) {
			writeError(w, http.StatusForbidden, "cross-origin request refused", "the request's Origin is not this server")
			return
		}
		seq, err := parseSeq("batch", r.PathValue("seq"))
		if err != nil {
			writeError(w, http.StatusBadRequest, "bad batch", err.Error())
			return
		}
		log := httpguard.Logger(r.Context(), h.log)
		var c observer.Change
		err = h.write(r, func(ctx context.Context, tx pgx.Tx) (err error) {
			c, err = do(ctx, tx, seq)
			return err
		})
		switch {
		case errors.Is(err, batchclaim.ErrNotFound):
			writeError(w, http.StatusNotFound, "no such batch", fmt.Sprintf("there is no batch #%d", seq))
			return
		case errors.Is(err, batchclaim.ErrStateChanged):
			writeError(w, http.StatusConflict, "not possible in this state", err.Error())
			return
		case pgdb.PermissionDenied(err):
			h.refused(w, r, action, err)
			return
		case err != nil:
			h.quiet.Log(r.Context(), slog.LevelWarn, "status page: "+action, "seq", seq, "error", err)
			writeError(w, http.StatusServiceUnavailable, "database unavailable",
				h.writeFailed(err, "The batch could not be changed", "the batch", "it changed"))
			return
		}
		log.Info("batch changed from the status page", "action", action, "seq", seq, "service_id", c.ServiceID,
			"from", c.From, "to", c.To, "remote", r.RemoteAddr)
		h.mu.Lock()
		h.last = nil // the next read shows the change
		h.mu.Unlock()
		writeJSON(w, http.StatusOK, map[string]observer.Change{"changed": c})
	}
}

// refused answers a write that the database refused for want of a grant (SQLSTATE 42501):
// 403 naming the grant, since trying again cannot help. The read-only role of
// deploy/roles.sql, which the documentation gives the status page, meets it.
func (h *Handler) refused(w http.ResponseWriter, r *http.Request, action string, err error) {
	grant := pgdb.MissingGrant(err, h.db.Schema())
	h.quiet.Log(r.Context(), slog.LevelWarn, "status page: the database role may not "+action, "missing_grant", grant, "error", err)
	writeError(w, http.StatusForbidden, "permission denied",
		fmt.Sprintf("The database refused the %s: the role this page connects as lacks GRANT %s. Serve the page as a role that may write "+
			"(batchclaim_app in deploy/roles.sql), or grant it (docs/operations.md, \"Least privilege\")", action, grant))
}

// sameOrigin refuses a browser's cross-site POST: a page elsewhere could otherwise make a
// browser on the operator's machine resume a service_id on a listener without
// authentication. Clients that send no Origin (curl, scripts) are not browsers and pass.
func sameOrigin(r *http.Request) bool {
	o := r.Header.Get("Origin")
	if o == "" {
		return true
	}
	u, err := url.Parse(o)
	return err == nil && strings.EqualFold(u.Host, r.Host)
}

// writeError answers {"error": {"title": ..., "message": ..., "request_id": ...}} (the
// request id when a listener guard gave the request one).
func writeError(w http.ResponseWriter, status int, title, message string) {
	e := map[string]string{"title": title, "message": message}
	if id := w.Header().Get(httpguard.HeaderRequestID); id != "" {
		e["request_id"] = id
	}
	writeJSON(w, status, map[string]map[string]string{"error": e})
}

func writeJSON(w http.ResponseWriter, status int, v any) { httpguard.WriteJSON(w, status, v) }
