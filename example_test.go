package batchclaim_test

import (
	"fmt"

	"github.com/batchclaim/batchclaim"
)

// What a Submitter's verdict makes of a batch: its next state, whether that finishes it (and
// so lets its service_id go on), and the ledger status it implies, if any.
func ExampleVerdict_State() {
	for _, v := range []batchclaim.Verdict{batchclaim.Done, batchclaim.Accepted, batchclaim.Rejected,
		batchclaim.Retry, batchclaim.Unknown, batchclaim.Discard} {
		fmt.Printf("%-8s -> %-9s finished=%-5v ledger=%q\n", v, v.State(), v.State().Terminal(), v.Status())
	}
	// Output:
	// done     -> COMMITTED finished=true  ledger="COMMITTED"
	// accepted -> PENDING   finished=false ledger="PENDING"
	// rejected -> INVALID   finished=true  ledger="INVALID"
	// retry    -> DELAYED   finished=false ledger=""
	// unknown  -> UNKNOWN   finished=false ledger=""
	// discard  -> DISCARDED finished=true  ledger=""
}

// What a ledger's answer about a batch makes of it.
func ExampleStatus_State() {
	for _, s := range []batchclaim.Status{batchclaim.StatusPending, batchclaim.StatusValid,
		batchclaim.StatusCommitted, batchclaim.StatusInvalid, batchclaim.StatusUnknown} {
		fmt.Println(s, "->", s.State())
	}
	// Output:
	// PENDING -> PENDING
	// VALID -> VALID
	// COMMITTED -> COMMITTED
	// INVALID -> INVALID
	// UNKNOWN -> UNKNOWN
}
