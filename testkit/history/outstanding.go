package history

import (
	"fmt"
	"slices"
	"time"
)

// LedgerEvent is one thing the ledger recorded: a POST of one batch, or a batch settling
// (committed or INVALID). Events are given in the order the ledger saw them.
type LedgerEvent struct {
	Settle  bool
	BatchID string
	Service string
	Effect  string // of a POST: accepted, duplicate, dropped-response, rejected, timeout
	At      time.Time
}

// OutstandingReport is what CheckOutstanding found.
type OutstandingReport struct {
	// DoubleOutstanding counts POSTs of a batch that took effect while another batch of the
	// same service_id had been posted (and taken) and was not yet settled: more than one
	// batch of a service_id in flight at the ledger.
	DoubleOutstanding int
	// Pairs names, for each, the batch posted and the one that was outstanding.
	Pairs    []OutstandingPair
	Problems []string
}

// OutstandingPair is one double outstanding POST.
type OutstandingPair struct {
	Service, Posted, Outstanding string
}

// CheckOutstanding walks the ledger's record and counts POSTs that broke one-round serial
// submission. A batch lost by a ledger restart stays outstanding until it is posted again
// and settles: whatever is posted for its service_id meanwhile jumps it.
func CheckOutstanding(events []LedgerEvent) OutstandingReport {
	var r OutstandingReport
	open := map[string][]string{} // service -> outstanding batch ids
	settled := map[string]bool{}
	for _, e := range events {
		if e.Service == "" || e.BatchID == "" {
			continue
		}
		if e.Settle {
			settled[e.BatchID] = true
			open[e.Service] = slices.DeleteFunc(open[e.Service], func(id string) bool { return id == e.BatchID })
			continue
		}
		if !TookEffect(e.Effect) || settled[e.BatchID] {
			continue
		}
		others := slices.DeleteFunc(slices.Clone(open[e.Service]), func(id string) bool { return id == e.BatchID })
		if len(others) > 0 {
			r.DoubleOutstanding++
			r.Pairs = append(r.Pairs, OutstandingPair{Service: e.Service, Posted: e.BatchID, Outstanding: others[0]})
			if len(r.Problems) < 20 {
				r.Problems = append(r.Problems, fmt.Sprintf("%s: batch %s posted at %s while %s was outstanding",
					e.Service, short(e.BatchID), e.At.Format(time.StampMicro), short(others[0])))
			}
		}
		if !slices.Contains(open[e.Service], e.BatchID) {
			open[e.Service] = append(open[e.Service], e.BatchID)
		}
	}
	return r
}
