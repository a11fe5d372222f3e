#!/usr/bin/env bash
# Build the local Debian image the container tests use (no registry is reachable):
# a minimal bookworm with python3 (and python3-apt, which the apt module needs); apt in it knows no mirror
# (the tests point it at their own repository only).
set -euo pipefail
exec "$(dirname "$0")/debian-image.sh" --no-sources bookworm "${1:-localhost/capvco-debian:bookworm}" python3,python3-apt
