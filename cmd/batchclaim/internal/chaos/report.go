package chaos

import (
	"fmt"
	"io"
)

// Report is the outcome of a run; the command prints it as text or as one JSON object.
type Report struct {
	Seed            int64          `json:"seed"`
	Replay          string         `json:"replay"`
	Database        string         `json:"database"`
	Instances       int            `json:"instances"`
	ServiceIDs      int            `json:"service_ids"`
	DurationSeconds float64        `json:"duration_seconds"`
	Faults          map[string]int `json:"faults"`
	Skipped         []string       `json:"skipped,omitempty"`
	Violations      map[string]int `json:"violations"`
	// Operations counts the operations that acted, by kind; OpsSkipped lists the kinds
	// this run could not do (resume without --halt-on-invalid); OperationLog is every
	// operation tried, in order.
	Operations    map[string]int `json:"operations"`
	OpsSkipped    []string       `json:"operations_skipped,omitempty"`
	OperationLog  []OpRecord     `json:"operation_log,omitempty"`
	HaltOnInvalid bool           `json:"halt_on_invalid"`
	// QuiesceResumes: halts lifted at quiescence so that every batch could finish.
	QuiesceResumes int `json:"quiesce_resumes,omitempty"`
	Batches        int `json:"batches"`
	Committed      int `json:"committed"`
	Invalid        int `json:"invalid"`
	Cancelled      int `json:"cancelled"`
	Discarded      int `json:"discarded"`
	// DeletedByRetention: batches retention deleted during the run (read from the audit;
	// not counted in Batches).
	DeletedByRetention int `json:"deleted_by_retention"`
	// Jobs: what the checks of the key's promise read.
	Jobs            JobCounts `json:"jobs"`
	Posts           int       `json:"posts"`
	DuplicatePosts  int       `json:"duplicate_posts"`
	Acquisitions    int       `json:"acquisitions"`
	Writes          int       `json:"fenced_writes"`
	TakeoversJudged int       `json:"takeovers_judged"`
	// DropIdleAfterMs is the instances' --drop-idle-after (0: rows are never dropped), and
	// Dropped the claims their owners dropped as idle (free rows dropped by others record no
	// claim event and are not counted).
	DropIdleAfterMs int64 `json:"drop_idle_after_ms"`
	Dropped         int   `json:"claims_dropped"`
	// SurplusReleased: claims given back over the fair share; SurplusWithWork, those of them
	// whose service_id had a batch stored before the release and not finished by it (a busy
	// claim that yielded, or an idle one with work waiting).
	SurplusReleased int `json:"surplus_released"`
	SurplusWithWork int `json:"surplus_released_with_work"`
	// LeaderTakeovers: what each fault of the Patroni leader or of etcd cost (Patroni
	// cluster only); PGRewinds: the times a member rejoined through pg_rewind.
	LeaderTakeovers []LeaderTakeover `json:"leader_takeovers,omitempty"`
	PGRewinds       int              `json:"pg_rewinds,omitempty"`
	Problems        []string         `json:"problems,omitempty"`
	// Diagnoses explain violations by what the run knows (e.g. when each client's COMMIT
	// returned).
	Diagnoses []string `json:"diagnoses,omitempty"`
	LogDir    string   `json:"log_dir"`
}

// JobCounts is the size of the jobs' history the promise checks read.
type JobCounts struct {
	Jobs     int `json:"jobs"`     // stored during the run, deleted ones included
	Changes  int `json:"changes"`  // recorded state changes
	Retries  int `json:"retries"`  // of them, written by Retry
	Deleted  int `json:"deleted"`  // jobs retention deleted
	Promises int `json:"promises"` // jobs a client was told were stored or revived
}

// Violated returns the total number of violations.
func (r Report) Violated() int {
	n := 0
	for _, v := range r.Violations {
		n += v
	}
	return n
}

