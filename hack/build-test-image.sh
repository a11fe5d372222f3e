#!/usr/bin/env bash
# Build the local Debian image the container tests use (no registry is reachable):
# debootstrap a minimal bookworm with python3 (and python3-apt, which the apt module needs).
set -euo pipefail
image=${1:-localhost/capvco-debian:bookworm}
if podman image exists "$image"; then exit 0; fi
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
debootstrap --variant=minbase --include=python3,python3-apt bookworm "$dir" >/dev/null
# the tests point apt at their own repository only
rm -f "$dir/etc/apt/sources.list"
tar -C "$dir" -c . | podman import - "$image" >/dev/null
echo "built $image"
