package claims

import "slices"

// Share is the fair-share arithmetic of one cycle.
type Share struct {
	ServiceIDs    int // service_ids known to the claims table
	LiveInstances int // instances whose lease is in phase one
	Rank          int // this instance's place among them (ordered by id), -1 if not live
	Target        int // claims this instance should hold
}

// fairShare splits k service_ids over the live instances: everybody gets k/n, and the first
// k%n instances in id order one more. The targets add up to exactly k, so once every instance
// holds its target no claim is free and no two instances differ by more than one.
func fairShare(k int, live []string, self string) Share {
	s := Share{ServiceIDs: k, LiveInstances: len(live), Rank: slices.Index(live, self)}
	if s.Rank < 0 || len(live) == 0 {
		return s
	}
	n := len(live)
	s.Target = k / n
	if s.Rank < k%n {
		s.Target++
	}
	return s
}

// figures is what a claim cycle's survey says, as its plan reads it.
type figures struct {
	ServiceIDs int      // rows of the claims table
	Free       int      // rows nobody holds
	Held       int      // rows this instance holds
	Idle       int      // of those, rows idle past DropIdleAfter
	Live       []string // instances whose lease is in phase one, in id order
}

// plan is what one claim cycle decides, from the survey's figures, the engine's settings and
// what the cycle's earlier steps did: no statement, no lock, so its table tests need no
// Postgres. Engine.cycle runs the steps it names, in this order:
//
//  1. void expired claims, when the survey says some wait (not decided here: one flag);
//  2. dropFreeFirst: drop idle free rows before anyone takes them, since acquiring a row only
//     to drop it later costs an epoch, two claim events and a place in someone's set;
//  3. take: acquire up to the fair-share target (only rows with work while idle free rows
//     are still being dropped; retake recomputes what is left from a survey between chunks),
//     or give back surplus idle claims once over the target by more than the slack for two
//     cycles in a row;
//  4. dropOwnIdle: drop this instance's idle claim rows;
//  5. over: whether this cycle ends over the target, for the next cycle's step 3.
type plan struct {
	self     string
	slack    int  // Config.ShareSlack
	dropIdle bool // Config.DropIdleAfter > 0
	fig      figures
	free     int // free rows: the survey's, plus those this cycle voided, less those it dropped (a retake's survey replaces it)
	share    Share
}

func newPlan(fig figures, self string, slack int, dropIdle bool) *plan {
	p := &plan{self: self, slack: slack, dropIdle: dropIdle, fig: fig, free: fig.Free}
	p.share = fairShare(fig.ServiceIDs, fig.Live, self)
	return p
}

// voided records claims this cycle freed: they are free rows now.
func (p *plan) voided(n int) { p.free += n }

// dropFreeFirst reports whether to drop idle free rows before taking any.
func (p *plan) dropFreeFirst() bool { return p.dropIdle && p.share.Rank >= 0 && p.free > 0 }

// dropped records free rows this cycle deleted: they are neither free nor shared any more.
func (p *plan) dropped(n int) {
	if n == 0 {
		return
	}
	p.free -= n
	p.fig.ServiceIDs -= n
	p.share = fairShare(p.fig.ServiceIDs, p.fig.Live, p.self)
}

// takeKind is what step 3 does.
type takeKind int

const (
	takeNothing  takeKind = iota
	takeWithWork          // acquire free rows that have work only (idle free rows are being dropped)
	takeFree              // acquire free rows
	giveSurplus           // release idle surplus claims
)

// take is step 3: what to do and for how many claims. draining says the drop of idle free
// rows left more than one cycle's chunk; overBefore that the previous cycle ended over the
// target by more than the slack.
func (p *plan) take(draining, overBefore bool) (takeKind, int) {
	want := p.share.Target - p.fig.Held
	switch {
	case p.share.Rank < 0:
		return takeNothing, 0 // our lease is not in phase one by the database clock
	case want > 0 && draining:
		return takeWithWork, want
	case want > 0 && p.free > 0:
		return takeFree, want
	case -want > p.slack && overBefore:
		return giveSurplus, -want
	}
	return takeNothing, 0
}

// retake is what is left to take after a chunk of takeFree, by a fresh survey's figures: the
// target over the instances live now, less what this instance holds now. An instance that
// started beside many others sees few of them live in its first survey, and a target read
// once would have it take the share of all the others that had not registered yet, only to
// give the surplus back cycles later.
func (p *plan) retake(fig figures) int {
	p.fig, p.free = fig, fig.Free
	p.share = fairShare(fig.ServiceIDs, fig.Live, p.self)
	if p.share.Rank < 0 || p.free == 0 {
		return 0
	}
	return max(p.share.Target-fig.Held, 0)
}

// dropOwnIdle reports whether to drop this instance's idle claim rows (step 4).
func (p *plan) dropOwnIdle() bool { return p.dropIdle && p.fig.Idle > 0 }

// over reports whether a cycle that ends holding held claims is over the target by more than
// the slack (step 5).
func (p *plan) over(held int) bool {
	return p.share.Rank >= 0 && held > p.share.Target+p.slack
}
