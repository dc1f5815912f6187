# batchclaim — run `make` or `make help` for the targets.
SHELL := /bin/bash
GO ?= go
BIN := bin
SQLC := $(BIN)/sqlc
PKGS := ./...

.DEFAULT_GOAL := help

.PHONY: help
help: ## Show this help
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  \033[36m%-10s\033[0m %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: build
build: ## Build bin/batchclaim
	$(GO) build -o $(BIN)/batchclaim ./cmd/batchclaim

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

# make bench: batchclaim's scenarios and River's no-op jobs against one Postgres server:
# DATABASE_URL when set, else the local server below. Each run creates scratch databases on it
# and drops them. RIVER_WORKERS is a list: River runs once per count; the default 32 matches
# bench's default 2 nodes x 16 workers. BENCH_FLAGS go to `batchclaim bench`.
BENCH_DATABASE_URL := $(or $(DATABASE_URL),postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable)
BENCH_FLAGS ?=
RIVER_WORKERS ?= 32 100 1000
RIVER_JOBS ?= 10000

.PHONY: bench
bench: build ## Measure batchclaim (jobs, ledger, failover, scale, churn, cycle) and River's no-op jobs on the same Postgres; print jobs/River
	@set -o pipefail; out=$$(mktemp); trap 'rm -f '$$out EXIT; \
	  DATABASE_URL='$(BENCH_DATABASE_URL)' $(BIN)/batchclaim bench --json $(BENCH_FLAGS) | tee $$out || exit 1; \
	  for w in $(RIVER_WORKERS); do \
	    jobs=$$(( w * 50 > $(RIVER_JOBS) ? w * 50 : $(RIVER_JOBS) )); \
	    (cd bench/river && DATABASE_URL='$(BENCH_DATABASE_URL)' $(GO) run . --workers $$w --jobs $$jobs) | tee -a $$out || exit 1; \
	  done; \
	  awk 'function rate(l) { match(l, /"jobs_per_second":[0-9.eE+-]+/); return substr(l, RSTART + 18, RLENGTH - 18) + 0 } \
	    /"scenario":"jobs"/ { j = rate($$0); match($$0, /"nodes":[0-9]+/); n = substr($$0, RSTART + 8, RLENGTH - 8); \
	      match($$0, /"workers_per_node":[0-9]+/); w = substr($$0, RSTART + 19, RLENGTH - 19) } \
	    /"scenario":"river"/ { r[++k] = rate($$0); match($$0, /"workers":[0-9]+/); rw[k] = substr($$0, RSTART + 10, RLENGTH - 10) } \
	    END { if (!j) exit; b = 0; for (i = 1; i <= k; i++) { \
	      printf "batchclaim jobs %.0f jobs/s (%d nodes x %d workers) / River %.0f jobs/s (%d workers) = %.2f\n", j, n, w, r[i], rw[i], j / r[i]; \
	      if (r[i] > r[b]) b = i } \
	      if (b) printf "against River'"'"'s best here (%d workers): %.2f\n", rw[b], j / r[b] }' $$out

.PHONY: test
test: ## Run every test with the race detector against a real Postgres (TEST_DATABASE_URL, else a throwaway local cluster)
	$(GO) test -race -count=1 -timeout 30m $(PKGS)

$(SQLC): tools/go.mod tools/go.sum
	cd tools && $(GO) build -o ../$(SQLC) github.com/sqlc-dev/sqlc/cmd/sqlc

.PHONY: generate
generate: $(SQLC) ## Regenerate internal/db from migrations/ and queries/ with the pinned sqlc
	$(SQLC) generate

.PHONY: verify
verify: $(SQLC) ## Check generated code, go.mod, formatting and vet
	@$(SQLC) diff || { echo 'internal/db is out of date with migrations/ and queries/: run make generate'; exit 1; }
	@$(GO) mod tidy -diff || { echo 'go.mod/go.sum are not tidy: run go mod tidy'; exit 1; }
	@out=$$(gofmt -l $$(git ls-files '*.go' | grep -v '^internal/db/')); \
	  if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)

.PHONY: lint
lint: verify ## Alias of verify (gofmt and go vet are the project's linters)
