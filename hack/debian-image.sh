#!/usr/bin/env bash
# A local Debian image (no registry is reachable): debootstrap minbase of SUITE with PACKAGES, imported into
# podman as IMAGE; nothing when IMAGE exists already.  With --no-sources, apt in the image knows no mirror
# (the container tests point it at their own repository only).
#
#   hack/debian-image.sh [--no-sources] SUITE IMAGE PACKAGES        (PACKAGES: comma-separated)
set -euo pipefail
keep_sources=1
if [ "${1:-}" = "--no-sources" ]; then keep_sources=0; shift; fi
suite=$1 image=$2 packages=$3
mirror=${CAPVCO_DEBIAN_MIRROR:-http://deb.debian.org/debian}
if podman image exists "$image"; then exit 0; fi
root=$(mktemp -d /var/tmp/capvco-rootfs.XXXXXX)
trap 'rm -rf "$root"' EXIT
echo "building $image (debootstrap $suite minbase + $packages)"
debootstrap --variant=minbase --include="$packages" "$suite" "$root" "$mirror" >/dev/null
if [ "$keep_sources" -eq 0 ]; then rm -f "$root/etc/apt/sources.list" "$root"/etc/apt/sources.list.d/*; fi
tar -C "$root" -c . | podman import --quiet - "$image" >/dev/null
echo "built $image"
