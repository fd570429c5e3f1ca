# Portcullis — developer entry points. `make help` lists the targets.
#
# `make test` is the one command a newcomer runs: it installs the Node test
# tools it needs (Node 22, the MCP conformance suite, the MCP Inspector) into
# .cache/node-tools, then runs every Go test, end-to-end tests included.

SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

GO       ?= go
BIN      ?= bin/portcullis
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
REVISION ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
LDFLAGS  := -s -w -X main.version=$(VERSION) -X main.revision=$(REVISION)

# The node tools' folder; the e2e tests read the same variable. It is
# exported only to the targets that use it: the server treats every
# PORTCULLIS_* variable as a config key and rejects unknown ones.
PORTCULLIS_NODE_TOOLS ?= $(CURDIR)/.cache/node-tools
tools test e2e: export PORTCULLIS_NODE_TOOLS := $(PORTCULLIS_NODE_TOOLS)

# GOTESTFLAGS adds flags to the test targets, e.g. make e2e GOTESTFLAGS='-v -run Conformance'.
GOTESTFLAGS ?=

.PHONY: help build run test e2e tools vet clean obs-tools obs-check

help: ## List the targets.
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z0-9_-]+:.*## / {printf "  %-12s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

build: ## Build bin/portcullis, stamped with the git version and revision.
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/server

run: ## Run the server in dev mode (go run ./cmd/server serve --dev).
	$(GO) run ./cmd/server serve --dev

tools: ## Install Node 22, the MCP conformance suite, the MCP Inspector and the e2e OpenID provider into .cache/node-tools.
	bash scripts/install-node-tools.sh

test: tools ## Install the test tools, then run every test with the race detector.
	rm -f results/conformance.txt
	$(GO) test -race -count=1 $(GOTESTFLAGS) ./...
	@echo "MCP conformance suite (one portcullis process):"; cat results/conformance.txt 2>/dev/null || echo "  (not run by this selection of tests)"

e2e: tools ## Run only the end-to-end tests (./e2e/...).
	$(GO) test -race -count=1 $(GOTESTFLAGS) ./e2e/...

obs-tools: ## Install Prometheus and promtool, build the OpenTelemetry Collector into .cache/bin, install @grafana/schema and TypeScript.
	bash scripts/install-prometheus.sh
	bash scripts/install-otelcol.sh
	bash scripts/install-grafana-schema.sh

obs-check: ## Check the alert rules (promtool check rules, promtool test rules) and type-check the Grafana dashboard.
	@command -v promtool >/dev/null || { echo "promtool not found: run make obs-tools" >&2; exit 1; }
	promtool check rules helm/portcullis/files/alerts.yaml
	cd helm/portcullis/files && promtool test rules alerts_test.yaml
	bash scripts/check-dashboard.sh

vet: ## Run go vet on every package.
	$(GO) vet ./...

clean: ## Remove build output, test results and the node tools cache.
	rm -rf bin results .cache

# The load harness (bench/loadtest) and its reference server, a bare SDK
# handler. BENCHFLAGS adds harness flags, e.g. BENCHFLAGS='-duration 5s -concurrency 16'.
BENCHFLAGS ?=
.PHONY: bench bench-bin bench-smoke bench-go
LOADTEST := bin/loadtest -portcullis $(BIN) -refserver bin/refserver

bench-bin: build
	$(GO) build -o bin/refserver ./bench/loadtest/refserver
	$(GO) build -o bin/loadtest ./bench/loadtest

bench: bench-bin ## Load-test the built binary (full stack) against the bare SDK, unpinned then pinned; writes results/bench.md and results/bench-pinned.md.
	$(LOADTEST) $(BENCHFLAGS)
	$(LOADTEST) -pin $(BENCHFLAGS)

bench-smoke: bench-bin ## Run the load harness for a few hundred requests per row (seconds); fails on any wrong response.
	$(LOADTEST) -smoke $(BENCHFLAGS)

bench-go: ## Run the Go benchmarks briefly (100 iterations each), with allocations.
	$(GO) test -run '^$$' -bench . -benchmem -benchtime 100x ./auth/... ./mcp/... ./observability/... ./cmd/...
