// Package queuer is the per-instance loop that hands the next batch of each claimed
// service_id to the submitter, at most one in flight per service_id. The claim engine
// (package claims) runs its own cycle and lease; the queuer reads which claims are held.
//
// Package node wires the queuer to the claim engine, the recorder and status poller (package
// observer), the submitter pool (package submitter) and a LISTEN connection that tells it
// about new work; most embedders use node. The example of Queuer wires the parts by hand:
// it shows the hooks that connect them and the order in which they start and stop.
//
// # Which service_ids it looks at
//
// The queuer reads the head batches of service_ids it has a reason to look at, never a window
// of its claims, so the cost of a fetch follows the service_ids with work, however many claims
// the instance holds (a thousand or a hundred thousand):
//
//   - it is told (Dirty): a batch was stored for a held service_id (the database notifies the
//     holder through LISTEN/NOTIFY, see package node), a status the instance recorded moved a
//     batch on (the poller's answers), a halt was lifted;
//   - a submission of the service_id ended (Done), unless its outcome's write found no other
//     unfinished batch of it (Drained) and nothing told the queuer about it while it ran: an
//     enqueue after that write wakes it as above; or a claim was gained;
//   - a time it noted came: a DELAYED head's next_attempt_at, an UNKNOWN head's grace;
//   - at start, and whenever notifications may have been missed (DirtyAll: the listening
//     connection was made again), every held claim, behind what it was told about;
//   - every Interval, the next FetchLimit held claims in turn (a safety net for anything
//     nothing told it about), or with Config.SweepAll every held claim (an instance that
//     cannot listen: the interval is then the latency of a new batch).
//
// The service_ids it was told about come first, in the order it was told; the sweeps come
// after. A fetch reads at most FetchLimit heads and not many more than the idle workers can
// take; ready heads that find no worker stay at the front for the next fetch.
//
// A worker that finishes a batch may go on with its service_id's next one at once: the
// outcome's write marks it in flight in the same statement (package observer) and the
// submitter runs it without coming back to the queuer (Chained). The queuer allows that
// (MayChain) without limit while no other service_id waits for a worker, and for ChainBurst
// jobs in a row while some do, so that a long backlog on one service_id does not starve the
// others.
//
// # Order and policy, per service_id
//
//   - Batches go out in seq order with at most one in flight ("one-round serial"): only the
//     oldest unfinished batch (the head) is ever considered. The next waits until the head is
//     COMMITTED or INVALID; VALID counts as done only where the ledger adapter says VALID
//     fixes the order (Config.SkipValid).
//   - NEW goes at once. DELAYED (back-pressure) goes once its next_attempt_at has passed.
//   - UNKNOWN is not failure: the head is resubmitted only after UnknownAnswers consecutive
//     UNKNOWN answers from the ledger or once it has been UNKNOWN for UnknownGrace, and always
//     before any newer batch (it is still the head).
//   - INFLIGHT left by a previous owner (or by this instance before it lost track of it) is
//     adopted as UNKNOWN, and its grace starts at the adoption, so the ledger is asked before
//     anything is sent again.
//   - INVALID is terminal and never resubmitted; with halt-on-invalid the service_id stops.
//
// All time comparisons (next_attempt_at, the age of an UNKNOWN) are made by the database
// clock; the queuer converts them into local timers only to know when to look again. Each
// statement of a fetch is bounded (Config.StatementTimeout), so a connection that hangs is
// abandoned rather than stopping the queuer.
package queuer
