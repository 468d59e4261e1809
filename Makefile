# One task runner; the README and .ci/run use these targets.
#   make render   - haptic's main job on the example cluster (no cluster needed)
#   make test     - everything CI checks: format, lints, unit/fixture/sandbox tests, the end-to-end test bed
SHELL := bash
CARGO ?= cargo
GUEST_PACKAGES := -p haptic-sdk -p haptic-base -p haptic-ingress -p haptic-kubernetes-backends \
	-p haptic-status-patches-150-pod-readiness-gate -p maintenance-mode -p source-allow-list
# Where the host's build script puts the template libraries.
TARGET_DIR := $(or $(CARGO_TARGET_DIR),target)
EXAMPLE_WASM := $(TARGET_DIR)/guests/wasm32-wasip2/guest/maintenance_mode.wasm

.PHONY: build render run test lint unit-test fixtures new-library-test e2e-test chart-test testbed-binaries testbed-up bench bench-agent bench-controller bench-scale setup

# A new user's first command must do its own set-up: the pinned toolchain may
# already be installed without the wasm target (rustup adds the targets of
# rust-toolchain.toml only when it installs the toolchain), and haproxy is
# needed to validate every render.
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
setup:
	@command -v haproxy >/dev/null || [ -x /usr/sbin/haproxy ] || { $(SUDO) apt-get update -qq && $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq haproxy; }
	@rustup target list --installed | grep -qx wasm32-wasip2 || rustup target add wasm32-wasip2

build:
	$(CARGO) build

render: setup build
	$(CARGO) run -q -- render examples/cluster

# haptic's main job on this machine: the controller on examples/cluster (edit
# its files and watch them redeploy), two local HAProxy instances with their
# agents, an echo server behind every endpoint, the readiness gate on.
run: setup build
	$(CARGO) run -q -- run examples/cluster --demo-backends --proxies 2 \
		--set templateLibraries.kubernetesBackends.podReadinessGate.enabled=true

lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings
	$(CARGO) clippy --target wasm32-wasip2 $(GUEST_PACKAGES) -p haptic-misbehaving -- -D warnings

unit-test:
	$(CARGO) test -p haptic --no-fail-fast
	$(CARGO) test $(GUEST_PACKAGES) --no-fail-fast

# The example custom library's fixtures, run the way its README tells an author
# to (`make unit-test` runs them too, through the same code, without a second
# build of the binary).
fixtures: build
	$(CARGO) run -q -- test $(EXAMPLE_WASM) --fixtures examples/maintenance-mode/fixtures

# What a new author does, outside the repository: `haptic new` into a fresh
# temporary directory, then the project's own `make test lint` (its build,
# unit tests and fixtures). Its target directory is separate from the
# workspace's (and kept, so a second run is warm).
new-library-test: build
	@dir=$$(mktemp -d) && trap 'rm -rf "$$dir"' EXIT && \
	$(CARGO) run -q -- new "$$dir/ip-allow-list" && \
	env CARGO_TARGET_DIR=$(abspath $(TARGET_DIR))/new-library $(MAKE) -C "$$dir/ip-allow-list" test lint

testbed-binaries:
	bash tests/testbed/scripts/build-binaries.sh

# The HAProxy pods run the local `haptic` binary (image haptic.test/haptic).
e2e-test: testbed-binaries
	$(CARGO) build -p haptic --bin haptic
	$(CARGO) test -p haptic-testbed --no-fail-fast -- --test-threads=2

# helm lint/template with assertions on the rendered objects (helm is built
# once through the Go module proxy, cached in ~/.cache/haptic).
chart-test:
	bash charts/haptic/tests/run.sh

test: setup lint unit-test new-library-test chart-test e2e-test

testbed-up: testbed-binaries
	$(CARGO) run -p haptic-testbed --bin control-plane-up

bench:
	$(CARGO) bench -p haptic --bench render

bench-agent:
	$(CARGO) bench -p haptic --bench agent

# Gate latency and endpoint flips on the test bed (two HAProxy pods).
bench-controller: testbed-binaries
	$(CARGO) build --release -p haptic --bin haptic
	HAPTIC_BIN=$(TARGET_DIR)/release/haptic $(CARGO) bench -p haptic-testbed --bench controller

# TestScale: seed, one Ingress change -> deployed, controller memory.
bench-scale: testbed-binaries
	$(CARGO) build --release -p haptic --bin haptic
	HAPTIC_BIN=$(TARGET_DIR)/release/haptic $(CARGO) bench -p haptic-testbed --bench scale
