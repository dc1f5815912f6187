package main

import (
	"slices"
	"testing"

	"github.com/batchclaim/batchclaim/cmd/batchclaim/internal/testbin"
)

// The serial scenario on 20 jobs of one key: every job counted, and each took statements
// and commits.
func TestBenchSerialScenario(t *testing.T) {
	t.Parallel()
	bin := testbin.Path(t)
	m := benchJSON(t, bin, "--scenario", "serial", "--serial-jobs", "20")
	if m["scenario"] != "serial" {
		t.Fatalf("scenario %v", m["scenario"])
	}
	hasFields(t, m, "nodes", "keys", "jobs_per_key", "workers_per_node", "conns_per_node", "jobs", "seconds", "jobs_per_second",
		"latency_p50_ms", "latency_p99_ms", "key_half_done_p50", "key_half_done_max", "first_done_seconds", "statements_per_job", "tx_control_per_job", "commits_per_job", "rollbacks", "statements",
		"process_cpu_us_per_job", "process_allocs_per_job", "process_gcs")
	if num(m, "process_cpu_us_per_job") <= 0 || num(m, "process_allocs_per_job") <= 0 {
		t.Errorf("the process used %v us of CPU and %v allocations per job: want both counted", m["process_cpu_us_per_job"], m["process_allocs_per_job"])
	}
	if num(m, "keys") != 1 || num(m, "jobs") != 20 || num(m, "jobs_per_key") != 20 || num(m, "nodes") != 1 {
		t.Errorf("keys %v, jobs %v (%v per key), nodes %v: want one key's 20 jobs on one node", m["keys"], m["jobs"], m["jobs_per_key"], m["nodes"])
	}
	if num(m, "jobs_per_second") <= 0 || num(m, "seconds") <= 0 || num(m, "statements_per_job") <= 0 || num(m, "commits_per_job") <= 0 {
		t.Errorf("rate %v in %v s, %v statements and %v commits per job", m["jobs_per_second"], m["seconds"], m["statements_per_job"], m["commits_per_job"])
	}
	if p50, p99 := num(m, "latency_p50_ms"), num(m, "latency_p99_ms"); p50 <= 0 || p99 < p50 {
		t.Errorf("latency p50 %v, p99 %v", p50, p99)
	}
}

// The latency scenario on a few batches, the processes' renew interval passed through:
// both runs measured every batch, each POST preceded its end, and the second run got the
// flags that turn listening off when run has them (here a flag run has).
func TestBenchLatencyScenario(t *testing.T) {
	t.Parallel()
	bin := testbin.Path(t)
	m := benchJSON(t, bin, "--scenario", "latency", "--latency-batches", "4", "--latency-service-ids", "3",
		"--latency-run-flags", "--renew-interval 300ms", "--latency-off-flags", "--halt-on-invalid=false")
	if m["scenario"] != "latency" {
		t.Fatalf("scenario %v", m["scenario"])
	}
	hasFields(t, m, "instances", "service_ids", "batches", "listening_off_flags", "run_has_listening_off_flag", "method", "runs", "seconds")
	if m["run_has_listening_off_flag"] != true || m["note"] != nil {
		t.Errorf("run has --halt-on-invalid: run_has_listening_off_flag %v, note %v", m["run_has_listening_off_flag"], m["note"])
	}
	runs, _ := m["runs"].([]any)
	if len(runs) != 2 {
		t.Fatalf("runs %v: want two", m["runs"])
	}
	for i, name := range []string{"listening", "polling"} {
		x, _ := runs[i].(map[string]any)
		hasFields(t, x, "name", "run_args", "renew_interval_ms", "batches", "pause_before_post_max_ms", "posted_to_holder", "posted_to_other",
			"enqueue_to_post_p50_ms", "enqueue_to_post_p99_ms", "enqueue_to_post_max_ms", "enqueue_to_done_p50_ms", "enqueue_to_done_p99_ms",
			"target_post_p99_ms", "target_formula", "target_met", "seconds")
		if x["name"] != name {
			t.Errorf("run %d: %v, want %s", i, x["name"], name)
		}
		if num(x, "renew_interval_ms") != 300 || num(x, "pause_before_post_max_ms") != 300 {
			t.Errorf("%s: renew interval %v ms, pause below %v ms; want the 300ms passed through", name, x["renew_interval_ms"], x["pause_before_post_max_ms"])
		}
		if num(x, "batches") != 4 || num(x, "posted_to_holder")+num(x, "posted_to_other") != 4 {
			t.Errorf("%s: %v batches, %v to the holder and %v to the other", name, x["batches"], x["posted_to_holder"], x["posted_to_other"])
		}
		post50, post99, postMax := num(x, "enqueue_to_post_p50_ms"), num(x, "enqueue_to_post_p99_ms"), num(x, "enqueue_to_post_max_ms")
		done50, done99 := num(x, "enqueue_to_done_p50_ms"), num(x, "enqueue_to_done_p99_ms")
		// Every batch is POSTed after it was stored and recorded COMMITTED after its POST,
		// so the quantiles keep that order.
		if post50 <= 0 || post99 < post50 || postMax < post99 || done50 < post50 || done99 < post99 {
			t.Errorf("%s: to POST p50 %v p99 %v max %v, to done p50 %v p99 %v", name, post50, post99, postMax, done50, done99)
		}
		if met, _ := x["target_met"].(bool); met != (post99 <= num(x, "target_post_p99_ms")) {
			t.Errorf("%s: target_met %v with p99 %v and target %v", name, x["target_met"], post99, x["target_post_p99_ms"])
		}
		var args []string
		if list, ok := x["run_args"].([]any); ok {
			args = strs(list)
		}
		if !slices.Contains(args, "--renew-interval") {
			t.Errorf("%s: run_args %v lack the flags passed through", name, args)
		}
		if off := slices.Contains(args, "--halt-on-invalid=false"); off != (name == "polling") {
			t.Errorf("%s: run_args %v", name, args)
		}
	}
	if x, _ := runs[1].(map[string]any); num(x, "target_post_p99_ms") != 350 {
		t.Errorf("polling: target %v ms, want R + 50 = 350", x["target_post_p99_ms"])
	}
}

