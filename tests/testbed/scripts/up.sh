#!/usr/bin/env bash
# Brings up the test bed's control plane for a person: builds the binaries on first use,
# then runs until Ctrl-C. It prints `export KUBECONFIG=...` and a kubectl alias on stdout.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/../../.." && pwd)"
"$ROOT/tests/testbed/scripts/build-binaries.sh" >/dev/null
cd "$ROOT"
exec cargo run --quiet -p haptic-testbed --bin control-plane-up
