package dltsim

import (
	"errors"
	"io"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/batchclaim/batchclaim/dlt"
)

// apiError is an error answer, written by each flavour in its own shape.
type apiError struct {
	status  int
	code    int // sawtooth error code
	title   string
	message string
}

// api is what differs between the flavours.
type api interface {
	// checkPost checks a POST's headers.
	checkPost(r *http.Request) *apiError
	// badList explains an error of dlt.SplitBatchList.
	badList(err error) *apiError
	// fault explains a status answered because of back-pressure or an injection.
	fault(status int) *apiError
	writeError(w http.ResponseWriter, e *apiError)
	writeAccepted(w http.ResponseWriter, r *http.Request, ids []string)
}

// outcome is what the ledger decided about a POST.
type outcome struct {
	status  int           // answer to send; 0: none
	code    int           // sawtooth error code of an injected status; 0: the usual one
	timeout bool          // hold the request for hold, then close the connection
	hold    time.Duration // how long an injected timeout holds
	drop    bool          // close the connection instead of answering
	ids     []string
}

// handlePost serves a POST of a BatchList.
func (s *Sim) handlePost(a api) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if e := s.checkAuth(r); e != nil {
			s.reject(w, a, e)
			return
		}
		if e := a.checkPost(r); e != nil {
			s.reject(w, a, e)
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBatchListBytes))
		if err != nil {
			s.reject(w, a, a.badList(dlt.ErrBadBatchList))
			return
		}
		batches, err := dlt.SplitBatchList(body)
		if err != nil {
			s.reject(w, a, a.badList(err))
			return
		}
		out := s.decide(batches)
		switch {
		case out.timeout:
			s.hold(r, out.hold)
			dropConnection(w)
		case out.drop:
			dropConnection(w)
		case out.status == http.StatusAccepted:
			a.writeAccepted(w, r, out.ids)
		case out.code == codeValidatorTimedOut:
			s.writeError(w, a, &apiError{status: out.status, code: out.code,
				title: sawtoothErrorTitle(out.code, ""), message: sawtoothErrorMessage(out.code, "")})
		default:
			e := a.fault(out.status)
			if out.code != 0 {
				e.code, e.title, e.message = out.code, sawtoothErrorTitle(out.code, e.title), sawtoothErrorMessage(out.code, e.message)
			}
			s.writeError(w, a, e)
		}
	}
}

// decide applies a decoded POST to the ledger, consuming injected faults, and records it.
func (s *Sim) decide(batches []dlt.Batch) outcome {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.cfg.Now()
	s.seq++
	s.ledger.advance(now)
	f := &s.faults
	out := outcome{status: http.StatusAccepted}
	switch {
	case f.statusN > 0 && f.statusCode == http.StatusServiceUnavailable && f.errorCode == codeValidatorTimedOut:
		// "It may or may not have been processed": this one was.
		f.statusN--
		out = outcome{status: f.statusCode, code: f.errorCode}
	case f.statusN > 0:
		f.statusN--
		return s.recordAll(batches, now, outcome{status: f.statusCode, code: f.errorCode}, EffectRejected)
	case f.timeoutN > 0:
		f.timeoutN--
		return s.recordAll(batches, now, outcome{timeout: true, hold: f.hold}, EffectTimeout)
	case !s.ledger.admit():
		return s.recordAll(batches, now, outcome{status: http.StatusTooManyRequests}, EffectRejected)
	}
	var hide time.Duration // how long the accepted batches stay out of the status answers
	switch {
	case f.hiddenN > 0 && out.status == http.StatusAccepted:
		f.hiddenN--
		hide = f.hideMax
		out = outcome{drop: true}
	case f.dropN > 0 && out.status == http.StatusAccepted:
		f.dropN--
		out = outcome{drop: true}
	}
	for _, b := range batches {
		service, _, _ := dlt.FakeBatchService(b.Header)
		effect := EffectAccepted
		if s.ledger.accept(b, service, s.invalid(b.ID), now) {
			effect = EffectDuplicate
		} else if hide > 0 {
			s.ledger.hide(b.ID, now.Add(time.Duration(s.fraction(b.ID, "hide")*float64(hide))))
		}
		switch {
		case out.drop:
			effect = EffectDropped
		case out.status != http.StatusAccepted:
			effect = EffectAcceptedError
		}
		out.ids = append(out.ids, b.ID)
		s.record(Post{BatchID: b.ID, Service: service, At: now, HTTPStatus: out.status, Effect: effect})
	}
	return out
}

func (s *Sim) recordAll(batches []dlt.Batch, now time.Time, out outcome, effect string) outcome {
	for _, b := range batches {
		service, _, _ := dlt.FakeBatchService(b.Header)
		s.record(Post{BatchID: b.ID, Service: service, At: now, HTTPStatus: out.status, Effect: effect})
	}
	return out
}

// record appends a record of the current POST (s.seq); s.mu must be held.
func (s *Sim) record(p Post) {
	p.Seq = s.seq
	s.posts = append(s.posts, p)
	s.ledger.posts = len(s.posts)
	s.log.Debug("post", "seq", p.Seq, "batch_id", p.BatchID, "service_id", p.Service,
		"http_status", p.HTTPStatus, "effect", p.Effect)
}

// reject answers a POST whose batches could not be read, and records it.
func (s *Sim) reject(w http.ResponseWriter, a api, e *apiError) {
	s.mu.Lock()
	s.seq++
	s.record(Post{At: s.cfg.Now(), HTTPStatus: e.status, Effect: EffectRejected})
	s.mu.Unlock()
	s.writeError(w, a, e)
}

// writeError adds Retry-After to a 429 or 503 when configured.
func (s *Sim) writeError(w http.ResponseWriter, a api, e *apiError) {
	if s.cfg.RetryAfter > 0 && (e.status == http.StatusTooManyRequests || e.status == http.StatusServiceUnavailable) {
		secs := int64(math.Ceil(s.cfg.RetryAfter.Seconds()))
		w.Header().Set("Retry-After", strconv.FormatInt(secs, 10))
	}
	a.writeError(w, e)
}

// checkAuth enforces Config.Authorization.
func (s *Sim) checkAuth(r *http.Request) *apiError {
	if s.cfg.Authorization == "" || r.Header.Get("Authorization") == s.cfg.Authorization {
		return nil
	}
	return &apiError{status: http.StatusUnauthorized, code: 401, title: "Unauthorized",
		message: "missing or wrong Authorization header"}
}

// hold waits for d, the client going away or the Sim closing.
func (s *Sim) hold(r *http.Request, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-r.Context().Done():
	case <-s.done:
	}
}

// dropConnection closes the connection without writing an answer.
func dropConnection(w http.ResponseWriter) {
	if hj, ok := w.(http.Hijacker); ok {
		if conn, _, err := hj.Hijack(); err == nil {
			_ = conn.Close()
			return
		}
	}
	panic(http.ErrAbortHandler)
}

// batchListErrorKind returns the sentinel a dlt.SplitBatchList error wraps.
func batchListErrorKind(err error) error {
	for _, k := range []error{dlt.ErrEmptyBatchList, dlt.ErrInvalidBatch, dlt.ErrBadBatchList} {
		if errors.Is(err, k) {
			return k
		}
	}
	return dlt.ErrBadBatchList
}
