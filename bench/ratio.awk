# ratio.awk reads the JSON lines of `make bench` (batchclaim bench --json and bench/river) and
# prints batchclaim over River, each side named with its settings. The producer scenarios come
# in pairs, batchclaim's line then River's (run at once after it): enqueue and bulk as jobs per
# second (higher is better), steady as latencies (lower is better), each pair on its own line,
# the best of each side, and for enqueue and bulk the median of the pairs' ratios. Bulk comes
# in two pairs: jobs without ids against River's plain InsertManyFast (the best and the median
# are of these), then jobs each with an id (registered to skip repeats) against River's with
# every job unique by its args. Then the backlog: the alternated pairs (a batchclaim jobs line
# followed at once by River's run at riverbench's tuning), each pair's ratio and their median,
# the figure least moved by a noisy machine (one run a side spreads by a fifth or more there);
# then each batchclaim jobs line over River's best run at the tuning of River's own benchmark
# (riverbench) and over River at its defaults.

function num(line, field,    re) {
	re = "\"" field "\":-?[0-9.eE+-]+"
	if (!match(line, re)) return ""
	return substr(line, RSTART + length(field) + 3, RLENGTH - length(field) - 3) + 0
}

function str(line, field,    re) {
	re = "\"" field "\":\"[^\"]*\""
	if (!match(line, re)) return ""
	return substr(line, RSTART + length(field) + 4, RLENGTH - length(field) - 5)
}

function riverSettings(line) {
	return sprintf("River %s, %s tuning: FetchCooldown %gms, FetchPollInterval %gms, %d workers, %d connections, %d jobs",
		str(line, "river_version"), str(line, "tuning"), num(line, "fetch_cooldown_ms"), num(line, "fetch_poll_interval_ms"),
		num(line, "workers"), num(line, "conns"), num(line, "jobs"))
}

# median sorts v[1..n] in place (insertion sort) and returns its median.
function median(v, n,    i, k, x) {
	for (i = 2; i <= n; i++) {
		x = v[i]
		for (k = i - 1; k >= 1 && v[k] > x; k--) v[k + 1] = v[k]
		v[k + 1] = x
	}
	return n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
}

function riverProducer(line) {
	return sprintf("River %s, %s tuning: FetchCooldown %gms, FetchPollInterval %gms, %d workers",
		str(line, "river_version"), str(line, "tuning"), num(line, "fetch_cooldown_ms"), num(line, "fetch_poll_interval_ms"), num(line, "workers"))
}

# The producer scenarios: batchclaim's line, then River's.
/"scenario":"(enqueue|bulk|steady)"/ {
	match($0, /"scenario":"[a-z]+"/)
	s = substr($0, RSTART + 12, RLENGTH - 13)
	mine[s] = $0
}
/"scenario":"river-(enqueue|bulk|steady)"/ {
	match($0, /"scenario":"river-[a-z]+"/)
	s = substr($0, RSTART + 18, RLENGTH - 19)
	theirs = $0
	pairs[s]++
	if (!(s in mine)) next
	m = mine[s]
	# River's bulk with UniqueOpts (a unique key stored per job): beside the batchclaim line
	# just before it, whose jobs each have an id registered to skip duplicates.
	if (s == "bulk" && theirs ~ /"unique_by_args":true/) {
		a = num(m, "jobs_per_second"); b = num(theirs, "jobs_per_second")
		producerLines[++np] = sprintf("bulk one call of %d jobs%s (River: InsertManyFast, every job UniqueOpts{ByArgs: true}): %.0f jobs/s vs River %.0f = %.2f (River %s, no client working)",
			num(m, "jobs_per_call"), m ~ /"without_ids":true/ ? " without ids" : ", each with an id", a, b, b > 0 ? a / b : 0, str(theirs, "river_version"))
		delete mine[s]
		next
	}
	if (s == "steady") {
		line = sprintf("steady %g jobs/s asked (%g and %g achieved), enqueue to done p50/p99 %g/%g ms vs River %g/%g ms, enqueue to start p50/p99 %g/%g vs %g/%g ms (%s)",
			num(m, "rate_asked"), num(m, "rate_achieved"), num(theirs, "rate_achieved"),
			num(m, "enqueue_to_done_p50_ms"), num(m, "enqueue_to_done_p99_ms"), num(theirs, "enqueue_to_done_p50_ms"), num(theirs, "enqueue_to_done_p99_ms"),
			num(m, "enqueue_to_start_p50_ms"), num(m, "enqueue_to_start_p99_ms"), num(theirs, "enqueue_to_start_p50_ms"), num(theirs, "enqueue_to_start_p99_ms"),
			riverProducer(theirs))
		if (!(s in bestMine) || num(m, "enqueue_to_done_p99_ms") < num(bestMine[s], "enqueue_to_done_p99_ms")) bestMine[s] = m
		if (!(s in bestTheirs) || num(theirs, "enqueue_to_done_p99_ms") < num(bestTheirs[s], "enqueue_to_done_p99_ms")) bestTheirs[s] = theirs
	} else {
		a = num(m, "jobs_per_second"); b = num(theirs, "jobs_per_second")
		what = s == "enqueue" ? sprintf("%d producers, single-job enqueue (River: Insert)", num(m, "producers")) : \
			sprintf("one call of %d jobs%s (River: InsertManyFast)", num(m, "jobs_per_call"), m ~ /"without_ids":true/ ? " without ids" : ", each with an id")
		who = s == "bulk" ? "River " str(theirs, "river_version") ", no client working" : riverProducer(theirs)
		line = sprintf("%s %s: %.0f jobs/s vs River %.0f = %.2f (%s)", s, what, a, b, b > 0 ? a / b : 0, who)
		if (a > num(bestMine[s], "jobs_per_second")) bestMine[s] = m
		if (b > num(bestTheirs[s], "jobs_per_second")) bestTheirs[s] = theirs
		if (b > 0) pairRatio[s, ++pairRatios[s]] = a / b
	}
	producerLines[++np] = line
	delete mine[s]
}

