package ingest

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"github.com/jackc/pgx/v5"

	"github.com/batchclaim/batchclaim"
	"github.com/batchclaim/batchclaim/dlt"
	"github.com/batchclaim/batchclaim/httpguard"
	"github.com/batchclaim/batchclaim/internal/db"
	"github.com/batchclaim/batchclaim/pgdb"
)

// Defaults for Config's zero values.
const (
	// MaxBodyDefault bounds a POST /batches body.
	MaxBodyDefault = 10 << 20
	// MaxMemoryDefault bounds the bytes held for request bodies and their decoded batches.
	MaxMemoryDefault = 128 << 20
	// MaxRequestsDefault bounds the requests worked on at once.
	MaxRequestsDefault = 64
	// MaxConnsDefault bounds the database connections the API holds at once.
	MaxConnsDefault = 2
	// MaxWaitDefault bounds a request's wait for its service_id's turn or for a connection.
	MaxWaitDefault = 10 * time.Second
	// StoreTimeoutDefault bounds the transaction that stores a request's batches.
	StoreTimeoutDefault = 30 * time.Second
)

// MaxStatusIDs bounds the ids one status request may ask about.
const MaxStatusIDs = 100

// MaxLinkLen bounds the length of one status link (scheme, host and path included), so that
// the link passes proxies with common request-line limits (8 KiB) and --max-header-bytes.
const MaxLinkLen = 8000

// statusBodyMax bounds a POST /batch_statuses body: MaxStatusIDs quoted ids and then some.
const statusBodyMax = 64 << 10

// CodeBusy is the error code of the 503 answered when the API is at one of its limits
// (requests worked on, memory, a wait for a connection or for the service_id's turn), with
// Retry-After.
const CodeBusy = 31

// Config configures the HTTP API. See docs/operations.md, "Memory", for what the limits
// mean for the memory an instance may use.
type Config struct {
	// MaxBody bounds a POST /batches body in bytes. Zero means MaxBodyDefault (10 MiB).
	MaxBody int64
	// MaxMemory bounds, in bytes, what the requests being read and worked on hold at once: a
	// request reserves its body's buffer as the bytes arrive and, once they have, what
	// decoding the batches allocates (dlt.SplitBatchListMemory: their copy of the body and
	// about 300 bytes a batch, up to 3.2 x the body for a list of the smallest batches), and
	// gives it all back when it is answered. A request that cannot reserve is answered 503
	// (CodeBusy) at once, or 413 if it could not even alone. Zero means MaxMemoryDefault
	// (128 MiB); at least 2 x MaxBody, and 4.2 x MaxBody to decode any body of up to MaxBody.
	MaxMemory int64
	// MaxRequests bounds the requests worked on at once (decoding, waiting for the
	// service_id's turn or a connection, storing, reading statuses). A request takes its place
	// only once its body has arrived, so a client that sends slowly holds none; one more is
	// answered 503 (CodeBusy) at once. Zero means MaxRequestsDefault.
	MaxRequests int
	// MaxConns bounds the database connections the API holds at once, so that it cannot
	// take every connection of a pool it shares with other work. Zero means MaxConnsDefault.
	MaxConns int
	// MaxWait bounds how long a request waits for an earlier request of its service_id (they
	// are stored one after the other) or for a connection; then it is answered 503
	// (CodeBusy). Zero means MaxWaitDefault.
	MaxWait time.Duration
	// StoreTimeout bounds the transaction that stores a request's batches once it has its
	// turn and a connection, and the read of a status request once it has a connection: a
	// database that stops answering (a frozen link, a lock held elsewhere) costs the API that
	// connection for this long at most, and the request is answered 503 (with nothing
	// stored). Zero means StoreTimeoutDefault.
	StoreTimeout time.Duration
	// BaseURL, e.g. "https://ingest.example:8443", starts the status links of 202 answers.
	// Empty means the request's Host when a listener guard (package httpguard)
	// checked it, else links relative to the server ("/batch_statuses?id=..."): a link is
	// never built from an unchecked Host header.
	BaseURL string
	// OnStored, when set, is called with the number of new batches after each stored list.
	OnStored func(n int)
	// Logger; nil discards.
	Logger *slog.Logger
}

