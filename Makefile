# One task runner; the README and .ci/run use these targets.
#   make render   - haptic's main job on the example cluster (no cluster needed)
#   make test     - everything CI checks: format, lints, unit/fixture/sandbox tests, the end-to-end test bed
SHELL := bash
CARGO ?= cargo
# A test that returns an error (anyhow) prints it without a backtrace, so its
# message is the last thing in a log's tail (a CI report shows the tail);
# panics keep theirs (RUST_BACKTRACE).
RUST_LIB_BACKTRACE ?= 0
export RUST_LIB_BACKTRACE
# The bundled libraries are listed once, in template-libraries/bundled.txt.
BUNDLED_LIBRARIES := $(shell grep -v '^\#' template-libraries/bundled.txt)
GUEST_PACKAGES := -p haptic-sdk $(addprefix -p haptic-,$(BUNDLED_LIBRARIES)) -p maintenance-mode -p source-allow-list -p basic-auth
# Where the host's build script puts the template libraries.
TARGET_DIR := $(or $(CARGO_TARGET_DIR),target)
EXAMPLE_WASM := $(TARGET_DIR)/guests/wasm32-wasip2/guest/maintenance_mode.wasm

.PHONY: test-stages build-lane go-lane e2e-scenarios e2e-suites e2e-go-builds clippy-build image image-setup image-test build render run test e2e-run e2e-lane checks-lane lint unit-test fixtures new-library-test new-python-library-test python-guests python-test bench-python e2e-test chart-test testbed-binaries testbed-node-setup testbed-images gateway-conformance-binaries gateway-conformance-images gateway-conformance gateway-rollout-test ingress-conformance-images ingress-conformance oauth2-images e2e-oauth2 testbed-up testbed-node-up bench bench-isolation bench-agent bench-spoa bench-fanout bench-gateway bench-controller bench-scale setup

# A new user's first command must do its own set-up: the pinned toolchain may
# already be installed without the wasm target (rustup adds the targets of
# rust-toolchain.toml only when it installs the toolchain), and HAProxy 3.0 is
# needed to validate every render: the image's own (Debian trixie's package),
# made runnable here by image/host-haproxy.sh and cached outside the checkout
# by version. Every target runs it; a HAPTIC_HAPROXY of your own wins.
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
HAPTIC_HAPROXY_CACHE ?= $(HOME)/.cache/haptic/haproxy
export HAPTIC_HAPROXY_CACHE
export HAPTIC_HAPROXY ?= $(HAPTIC_HAPROXY_CACHE)/current/haproxy
setup:
	@[ -x "$(HAPTIC_HAPROXY)" ] || bash image/host-haproxy.sh >/dev/null
	@echo "HAProxy for validation: $$("$(HAPTIC_HAPROXY)" -v | head -1) ($(HAPTIC_HAPROXY))"
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

# Clippy on the workspace's own crates runs inside their build:
# clippy-driver stands in for rustc on workspace members only
# (RUSTC_WORKSPACE_WRAPPER), compiles exactly what rustc would and adds
# clippy's lints, so a lint costs no second build of the dependencies (a
# separate `cargo clippy` type-checked every one of them again: 18 min of a
# cold CI run). Its artifacts sit beside plain rustc's in the target dir
# (another metadata hash), so switching between `cargo test` and `make test`
# rebuilds nothing twice. CLIPPY_ARGS is how cargo-clippy hands its
# `-- -D warnings` to the driver. `make test` builds everything this way.
CLIPPY_DRIVER := $(shell rustup which clippy-driver 2>/dev/null || command -v clippy-driver)
LINTING_CARGO := env RUSTC_WORKSPACE_WRAPPER=$(CLIPPY_DRIVER) CLIPPY_ARGS=-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__ HAPTIC_LINT_GUESTS=1 cargo
# The wasm guests (every library, the SDK, the examples and the test guests)
# are linted the same way inside their own wasm32 build, which the host's
# build script runs: HAPTIC_LINT_GUESTS=1 keeps the driver there (a separate
# `cargo clippy --target wasm32-wasip2` type-checked all their dependencies
# again: 3.5 min of a cold CI run).
lint: clippy-build
	cargo fmt --all -- --check
	$(CARGO) test -q -p haptic --features synthetic --test module_tree