/"scenario":"jobs"/ {
	jobs[++nj] = num($0, "jobs_per_second")
	jobsSet[nj] = sprintf("%d nodes x %d workers, %d connections each, %d keys x %d jobs",
		num($0, "nodes"), num($0, "workers_per_node"), num($0, "conns_per_node"), num($0, "keys"), num($0, "jobs_per_key"))
	if (num($0, "fillfactor") != "") jobsSet[nj] = jobsSet[nj] sprintf(", batches fillfactor %d", num($0, "fillfactor"))
}

/"scenario":"river"/ {
	t = str($0, "tuning")
	r = num($0, "jobs_per_second")
	runs[t]++
	if (r > best[t]) { best[t] = r; bestSet[t] = riverSettings($0) }
	if (t == "riverbench" && lastJobs) {
		pairs_n++
		pairMine[pairs_n] = jobs[lastJobs]; pairTheirs[pairs_n] = r
		pairSet[pairs_n] = jobsSet[lastJobs]; pairRiver[pairs_n] = riverSettings($0)
	}
}

# lastJobs: the jobs line just before this one, if this one is River's run of its pair.
/"scenario":/ { lastJobs = $0 ~ /"scenario":"jobs"/ ? nj : 0 }

END {
	for (i = 1; i <= np; i++) print producerLines[i]
	for (s in bestMine) {
		if (!(s in bestTheirs)) continue
		if (s == "steady")
			printf "steady, best of each side: enqueue to done p50/p99 %g/%g ms vs River %g/%g ms\n",
				num(bestMine[s], "enqueue_to_done_p50_ms"), num(bestMine[s], "enqueue_to_done_p99_ms"),
				num(bestTheirs[s], "enqueue_to_done_p50_ms"), num(bestTheirs[s], "enqueue_to_done_p99_ms")
		else
			printf "%s, best of each side: %.0f vs %.0f jobs/s = %.2f\n", s, num(bestMine[s], "jobs_per_second"),
				num(bestTheirs[s], "jobs_per_second"), num(bestMine[s], "jobs_per_second") / num(bestTheirs[s], "jobs_per_second")
	}
	for (s in pairRatios) {
		n = pairRatios[s]
		for (i = 1; i <= n; i++) v[i] = pairRatio[s, i]
		med = median(v, n)
		printf "%s, median of the %d pairs' ratios: %.2f (lowest %.2f, highest %.2f)\n", s, n, med, v[1], v[n]
	}
	if (!nj) { print "no jobs line: no ratio to River"; exit }
	if (pairs_n) {
		printf "backlog, %d alternated pairs (batchclaim's run, then River's at once after it):\n", pairs_n
		for (i = 1; i <= pairs_n; i++) {
			ratio[i] = pairTheirs[i] > 0 ? pairMine[i] / pairTheirs[i] : 0
			printf "  %.0f jobs/s (%s) / %.0f (%s) = %.2f\n", pairMine[i], pairSet[i], pairTheirs[i], pairRiver[i], ratio[i]
		}
		med = median(ratio, pairs_n)
		printf "  median of the pairs' ratios: %.2f (lowest %.2f, highest %.2f)\n", med, ratio[1], ratio[pairs_n]
	}
	for (i = 1; i <= nj; i++) {
		printf "batchclaim jobs: %.0f jobs/s (%s)\n", jobs[i], jobsSet[i]
		if (best["riverbench"] > 0)
			printf "  / River at its own benchmark's tuning, best of %d runs: %.0f jobs/s (%s) = %.2f\n",
				runs["riverbench"], best["riverbench"], bestSet["riverbench"], jobs[i] / best["riverbench"]
		else
			print "  no River run at riverbench's tuning: no ratio"
		if (best["defaults"] > 0)
			printf "  / River at its defaults, best of %d runs: %.0f jobs/s (%s) = %.2f\n",
				runs["defaults"], best["defaults"], bestSet["defaults"], jobs[i] / best["defaults"]
		if (best["defaults"] > best["riverbench"])
			print "  (River ran faster at its defaults than at riverbench's tuning in this sitting: the machine was busy, or the tunings need another look)"
	}
}
