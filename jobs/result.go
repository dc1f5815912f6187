package jobs

import (
	"errors"
	"fmt"

	"github.com/batchclaim/batchclaim"
)

// Discard returns an error that, returned by Work, gives the job up at once: it becomes
// DISCARDED with err's text as its last error, whatever attempts remain, and its key goes on
// with the next job (River's JobCancel returned from Work). An operator may retry it
// (node.Retry, batchclaim retry, the status page).
func Discard(err error) error {
	if err == nil {
		err = errors.New("discarded by its worker")
	}
	return &verdictError{verdict: batchclaim.Discard, err: err}
}

// resulter is an error returned by Work that says which Result the attempt comes to, in
// place of an error's retry.
type resulter interface {
	error
	result() batchclaim.Result
}

// verdictError is an error that gives its job a verdict with the error's text as detail.
type verdictError struct {
	verdict batchclaim.Verdict
	err     error
}

func (e *verdictError) Error() string { return fmt.Sprintf("%s: %v", e.verdict, e.err) }
func (e *verdictError) Unwrap() error { return e.err }
func (e *verdictError) result() batchclaim.Result {
	return batchclaim.Result{Verdict: e.verdict, Detail: e.err.Error()}
}

// resultOf is what Work's error comes to: Done for nil, the Result a resulter says, else the
// error itself, for the runner to retry.
func resultOf(err error) (batchclaim.Result, error) {
	if err == nil {
		return batchclaim.Result{Verdict: batchclaim.Done}, nil
	}
	var r resulter
	if errors.As(err, &r) {
		return r.result(), nil
	}
	return batchclaim.Result{}, err
}
