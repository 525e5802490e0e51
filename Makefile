# latchkey — the commands the README promises:
#   make test   vet + every test with the race detector, integration included,
#               and the bench module's tests (test-bench)
#   make demo   a fleet of worker processes contending on one lock, pub/sub
#               vs spin, with a verdict of where pub/sub wins and pays
#   make bench  the benchmark suite against the other lock libraries and the
#               lock family's (familybench); writes docs/benchmarks.md and its
#               charts in docs/bench/
#   make test-faults   the fault-injection suite on its own (also part of
#               make test); prints one "FAULT <name>: ..." line per fault
#   make torture       the torture suite on its own (a short seeded run is
#               part of make test); TORTURE_DUR=10m make torture for long runs
#   make bench-watchdog  1,000,000 watchdog locks in one client beside two
#               CPU-burning processes (issue 21, defect 12); not part of make
#               bench: about 5 minutes and 4 GB of memory
# All install what they need first (redis-server from Debian's packages).

GO       ?= go
TESTFLAGS ?= -race -count=1 -timeout 25m
# BENCHFLAGS go to lockbench -suite (they are its defaults, written out).
# Budget, on the 2-core machine, per repetition (all runs interleaved):
#   scenarios a-e, 5 libraries at their defaults:   25 runs × 2s = 50s
#   sweep in c, d, e: latchkey-spin 3, redislock 3
#     and redsync 4 settings besides the defaults:   30 runs × 2s = 60s
#   f, idle waiting: baseline 2s + 5 runs × 4s                    = 22s
#   per-run overhead (spawn, warm-up, FLUSHALL, last holds),
#     measured 0.08s × 61 runs                                    ≈  5s
#   => about 137s; × 5 repetitions ≈ 11.4 min.
# g, the fleet, runs ONE repetition (-fleetreps 1, not 5) of 2s runs,
# each after a ramp of 0.5s that no figure counts:
#   5 libraries × 3 sizes (4, 16, 64 processes)   15 runs × 2.5s = 38s
#   starting 5 × (4 + 16 + 64) = 420 worker processes, most of it
#     in the 64-process runs (≈ 2.5s each on 2 cores)             ≈ 20s
#   => measured 53s for the whole of g on the shared machine before
#      the ramp, ≈ 61s with it                                     ≈ 1.0 min
# + the watchdog scale ≈ 10s, the market benchmark ≈ 1 min, the lock
#   family (below) ≈ 1 min and the builds and benchdoc ≈ 0.5 min: about
#   15.0 minutes, at the 15 allowed; a second repetition of g
#   would not fit. E.g. make bench BENCHFLAGS="-reps 7 -dur 5s -sweepdur 3s
#   -fleetreps 3" for steadier figures (longer).
BENCHFLAGS ?= -reps 5 -dur 2s -sweep 2ms,8ms,32ms,128ms -sweepdur 2s -idledur 4s -fleet 4,16,64 -fleetdur 2s -fleetramp 500ms -fleetreps 1
# FAMILYFLAGS go to familybench (its defaults, written out). Per repetition:
#   rw, RWMutex / SpinRWMutex / Mutex:  3 runs × 2s = 6s
#   semaphore, Semaphore / SpinSemaphore (8 permits, 4 × 16 contenders):
#                                       2 runs × 2s = 4s
#   per-run overhead (FLUSHALL, 4 clients, warm-up, last holds) ≈ 0.2s
#   => about 11s; × 5 repetitions ≈ 55s.
FAMILYFLAGS ?= -reps 5 -dur 2s -clients 4 -g 8 -semg 16 -size 8 -reads 0.95 -cs 100us

.PHONY: all test test-bench test-faults torture vet demo bench bench-watchdog fuzz setup redis-image clean-docker core-lines

all: test

# The library module keeps its go.mod to rueidis, uuid, the OpenTelemetry
# API and the test libraries; the CLI (cmd/latchkey) needs nothing more and lives in it, so
# that `go install …/cmd/latchkey@version` works (no replace directives).
# What needs more is a module of its own, tested here one by one:
# internal/latency (HdrHistogram), cmd/latchkey-demo (the OTel SDK and
# Prometheus), integration (Docker, toxiproxy, porcupine), miniredistest
# (the primitives on miniredis, no server) and bench (the peer libraries,
# test-bench).
MODULES := . internal/latency cmd/latchkey-demo integration miniredistest

test: setup vet test-bench
	@set -e; for m in $(MODULES); do echo "test: module $$m"; (cd $$m && $(GO) test $(TESTFLAGS) ./...); done

test-bench: setup
	cd bench && $(GO) vet ./... && $(GO) test -race -count=1 ./...

test-faults: setup
	cd integration && $(GO) test $(TESTFLAGS) -v -run '^TestFault' .

# torture runs TestTorture (integration/torture_test.go): processes ×
# goroutines × locks under injected faults, on standalone Redis and on the
# Cluster. TORTURE_DUR is each topology's workload time (default 8s, as in
# make test), TORTURE_SEED=n replays run n's schedule, TORTURE_COMPAT=1
# keeps to what the old handle-is-owner semantics support, and
# TORTURE_HISTORY=dir keeps each run's history as JSON lines.
TORTURE_TIMEOUT ?= 3h

