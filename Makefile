# verbsrt: `make test` is the full check, and the one command CI runs.

GO       ?= go
FUZZTIME ?= 30s

.PHONY: test lint fmt vet staticcheck race allocs race-1p race-actor-only stress modules fuzz demo test-rxe test-rxe-2host metrics-check

# Modules of their own, beside the main one: their tests need modules the
# library's users must not inherit (gRPC, golang.org/x/net's nettest).
MODULES := examples/rdmanet

# The full check: formatting, vet, staticcheck, then every test under the
# race detector, the allocation tests without it, the concurrency core's
# tests again on one P and the runtime's again without its caller-thread
# defaults; then the same for each module of MODULES.
test: lint race allocs race-1p race-actor-only modules

# The static checks only.
lint: fmt vet staticcheck

fmt:
	@files="$$(gofmt -l .)"; \
	if [ -n "$$files" ]; then \
		echo "gofmt -l: these files need gofmt -w:"; echo "$$files"; exit 1; \
	fi

# vet and staticcheck run twice: the second time with the lockrank tag,
# so the files that build only with it are checked too.
vet:
	$(GO) vet ./...
	$(GO) vet -tags lockrank ./...

# staticcheck is pinned by the tool directive in go.mod.
staticcheck:
	$(GO) tool staticcheck ./...
	$(GO) tool staticcheck -tags lockrank ./...

# The race targets build with the lockrank tag: every ranked mutex
# (internal/lockrank) then panics on a Lock out of the module's lock
# order, so each test that runs a chain of locks checks the order too.
race:
	$(GO) test -race -tags lockrank -count=1 -timeout 30m ./...

# The tests that count allocations, without the race detector, which
# empties sync.Pools at random.
allocs:
	$(GO) test -count=1 -run 'Allocs|AllocatesNothing' ./runtime/ ./qpactor/ ./internal/...

# The actor, poller and runtime tests with GOMAXPROCS=1: spin slots, actors
# that drive their own CQ and yielding pollers must make progress where no
# second P exists to spin on, and a test must not assume one.
race-1p:
	GOMAXPROCS=1 $(GO) test -race -count=1 -timeout 30m ./qpactor/ ./cqpoller/ ./runtime/

# The runtime's tests with Tuning.NoInlinePost and Tuning.NoWaitPoll on
# every runtime they make (runtime/helpers_test.go): posting and
# completion handling only on actor and poller goroutines must keep every
# behaviour they check too.
race-actor-only:
	VERBSRT_TEST_ACTOR_ONLY=1 $(GO) test -race -tags lockrank -count=1 -timeout 30m ./runtime/...

# The race-1p and race-actor-only targets beside one CPU burner per core,
# three times in a row: a test that depends on how a busy machine
# schedules its goroutines fails here, as it would for a user whose
# machine is doing other work.
STRESS_ROUNDS ?= 3
stress:
	@set -e; burners=""; \
	trap 'kill $$burners 2>/dev/null || true' EXIT HUP INT PIPE TERM; \
	for i in $$(seq "$$(getconf _NPROCESSORS_ONLN)"); do \
		( while :; do :; done ) & burners="$$burners $$!"; \
	done; \
	for round in $$(seq $(STRESS_ROUNDS)); do \
		echo "== stress round $$round of $(STRESS_ROUNDS), beside $$(echo $$burners | wc -w) CPU burners"; \
		$(MAKE) --no-print-directory race-1p race-actor-only; \
	done

# Each module of MODULES: tidy, vet, staticcheck (its own tool directive)
# and its tests under the race detector.
modules:
	@set -e; for m in $(MODULES); do \
		echo "== $$m"; \
		(cd $$m && $(GO) mod tidy -diff && $(GO) vet ./... && $(GO) tool staticcheck ./... && \
			$(GO) test -race -count=1 -timeout 20m ./...); \
	done

# Runs every fuzz target of every package for FUZZTIME each.
fuzz:
	@set -e; \
	for pkg in $$($(GO) list ./...); do \
		targets="$$($(GO) test -list '^Fuzz' "$$pkg")"; \
		for target in $$(printf '%s\n' "$$targets" | sed -n 's/^\(Fuzz[A-Za-z0-9_]*\)$$/\1/p'); do \
			echo "== $$pkg $$target ($(FUZZTIME))"; \
			$(GO) test -run '^$$' -fuzz "^$$target\$$" -fuzztime $(FUZZTIME) "$$pkg"; \
		done; \
	done

# The observability checks, failing (not skipping) without Debian's
# prometheus package: promtool check metrics on a scrape of serve-metrics,
# a real Prometheus on loopback scraping examples/metrics and answering a
# query for the WRITEs posted, and the Grafana dashboard's queries. `make
# race` runs the same tests, which .ci/run makes required.
metrics-check:
	VERBSRT_REQUIRE_PROMETHEUS=1 $(GO) test -race -count=1 -run 'ServeMetrics|Prometheus|Dashboard' ./cmd/verbsrt/ ./examples/metrics/

# Runs the main job on the soft provider.
demo:
	$(GO) run ./cmd/verbsrt demo

# Runs, in one throwaway QEMU guest with the kernel's Soft-RoCE driver: the
# verbs/ibv tests (the conformance suite, rdma_cm and rping among them), the
# runtime's tests on the ibv provider, and verbsrt pingpong against rdma-core's
# ibv_rc_pingpong both ways. Needs root and Debian's packages, which it
# installs; see verbs/ibv/rxevm/README.md.
test-rxe:
	verbs/ibv/rxevm/test-rxe

# Runs, in two throwaway QEMU guests with one Soft-RoCE device each, joined
# by a virtual wire: ibv_rc_pingpong from one to the other, verbsrt pingpong
# against it both ways and from either side, and rping. Needs root, like
# test-rxe; see "Two hosts" in verbs/ibv/rxevm/README.md.
test-rxe-2host:
	verbs/ibv/rxevm/test-rxe-2host
