# batchclaim — run `make` or `make help` for the targets.
SHELL := /bin/bash
GO ?= go
BIN := bin
SQLC := $(BIN)/sqlc
PKGS := ./...
# The library (the root) and the program (cmd/batchclaim, its own module so that embedders do
# not get its requirements): test, tidy and vet run in each. There is no go.work: a workspace
# would not make the root's ./... reach into the nested module, and the program's go.mod, with
# its replace of the library by ../.., builds as it is.
MODULES := . cmd/batchclaim
CLI := cmd/batchclaim

.DEFAULT_GOAL := help

.PHONY: help
help: ## Show this help
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  \033[36m%-10s\033[0m %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: build
build: ## Build bin/batchclaim, stamped with the commit it was built from (`batchclaim version`)
	$(GO) -C $(CLI) build -buildvcs=auto -o $(CURDIR)/$(BIN)/batchclaim .

.PHONY: demo
demo: build ## Run the demo: instances sharing service_ids, one killed, the others take over
	$(BIN)/batchclaim demo

CHAOS_SEEDS ?= 1 2 3 4 5
CHAOS_DURATION ?= 5m
CHAOS_FLAGS ?=

.PHONY: chaos
chaos: build ## Long chaos runs at several seeds on a throwaway cluster (CHAOS_SEEDS, CHAOS_DURATION, CHAOS_FLAGS); stops at the first violation
	@for s in $(CHAOS_SEEDS); do \
	  echo "== batchclaim chaos --seed $$s --duration $(CHAOS_DURATION) $(CHAOS_FLAGS)"; \
	  env -u DATABASE_URL $(BIN)/batchclaim chaos --seed $$s --duration $(CHAOS_DURATION) $(CHAOS_FLAGS) || exit 1; \
	done

CHAOS_HA_SEEDS ?= 1 2 3 4 5
CHAOS_HA_DURATION ?= 5m

.PHONY: chaos-ha
chaos-ha: build ## Long chaos runs on a Patroni cluster (etcd, three members; needs the patroni and etcd-server packages) at several seeds (CHAOS_HA_SEEDS, CHAOS_HA_DURATION, CHAOS_FLAGS)
	@for s in $(CHAOS_HA_SEEDS); do \
	  echo "== batchclaim chaos --cluster patroni --seed $$s --duration $(CHAOS_HA_DURATION) $(CHAOS_FLAGS)"; \
	  env -u DATABASE_URL $(BIN)/batchclaim chaos --cluster patroni --seed $$s --duration $(CHAOS_HA_DURATION) $(CHAOS_FLAGS) || exit 1; \
	done

# make bench: batchclaim's scenarios and River's against one Postgres server: DATABASE_URL
# when set, else the local server below. Each run creates scratch databases on it and drops
# them. First the producer scenarios (PRODUCER_SCENARIOS: enqueue, bulk, steady), each run by
# batchclaim and at once by River at the tuning of River's own benchmark (cmd/river/riverbench:
# FetchCooldown 2ms, FetchPollInterval 20ms, 2,000 workers), the pair PRODUCER_RUNS times, so
# that both sides of a ratio ran in the same minutes. Bulk is two pairs: jobs without ids
# (--bulk-without-ids) against River's InsertManyFast, then jobs each with an id (registered to
# skip repeats) against River's with every job unique by its args (--bulk-unique: a unique key
# stored per job).
# Then every other scenario of `batchclaim bench` (BENCH_SCENARIOS). Then the backlog of no-op
# jobs in BACKLOG_PAIRS alternated pairs: the jobs scenario with BENCH_JOBS_TUNED (none: River
# alone; its --fillfactor is a tuning of the batches table in the scratch database, with its
# cost in docs/operations.md), then River at riverbench's tuning (pgx's default pool;
# RIVER_JOBS jobs); and River once at its defaults (FetchCooldown 100ms, FetchPollInterval
# 1s) with RIVER_DEFAULTS_WORKERS workers. BENCH_FLAGS go to every `batchclaim bench`. The
# ratios to River come last, each side named with its settings, the backlog's as each pair's
# and their median.
BENCH_DATABASE_URL := $(or $(DATABASE_URL),postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable)
BENCH_FLAGS ?=
BENCH_SCENARIOS ?= jobs serial ledger defaults latency many-claims failover scale churn cycle
BENCH_JOBS_TUNED ?= --workers 500 --per-key 50 --conns 8 --fillfactor 35
PRODUCER_SCENARIOS ?= enqueue bulk steady
PRODUCER_RUNS ?= 3
BACKLOG_PAIRS ?= 5
RIVER_JOBS ?= 100000
RIVER_DEFAULTS_WORKERS ?= 1000
RIVER_DEFAULTS_JOBS ?= 50000

.PHONY: bench
bench: build ## Measure every `batchclaim bench` scenario and River (at its own benchmark's tuning and at its defaults) on the same Postgres; print the ratios to River
	cd bench/river && $(GO) build -o ../../$(BIN)/river-bench .
	@set -o pipefail; out=$$(mktemp); trap 'rm -f '$$out EXIT; \
	  export DATABASE_URL='$(BENCH_DATABASE_URL)'; \
	  for i in $$(seq $(PRODUCER_RUNS)); do for s in $(PRODUCER_SCENARIOS); do \
	    if [ $$s = bulk ]; then \
	      $(BIN)/batchclaim bench --json --scenario bulk --bulk-without-ids $(BENCH_FLAGS) | tee -a $$out || exit 1; \
	      $(BIN)/river-bench --tuning riverbench --scenario bulk | tee -a $$out || exit 1; \
	      $(BIN)/batchclaim bench --json --scenario bulk $(BENCH_FLAGS) | tee -a $$out || exit 1; \
	      $(BIN)/river-bench --scenario bulk --bulk-unique | tee -a $$out || exit 1; \
	      continue; \
	    fi; \
	    $(BIN)/batchclaim bench --json --scenario $$s $(BENCH_FLAGS) | tee -a $$out || exit 1; \
	    $(BIN)/river-bench --tuning riverbench --scenario $$s | tee -a $$out || exit 1; \
	  done; done; \
	  for s in $(BENCH_SCENARIOS); do \
	    $(BIN)/batchclaim bench --json --scenario $$s $(BENCH_FLAGS) | tee -a $$out || exit 1; \
	  done; \
	  for i in $$(seq $(BACKLOG_PAIRS)); do \
	    if [ -n '$(strip $(BENCH_JOBS_TUNED))' ]; then \
	      $(BIN)/batchclaim bench --json --scenario jobs $(BENCH_JOBS_TUNED) | tee -a $$out || exit 1; \
	    fi; \
	    $(BIN)/river-bench --tuning riverbench --jobs $(RIVER_JOBS) | tee -a $$out || exit 1; \
	  done; \
	  $(BIN)/river-bench --tuning defaults --workers $(RIVER_DEFAULTS_WORKERS) --jobs $(RIVER_DEFAULTS_JOBS) | tee -a $$out || exit 1; \
	  awk -f bench/ratio.awk $$out

# make bench-slow-wal: make bench's producer pairs (enqueue, steady) and backlog pairs, each
# SLOW_WAL_RUNS times, and its River-at-defaults run, against a throwaway server whose every WAL
# flush takes SLOW_WAL_DELAY_US microseconds longer, as on network block storage
# (bench/slow-wal.sh: the server runs under strace, which delays each fdatasync's return), then
# the ratios to River.
SLOW_WAL_DELAY_US ?= 1500
SLOW_WAL_RUNS ?= 2

.PHONY: bench-slow-wal
bench-slow-wal: build ## Measure the producer and backlog pairs against River on a throwaway server whose WAL flushes are slowed (SLOW_WAL_DELAY_US); print the ratios
	DELAY_US='$(SLOW_WAL_DELAY_US)' bash bench/slow-wal.sh $(MAKE) --no-print-directory bench \
	  PRODUCER_SCENARIOS='enqueue steady' BENCH_SCENARIOS= PRODUCER_RUNS='$(SLOW_WAL_RUNS)' BACKLOG_PAIRS='$(SLOW_WAL_RUNS)'

# The long scenarios, minutes each: the short chaos runs (two 60s runs on a throwaway primary
# with a synchronous standby), every fault of the Patroni harness on one cluster, the demo
# riding through a Patroni failover, and the bench scenarios' runs (each a short benchmark
# that takes every core it can, which made the timing of the tests beside it the machine's). make test leaves them out; make test-long runs them one
# package at a time (a Patroni cluster also waits for any other on the machine), and .ci/run
# runs both targets.
LONG_TESTS := ^(TestChaosShort|TestFaults|TestDemoRidesThroughFailover|TestBench(Serial|Latency|ManyClaims|Defaults|Failover|Scale|Churn)Scenario|TestBenchProducerScenarios)$$

# Parallel tests at once within a package: four on 2 cores, in both modules, since most tests
# wait (on expiries, on the processes they start, on a browser) more than they compute. The two
# modules run one after the other: side by side (or with more test binaries at once) the whole
# was no faster on 2 cores, whose CPU it fills. The program's tests start bin/batchclaim, built
# once here and named by TEST_BATCHCLAIM_BINARY (go test alone builds its own).
TEST_PARALLEL ?= 4

.PHONY: test
test: ## Run every test of both modules but the long scenarios (make test-long), with the race detector, against a real Postgres (TEST_DATABASE_URL, else a throwaway local cluster)
	@start=$$(date +%s); $(MAKE) --no-print-directory build || exit 1; failed=; for m in $(MODULES); do \
	  echo "== go test in $$m"; ms=$$(date +%s); \
	  TEST_BATCHCLAIM_BINARY=$(CURDIR)/$(BIN)/batchclaim $(GO) -C $$m test -race -count=1 -timeout 30m -parallel $(TEST_PARALLEL) -skip '$(LONG_TESTS)' $(PKGS) || failed="$$failed $$m"; \
	  echo "== go test in $$m: $$(( $$(date +%s) - ms )) s"; \
	done; \
	echo "== make test: $$(( $$(date +%s) - start )) s"; \
	if [ -n "$$failed" ]; then echo "tests failed in:$$failed"; exit 1; fi

.PHONY: test-long
test-long: build ## Run the long scenarios make test leaves out (CI runs both): short chaos runs, the Patroni harness's faults, the demo through a Patroni failover, the bench scenarios' runs
	TEST_BATCHCLAIM_BINARY=$(CURDIR)/$(BIN)/batchclaim $(GO) -C $(CLI) test -race -count=1 -timeout 30m -p 1 -run '$(LONG_TESTS)' -v $(PKGS)

.PHONY: hostile
hostile: ## Run the hostile suite alone (also in make test): a real instance probed as an attacker would, then its database and memory checked
	$(GO) -C $(CLI) test -race -count=1 -timeout 10m -run 'TestHostile|TestLeastPrivilegeRoles' -v .

$(SQLC): tools/go.mod tools/go.sum
	cd tools && $(GO) build -o ../$(SQLC) github.com/sqlc-dev/sqlc/cmd/sqlc

.PHONY: generate
generate: $(SQLC) ## Regenerate internal/db from migrations/ and queries/ with the pinned sqlc
	$(SQLC) generate

.PHONY: verify
verify: $(SQLC) ## Check generated code, go.mod, formatting and vet
	@$(SQLC) diff || { echo 'internal/db is out of date with migrations/ and queries/: run make generate'; exit 1; }
	@for m in $(MODULES); do \
	  $(GO) -C $$m mod tidy -diff || { echo "$$m/go.mod, go.sum are not tidy: run go mod tidy in $$m"; exit 1; }; \
	done
	@out=$$(gofmt -l $$(git ls-files '*.go' | grep -v '^internal/db/')); \
	  if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	@set -e; for m in $(MODULES); do echo "go vet $$m"; $(GO) -C $$m vet $(PKGS); done

.PHONY: lint
lint: verify ## Alias of verify (gofmt and go vet are the project's linters)