# Every target of every member, built (not run) with clippy's lints, in the
# package sets the tests use: cargo unifies features per invocation, and one
# `--workspace` build would compile wasmtime and the wasm tooling again with
# the guests' features (6 min warm).
REST_PACKAGES := $(GUEST_PACKAGES) -p haptic-selectors -p haptic-misbehaving -p haptic-contract-0-2-0 \
	-p haptic-owned-objects -p haptic-render-floor
clippy-build:
	@[ -n "$(CLIPPY_DRIVER)" ] || { echo "clippy-driver not found: rustup component add clippy" >&2; exit 1; }
	$(LINTING_CARGO) test -p haptic --features synthetic --all-targets --no-run
	$(LINTING_CARGO) test $(REST_PACKAGES) --all-targets --no-run
	$(LINTING_CARGO) test -p haptic-testbed --all-targets --no-run

unit-test:
	$(CARGO) test -p haptic --features synthetic --no-fail-fast
	$(CARGO) test $(REST_PACKAGES) --no-fail-fast

# The example custom library's fixtures, run the way its README tells an author
# to (`make unit-test` runs them too, through the same code, without a second
# build of the binary).
fixtures: build
	$(CARGO) run -q -- test $(EXAMPLE_WASM) --fixtures examples/maintenance-mode/fixtures

# What a new author does, outside the repository: `haptic new` into a fresh
# temporary directory, then the project's own `make test` (its native unit
# tests, its wasm32 build and its fixtures) and its lint. The lint is the
# project's `make lint` made cheaper: clippy's driver stands in for rustc in
# `make test`'s two builds (LINTING_CARGO), which lints exactly what
# `cargo clippy --all-targets` and `cargo clippy --target wasm32-wasip2`
# would without type-checking every dependency twice more (3.4 min of a cold
# CI run), then its rustfmt check. Its target directory is separate from the
# workspace's (and kept, so a second run is warm).
# Its passing fixtures log no WARN (a missing Service, say): a new author
# would take it for a problem of their own.
no_warn = if grep ' WARN ' "$(1)"; then echo "the scaffolded project's make test logged a WARN (above)" >&2; exit 1; fi
new-library-test: build
	@dir=$$(mktemp -d) && trap 'rm -rf "$$dir"' EXIT && set -o pipefail && \
	$(CARGO) run -q -- new "$$dir/ip-allow-list" && \
	env CARGO_TARGET_DIR=$(abspath $(TARGET_DIR))/new-library $(MAKE) -C "$$dir/ip-allow-list" test CARGO='$(LINTING_CARGO)' 2>&1 | tee "$$dir/log" && \
	(cd "$$dir/ip-allow-list" && cargo fmt -- --check) && \
	$(call no_warn,$$dir/log)

