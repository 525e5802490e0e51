# latchkey — the two commands the README promises:
#   make test   vet + every test with the race detector, integration included
#   make demo   worker processes contending on one lock, pub/sub vs spin
# Both install what they need first (redis-server from Debian's packages).

GO       ?= go
TESTFLAGS ?= -race -count=1 -timeout 25m

.PHONY: all test vet demo setup redis-image clean-docker

all: test

test: setup vet
	$(GO) test $(TESTFLAGS) ./...

vet:
	$(GO) vet ./...

demo: setup
	$(GO) run ./cmd/latchkey-demo $(DEMOFLAGS)

# setup installs redis-server and redis-cli when they are missing: the
# harness runs them as processes (always for Redis Cluster, and for
# standalone Redis when no Docker engine answers).
setup:
	@if ! command -v redis-server >/dev/null 2>&1 || ! command -v redis-cli >/dev/null 2>&1; then \
		echo "setup: installing redis-server and redis-tools"; \
		SUDO=; [ "$$(id -u)" -eq 0 ] || SUDO=sudo; \
		$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq redis-server redis-tools >/dev/null; \
	fi
	@redis-server --version

# redis-image builds the Docker image the harness uses when redis:7 cannot
# be pulled (the harness would build it on first use anyway).
redis-image: setup
	$(GO) run ./integration/redistest/redis-image

# clean-docker removes containers left by a test binary that was killed.
clean-docker:
	-docker rm -f $$(docker ps -aq --filter label=org.latchkey.redistest) 2>/dev/null
