package claims

import "testing"

func TestFairShare(t *testing.T) {
	t.Parallel()
	live := []string{"a", "b", "c"}
	for _, tc := range []struct {
		k      int
		self   string
		rank   int
		target int
	}{
		{10, "a", 0, 4}, // 10 = 4 + 3 + 3: the first k%n get one more
		{10, "b", 1, 3},
		{10, "c", 2, 3},
		{2, "c", 2, 0},
		{0, "a", 0, 0},
		{10, "z", -1, 0}, // not live: nothing
	} {
		s := fairShare(tc.k, live, tc.self)
		if s.Rank != tc.rank || s.Target != tc.target || s.LiveInstances != 3 || s.ServiceIDs != tc.k {
			t.Errorf("fairShare(%d, %v, %s) = %+v, want rank %d target %d", tc.k, live, tc.self, s, tc.rank, tc.target)
		}
	}
	total := 0
	for _, self := range live {
		total += fairShare(1000, live, self).Target
	}
	if total != 1000 {
		t.Errorf("targets add up to %d, want 1000", total)
	}
}

// The plan of one cycle, step by step, for the situations the claim cycle meets; each row
// is the survey's figures, what the earlier steps did, and what the plan decides.
func TestPlan(t *testing.T) {
	t.Parallel()
	two := []string{"a", "b"}
	for _, tc := range []struct {
		name       string
		fig        figures
		self       string
		dropIdle   bool
		voided     int
		dropped    int // idle free rows the first drop deleted (when it runs)
		draining   bool
		overBefore bool

		dropFirst bool
		kind      takeKind
		n         int
		target    int // the share's target after the drops
		dropOwn   bool
		overAt    int // the plan says "over" when the cycle ends holding this many (0: not checked)
	}{
		{name: "a joining instance takes its share of free rows",
			fig: figures{ServiceIDs: 10, Free: 10, Live: two}, self: "a",
			kind: takeFree, n: 5, target: 5},
		{name: "no free row: nothing to take though under the target",
			fig: figures{ServiceIDs: 10, Held: 2, Live: two}, self: "a",
			kind: takeNothing, target: 5},
		{name: "rows voided by this cycle are free to take",
			fig: figures{ServiceIDs: 10, Held: 2, Live: two}, self: "a", voided: 3,
			kind: takeFree, n: 3, target: 5},
		{name: "not live by the database clock: take nothing",
			fig: figures{ServiceIDs: 10, Free: 10, Live: two}, self: "z",
			kind: takeNothing},
		{name: "over by more than the slack, but only one cycle: keep",
			fig: figures{ServiceIDs: 10, Held: 8, Live: two}, self: "a",
			kind: takeNothing, target: 5, overAt: 7},
		{name: "over for a second cycle: give the surplus back",
			fig: figures{ServiceIDs: 10, Held: 8, Live: two}, self: "a", overBefore: true,
			kind: giveSurplus, n: 3, target: 5},
		{name: "over by the slack only: keep",
			fig: figures{ServiceIDs: 10, Held: 6, Live: two}, self: "a", overBefore: true,
			kind: takeNothing, target: 5},
		{name: "idle free rows are dropped first, and the share counts without them",
			fig: figures{ServiceIDs: 10, Free: 4, Held: 3, Live: two}, self: "a", dropIdle: true, dropped: 4,
			dropFirst: true, kind: takeNothing, target: 3},
		{name: "some free rows survive the drop: take them",
			fig: figures{ServiceIDs: 10, Free: 4, Held: 3, Live: two}, self: "a", dropIdle: true, dropped: 2,
			dropFirst: true, kind: takeFree, n: 1, target: 4},
		{name: "more idle free rows than one drop: take only rows with work",
			fig: figures{ServiceIDs: 10, Free: 10, Live: two}, self: "a", dropIdle: true, dropped: 1, draining: true,
			dropFirst: true, kind: takeWithWork, n: 5, target: 5},
		{name: "no free row: no drop of free rows, but own idle rows are dropped",
			fig: figures{ServiceIDs: 10, Held: 5, Idle: 2, Live: two}, self: "a", dropIdle: true,
			kind: takeNothing, target: 5, dropOwn: true},
		{name: "idle rows are left alone without DropIdleAfter",
			fig: figures{ServiceIDs: 10, Free: 3, Held: 5, Idle: 2, Live: two}, self: "a",
			kind: takeNothing, target: 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := newPlan(tc.fig, tc.self, 1, tc.dropIdle)
			p.voided(tc.voided)
			if got := p.dropFreeFirst(); got != tc.dropFirst {
				t.Fatalf("dropFreeFirst = %v, want %v", got, tc.dropFirst)
			}
			if tc.dropFirst {
				p.dropped(tc.dropped)
			}
			kind, n := p.take(tc.draining, tc.overBefore)
			if kind != tc.kind || n != tc.n {
				t.Errorf("take = %v %d, want %v %d", kind, n, tc.kind, tc.n)
			}
			if p.share.Target != tc.target {
				t.Errorf("target %d, want %d", p.share.Target, tc.target)
			}
			if got := p.dropOwnIdle(); got != tc.dropOwn {
				t.Errorf("dropOwnIdle = %v, want %v", got, tc.dropOwn)
			}
			if tc.overAt > 0 && !p.over(tc.overAt) {
				t.Errorf("over(%d) = false with target %d and slack 1", tc.overAt, p.share.Target)
			}
			if p.over(p.share.Target + 1) {
				t.Errorf("over(target + slack) = true")
			}
		})
	}
}

// retake: what is left to take after a chunk, by a fresh survey.
func TestPlanRetake(t *testing.T) {
	t.Parallel()
	alone := figures{ServiceIDs: 100, Free: 100, Live: []string{"a"}}
	for _, tc := range []struct {
		name   string
		fig    figures
		self   string
		left   int
		target int
	}{
		{"a peer joined: the share of two, less what is held", figures{ServiceIDs: 100, Free: 90, Held: 10, Live: []string{"a", "b"}}, "a", 40, 50},
		{"nobody joined: the rest of the share", figures{ServiceIDs: 100, Free: 90, Held: 10, Live: []string{"a"}}, "a", 90, 100},
		{"already over the new share: nothing", figures{ServiceIDs: 100, Free: 60, Held: 40, Live: []string{"a", "b", "c"}}, "a", 0, 34},
		{"no free row left: nothing", figures{ServiceIDs: 100, Free: 0, Held: 30, Live: []string{"a", "b"}}, "a", 0, 50},
		{"our lease left phase one: nothing", figures{ServiceIDs: 100, Free: 90, Held: 10, Live: []string{"b"}}, "a", 0, 0},
	} {
		p := newPlan(alone, tc.self, 0, false)
		if left := p.retake(tc.fig); left != tc.left || p.share.Target != tc.target {
			t.Errorf("%s: retake = %d with target %d, want %d with target %d", tc.name, left, p.share.Target, tc.left, tc.target)
		}
	}
}
