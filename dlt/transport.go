package dlt

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/batchclaim/batchclaim"
	"github.com/batchclaim/batchclaim/wallclock"
)

// Body size limits: answers larger than this are cut (and then usually fail to decode).
const (
	maxPostAnswer   = 64 << 10
	maxStatusAnswer = 16 << 20
)

// HTTPError is returned (wrapped) by Statuses when the ledger answers with a status other
// than 200.
type HTTPError struct {
	StatusCode int
	// RetryAfter is the delay a Retry-After header asked for, 0 when absent.
	RetryAfter time.Duration
	// Detail is the error message of the body or an excerpt of it.
	Detail string
}

func (e *HTTPError) Error() string {
	return fmt.Sprintf("http %d: %s", e.StatusCode, e.Detail)
}

// tlsHTTPClient returns a client that trusts the CAs of caFile (the system's roots when empty)
// and presents the client certificate of certFile and keyFile when set.
func tlsHTTPClient(caFile, certFile, keyFile string, idleConns int) (*http.Client, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile != "" {
		pemData, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("read CA file: %w", err)
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pemData) {
			return nil, fmt.Errorf("CA file %s holds no PEM certificate", caFile)
		}
	}
	if certFile != "" {
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("load client certificate: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	tr := ledgerTransport(idleConns)
	tr.TLSClientConfig = cfg
	return &http.Client{Transport: tr}, nil
}

// IdleConnsDefault is how many idle connections to the ledger the default client keeps for
// reuse (Config.IdleConns): as many as the submitter's workers (1024 by default) POST at once
// and the status poller's requests beside them (16: 4 polls of 4 requests), so that a burst's
// connections stay open for the next one.
const IdleConnsDefault = 1040

// ledgerTransport is http.DefaultTransport's settings with room for `idle` idle connections to
// the one ledger host. The default transport keeps 2 per host: after every burst of
// concurrent POSTs all but 2 of their connections were closed, and the next burst dialed
// again (and left the closed ones in TIME_WAIT).
func ledgerTransport(idle int) *http.Transport {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns = idle
	tr.MaxIdleConnsPerHost = idle
	return tr
}

// transport holds what the flavours share: the base URL, the HTTP client, the headers sent
// with every request and the status fan-out.
type transport struct {
	base        *url.URL
	hc          *http.Client
	timeout     time.Duration
	concurrency int
	auth        string
	headers     map[string]string
	log         *slog.Logger

	refusedAt atomic.Int64 // unix nanoseconds of the last "refused for configuration" warning
}

// refusalWarnEvery spaces the warnings about POSTs refused for a reason every batch meets.
const refusalWarnEvery = 10 * time.Second

// warnRefused logs, at most once every refusalWarnEvery, a 4xx that is neither the batch's
// fault nor back-pressure: every POST meets it, so it points at the configuration.
func (t *transport) warnRefused(ctx context.Context, target string, res batchclaim.Result) {
	now := time.Now().UnixNano()
	last := t.refusedAt.Load()
	if now-last < int64(refusalWarnEvery) || !t.refusedAt.CompareAndSwap(last, now) {
		return
	}
	t.log.WarnContext(ctx, "the ledger refuses POSTs for a reason that is not the batch's: check the ledger URL and authorization; the batches are retried with backoff",
		"url", redacted(target), "http_status", res.HTTPStatus, "detail", res.Detail)
}

// endpoint returns the base URL followed by the path-escaped elements.
func (t *transport) endpoint(elem ...string) string {
	var b strings.Builder
	b.WriteString(strings.TrimRight(t.base.String(), "/"))
	for _, e := range elem {
		b.WriteByte('/')
		b.WriteString(url.PathEscape(e))
	}
	return b.String()
}

func (t *transport) newRequest(ctx context.Context, method, target string, body []byte) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, method, target, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	if t.auth != "" {
		req.Header.Set("Authorization", t.auth)
	}
	for k, v := range t.headers {
		req.Header.Set(k, v)
	}
	return req, nil
}

// post sends a BatchList and classifies the answer; detail extracts a message from an error
// body.
func (t *transport) post(ctx context.Context, target string, payload []byte,
	detail func(code int, body []byte) string) (PostResult, error) {
	if err := ctx.Err(); err != nil {
		return PostResult{}, fmt.Errorf("post batches: %w", err)
	}
	rctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	var wrote atomic.Bool
	rctx = httptrace.WithClientTrace(rctx, &httptrace.ClientTrace{
		WroteRequest: func(i httptrace.WroteRequestInfo) { wrote.Store(i.Err == nil) },
	})
	req, err := t.newRequest(rctx, http.MethodPost, target, payload)
	if err != nil {
		return PostResult{}, fmt.Errorf("post batches: %w", err)
	}
	req.Header.Set("Content-Type", "application/octet-stream")
	resp, err := t.hc.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return PostResult{}, fmt.Errorf("post batches: %w", ctx.Err())
		}
		// A request never written was certainly not taken; one written may have been.
		res := PostResult{Result: batchclaim.Result{Verdict: batchclaim.Retry, Detail: err.Error()}}
		if wrote.Load() {
			res.Verdict = batchclaim.Unknown
		}
		t.log.DebugContext(ctx, "post batches failed", "url", redacted(target), "error", err, "verdict", res.Verdict.String())
		return res, nil
	}
	defer resp.Body.Close()
	body, readErr := io.ReadAll(io.LimitReader(resp.Body, maxPostAnswer))
	res := PostResult{Result: classify(resp.StatusCode, body)}
	res.RetryAfter = parseRetryAfter(resp.Header.Get("Retry-After"), wallclock.Now())
	if res.Verdict == batchclaim.Accepted {
		res.Link = t.link(body)
	} else {
		res.Detail = detail(resp.StatusCode, body)
	}
	if readErr != nil && res.Detail == "" {
		res.Detail = "read answer: " + readErr.Error()
	}
	if res.Verdict == batchclaim.Retry && res.HTTPStatus >= 400 && res.HTTPStatus < 500 && res.HTTPStatus != http.StatusTooManyRequests {
		t.warnRefused(ctx, target, res.Result)
	}
	t.log.DebugContext(ctx, "post batches", "url", redacted(target), "http_status", res.HTTPStatus,
		"verdict", res.Verdict.String(), "detail", res.Detail)
	return res, nil
}

