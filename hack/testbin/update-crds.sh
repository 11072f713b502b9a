#!/bin/bash
# update-crds.sh copies the Cluster API CRDs (core, kubeadm bootstrap,
# kubeadm control plane) verbatim from the sigs.k8s.io/cluster-api module zip
# on the Go module proxy into crds/capi/, and records where they came from in
# crds/capi/SOURCE. The copies are committed: tests and `make demo` need no
# download, and a version bump shows up as a reviewable diff.
#
#   CAPI_VERSION  module version to copy (default: the one in crds/capi/SOURCE)
#
# Run it by hand when bumping Cluster API, then review `git diff crds/`.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
DEST=$HERE/crds/capi
CAPI_VERSION=${CAPI_VERSION:-$(awk '/^module /{print $3}' "$DEST/SOURCE" 2>/dev/null || true)}
CAPI_VERSION=${CAPI_VERSION:-v1.14.2}
# Outside any module, so neither this module's nor the main one's go.mod
# changes; the checksum database verifies the zip.
INFO=$(cd / && GOWORK=off GOFLAGS='' go mod download -json "sigs.k8s.io/cluster-api@$CAPI_VERSION")
DIR=$(echo "$INFO" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
SUM=$(echo "$INFO" | sed -n 's/^[[:space:]]*"Sum": "\(.*\)",$/\1/p')
if [ -z "$DIR" ] || [ ! -d "$DIR" ]; then
  echo "update-crds: download of sigs.k8s.io/cluster-api@$CAPI_VERSION failed:" >&2
  echo "$INFO" >&2
  exit 1
fi

SRCS="core/config/crd/bases bootstrap/kubeadm/config/crd/bases controlplane/kubeadm/config/crd/bases"
rm -rf "$DEST"
mkdir -p "$DEST"
n=0
for s in $SRCS; do
  for f in "$DIR/$s"/*.yaml; do
    # Copied byte for byte (no sed: an edit once silently dropped a CRD).
    cp "$f" "$DEST/"
    chmod 0644 "$DEST/$(basename "$f")"
    n=$((n + 1))
  done
done
{
  echo "# Written by hack/testbin/update-crds.sh; do not edit. The YAML files here are"
  echo "# verbatim copies of config/crd/bases from the module below."
  echo "module sigs.k8s.io/cluster-api $CAPI_VERSION $SUM"
  for s in $SRCS; do echo "from $s"; done
} >"$DEST/SOURCE"
echo "update-crds: copied $n CRDs of sigs.k8s.io/cluster-api $CAPI_VERSION into $DEST"
