package batchclaim

import (
	"context"
	"time"
)

// Claim is a service_id an instance holds, with the epoch of its acquisition. Every write
// made about the service_id is fenced on (instance, ServiceID, Epoch).
type Claim struct {
	ServiceID string
	Epoch     int64
	ClaimedAt time.Time // database time of the acquisition

	ctx context.Context
}

// Context is cancelled the moment the instance learns the claim is lost, releases it, or its
// local deadline passes. Work done for the claim (an HTTP POST, say) should run under it.
// A Claim not handed out by a claim engine has a context that is never cancelled.
func (c Claim) Context() context.Context {
	if c.ctx == nil {
		return context.TODO()
	}
	return c.ctx
}

// WithContext returns c whose Context is ctx. The claim engine uses it to hand out claims
// whose context it cancels when the claim is lost.
func (c Claim) WithContext(ctx context.Context) Claim {
	c.ctx = ctx
	return c
}

// Job is one batch to submit under the claim of its service_id: what the queuer hands to
// the submitter, and what the recorder writes about.
type Job struct {
	Claim     Claim
	Batch     Batch
	FromState State  // the state the in-flight mark expects
	Reason    Reason // why the job is handed out
}
