package dlt

import (
	"context"
	"fmt"
	"time"

	"github.com/batchclaim/batchclaim"
)

// Flavor names a ledger API.
type Flavor string

// The ledger APIs this package speaks.
const (
	FlavorSawtooth Flavor = "sawtooth" // the Sawtooth REST API
	FlavorScabbard Flavor = "scabbard" // a Splinter scabbard service
)

// ParseFlavor reads a flavor name.
func ParseFlavor(s string) (Flavor, error) {
	switch f := Flavor(s); f {
	case FlavorSawtooth, FlavorScabbard:
		return f, nil
	}
	return "", fmt.Errorf("unknown ledger flavor %q (want %q or %q)", s, FlavorSawtooth, FlavorScabbard)
}

// PostResult is the classified answer to one POST: the batchclaim.Result the submission
// records, and the status link of an accepted POST. Its Verdict is Accepted, Rejected, Retry
// or Unknown, as the package documentation details: Retry only when the answer proves the
// batches were not taken, Unknown when the POST may have taken effect, so that the ledger is
// asked before the batches are posted again. HTTPStatus is 0 when no response arrived;
// RetryAfter is the delay a Retry-After header asked for (seconds or an HTTP date), 0 when it
// was absent or unparseable; Detail explains anything but an acceptance (the error title and
// message of the body, a short excerpt of it, or the transport error's text). Invalid is never
// set: a POST's 400 does not say which transaction failed; the batch's status does.
type PostResult struct {
	batchclaim.Result
	// Link is the status link of an accepted POST, resolved to an absolute URL; "" otherwise.
	Link string
}

// Client is a ledger API.
type Client interface {
	// Post sends a serialized BatchList. The error is non-nil only for a payload that is not a
	// valid BatchList or when ctx ends; every HTTP or transport failure is a verdict.
	Post(ctx context.Context, batchList []byte) (PostResult, error)
	// Submit is Post of a batch whose payload is a BatchList, returning its batchclaim.Result:
	// a Client is a submitter.Submitter.
	Submit(ctx context.Context, b batchclaim.Batch) (batchclaim.Result, error)
	// Statuses returns one status per distinct id, in the order of ids. With StatusesWait, a
	// Client is an observer.StatusWaiter.
	Statuses(ctx context.Context, ids []string) ([]batchclaim.LedgerStatus, error)
	// StatusesWait is Statuses asking the ledger to hold its answer until no id is left
	// unsettled (Sawtooth: none PENDING; scabbard: each COMMITTED or INVALID) or wait has
	// passed, so that one call sees a commit that is a moment away. The ledger gets wait in
	// whole seconds, rounded up; wait bounds the whole call, so the groups of ids sent after
	// others ask for only what is left of it. Zero or negative wait is Statuses.
	StatusesWait(ctx context.Context, ids []string, wait time.Duration) ([]batchclaim.LedgerStatus, error)
	// Flavor names the API.
	Flavor() Flavor
	// OrderedOnValid reports whether a VALID status already fixes the batch's place in the
	// ledger's order, so that the next batch of the service_id may be sent. Neither adapter
	// says so: Sawtooth never reports VALID, and scabbard can forget a VALID batch on restart.
	OrderedOnValid() bool
}

var (
	_ Client = (*Sawtooth)(nil)
	_ Client = (*Scabbard)(nil)
)
