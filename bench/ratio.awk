# ratio.awk reads the JSON lines of `make bench` (batchclaim bench --json, then bench/river)
# and prints batchclaim's jobs per second over River's: against River's best run at the
# tuning of River's own benchmark (riverbench), then against River at its defaults. Each side
# is named with its settings.

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

/"scenario":"jobs"/ {
	jobs[++nj] = num($0, "jobs_per_second")
	jobsSet[nj] = sprintf("%d nodes x %d workers, %d connections each, %d keys x %d jobs",
		num($0, "nodes"), num($0, "workers_per_node"), num($0, "conns_per_node"), num($0, "keys"), num($0, "jobs_per_key"))
}

/"scenario":"river"/ {
	t = str($0, "tuning")
	r = num($0, "jobs_per_second")
	runs[t]++
	if (r > best[t]) { best[t] = r; bestSet[t] = riverSettings($0) }
}

END {
	if (!nj) { print "no jobs line: no ratio to River"; exit }
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
