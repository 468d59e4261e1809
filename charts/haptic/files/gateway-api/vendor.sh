#!/bin/sh
# Vendors the Gateway API CRDs of the standard channel into the chart:
# sigs.k8s.io/gateway-api@$VERSION config/crd/standard, from the Go module
# cache (the module proxy is how this repository fetches Go code), each
# document unchanged except one added annotation, helm.sh/resource-policy:
# keep, so `helm uninstall` never deletes the CRDs and with them every
# Gateway and route of the cluster.
set -eu
VERSION=${1:-v1.6.3}
here=$(cd "$(dirname "$0")" && pwd)
dir=$(cd /tmp && GOFLAGS=-mod=mod go mod download -json "sigs.k8s.io/gateway-api@$VERSION" | sed -n 's/.*"Dir": "\(.*\)",/\1/p')
out="$here/standard-install-$VERSION.yaml"
{
    echo "# Gateway API $VERSION, standard channel: sigs.k8s.io/gateway-api@$VERSION config/crd/standard,"
    echo "# vendored by charts/haptic/files/gateway-api/vendor.sh (adds helm.sh/resource-policy: keep)."
    echo "# Apply with \`kubectl apply --server-side -f\`: the HTTPRoute CRD is larger than"
    echo "# client-side apply's last-applied annotation allows."
    for file in "$dir"/config/crd/standard/gateway.networking.k8s.io_*.yaml; do
        echo "---"
        awk 'BEGIN { done = 0 }
             { print }
             !done && /^  annotations:$/ { print "    helm.sh/resource-policy: keep"; done = 1 }' "$file"
    done
} > "$out"
echo "wrote $out"