// withDefaults returns c with every zero field filled in.
func (c Config) withDefaults() Config {
	c.MaxBody = cmp.Or(c.MaxBody, MaxBodyDefault)
	c.MaxMemory = cmp.Or(c.MaxMemory, MaxMemoryDefault)
	c.MaxRequests = cmp.Or(c.MaxRequests, MaxRequestsDefault)
	c.MaxConns = cmp.Or(c.MaxConns, MaxConnsDefault)
	c.MaxWait = cmp.Or(c.MaxWait, MaxWaitDefault)
	c.StoreTimeout = cmp.Or(c.StoreTimeout, StoreTimeoutDefault)
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Resolve applies the defaults and checks the limits, returning the Config a Handler would
// use.
func (c Config) Resolve() (Config, error) {
	c = c.withDefaults()
	return c, c.validate()
}

// validate checks c with its defaults filled in.
func (c Config) validate() error {
	var errs []error
	if c.MaxBody < 0 || c.MaxMemory < 0 || c.MaxRequests < 0 || c.MaxConns < 0 || c.MaxWait < 0 || c.StoreTimeout < 0 {
		errs = append(errs, fmt.Errorf("limits must not be negative (zero means the default), got MaxBody %d, MaxMemory %d, MaxRequests %d, MaxConns %d, MaxWait %s, StoreTimeout %s",
			c.MaxBody, c.MaxMemory, c.MaxRequests, c.MaxConns, c.MaxWait, c.StoreTimeout))
	} else if c.MaxMemory < 2*c.MaxBody {
		errs = append(errs, fmt.Errorf("MaxMemory %d is under 2 x MaxBody %d: a body of the largest size and its decoded batches could never be held", c.MaxMemory, c.MaxBody))
	}
	if c.BaseURL != "" {
		if u, err := url.Parse(c.BaseURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" {
			errs = append(errs, fmt.Errorf("BaseURL %q: want scheme://host[:port]", c.BaseURL))
		}
	}
	return errors.Join(errs...)
}

// Handler serves the ingest API.
type Handler struct {
	db    pgdb.DB
	cfg   Config
	log   *slog.Logger
	mem   *budget
	slots slots
	conns slots
	keys  keyLocks
	// quiet throttles the lines any client can cause (a store that fails during a database
	// outage, a refused batch it can post again and again).
	quiet *httpguard.Throttle
}

// NewHandler returns the ingest API's handler, storing in db. It does no I/O.
func NewHandler(db pgdb.DB, cfg Config) (*Handler, error) {
	if err := db.Err(); err != nil {
		return nil, fmt.Errorf("ingest: %w", err)
	}
	cfg, err := cfg.Resolve()
	if err != nil {
		return nil, fmt.Errorf("ingest: %w", err)
	}
	cfg.BaseURL = strings.TrimSuffix(cfg.BaseURL, "/")
	return &Handler{db: db, cfg: cfg, log: cfg.Logger, mem: &budget{size: cfg.MaxMemory},
		slots: make(slots, cfg.MaxRequests), conns: make(slots, cfg.MaxConns), quiet: httpguard.NewThrottle(cfg.Logger, httpguard.LogIntervalDefault)}, nil
}

// Stats is what the API holds now: the bytes reserved from Config.MaxMemory, and the
// requests being worked on (Config.MaxRequests).
func (h *Handler) Stats() (memory int64, requests int) { return h.mem.used.Load(), len(h.slots) }

// Register adds the API's routes to mux.
func (h *Handler) Register(mux *http.ServeMux) {
	mux.HandleFunc("POST /batches", h.postBatches)
	mux.HandleFunc("GET /batch_statuses", h.getStatuses)
	mux.HandleFunc("POST /batch_statuses", h.postStatuses)
}

// apiError is an error answer of the API.
type apiError struct {
	status int
	code   int
	title  string
	msg    string
}

// WriteError writes an error in the Sawtooth REST API's shape,
// {"error":{"code":N,"title":"...","message":"...","request_id":"..."}}, with the HTTP status
// given (the request id is there when a listener guard gave the request one). Other handlers
// in front of the API (authentication, limits) answer through it so that clients see one
// error shape.
func WriteError(w http.ResponseWriter, status, code int, title, message string) {
	httpguard.WriteError(w, status, code, title, message)
}

func writeError(w http.ResponseWriter, e apiError) { WriteError(w, e.status, e.code, e.title, e.msg) }

func busy(w http.ResponseWriter, why string) {
	w.Header().Set("Retry-After", "1")
	WriteError(w, http.StatusServiceUnavailable, CodeBusy, "Too Many Requests", why+"; try again shortly")
}

func (h *Handler) postBatches(w http.ResponseWriter, r *http.Request) {
	if e, ok := onlyParams(r.URL.Query(), "service_id"); !ok {
		writeError(w, e)
		return
	}
	serviceID := r.URL.Query().Get("service_id")
	if err := batchclaim.ValidateServiceID(serviceID); err != nil {
		writeError(w, apiError{http.StatusBadRequest, 70, "Bad service_id", "The service_id query parameter is required: " + err.Error()})
		return
	}
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/octet-stream" {
		writeError(w, apiError{http.StatusBadRequest, 42, "Wrong Content Type", "Batches must be submitted as a BatchList protobuf binary, with a 'Content-Type' header of 'application/octet-stream'"})
		return
	}
	mem := &hold{b: h.mem}
	defer mem.done()
	body, err := readBody(r.Body, r.ContentLength, h.cfg.MaxBody, mem)
	switch {
	case errors.Is(err, errTooLarge):
		writeError(w, apiError{http.StatusRequestEntityTooLarge, 36, "Body Too Large", fmt.Sprintf("The body is larger than %d bytes", h.cfg.MaxBody)})
		return
	case errors.Is(err, errOverBudget):
		busy(w, "This instance holds as many request bodies as its memory limit allows")
		return
	case err != nil:
		writeError(w, apiError{http.StatusBadRequest, 35, "Unreadable Body", "The body could not be read: " + err.Error()})
		return
	case len(body) == 0:
		writeError(w, apiError{http.StatusBadRequest, 34, "No Batches Submitted", "The protobuf BatchList you submitted was empty and contained no Batches"})
		return
	}
	if !h.slots.tryAcquire() {
		busy(w, fmt.Sprintf("This instance is serving its limit of %d ingest requests", h.cfg.MaxRequests))
		return
	}
	defer h.slots.release()
	batches, err := decodeBatches(body, mem)
	// The batches hold their own copies from here on: the body's buffer is given back, and
	// what storing them returns (a Stored each, which the answer's links are made from) is
	// reserved in its place: 32 bytes a batch, under a quarter of the body (a batch is at
	// least 134 bytes of it).
	mem.give(int64(cap(body)))
	body = nil //nolint:ineffassign,wastedassign // see above
	if err == nil && !mem.take(int64(len(batches))*int64(unsafe.Sizeof(Stored{}))) {
		err = errOverBudget
	}
	switch {
	case errors.Is(err, errTooLarge):
		writeError(w, apiError{http.StatusRequestEntityTooLarge, 36, "Body Too Large",
			"Decoding this body's batches would take more memory than this instance allows a request (each batch costs about 300 bytes beyond its own); send them in smaller lists"})
		return
	case errors.Is(err, errOverBudget):
		busy(w, "This instance holds as many request bodies as its memory limit allows")
		return
	case err != nil:
		writeError(w, apiError{http.StatusBadRequest, 35, "Protobuf Not Decodable", err.Error()})
		return
	}
	ctx := r.Context()
	stored, err := h.store(ctx, serviceID, batches)
	var taken *takenError
	switch {
	case errors.As(err, &taken):
		h.quiet.Log(ctx, slog.LevelInfo, "batch refused: its id is stored under another service_id", "service_id", serviceID, "error", err)
		writeError(w, apiError{http.StatusConflict, 72, "Batch Stored Under Another service_id",
			fmt.Sprintf("Batch %s is already stored under another service_id, and a batch id is global on the ledger; nothing was stored", taken.batchID)})
		return
	case err != nil && ctx.Err() != nil:
		httpguard.Logger(ctx, h.log).Debug("store batches: the client went away", "service_id", serviceID, "error", err)
		return
	case errors.Is(err, errWaited):
		busy(w, "Earlier requests for this service_id, or for the database, are still being worked on")
		return
	case pgdb.LockTimeout(err):
		h.quiet.Log(ctx, slog.LevelInfo, "store batches: another transaction held the service_id's enqueue lock too long", "service_id", serviceID, "error", err)
		busy(w, "Another request is storing batches of this service_id")
		return
	case err != nil:
		h.quiet.Log(ctx, slog.LevelError, "store batches", "service_id", serviceID, "error", err)
		writeError(w, apiError{http.StatusServiceUnavailable, 18, "Storage Unavailable", "The batches could not be stored; try again"})
		return
	}
	if h.cfg.OnStored != nil {
		fresh := 0
		for _, s := range stored {
			if s.New {
				fresh++
			}
		}
		h.cfg.OnStored(fresh)
	}
	h.writeLinks(w, r, stored)
}

