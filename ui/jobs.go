package ui

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/batchclaim/batchclaim"
	"github.com/batchclaim/batchclaim/internal/db"
	"github.com/batchclaim/batchclaim/observer"
	"github.com/batchclaim/batchclaim/pgdb"
)

// Bounds of the job view's API. Requests beyond them are answered 400, so that no request
// reads or holds more than a few hundred rows.
const (
	// PageDefault and PageMax are the default and largest page of a list (?limit=).
	PageDefault = 50
	PageMax     = 200
	// SearchMaxLen bounds a search's text, in bytes: a ledger batch id (128) or a service_id
	// (batchclaim.MaxServiceIDLen) fits.
	SearchMaxLen = 512
	// BatchPrefixMin is the shortest batch id prefix searched for (hex digits).
	BatchPrefixMin = 8
	// HistoryWindowDefault and HistoryWindowMax bound the ?window= of the batch list.
	HistoryWindowDefault = time.Hour
	HistoryWindowMax     = 30 * 24 * time.Hour
	HistoryWindowMin     = time.Minute

	searchRows     = 20    // batches and service_ids a search returns, each
	searchScan     = 1_000 // service_ids read past the search text's place in their order
	attemptRows    = 100   // newest attempts on a batch page
	transitionRows = 200   // newest transitions on a batch page
	ownershipRows  = 50    // newest ownership events on a service_id page
)

// errBadRequest marks an error that is the client's: the handler answers 400 with its text.
var errBadRequest = errors.New("bad request")

func badRequest(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errBadRequest, fmt.Sprintf(format, args...))
}

