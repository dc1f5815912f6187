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

.PHONY: chaos
chaos: build ## Long chaos runs at several seeds on a throwaway cluster (CHAOS_SEEDS, CHAOS_DURATION); stops at the first violation
	@for s in $(CHAOS_SEEDS); do \
	  echo "== batchclaim chaos --seed $$s --duration $(CHAOS_DURATION)"; \
	  env -u DATABASE_URL $(BIN)/batchclaim chaos --seed $$s --duration $(CHAOS_DURATION) || exit 1; \
	done

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