// The many-claims scenario on 30 claims: the first round all committed, and the last keys'
// counters agree with one another.
func TestBenchManyClaimsScenario(t *testing.T) {
	t.Parallel()
	bin := testbin.Path(t)
	m := benchJSON(t, bin, "--scenario", "many-claims", "--many-claims", "30", "--many-claims-last", "5",
		"--many-claims-timeout", "20s", "--many-claims-run-flags", "--renew-interval 300ms")
	if m["scenario"] != "many-claims" {
		t.Fatalf("scenario %v", m["scenario"])
	}
	hasFields(t, m, "claims", "last_keys", "run_args", "seconds_to_hold_all", "first_round", "first_round_timeout_seconds",
		"last_keys_round", "last_keys_timeout_seconds", "method", "seconds")
	if num(m, "claims") != 30 || num(m, "last_keys") != 5 || num(m, "last_keys_timeout_seconds") != 20 || num(m, "seconds_to_hold_all") <= 0 {
		t.Errorf("claims %v, last keys %v, timeout %v, held after %v s", m["claims"], m["last_keys"], m["last_keys_timeout_seconds"], m["seconds_to_hold_all"])
	}
	first, _ := m["first_round"].(map[string]any)
	if num(first, "batches") != 30 || num(first, "submitted") != 30 || num(first, "committed") != 30 || first["timed_out"] != false {
		t.Errorf("first round %v: want all 30 committed", first)
	}
	last, _ := m["last_keys_round"].(map[string]any)
	for _, round := range []map[string]any{first, last} {
		hasFields(t, round, "batches", "submitted", "committed", "timed_out", "seconds", "enqueue_to_post_p50_ms", "enqueue_to_post_p99_ms", "enqueue_to_post_max_ms")
		b, s, c := num(round, "batches"), num(round, "submitted"), num(round, "committed")
		if c > s || s > b || round["timed_out"] != (c < b) {
			t.Errorf("round %v: committed <= submitted <= batches, timed out when not all committed", round)
		}
		if (s > 0) != (round["enqueue_to_post_p50_ms"] != nil) {
			t.Errorf("round %v: latencies only over batches submitted", round)
		}
		if s > 0 && (num(round, "enqueue_to_post_p50_ms") <= 0 || num(round, "enqueue_to_post_p99_ms") < num(round, "enqueue_to_post_p50_ms")) {
			t.Errorf("round %v: latencies", round)
		}
	}
	if num(last, "batches") != 5 {
		t.Errorf("last keys round %v: want 5 batches", last)
	}
}

// The defaults scenario on 20 service_ids x 3: every batch committed, and both processes'
// /readyz probed and counted.
func TestBenchDefaultsScenario(t *testing.T) {
	t.Parallel()
	bin := testbin.Path(t)
	m := benchJSON(t, bin, "--scenario", "defaults", "--defaults-service-ids", "20", "--defaults-per-key", "3",
		"--defaults-run-flags", "--renew-interval 300ms", "--defaults-readyz-interval", "20ms")
	if m["scenario"] != "defaults" {
		t.Fatalf("scenario %v", m["scenario"])
	}
	hasFields(t, m, "processes", "service_ids", "batches_per_service_id", "run_args", "batches", "committed", "seconds", "batches_per_second",
		"stored_to_done_p50_ms", "stored_to_done_p99_ms", "statements_per_batch", "readyz_interval_ms", "readyz", "readyz_non_200", "readyz_failed", "method")
	if num(m, "batches") != 60 || num(m, "committed") != 60 {
		t.Errorf("batches %v, committed %v: want 20 x 3 = 60", m["batches"], m["committed"])
	}
	if num(m, "batches_per_second") <= 0 || num(m, "statements_per_batch") <= 0 || num(m, "stored_to_done_p99_ms") < num(m, "stored_to_done_p50_ms") {
		t.Errorf("rate %v, statements %v, p50 %v, p99 %v", m["batches_per_second"], m["statements_per_batch"], m["stored_to_done_p50_ms"], m["stored_to_done_p99_ms"])
	}
	probes, _ := m["readyz"].([]any)
	if len(probes) != 2 {
		t.Fatalf("readyz %v: want one count per process", m["readyz"])
	}
	var non200, failed float64
	for _, p := range probes {
		z, _ := p.(map[string]any)
		byCode, _ := z["by_code"].(map[string]any)
		var answered float64
		for _, n := range byCode {
			answered += n.(float64)
		}
		if num(z, "probes") <= 0 || answered+num(z, "failed") != num(z, "probes") || num(z, "non_200") > answered {
			t.Errorf("readyz %v: every probe answered or failed, non-200 among the answers", z)
		}
		non200 += num(z, "non_200")
		failed += num(z, "failed")
	}
	if num(m, "readyz_non_200") != non200 || num(m, "readyz_failed") != failed {
		t.Errorf("readyz totals %v non-200, %v failed; the processes' sum %v, %v", m["readyz_non_200"], m["readyz_failed"], non200, failed)
	}
}