// Print writes the report for a person.
func (r Report) Print(w io.Writer) {
	fmt.Fprintf(w, "\nchaos: seed %d, %d instances, %d service_ids, %.0fs, database: %s\n", r.Seed, r.Instances, r.ServiceIDs, r.DurationSeconds, r.Database)
	fmt.Fprintf(w, "faults:\n")
	for _, k := range Kinds() {
		fmt.Fprintf(w, "  %-22s %d\n", k, r.Faults[k])
	}
	for _, k := range r.Skipped {
		fmt.Fprintf(w, "  skipped: %s (not a fault of this database)\n", k)
	}
	fmt.Fprintf(w, "operations (halt-on-invalid %t):\n", r.HaltOnInvalid)
	for _, k := range Operations() {
		fmt.Fprintf(w, "  %-22s %d\n", k, r.Operations[k])
	}
	for _, k := range r.OpsSkipped {
		fmt.Fprintf(w, "  skipped: %s (the instances run without --halt-on-invalid)\n", k)
	}
	if r.QuiesceResumes > 0 {
		fmt.Fprintf(w, "  halts lifted at quiescence: %d\n", r.QuiesceResumes)
	}
	fmt.Fprintf(w, "history: %d batches (%d committed, %d invalid, %d cancelled, %d discarded; %d more deleted by retention), %d POSTs (%d duplicates), %d acquisitions, %d fenced writes, %d takeovers judged\n",
		r.Batches, r.Committed, r.Invalid, r.Cancelled, r.Discarded, r.DeletedByRetention, r.Posts, r.DuplicatePosts, r.Acquisitions, r.Writes, r.TakeoversJudged)
	fmt.Fprintf(w, "jobs: %d (%d deleted), %d state changes (%d by Retry), %d promises of stored or revived jobs\n",
		r.Jobs.Jobs, r.Jobs.Deleted, r.Jobs.Changes, r.Jobs.Retries, r.Jobs.Promises)
	fmt.Fprintf(w, "surplus claims released: %d (%d with work left on their service_id)\n", r.SurplusReleased, r.SurplusWithWork)
	if r.DropIdleAfterMs > 0 {
		fmt.Fprintf(w, "idle claim rows dropped after %dms: %d claims dropped by their owners (free rows dropped leave no claim event)\n", r.DropIdleAfterMs, r.Dropped)
	}
	if len(r.LeaderTakeovers) > 0 {
		fmt.Fprintf(w, "leader faults: %d; pg_rewind runs: %d\n", len(r.LeaderTakeovers), r.PGRewinds)
		var slowest LeaderTakeover
		for _, t := range r.LeaderTakeovers {
			fmt.Fprintf(w, "  %-24s %s -> %s: writes after %.1fs; %d claims held again after %.1fs (%.1fs after writes resumed; bound %.1fs)\n",
				t.Kind, t.From, t.To, t.WritableAfter, t.Claims, t.SlowestAfterFault, t.SlowestAfterWrites, t.Bound)
			if t.FaultBound > 0 && t.SlowestAfterFault > slowest.SlowestAfterFault {
				slowest = t
			}
		}
		if slowest.FaultBound > 0 {
			fmt.Fprintf(w, "  slowest takeover after a leader kill: %.1fs after the fault (%s; bound ttl + loop_wait + T2 + 2R + allowance = %.1fs)\n",
				slowest.SlowestAfterFault, slowest.Kind, slowest.FaultBound)
		}
	}
	fmt.Fprintf(w, "violations:\n")
	for _, k := range Invariants() {
		fmt.Fprintf(w, "  %-22s %d\n", k, r.Violations[k])
	}
	for _, p := range r.Problems {
		fmt.Fprintf(w, "  problem: %s\n", p)
	}
	for _, d := range r.Diagnoses {
		fmt.Fprintf(w, "  diagnosis: %s\n", d)
	}
	fmt.Fprintf(w, "instance logs: %s\n", r.LogDir)
	if r.Violated() > 0 {
		fmt.Fprintf(w, "\nINVARIANTS VIOLATED with seed %d; replay with:\n  %s\n", r.Seed, r.Replay)
	} else {
		fmt.Fprintf(w, "\nevery invariant held (seed %d)\n", r.Seed)
	}
}