// decodeBatches decodes a POST /batches body into the batches to store, their ids and lists,
// after reserving from mem what decoding allocates. That is not just a copy of the body: each
// batch adds its id and bookkeeping, so a list of the smallest batches takes about 3.2 x its
// body (dlt.SplitBatchListMemory), and it is all reserved before anything is allocated. It
// fails with errOverBudget when the budget cannot cover that now, with errTooLarge when it
// could not even with this request alone, or with the decoding's error.
func decodeBatches(body []byte, mem *hold) ([]dlt.Batch, error) {
	need := dlt.SplitBatchListMemory(body)
	if need > mem.b.size-mem.n {
		return nil, errTooLarge
	}
	if !mem.take(need) {
		return nil, errOverBudget
	}
	return dlt.SplitBatchListNoTransactionIDs(body)
}

// errWaited: MaxWait passed while a request waited for its turn or a connection.
var errWaited = errors.New("waited too long for the service_id's turn or a connection")

// store stores the batches in one transaction, after the earlier requests of the same
// service_id in this process, on one of the API's connections.
func (h *Handler) store(ctx context.Context, serviceID string, batches []dlt.Batch) ([]Stored, error) {
	wctx, cancel := context.WithTimeout(ctx, h.cfg.MaxWait)
	defer cancel()
	unlock, err := h.keys.lock(wctx, serviceID)
	if err != nil {
		return nil, errors.Join(errWaited, err)
	}
	defer unlock()
	if err := h.conns.acquire(wctx); err != nil {
		return nil, errors.Join(errWaited, err)
	}
	defer h.conns.release()
	sctx, cancel := context.WithTimeout(ctx, h.cfg.StoreTimeout)
	defer cancel()
	var stored []Stored
	err = pgdb.InTx(sctx, h.db, pgx.TxOptions{}, func(tx pgx.Tx) (err error) {
		stored, err = enqueueBatches(sctx, tx, serviceID, batches)
		return err
	})
	return stored, err
}