# Template libraries in Python: componentize-py (pinned) is installed once
# into a venv outside the checkout; the SDK is template-libraries/sdk-python,
# the contract wit/haptic-template@0.3.0.
COMPONENTIZE_PY_VERSION := 0.25.1
COMPONENTIZE_PY_VENV := $(HOME)/.cache/haptic/componentize-py-$(COMPONENTIZE_PY_VERSION)
COMPONENTIZE_PY := $(COMPONENTIZE_PY_VENV)/bin/componentize-py
PYTHON_SDK := template-libraries/sdk-python
PYTHON_WIT := wit/haptic-template@0.3.0
PYTHON_GUESTS := $(abspath $(TARGET_DIR))/guests/python
PYTHON_EXAMPLE_WASM := $(PYTHON_GUESTS)/maintenance_mode_python.wasm
PYTHON_DEPS := $(wildcard $(PYTHON_SDK)/haptic_sdk/*.py $(PYTHON_WIT)/*.wit) | $(COMPONENTIZE_PY)
# $(1): the app module, $(2): its directory.
componentize = @mkdir -p $(@D) && echo "componentize-py: $(1) -> $@" && \
	$(COMPONENTIZE_PY) -q -d $(PYTHON_WIT) -w template-library componentize $(1) -p $(2) -p $(PYTHON_SDK) -o $@

$(COMPONENTIZE_PY):
	@python3 -m venv $(COMPONENTIZE_PY_VENV) || { echo "python3 -m venv failed: install Python 3 with venv (Debian: apt-get install python3-venv)" >&2; exit 1; }
	$(COMPONENTIZE_PY_VENV)/bin/pip install -q componentize-py==$(COMPONENTIZE_PY_VERSION)

$(PYTHON_EXAMPLE_WASM): examples/maintenance-mode-python/maintenance_mode.py $(PYTHON_DEPS)
	$(call componentize,maintenance_mode,examples/maintenance-mode-python)

$(PYTHON_GUESTS)/misbehaving_python.wasm: template-libraries/misbehaving-python/misbehaving_python.py $(PYTHON_DEPS)
	$(call componentize,misbehaving_python,template-libraries/misbehaving-python)

python-guests: $(PYTHON_EXAMPLE_WASM) $(PYTHON_GUESTS)/misbehaving_python.wasm

# The same for `haptic new --lang python`: its own `make test` (unit tests,
# componentize-py build, fixtures with traffic through the real HAProxy),
# without a WARN. 30-100 s on 2 busy cores: ~20-30 s componentize-py, then
# ~30 s compiling the component when wasmtime's cache misses (two builds
# of the same project in different directories gave different bytes).
new-python-library-test: build | $(COMPONENTIZE_PY)
	@dir=$$(mktemp -d) && trap 'rm -rf "$$dir"' EXIT && set -o pipefail && \
	$(CARGO) run -q -- new --lang python "$$dir/ip-allow-list" && \
	$(MAKE) -C "$$dir/ip-allow-list" test COMPONENTIZE_PY_VENV=$(COMPONENTIZE_PY_VENV) CARGO=cargo 2>&1 | tee "$$dir/log" && \
	$(call no_warn,$$dir/log)

# The Python SDK's and example's unit tests (native Python), the example's
# fixtures run the way its README tells an author to, and the sandbox
# (deadline, memory cap, recovery) on Python components.
# No __pycache__ in the checkout (it would also re-run the host's build script);
# the tests share the CLI's compile cache, so CI compiles each component once.
python-test: export PYTHONDONTWRITEBYTECODE := 1
python-test: export PYTHONPATH := $(PYTHON_SDK)
python-test: python-guests build
	python3 -m unittest discover -s $(PYTHON_SDK)/tests -t $(PYTHON_SDK)
	python3 -m unittest discover -s examples/maintenance-mode-python/tests
	$(CARGO) run -q -- test $(PYTHON_EXAMPLE_WASM) --fixtures examples/maintenance-mode-python/fixtures
	HAPTIC_PYTHON_GUESTS=$(PYTHON_GUESTS) HAPTIC_CACHE_DIR=$(or $(HAPTIC_CACHE_DIR),$(HOME)/.cache/haptic) \
		$(CARGO) test -p haptic --features synthetic --test python --no-fail-fast -- --include-ignored

# Size, load and render cost of the Python example against the Rust one.
bench-python: python-guests
	HAPTIC_PYTHON_GUESTS=$(PYTHON_GUESTS) $(CARGO) bench -p haptic --bench python

testbed-binaries:
	bash tests/testbed/scripts/build-binaries.sh

# The bed's real node: containerd + runc, the CNI plugins (bridge,
# host-local, loopback), iptables and conntrack for kube-proxy, gcc for the
# pause image, curl for the tools image. Debian packages; see DESIGN.md section 5.
NODE_TOOLS := containerd:containerd ctr:containerd runc:runc /usr/lib/cni/bridge:containernetworking-plugins \
	iptables:iptables conntrack:conntrack gcc:gcc umoci:umoci curl:curl
testbed-node-setup:
	@missing=$$(for pair in $(NODE_TOOLS); do command -v $${pair%%:*} >/dev/null || [ -x $${pair%%:*} ] || echo $${pair##*:}; done | sort -u); \
	[ -z "$$missing" ] || { $(SUDO) apt-get update -qq && $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing; }

# The Gateway API conformance suite (`go test -c`) with its echo-basic and the
# bed's DNS stand-in, built once per suite release into ~/.cache/haptic-testbed.
gateway-conformance-binaries:
	bash tests/testbed/scripts/build-gateway-conformance.sh

# The real node's images (pause, the echo server) as OCI archives in
# $(TARGET_DIR)/testbed-images, where the bed imports them from;
# gateway-conformance-images adds the conformance suite's echo-basic and DNS
# (a build of the suite, which `make test` does not need yet).
TESTBED_IMAGES := $(TARGET_DIR)/testbed-images
# The echo server comes from the test bed's test build: the package selection
# `make e2e-test` builds next, so every dependency compiles once. A
# `cargo build --bin echo-server` alone resolves fewer features of tokio, syn,
# serde_json and more, and compiled 76 crates a second time (3 min cold).
ECHO_SERVER = $(CARGO) test -p haptic-testbed --no-run
testbed-images: testbed-node-setup testbed-binaries
	$(ECHO_SERVER)
	bash tests/testbed/scripts/build-node-images.sh $(TARGET_DIR)/debug/echo-server $(TESTBED_IMAGES)

gateway-conformance-images: testbed-node-setup testbed-binaries
	$(ECHO_SERVER)
	suite=$$(bash tests/testbed/scripts/build-gateway-conformance.sh) && \
	bash tests/testbed/scripts/build-node-images.sh $(TARGET_DIR)/debug/echo-server $(TESTBED_IMAGES) "$$suite"

# The image: haptic:<version> as an OCI archive built from Debian packages
# (mmdebstrap + umoci, no registry, no container engine), loaded into the
# local containerd (namespace k8s.io, what a kubelet uses) or podman when one
# runs. image/build.sh says what goes in.
IMAGE_NAME := localhost/haptic
IMAGE_VERSION := $(shell sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)
IMAGE_ARCHIVE := $(TARGET_DIR)/image/haptic-$(IMAGE_VERSION).oci.tar
IMAGE_TOOLS := mmdebstrap:mmdebstrap umoci:umoci containerd:containerd ctr:containerd runc:runc
image-setup:
	@missing=$$(for pair in $(IMAGE_TOOLS); do command -v $${pair%%:*} >/dev/null || echo $${pair##*:}; done | sort -u); \
	[ -z "$$missing" ] || { $(SUDO) apt-get update -qq && $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing; }

# The binary's cargo profile: release for what users run. CI sets
# IMAGE_PROFILE=dev: the image test proves the image's layout and behaviour,
# and the dev binary is already built, where a cold release build would
# compile every dependency a second time (about 13 min on 2 cores).
IMAGE_PROFILE ?= release
IMAGE_BIN := $(TARGET_DIR)/$(if $(filter dev,$(IMAGE_PROFILE)),debug,$(IMAGE_PROFILE))/haptic
image: setup image-setup
	$(CARGO) build --profile $(IMAGE_PROFILE) -p haptic --bin haptic
	$(SUDO) env IMAGE_NAME=$(IMAGE_NAME) bash image/build.sh $(IMAGE_BIN) $(IMAGE_ARCHIVE) $(IMAGE_VERSION)
	@if [ -S /run/containerd/containerd.sock ]; then \
		$(SUDO) ctr -n k8s.io images import $(IMAGE_ARCHIVE) && echo "loaded into containerd (namespace k8s.io)"; \
	elif command -v podman >/dev/null; then podman load -i $(IMAGE_ARCHIVE); \
	else echo "no local container runtime to load into: kind load image-archive $(IMAGE_ARCHIVE), or see README.md"; fi

# The image under a private containerd with runc: versions, no shell, the
# precompiled libraries, the HAProxy pod's pair as the chart runs it, traffic
# and the preStop soft stop.
image-test: image
	$(SUDO) python3 image/test.py $(IMAGE_ARCHIVE)

# Every scenario runs its pods on the real node, containers from
# testbed-images and the image `make image` built (make test builds it first,
# in image-test); controllers the scenarios run on the host use the local
# `haptic` binary.
# The ignored real-node tests of node_gateway, by name filter.
NODE_GATEWAY_TEST = $(CARGO) test -p haptic-testbed --test node_gateway -- --ignored
e2e-test: testbed-binaries testbed-images gateway-conformance-images
	$(MAKE) --no-print-directory e2e-run

# The end-to-end tests themselves, once what they need is built: the test
# bed's scenarios, then the suites that bring their own Go builds.
e2e-run: e2e-scenarios e2e-suites

e2e-scenarios:
	$(CARGO) build -p haptic --bin haptic
	$(CARGO) test -p haptic-testbed --no-fail-fast -- --test-threads=2

e2e-suites: gateway-conformance-images
	# The whole Gateway API suite, both profiles (make gateway-conformance commits the report;
	# this one stays in the target dir).
	HAPTIC_GATEWAY_PROFILES=$(HAPTIC_GATEWAY_PROFILES) HAPTIC_GATEWAY_CONFORMANCE=all \
	HAPTIC_GATEWAY_REPORT_DIR=$(TARGET_DIR)/gateway-conformance \
		$(NODE_GATEWAY_TEST) conformance --nocapture
	# The gated rollout behind an HTTPRoute (about 2 min; the image is image-test's).
	$(NODE_GATEWAY_TEST) gated_rollouts --nocapture
	# External authentication through a real oauth2-proxy (about 30 s); its images are built
	# once per release (about 2.5 min cold, through the Go module proxy).
	$(MAKE) --no-print-directory oauth2-images
	$(E2E_OAUTH2_TEST)

# The Go builds only the suites need (the Gateway API suite, oauth2-proxy and its OIDC stand-in,
# once per release into caches), at nice 19 beside the scenarios in CI's end-to-end lane: they
# take the cores the scenarios leave while those wait on the node.
e2e-go-builds:
	nice -n 19 bash tests/testbed/scripts/build-gateway-conformance.sh >/dev/null
	nice -n 19 bash tests/testbed/scripts/build-oauth2.sh >/dev/null

# The whole Gateway API conformance suite (profiles GATEWAY-HTTP and GATEWAY-GRPC, the release
# tests/testbed/gateway-conformance pins) against the chart with the
# gateway-api library on the real node; the report goes to docs/conformance/.
# `make e2e-test` runs all of it too, its report in the target dir.
# Both profiles the library serves; HAPTIC_GATEWAY_PROFILES=GATEWAY-HTTP runs one.
HAPTIC_GATEWAY_PROFILES ?= GATEWAY-HTTP,GATEWAY-GRPC
gateway-conformance: testbed-binaries gateway-conformance-images image
	HAPTIC_GATEWAY_PROFILES=$(HAPTIC_GATEWAY_PROFILES) HAPTIC_GATEWAY_CONFORMANCE=all $(NODE_GATEWAY_TEST) conformance --nocapture

# A gated single-replica rollout behind an HTTPRoute on the real node (10
# restarts under load, the gate checked against every HAProxy worker); also
# part of `make e2e-test`.
gateway-rollout-test: testbed-binaries gateway-conformance-images image
	$(NODE_GATEWAY_TEST) gated_rollouts --nocapture

# The upstream Ingress conformance suite (kubernetes-sigs/ingress-controller-conformance, its
# features/*.feature) against the chart with its default values on the real node; the report
# goes to docs/conformance/. No module proxy serves the suite: the first build needs a clone,
#   HAPTIC_INGRESS_CONFORMANCE_SRC=/path/to/ingress-controller-conformance make ingress-conformance
# and is cached in ~/.cache/haptic-testbed (tests/testbed/scripts/build-ingress-conformance.sh).
ingress-conformance-images: testbed-node-setup testbed-binaries
	$(ECHO_SERVER)
	suite=$$(bash tests/testbed/scripts/build-ingress-conformance.sh) && \
	INGRESS_CONFORMANCE_DIR="$$suite" bash tests/testbed/scripts/build-node-images.sh $(TARGET_DIR)/debug/echo-server $(TESTBED_IMAGES)

ingress-conformance: testbed-binaries ingress-conformance-images image
	HAPTIC_CONFORMANCE_REPORT_DIR=$(CURDIR)/docs/conformance $(CARGO) test -p haptic-testbed --test node_ingress -- --ignored --nocapture

# External authentication (ingress-nginx's auth-url family) end to end on the real node: a real
# oauth2-proxy and a mock OIDC provider (tests/testbed/oauth2, built once per release through the
# Go module proxy into ~/.cache/haptic-testbed by build-oauth2.sh, about 2 min cold), packed as
# node images beside the others; tests/testbed/tests/node_auth.rs. `make e2e-test` (and so CI)
# runs it too, at the end of the end-to-end lane.
oauth2-images: testbed-node-setup testbed-binaries
	$(ECHO_SERVER)
	dir=$$(bash tests/testbed/scripts/build-oauth2.sh | tail -n 1) && \
	OAUTH2_DIR="$$dir" bash tests/testbed/scripts/build-node-images.sh $(TARGET_DIR)/debug/echo-server $(TESTBED_IMAGES)

E2E_OAUTH2_TEST = $(CARGO) test -p haptic-testbed --test node_auth -- --ignored --nocapture
e2e-oauth2: testbed-binaries testbed-images oauth2-images image
	$(E2E_OAUTH2_TEST)

# helm lint/template with assertions on the rendered objects, and promtool
# checks and unit tests of the alert rules (helm and promtool are built once
# through the Go module proxy, cached in ~/.cache/haptic).
chart-test:
	bash charts/haptic/tests/run.sh

# Everything CI checks, in three stages, every cargo step linting as it
# builds (LINTING_CARGO above).
# 1. The builds, in two lanes: the Rust one (every target of every member,
#    the guests' wasm32 build among them, then the image and its test) and,
#    at nice 19, the Go one (the bed's Kubernetes binaries, built once per
#    release into a cache), which takes what the Rust lane leaves; warm it
#    returns at once.
# 2. The real node's images.
# 3. The end-to-end lane and, beside it at nice 19, everything else: the
#    unit, fixture and sandbox tests (built in stage 1: cargo holds its lock
#    only while it builds), the lints, the scaffolded projects, the Python and
#    chart tests. The scenarios wait on one real node and use about a quarter
#    of the cores (measured over a cold run's 20 minutes), so the checks take
#    what the scenarios leave, never what they ask for; so do the Go builds
#    of the Gateway API suite and oauth2-proxy (e2e-go-builds, nice 19 beside
#    the scenarios), which only the suites at the lane's end need.
# Within a lane the steps run one at a time (-j1: two scaffolded projects
# installing one componentize-py at once would race). Each lane's lines carry
# its name; a failure in either fails the run once both lanes have ended, and
# the checks lane goes on past a failed check (-k), so one run names them all.
COMPUTE_CHECKS := unit-test lint new-library-test python-test new-python-library-test chart-test
test: setup
	$(MAKE) --no-print-directory CARGO='$(LINTING_CARGO)' test-stages

test-stages:
	$(MAKE) --no-print-directory -j2 build-lane go-lane
	$(MAKE) --no-print-directory testbed-images
	$(MAKE) --no-print-directory -j2 e2e-lane checks-lane

build-lane:
	@set -o pipefail; $(MAKE) --no-print-directory -j1 clippy-build image-test 2>&1 | sed -u 's/^/[build] /'

go-lane:
	@set -o pipefail; nice -n 19 $(MAKE) --no-print-directory -j1 testbed-binaries 2>&1 | sed -u 's/^/[go] /'

e2e-lane:
	@set -o pipefail; { $(MAKE) --no-print-directory -j2 e2e-scenarios e2e-go-builds && \
		$(MAKE) --no-print-directory -j1 e2e-suites; } 2>&1 | sed -u 's/^/[e2e] /'

checks-lane:
	@set -o pipefail; nice -n 19 $(MAKE) --no-print-directory -k -j1 $(COMPUTE_CHECKS) 2>&1 | sed -u 's/^/[checks] /'

testbed-up: testbed-binaries
	$(CARGO) run -p haptic-testbed --bin control-plane-up

# The same with the real node (root; haptic's image too when `make image` built it).
testbed-node-up: testbed-binaries testbed-node-setup testbed-images
	$(CARGO) run -p haptic-testbed --bin control-plane-up -- --node

# The render bench, then what the controller pays to take in 10,000 listed pods.
bench:
	$(CARGO) bench -p haptic --features synthetic --bench render
	$(CARGO) bench -p haptic --features synthetic --bench ingest

# What isolating a refused render to its object costs at TestScale.
bench-isolation:
	$(CARGO) bench -p haptic --features synthetic --bench isolation

bench-agent:
	$(CARGO) bench -p haptic --bench agent

# What external authentication through the agent's SPOA costs a request
# (docs/spoa.md, docs/performance.md).
bench-spoa:
	$(CARGO) bench -p haptic --bench spoa

# One change -> every HAProxy converged, 1 to 100 local instances (`haptic run --proxies N`).
bench-fanout:
	$(CARGO) bench -p haptic --bench fanout

# 1,000 HTTPRoutes over 50 Gateways: one route change -> every HAProxy converged (`haptic run --proxies 2`).
bench-gateway:
	$(CARGO) bench -p haptic --features synthetic --bench gateway

# Gate latency and endpoint flips on the test bed (two HAProxy pods).
bench-controller: testbed-binaries testbed-images image
	$(CARGO) build --release -p haptic --bin haptic
	HAPTIC_BIN=$(TARGET_DIR)/release/haptic $(CARGO) bench -p haptic-testbed --bench controller

# TestScale: seed, one Ingress change -> deployed, controller memory.
bench-scale: testbed-binaries testbed-images image
	$(CARGO) build --release -p haptic --bin haptic
	HAPTIC_BIN=$(TARGET_DIR)/release/haptic $(CARGO) bench -p haptic-testbed --bench scale