// classify maps an answer to a verdict. 400, 413 (too large) and 422 (unprocessable) say the
// batch itself is at fault: Rejected, never sent again. Only an answer that proves the batches
// were not taken is Retry, to be posted again blind: 429 (queue full), a 503 whose Sawtooth
// error code is 15 (validator not ready: the REST API did not pass the batches on), and the
// other 4xx (the request was refused for a reason that is not the batch's: authorization, a
// wrong URL; every batch meets it, so it is logged as a configuration problem). Everything
// else that is not an acceptance or a rejection
// is Unknown: the ledger must be asked before the batches go again. That includes 408 (the
// REST API gave up sending to the validator after trying), a 503 with code 17 (validator timed
// out: the batches may have been taken) or 18 (validator disconnected after receiving them), a
// 503 without a Sawtooth code, and every other 5xx.
func classify(code int, body []byte) batchclaim.Result {
	res := batchclaim.Result{HTTPStatus: code}
	switch {
	case code >= 200 && code < 300:
		res.Verdict = batchclaim.Accepted
	case code == http.StatusBadRequest, code == http.StatusRequestEntityTooLarge, code == http.StatusUnprocessableEntity:
		res.Verdict = batchclaim.Rejected
	case code == http.StatusServiceUnavailable && sawtoothErrorCode(body) == sawtoothValidatorNotReady:
		res.Verdict = batchclaim.Retry
	case code == http.StatusRequestTimeout, code >= 500:
		res.Verdict = batchclaim.Unknown
	default: // 429 and the other 4xx
		res.Verdict = batchclaim.Retry
	}
	return res
}

// sawtoothValidatorNotReady is the Sawtooth REST API's error code for a 503 sent before the
// batches were passed to the validator.
const sawtoothValidatorNotReady = 15

// sawtoothErrorCode reads the code of a Sawtooth error body, {"error": {"code": N}}; 0 when
// the body is not one.
func sawtoothErrorCode(body []byte) int {
	var v struct {
		Error struct {
			Code int `json:"code"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &v) != nil {
		return 0
	}
	return v.Error.Code
}

// link reads {"link": L} and resolves L against the base URL; "" when absent.
func (t *transport) link(body []byte) string {
	var v struct {
		Link string `json:"link"`
	}
	if json.Unmarshal(body, &v) != nil || v.Link == "" {
		return ""
	}
	ref, err := url.Parse(v.Link)
	if err != nil {
		return ""
	}
	return t.base.ResolveReference(ref).String()
}

// getJSON sends a GET and decodes a 200 answer into v. wait is the seconds the request asks
// the ledger to hold its answer, which its timeout allows for on top of t.timeout.
func (t *transport) getJSON(ctx context.Context, target string, wait int, v any,
	detail func(code int, body []byte) string) error {
	rctx, cancel := context.WithTimeout(ctx, t.timeout+time.Duration(wait)*time.Second)
	defer cancel()
	req, err := t.newRequest(rctx, http.MethodGet, target, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := t.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxStatusAnswer))
	if err != nil {
		return fmt.Errorf("read answer: %w", err)
	}
	t.log.DebugContext(ctx, "get batch statuses", "url", redacted(target), "http_status", resp.StatusCode)
	if resp.StatusCode != http.StatusOK {
		return &HTTPError{
			StatusCode: resp.StatusCode,
			RetryAfter: parseRetryAfter(resp.Header.Get("Retry-After"), wallclock.Now()),
			Detail:     detail(resp.StatusCode, body),
		}
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("decode answer: %w", err)
	}
	return nil
}

// redacted is a URL for logs: a password in its user info becomes "xxxxx".
func redacted(target string) string {
	u, err := url.Parse(target)
	if err != nil {
		return "(unparseable URL)"
	}
	return u.Redacted()
}

// bodyExcerpt is the fallback detail of an error answer.
func bodyExcerpt(code int, body []byte) string {
	s := strings.Join(strings.Fields(string(body)), " ")
	if s == "" {
		return http.StatusText(code)
	}
	return excerpt(s, 200)
}