func writeJSON(w http.ResponseWriter, status int, v any) { httpguard.WriteJSON(w, status, v) }

func (h *Handler) getStatuses(w http.ResponseWriter, r *http.Request) {
	if e, ok := onlyParams(r.URL.Query(), "id", "wait"); !ok {
		writeError(w, e)
		return
	}
	var ids []string
	if raw := r.URL.Query().Get("id"); raw != "" {
		ids = strings.Split(raw, ",")
	}
	h.answerStatuses(w, r, ids, true)
}

func (h *Handler) postStatuses(w http.ResponseWriter, r *http.Request) {
	mem := &hold{b: h.mem}
	defer mem.done()
	body, err := readBody(r.Body, r.ContentLength, statusBodyMax, mem)
	switch {
	case errors.Is(err, errTooLarge):
		writeError(w, apiError{http.StatusRequestEntityTooLarge, 36, "Body Too Large", fmt.Sprintf("The body is larger than %d bytes", statusBodyMax)})
		return
	case errors.Is(err, errOverBudget):
		busy(w, "This instance holds as many request bodies as its memory limit allows")
		return
	}
	var ids []string
	if err != nil || json.Unmarshal(body, &ids) != nil {
		writeError(w, apiError{http.StatusBadRequest, 53, "Bad Status Request", "The body must be a JSON array of batch ids"})
		return
	}
	h.answerStatuses(w, r, ids, false)
}

type statusEntry struct {
	ID                  string            `json:"id"`
	Status              batchclaim.Status `json:"status"`
	InvalidTransactions []json.RawMessage `json:"invalid_transactions"`
}