// BatchRef is a batch as lists show it.
type BatchRef struct {
	Seq       int64     `json:"seq"`
	ServiceID string    `json:"service_id"`
	BatchID   string    `json:"batch_id"`
	State     string    `json:"state"`
	Attempts  int32     `json:"attempts"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
	Kind      string    `json:"kind,omitempty"` // the job's kind (package jobs); none for a plain job
}

// SearchResult is what GET /api/search finds: batches by id or id prefix, and service_ids.
type SearchResult struct {
	Query      string     `json:"query"`
	Batches    []BatchRef `json:"batches"`
	ServiceIDs []string   `json:"service_ids"`
	// Note says why a part was not searched (a batch id prefix shorter than BatchPrefixMin).
	Note string `json:"note,omitempty"`
}

// BatchDetail is one batch with its attempts and its state changes (GET /api/batches/{seq}).
type BatchDetail struct {
	BatchRef
	Ledger          bool       `json:"ledger"`
	PayloadBytes    int64      `json:"payload_bytes"`
	SubmittedAt     *time.Time `json:"submitted_at,omitempty"`
	NextAttemptAt   *time.Time `json:"next_attempt_at,omitempty"`
	FinishedAt      *time.Time `json:"finished_at,omitempty"`
	LastError       string     `json:"last_error,omitempty"`
	DLTStatus       string     `json:"dlt_status,omitempty"`
	StatusUpdatedAt *time.Time `json:"status_updated_at,omitempty"`
	UnknownCount    int32      `json:"unknown_count"`
	Owner           string     `json:"owner,omitempty"` // the instance of the last fenced write
	Epoch           *int64     `json:"epoch,omitempty"`
	// InvalidDetails is what the ledger said about an INVALID batch, as it said it.
	InvalidDetails json.RawMessage `json:"invalid_details,omitempty"`
	// TimeoutMs is the job's own timeout, set when it was stored (none: its kind's or the
	// runner's).
	TimeoutMs *int64 `json:"timeout_ms,omitempty"`
	// Output is what the job recorded (jobs.RecordOutput, batchclaim.Result.Output), as JSON.
	Output json.RawMessage `json:"output,omitempty"`
	// Posts are the newest POST attempts, newest first (at most 100); Number counts from the
	// first. (Attempts, from BatchRef, is how many there were.)
	Posts []Attempt `json:"posts"`
	// Transitions are the state changes in order (the newest 200).
	Transitions []Transition `json:"transitions"`
}

// Attempt is one POST of a batch.
type Attempt struct {
	Number     int64      `json:"number"`
	StartedAt  time.Time  `json:"started_at"`
	FinishedAt *time.Time `json:"finished_at,omitempty"`
	Reason     string     `json:"reason"` // first | retry | resubmit
	HTTPStatus *int32     `json:"http_status,omitempty"`
	LatencyMs  *float64   `json:"latency_ms,omitempty"`
	Outcome    string     `json:"outcome,omitempty"`
	Error      string     `json:"error,omitempty"`
	Instance   string     `json:"instance"`
	Epoch      int64      `json:"epoch"`
}

// ServicePage is one service_id (GET /api/services/{service_id}).
type ServicePage struct {
	ServiceID  string         `json:"service_id"`
	Owner      string         `json:"owner,omitempty"`
	Epoch      int64          `json:"epoch"`
	Phase      string         `json:"phase"` // free | held | held_busy | expired
	ClaimedAt  *time.Time     `json:"claimed_at,omitempty"`
	Unfinished int64          `json:"unfinished"`
	Halt       *observer.Halt `json:"halt,omitempty"`
	// Queue is a page of the unfinished batches in seq order; NextAfter, when set, is the
	// ?after= of the next page.
	Queue     []BatchRef `json:"queue"`
	NextAfter int64      `json:"next_after,omitempty"`
	// Ownership is the newest acquisitions, releases and voids, newest first.
	Ownership []OwnershipEvent `json:"ownership"`
}

// OwnershipEvent is one change of a service_id's owner.
type OwnershipEvent struct {
	At       time.Time `json:"at"`
	Event    string    `json:"event"` // acquired | released | surplus_released | voided_idle | voided_expired
	Epoch    int64     `json:"epoch"`
	Instance string    `json:"instance"`
}

// BatchList is a page of GET /api/batches, newest seq first; NextBefore, when set, is the
// ?before= of the next page.
type BatchList struct {
	State         string     `json:"state,omitempty"`
	ServiceID     string     `json:"service_id,omitempty"`
	Kind          string     `json:"kind,omitempty"`
	WindowSeconds float64    `json:"window_seconds"`
	Batches       []BatchRef `json:"batches"`
	// NextBefore, when set, is the ?before= of the next page. A page reads at most
	// Config.Scan batches by seq, so a page of rare batches can hold fewer than the limit (even
	// none) and still have a next page; ScannedTo is the lowest seq it read.
	NextBefore int64 `json:"next_before,omitempty"`
	ScannedTo  int64 `json:"scanned_to,omitempty"`
}

// search finds batches by id (ledger batches, by the full id or a prefix of at least
// BatchPrefixMin hex digits) or by seq ("#123"), and service_ids starting with q.
func search(ctx context.Context, q db.DBTX, text string) (SearchResult, error) {
	text = strings.TrimSpace(text)
	switch {
	case text == "":
		return SearchResult{}, badRequest("q is empty: give a batch id (or its first %d hex digits), #seq or a service_id", BatchPrefixMin)
	case len(text) > SearchMaxLen:
		return SearchResult{}, badRequest("q is %d bytes; at most %d", len(text), SearchMaxLen)
	}
	qs := db.New()
	out := SearchResult{Query: text, Batches: []BatchRef{}, ServiceIDs: []string{}}
	if n, ok := strings.CutPrefix(text, "#"); ok {
		seq, err := strconv.ParseInt(n, 10, 64)
		if err != nil || seq < 1 {
			return SearchResult{}, badRequest("%q is not a batch seq (#1, #2, ...)", text)
		}
		b, err := readBatchRef(ctx, qs, q, seq)
		if err != nil && !errors.Is(err, batchclaim.ErrNotFound) {
			return SearchResult{}, err
		}
		if err == nil {
			out.Batches = append(out.Batches, b)
		}
		return out, nil
	}
	if hex := strings.ToLower(text); isHex(hex) {
		if len(hex) < BatchPrefixMin {
			out.Note = fmt.Sprintf("batch ids are searched from %d hex digits", BatchPrefixMin)
		} else {
			rows, err := qs.UIBatchSearchLedger(ctx, q, db.UIBatchSearchLedgerParams{Prefix: hex, Upper: hexUpper(hex), MaxRows: searchRows})
			if err != nil {
				return SearchResult{}, fmt.Errorf("search batches: %w", err)
			}
			for _, r := range rows {
				out.Batches = append(out.Batches, BatchRef{Seq: r.Seq, ServiceID: r.ServiceID, BatchID: r.BatchID, State: r.State, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt})
			}
		}
	}
	if batchclaim.ValidateServiceID(text) == nil {
		ids, err := qs.UIServiceSearch(ctx, q, db.UIServiceSearchParams{Prefix: text, Scan: searchScan, MaxRows: searchRows})
		if err != nil {
			return SearchResult{}, fmt.Errorf("search service_ids: %w", err)
		}
		out.ServiceIDs = append(out.ServiceIDs, ids...)
	}
	return out, nil
}

func isHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return s != ""
}

// hexUpper is the least string past every string that starts with the hex prefix p, in an
// order that puts digits before letters: p with its last digit raised by one ('9' becomes
// 'a'), or p followed by 'g' when it ends in 'f' (every hex digit sorts before 'g').
func hexUpper(p string) string {
	switch last := p[len(p)-1]; last {
	case '9':
		return p[:len(p)-1] + "a"
	case 'f':
		return p[:len(p)-1] + "g"
	default:
		return p[:len(p)-1] + string(last+1)
	}
}

func readBatchRef(ctx context.Context, qs *db.Queries, q db.DBTX, seq int64) (BatchRef, error) {
	r, err := qs.UIBatch(ctx, q, seq)
	if pgdb.NoRows(err) {
		return BatchRef{}, fmt.Errorf("batch %d: %w", seq, batchclaim.ErrNotFound)
	}
	if err != nil {
		return BatchRef{}, fmt.Errorf("read batch %d: %w", seq, err)
	}
	return BatchRef{Seq: r.Seq, ServiceID: r.ServiceID, BatchID: r.BatchID, State: r.State, Attempts: r.Attempts, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt, Kind: deref(r.Kind)}, nil
}

// parseSeq reads a batch's seq from a path or a query parameter.
func parseSeq(what, s string) (int64, error) {
	seq, err := strconv.ParseInt(s, 10, 64)
	if err != nil || seq < 1 {
		return 0, badRequest("%s %q is not a batch seq (a positive integer)", what, truncate(s, 40))
	}
	return seq, nil
}

func readBatch(ctx context.Context, q db.DBTX, seq int64) (BatchDetail, error) {
	qs := db.New()
	r, err := qs.UIBatch(ctx, q, seq)
	if pgdb.NoRows(err) {
		return BatchDetail{}, fmt.Errorf("batch %d: %w", seq, batchclaim.ErrNotFound)
	}
	if err != nil {
		return BatchDetail{}, fmt.Errorf("read batch %d: %w", seq, err)
	}
	d := BatchDetail{
		BatchRef:     BatchRef{Seq: r.Seq, ServiceID: r.ServiceID, BatchID: r.BatchID, State: r.State, Attempts: r.Attempts, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt, Kind: deref(r.Kind)},
		Ledger:       r.Ledger,
		PayloadBytes: r.PayloadBytes, SubmittedAt: r.SubmittedAt, NextAttemptAt: r.NextAttemptAt, FinishedAt: r.FinishedAt,
		LastError: deref(r.LastError), DLTStatus: deref(r.DltStatus), StatusUpdatedAt: r.StatusUpdatedAt,
		UnknownCount: r.UnknownCount, Owner: name(r.ClaimantName, r.Claimant), Epoch: r.ClaimEpoch,
		Posts: []Attempt{}, Transitions: []Transition{},
	}
	if len(r.InvalidDetails) > 0 && json.Valid(r.InvalidDetails) {
		d.InvalidDetails = r.InvalidDetails
	}
	if len(r.Output) > 0 && json.Valid(r.Output) {
		d.Output = r.Output
	}
	d.TimeoutMs = r.TimeoutMs
	attempts, err := qs.UIBatchAttempts(ctx, q, db.UIBatchAttemptsParams{Seq: seq, MaxRows: attemptRows})
	if err != nil {
		return BatchDetail{}, fmt.Errorf("read attempts of batch %d: %w", seq, err)
	}
	for _, a := range attempts {
		d.Posts = append(d.Posts, Attempt{
			Number: a.Number, StartedAt: a.StartedAt, FinishedAt: a.FinishedAt, Reason: a.Reason,
			HTTPStatus: a.HttpStatus, LatencyMs: a.LatencyMs, Outcome: deref(a.Outcome), Error: deref(a.Error),
			Instance: name(a.InstanceName, &a.InstanceID), Epoch: a.Epoch,
		})
	}
	trs, err := qs.UIBatchTransitions(ctx, q, db.UIBatchTransitionsParams{Seq: seq, MaxRows: transitionRows})
	if err != nil {
		return BatchDetail{}, fmt.Errorf("read transitions of batch %d: %w", seq, err)
	}
	for _, t := range trs {
		d.Transitions = append(d.Transitions, Transition{
			At: t.At, ServiceID: r.ServiceID, BatchID: r.BatchID, Seq: seq, From: deref(t.FromState), To: t.ToState,
			Epoch: t.Epoch, Instance: name(t.InstanceName, t.InstanceID), Detail: deref(t.Detail),
		})
	}
	return d, nil
}

// parseLimit reads ?limit= (1..PageMax; PageDefault when absent).
func parseLimit(s string) (int, error) {
	if s == "" {
		return PageDefault, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > PageMax {
		return 0, badRequest("limit %q: give 1 to %d", truncate(s, 40), PageMax)
	}
	return n, nil
}

func readService(ctx context.Context, q db.DBTX, id string, after int64, limit int) (ServicePage, error) {
	qs := db.New()
	s, err := qs.UIServiceSummary(ctx, q, id)
	if err != nil {
		return ServicePage{}, fmt.Errorf("read service_id: %w", err)
	}
	if !s.Known {
		return ServicePage{}, fmt.Errorf("service_id %q: %w", id, batchclaim.ErrNotFound)
	}
	p := ServicePage{
		ServiceID: id, Owner: s.Owner, Epoch: s.Epoch, Phase: s.Phase, ClaimedAt: s.ClaimedAt, Unfinished: s.Unfinished,
		Queue: []BatchRef{}, Ownership: []OwnershipEvent{},
	}
	if s.HaltSeq != nil {
		p.Halt = &observer.Halt{ServiceID: id, Seq: *s.HaltSeq, Reason: deref(s.HaltReason)}
		if s.HaltAt != nil {
			p.Halt.At = *s.HaltAt
		}
	}
	rows, err := qs.UIServiceQueue(ctx, q, db.UIServiceQueueParams{ServiceID: id, AfterSeq: after, MaxRows: int32(limit)})
	if err != nil {
		return ServicePage{}, fmt.Errorf("read queue: %w", err)
	}
	for _, r := range rows {
		p.Queue = append(p.Queue, BatchRef{Seq: r.Seq, ServiceID: id, BatchID: r.BatchID, State: r.State, Attempts: r.Attempts, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt, Kind: deref(r.Kind)})
	}
	if len(rows) == limit {
		p.NextAfter = rows[len(rows)-1].Seq
	}
	events, err := qs.UIServiceOwnership(ctx, q, db.UIServiceOwnershipParams{ServiceID: id, MaxRows: ownershipRows})
	if err != nil {
		return ServicePage{}, fmt.Errorf("read ownership: %w", err)
	}
	for _, e := range events {
		p.Ownership = append(p.Ownership, OwnershipEvent{At: e.At, Event: e.Event, Epoch: e.Epoch, Instance: e.Instance})
	}
	return p, nil
}

// listOptions are the filters and the page of GET /api/batches.
type listOptions struct {
	state, serviceID, kind string
	before                 int64
	limit, scan            int
	window                 time.Duration
}

func parseListOptions(get func(string) string) (listOptions, error) {
	o := listOptions{before: math.MaxInt64, window: HistoryWindowDefault}
	if s := get("state"); s != "" {
		st := strings.ToUpper(s)
		known := false
		for _, k := range batchclaim.States {
			known = known || string(k) == st
		}
		if !known {
			return o, badRequest("state %q is not a batch state (%s)", truncate(s, 40), stateNames())
		}
		o.state = st
	}
	if s := get("service_id"); s != "" {
		if err := batchclaim.ValidateServiceID(s); err != nil {
			return o, badRequest("service_id: %v", err)
		}
		o.serviceID = s
	}
	if s := get("kind"); s != "" {
		if len(s) > batchclaim.MaxKindLen {
			return o, badRequest("kind is %d bytes; at most %d", len(s), batchclaim.MaxKindLen)
		}
		o.kind = s
	}
	if s := get("before"); s != "" {
		seq, err := parseSeq("before", s)
		if err != nil {
			return o, err
		}
		o.before = seq
	}
	var err error
	if o.limit, err = parseLimit(get("limit")); err != nil {
		return o, err
	}
	if s := get("window"); s != "" {
		if o.window, err = parseWindow(s); err != nil {
			return o, err
		}
	}
	return o, nil
}

// parseWindow reads a duration ("90m", "6h") or a number of days ("7d"), from
// HistoryWindowMin to HistoryWindowMax.
func parseWindow(s string) (time.Duration, error) {
	var d time.Duration
	if n, ok := strings.CutSuffix(s, "d"); ok {
		days, err := strconv.Atoi(n)
		if err != nil {
			return 0, badRequest("window %q: give a duration such as 90m, 6h or 7d", truncate(s, 40))
		}
		d = time.Duration(min(days, 10_000)) * 24 * time.Hour
	} else {
		var err error
		if d, err = time.ParseDuration(s); err != nil {
			return 0, badRequest("window %q: give a duration such as 90m, 6h or 7d", truncate(s, 40))
		}
	}
	if d < HistoryWindowMin || d > HistoryWindowMax {
		return 0, badRequest("window %s: give %s to %s", truncate(s, 40), HistoryWindowMin, "30d")
	}
	return d, nil
}

func listBatches(ctx context.Context, q db.DBTX, o listOptions) (BatchList, error) {
	qs := db.New()
	top, err := qs.UIBatchSeqMax(ctx, q)
	if err != nil {
		return BatchList{}, fmt.Errorf("list batches: %w", err)
	}
	before := min(o.before, top+1)
	floor := max(before-int64(o.scan), 1)
	rows, err := qs.UIBatchList(ctx, q, db.UIBatchListParams{
		BeforeSeq: before, FloorSeq: floor, WindowMs: o.window.Milliseconds(), State: o.state, ServiceID: o.serviceID, Kind: o.kind, MaxRows: int32(o.limit),
	})
	if err != nil {
		return BatchList{}, fmt.Errorf("list batches: %w", err)
	}
	out := BatchList{State: o.state, ServiceID: o.serviceID, Kind: o.kind, WindowSeconds: o.window.Seconds(), Batches: []BatchRef{}}
	for _, r := range rows {
		out.Batches = append(out.Batches, BatchRef{Seq: r.Seq, ServiceID: r.ServiceID, BatchID: r.BatchID, State: r.State, Attempts: r.Attempts, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt, Kind: deref(r.Kind)})
	}
	switch {
	case len(rows) == o.limit:
		out.NextBefore = rows[len(rows)-1].Seq
	case floor > 1: // the scan stopped before the first batch
		out.NextBefore, out.ScannedTo = floor, floor
	}
	return out, nil
}

func stateNames() string {
	var b strings.Builder
	for i, s := range batchclaim.States {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(string(s))
	}
	return b.String()
}

// truncate shortens what a client sent before it is quoted back in an error.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