torture: setup
	cd integration && $(GO) test -race -count=1 -timeout $(TORTURE_TIMEOUT) -v -run '^TestTorture' .

vet:
	@set -e; for m in $(MODULES); do (cd $$m && $(GO) vet ./...); done

demo: setup
	cd cmd/latchkey-demo && $(GO) run . $(DEMOFLAGS)

# fuzz runs every fuzz target (func FuzzXxx in a _test.go file) for FUZZTIME
# each, one at a time: go test takes one -fuzz target per run. Their seed
# corpora (testdata/fuzz) also run in every plain `go test`. New failures are
# written to the package's testdata/fuzz/FuzzXxx; commit them with the fix.
# Each target runs from its own module (the nearest go.mod above it).
FUZZTIME ?= 10s

fuzz:
	@set -e; for file in $$(grep -rl --include='*_test.go' '^func Fuzz' .); do \
		dir=$$(dirname $${file#./}); mod=$$dir; \
		while [ ! -f $$mod/go.mod ]; do mod=$$(dirname $$mod); done; \
		pkg=./$${dir#$$mod/}; [ "$$dir" != "$$mod" ] || pkg=.; \
		for target in $$(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' $$file); do \
			echo "fuzz: $$target in $$pkg of module $$mod for $(FUZZTIME)"; \
			(cd $$mod && $(GO) test -run '^$$' -fuzz "^$$target\$$" -fuzztime $(FUZZTIME) $$pkg); \
		done; \
	done

# bench runs the suite on a redis-server process it starts on loopback, the
# market benchmark when bench/market exists, the lock family on a
# redis-server of its own, and regenerates the document.
bench: setup
	mkdir -p bench/results
	cd bench && $(GO) run ./cmd/lockbench -suite -out results/lockbench.json $(BENCHFLAGS)
	if [ -d bench/market ]; then cd bench && $(GO) run ./market -json > results/market.json.tmp && mv results/market.json.tmp results/market.json; fi
	cd bench && $(GO) run ./cmd/familybench -out results/family.json $(FAMILYFLAGS)
	cd bench && $(GO) run ./cmd/benchdoc -in results/lockbench.json -market results/market.json -family results/family.json -doc ../docs/benchmarks.md -svg ../docs/bench -notes ../docs/bench/notes.md

# bench-watchdog runs bench/cmd/watchdogbench: it takes WDFLAGS' locks with
# the default watchdog (timeout 30s, interval 10s), measures 3 ticks and
# fails unless every renewal was confirmed before its lease's local deadline.
# docs/benchmarks.md ("Watchdog at 1,000,000 locks") quotes its figures.
WDFLAGS ?= -n 1000000 -ticks 3 -burners 2

bench-watchdog: setup
	cd bench && nice -n 10 $(GO) run ./cmd/watchdogbench $(WDFLAGS)

# setup installs redis-server and redis-cli when they are missing: the
# harness runs them as processes (always for Redis Cluster, and for
# standalone Redis when no Docker engine answers).
setup:
	@# Installing takes root: without it and without sudo, say what to do
	@# rather than fail on "sudo: not found".
	@if ! command -v redis-server >/dev/null 2>&1 || ! command -v redis-cli >/dev/null 2>&1; then \
		SUDO=; \
		if [ "$$(id -u)" -ne 0 ]; then \
			if ! command -v sudo >/dev/null 2>&1; then \
				echo "setup: redis-server or redis-cli is missing, and installing them takes root (there is no sudo): install redis-server 7.0 or newer and redis-cli by hand (Debian's redis-server and redis-tools packages, or redis.io's) and put them on PATH, or run make setup as root" >&2; \
				exit 1; \
			fi; \
			SUDO=sudo; \
		fi; \
		echo "setup: installing redis-server and redis-tools"; \
		$$SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -qq && $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server redis-tools >/dev/null; \
	else \
		echo "setup: redis-server and redis-cli found, nothing to install"; \
	fi
	@redis-server --version
	@# The Cluster suites need sharded pub/sub (Redis 7.0): fail here, not
	@# minutes later in a test (older distributions package Redis 6.0).
	@v=$$(redis-server --version | sed -n 's/.*v=\([0-9][0-9]*\)\..*/\1/p'); \
	if [ -z "$$v" ] || [ "$$v" -lt 7 ]; then \
		echo "setup: redis-server 7.0 or later is needed (found: $$(redis-server --version)); install it from redis.io's packages or put one first on PATH" >&2; \
		exit 1; \
	fi

# redis-image builds the Docker image the harness uses when redis:7 cannot
# be pulled (the harness would build it on first use anyway).
redis-image: setup
	cd integration && $(GO) run ./dockerredis/redis-image

# clean-docker removes containers left by a test binary that was killed.
clean-docker:
	-docker rm -f $$(docker ps -aq --filter label=org.latchkey.redistest) 2>/dev/null

# core-lines counts the lock core: rlock's and internal/luascripts' non-test
# Go and the Lua scripts, every line (docs/design.md quotes the figure).
core-lines:
	@go=$$(ls rlock/*.go internal/luascripts/*.go | grep -v '_test.go$$' | xargs cat | wc -l); \
	lua=$$(cat internal/luascripts/*.lua | wc -l); \
	echo "lock core: $$((go + lua)) lines ($$go Go, $$lua Lua)"
