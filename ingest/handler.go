package ingest

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"net/url"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/batchclaim/batchclaim"
	"github.com/batchclaim/batchclaim/claims"
	"github.com/batchclaim/batchclaim/dlt"
	"github.com/batchclaim/batchclaim/internal/db"
)

// MaxBodyDefault bounds a POST /batches body.
const MaxBodyDefault = 10 << 20

// MaxStatusIDs bounds the ids one status request may ask about.
const MaxStatusIDs = 100

// Pool runs statements and transactions (a *pgxpool.Pool).
type Pool interface {
	claims.Querier
	Begin(ctx context.Context) (pgx.Tx, error)
}

// Config configures the HTTP API.
type Config struct {
	// MaxBody bounds a POST /batches body in bytes. Zero means 10 MiB.
	MaxBody int64
	// OnStored, when set, is called with the number of new batches after each stored list.
	OnStored func(n int)
	// Logger; nil discards.
	Logger *slog.Logger
}

// Handler serves the ingest API.
type Handler struct {
	pool Pool
	cfg  Config
	log  *slog.Logger
}

// NewHandler returns the ingest API's handler. It does no I/O.
func NewHandler(pool Pool, cfg Config) *Handler {
	cfg.MaxBody = cmp.Or(cfg.MaxBody, MaxBodyDefault)
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Handler{pool: pool, cfg: cfg, log: cfg.Logger}
}

// Register adds the API's routes to mux.
func (h *Handler) Register(mux *http.ServeMux) {
	mux.HandleFunc("POST /batches", h.postBatches)
	mux.HandleFunc("GET /batch_statuses", h.getStatuses)
	mux.HandleFunc("POST /batch_statuses", h.postStatuses)
}

// apiError is the Sawtooth-shaped error body.
type apiError struct {
	status int
	Code   int    `json:"code"`
	Title  string `json:"title"`
	Msg    string `json:"message"`
}

// WriteError writes an error in the Sawtooth REST API's shape,
// {"error":{"code":N,"title":"...","message":"..."}}, with the HTTP status given. Other
// handlers in front of the API (authentication, limits) answer through it so that clients
// see one error shape.
func WriteError(w http.ResponseWriter, status, code int, title, message string) {
	writeError(w, apiError{status, code, title, message})
}

func writeError(w http.ResponseWriter, e apiError) {
	writeJSON(w, e.status, map[string]apiError{"error": e})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
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
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.cfg.MaxBody))
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		writeError(w, apiError{http.StatusRequestEntityTooLarge, 36, "Body Too Large", fmt.Sprintf("The body is larger than %d bytes", h.cfg.MaxBody)})
		return
	case err != nil:
		writeError(w, apiError{http.StatusBadRequest, 35, "Unreadable Body", err.Error()})
		return
	case len(body) == 0:
		writeError(w, apiError{http.StatusBadRequest, 34, "No Batches Submitted", "The protobuf BatchList you submitted was empty and contained no Batches"})
		return
	}
	if _, err := dlt.SplitBatchList(body); err != nil {
		writeError(w, apiError{http.StatusBadRequest, 35, "Protobuf Not Decodable", err.Error()})
		return
	}
	stored, err := h.store(r.Context(), serviceID, body)
	if errors.Is(err, ErrBatchIDTaken) {
		writeError(w, apiError{http.StatusConflict, 72, "Batch Stored Under Another service_id",
			"A batch id is global on the ledger; nothing was stored: " + err.Error()})
		return
	}
	if err != nil {
		h.log.Error("store batches", "service_id", serviceID, "error", err)
		writeError(w, apiError{http.StatusServiceUnavailable, 18, "Storage Unavailable", "The batches could not be stored; try again"})
		return
	}
	ids := make([]string, len(stored))
	fresh := 0
	for i, s := range stored {
		ids[i] = s.BatchID
		if s.New {
			fresh++
		}
	}
	if h.cfg.OnStored != nil {
		h.cfg.OnStored(fresh)
	}
	writeJSON(w, http.StatusAccepted, map[string]string{"link": statusLink(r, ids)})
}

func (h *Handler) store(ctx context.Context, serviceID string, list []byte) ([]Stored, error) {
	tx, err := h.pool.Begin(ctx)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // no-op after commit
	stored, err := EnqueueBatchList(ctx, tx, serviceID, list)
	if err != nil {
		return nil, err
	}
	return stored, tx.Commit(ctx)
}

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
	var ids []string
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&ids); err != nil {
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
			writeError(w, apiError{http.StatusBadRequest, 60, "Invalid Resource Id", fmt.Sprintf("Batch id %q is not 128 hex characters", id)})
			return
		}
	}
	rows, err := db.New().BatchStatusesByID(r.Context(), h.pool, ids)
	if err != nil {
		h.log.Error("read batch statuses", "error", err)
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
		switch batchclaim.State(row.State) {
		case batchclaim.StateCommitted:
			data[i].Status = batchclaim.StatusCommitted
		case batchclaim.StateInvalid:
			data[i].Status = batchclaim.StatusInvalid
			var details []json.RawMessage
			if len(row.InvalidDetails) > 0 && json.Unmarshal(row.InvalidDetails, &details) == nil {
				data[i].InvalidTransactions = details
			}
		default:
			data[i].Status = batchclaim.StatusPending
		}
	}
	out := map[string]any{"data": data}
	if link {
		out["link"] = statusLink(r, ids)
	}
	writeJSON(w, http.StatusOK, out)
}

// onlyParams rejects query parameters other than the allowed ones.
func onlyParams(q url.Values, allowed ...string) (apiError, bool) {
	for k := range q {
		ok := false
		for _, a := range allowed {
			ok = ok || k == a
		}
		if !ok {
			return apiError{http.StatusBadRequest, 71, "Unknown Parameter", fmt.Sprintf("Unknown query parameter %q; allowed: %s", k, strings.Join(allowed, ", "))}, false
		}
	}
	return apiError{}, true
}

func statusLink(r *http.Request, ids []string) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	u := url.URL{Scheme: scheme, Host: r.Host, Path: "/batch_statuses", RawQuery: "id=" + strings.Join(ids, ",")}
	return u.String()
}
