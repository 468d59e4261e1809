#!/usr/bin/env bash
# Template tests of the haptic chart: helm lint, then `helm template` of a set
# of values with assertions on the rendered objects (test_chart.py).
#
#   charts/haptic/tests/run.sh            # every case
#   charts/haptic/tests/run.sh gate mtls  # cases whose name contains a word
#
# Needs: bash, python3 with PyYAML (Debian: python3-yaml), helm and promtool,
# which charts/scripts/install-helm.sh and install-promtool.sh build once from
# the Go module proxy (or set HELM=/path/to/helm, PROMTOOL=/path/to/promtool).
# No cluster, no network once they are cached.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
chart="$(dirname "$here")"
repo="$(cd "$chart/../.." && pwd)"

if [[ -z "${HELM:-}" ]]; then
    HELM="$("$repo/charts/scripts/install-helm.sh")"
fi
export HELM
# promtool checks and unit-tests the chart's alert rules (built the same way).
if [[ -z "${PROMTOOL:-}" ]]; then
    PROMTOOL="$("$repo/charts/scripts/install-promtool.sh")"
fi
export PROMTOOL

if ! python3 -c 'import yaml' 2>/dev/null; then
    echo "run.sh: python3 with PyYAML is needed (Debian/Ubuntu: apt-get install python3-yaml)" >&2
    exit 2
fi

exec python3 "$here/test_chart.py" --helm "$HELM" --chart "$chart" "$@"
