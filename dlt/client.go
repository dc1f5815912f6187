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

// Verdict classifies the answer to a POST of a BatchList.
type Verdict int

const (
	// Accepted: 200 or 202, the ledger has the batches.
	Accepted Verdict = iota + 1
	// Rejected: 400, the batches are at fault; terminal, never post them again.
	Rejected
	// Retry: not accepted and not rejected. Post again later: at once after back-pressure that
	// proves refusal (429, 503 code 15, a refused connection), only after asking the ledger when
	// Unknown is set.
	Retry
)

func (v Verdict) String() string {
	switch v {
	case Accepted:
		return "accepted"
	case Rejected:
		return "rejected"
	case Retry:
		return "retry"
	}
	return fmt.Sprintf("Verdict(%d)", int(v))
}

// PostResult is the classified answer to one POST.
type PostResult struct {
	Verdict Verdict
	// HTTPStatus is the response's status code, 0 when no response arrived.
	HTTPStatus int
	// RetryAfter is the delay a Retry-After header asked for (seconds or an HTTP date), 0 when
	// the header was absent or unparseable.
	RetryAfter time.Duration
	// Link is the status link of an accepted POST, resolved to an absolute URL.
	Link string
	// Detail explains a rejection or a retry: the error title and message of the body, a short
	// excerpt of it, or the transport error's text.
	Detail string
	// Unknown is true when the POST may have taken effect although no answer proved either
	// way: a timeout or a dropped connection after the request was written, a 408, a 503 other
	// than Sawtooth's "validator not ready" (code 15), or another 5xx. The ledger is asked
	// before the batches are posted again; a later re-post may then be a duplicate, which this
	// explains.
	Unknown bool
}

// InvalidTransaction explains why a batch is INVALID.
type InvalidTransaction struct {
	ID           string
	Message      string
	ExtendedData []byte
}

// BatchStatus is what the ledger says about one batch id.
type BatchStatus struct {
	ID     string
	Status batchclaim.Status
	// Invalid lists the failed transactions of an INVALID batch.
	Invalid []InvalidTransaction
}

// Client is a ledger API.
type Client interface {
	// Post sends a serialized BatchList. The error is non-nil only for a payload that is not a
	// valid BatchList or when ctx ends; every HTTP or transport failure is a Verdict.
	Post(ctx context.Context, batchList []byte) (PostResult, error)
	// Statuses returns one status per distinct id, in the order of ids.
	Statuses(ctx context.Context, ids []string) ([]BatchStatus, error)
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
