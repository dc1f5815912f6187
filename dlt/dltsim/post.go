package dltsim

import "time"

// Effects of a POST on one batch, as recorded in Post.Effect.
const (
	EffectAccepted  = "accepted"         // new batch, queued, answered 202
	EffectDuplicate = "duplicate"        // already known; harmless, answered 202
	EffectRejected  = "rejected"         // not accepted: a 4xx or 5xx answer
	EffectDropped   = "dropped-response" // accepted (or duplicate), connection closed unanswered
	EffectTimeout   = "timeout"          // held unanswered, not accepted
	// EffectAcceptedError: accepted (or duplicate), answered 503 with code 17 ("timed out
	// ... may or may not have been processed").
	EffectAcceptedError = "accepted-error"
)

// Settlement records a batch leaving the ledger's queue for good: committed to the chain, or
// INVALID. Batches lost by a restart never settle.
type Settlement struct {
	BatchID string `json:"batch_id"`
	// Service is the service id of a batch built by dlt.FakeBatch, else empty.
	Service string `json:"service,omitempty"`
	// Status is COMMITTED or INVALID.
	Status string `json:"status"`
	// At is the time on the simulator's clock.
	At time.Time `json:"at"`
	// AfterPosts is the number of Post records made before it: the settlement happened after
	// Posts()[AfterPosts-1] and before Posts()[AfterPosts].
	AfterPosts int `json:"after_posts"`
}

// Post records one batch of one POST the simulator received. A POST of k batches gives k
// records with the same Seq; a POST rejected before its batches could be read gives one
// record with an empty BatchID.
type Post struct {
	// Seq numbers the POSTs in arrival order, from 1.
	Seq int `json:"seq"`
	// BatchID is the batch's id; empty when the body could not be read as a BatchList.
	BatchID string `json:"batch_id,omitempty"`
	// Service is the service id of a batch built by dlt.FakeBatch, else empty.
	Service string `json:"service,omitempty"`
	// At is the arrival time on the simulator's clock.
	At time.Time `json:"at"`
	// HTTPStatus is the status answered; 0 when no answer was sent.
	HTTPStatus int `json:"http_status"`
	// Effect is one of the Effect constants.
	Effect string `json:"effect"`
}
