#!/bin/sh
# Builds a base image with no registry: a minimal Debian root made by debootstrap,
# imported with `docker import`. Run as root; then `make images BASE_IMAGE=baobab-base:bookworm`.
set -eu
TAG=${1:-baobab-base:bookworm}
SUITE=${SUITE:-bookworm}
ROOT=$(mktemp -d)
trap 'rm -rf "$ROOT"' EXIT
debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates "$SUITE" "$ROOT" ${MIRROR:-}
tar -C "$ROOT" -c . | docker import -c 'CMD ["/bin/bash"]' - "$TAG"
echo "$TAG"
