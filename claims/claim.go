package claims

import (
	"github.com/batchclaim/batchclaim"
)

// Claim is a service_id this instance holds, with the epoch of its acquisition (the
// vocabulary's batchclaim.Claim; its Context is cancelled when the claim is lost).
type Claim = batchclaim.Claim

// LossReason says why a claim was lost.
type LossReason string

const (
	// LossTaken: the database no longer lists the claim as ours (voided or taken by another).
	LossTaken LossReason = "taken"
	// LossFenced: a fenced write found the epoch stale.
	LossFenced LossReason = "fenced"
	// LossDeadline: no renewal succeeded before the local deadline; we fenced ourselves.
	LossDeadline LossReason = "deadline"
	// LossReleased: we gave the claim back (graceful stop or fair-share surplus).
	LossReleased LossReason = "released"
	// LossDropped: we deleted the claim row of an idle service_id (Config.DropIdleAfter).
	LossDropped LossReason = "dropped"
)