func (h *Handler) answerStatuses(w http.ResponseWriter, r *http.Request, ids []string, link bool) {
	if len(ids) == 0 {
		writeError(w, apiError{http.StatusBadRequest, 66, "Id Query Invalid or Missing", "A query must include one or more batch ids"})
		return
	}
	if len(ids) > MaxStatusIDs {
		writeError(w, apiError{http.StatusBadRequest, 67, "Too Many Ids", fmt.Sprintf("At most %d ids may be asked about at once", MaxStatusIDs)})
		return
	}
	for _, id := range ids {
		if !batchclaim.ValidBatchID(id) {
			writeError(w, apiError{http.StatusBadRequest, 60, "Invalid Resource Id", fmt.Sprintf("Batch id %s is not 128 hex characters", quote(id))})
			return
		}
	}
	if !h.slots.tryAcquire() {
		busy(w, fmt.Sprintf("This instance is serving its limit of %d ingest requests", h.cfg.MaxRequests))
		return
	}
	defer h.slots.release()
	rows, err := h.readStatuses(r.Context(), ids)
	switch {
	case err != nil && r.Context().Err() != nil:
		return
	case errors.Is(err, errWaited):
		busy(w, "Earlier requests are still being worked on")
		return
	case err != nil:
		h.quiet.Log(r.Context(), slog.LevelError, "read batch statuses", "error", err)
		writeError(w, apiError{http.StatusServiceUnavailable, 18, "Storage Unavailable", "Statuses could not be read; try again"})
		return
	}
	byID := map[string]db.BatchStatusesByIDRow{}
	for _, row := range rows {
		byID[row.BatchID] = row
	}
	data := make([]statusEntry, len(ids))
	for i, id := range ids {
		data[i] = statusEntry{ID: id, Status: batchclaim.StatusUnknown, InvalidTransactions: []json.RawMessage{}}
		row, ok := byID[id]
		if !ok {
			continue
		}
		data[i].Status = batchclaim.State(row.State).Status()
		if data[i].Status == batchclaim.StatusInvalid {
			var details []json.RawMessage
			if len(row.InvalidDetails) > 0 && json.Unmarshal(row.InvalidDetails, &details) == nil {
				data[i].InvalidTransactions = details
			}
		}
	}
	out := map[string]any{"data": data}
	if link {
		out["link"] = h.firstStatusLink(r, ids)
	}
	writeJSON(w, http.StatusOK, out)
}

// readStatuses reads the rows of ids on one of the API's connections, for StoreTimeout at
// most: a read on a link that stopped answering would otherwise keep the connection from
// the stores for as long as its client waits.
func (h *Handler) readStatuses(ctx context.Context, ids []string) ([]db.BatchStatusesByIDRow, error) {
	wctx, cancel := context.WithTimeout(ctx, h.cfg.MaxWait)
	defer cancel()
	if err := h.conns.acquire(wctx); err != nil {
		return nil, errors.Join(errWaited, err)
	}
	defer h.conns.release()
	rctx, cancel := context.WithTimeout(ctx, h.cfg.StoreTimeout)
	defer cancel()
	return db.New().BatchStatusesByID(rctx, h.db, ids)
}

// onlyParams rejects query parameters other than the allowed ones, and any given twice
// (service_id=a&service_id=b names two keys; which one would be meant is a guess).
func onlyParams(q url.Values, allowed ...string) (apiError, bool) {
	for k, vs := range q {
		if len(vs) > 1 && slices.Contains(allowed, k) {
			return apiError{http.StatusBadRequest, 73, "Repeated Parameter", fmt.Sprintf("The query parameter %s is given %d times; give it once", quote(k), len(vs))}, false
		}
		ok := false
		for _, a := range allowed {
			ok = ok || k == a
		}
		if !ok {
			return apiError{http.StatusBadRequest, 71, "Unknown Parameter", fmt.Sprintf("Unknown query parameter %s; allowed: %s", quote(k), strings.Join(allowed, ", "))}, false
		}
	}
	return apiError{}, true
}

// quote is s for an error message: at most 64 bytes of it, quoted with every non-ASCII or
// invisible character escaped.
func quote(s string) string {
	if len(s) > 64 {
		return strconv.QuoteToASCII(s[:64]) + "..."
	}
	return strconv.QuoteToASCII(s)
}
