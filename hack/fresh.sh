#!/usr/bin/env bash
# `make fresh`: the README's commands on a new user's machine.
#
# A bare Debian bookworm root filesystem (debootstrap minbase with python3,
# python3-venv, make and git only) runs, as a privileged podman container (the
# demo makes network namespaces), a fresh clone of this working tree, and in
# it `make demo`, then `make smoke` (the part of the integration layer that
# shows what only a new machine can: installs, real HTTP, playbooks, network
# namespaces, packaging; `make test` runs the unit layer and the whole
# integration layer on this machine): each must install what it needs by
# itself; then the user's path of the README's "Install" section
# (hack/user-path.sh: the offline install, then a cluster's whole walk on the
# emulator, each step checked).  Passes only if all three succeed.
#
# Only the download caches are shared with the host (pip's and apt's, under
# $CAPVCO_FRESH_CACHE), so it stays fast without hiding an install step.
# The molecule layer needs podman on the host and is not run here.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
image=${CAPVCO_FRESH_IMAGE:-localhost/capvco-fresh:bookworm}
packages=python3,python3-venv,make,git
cache=${CAPVCO_FRESH_CACHE:-$HOME/.cache/capvco-fresh}
ca=/etc/ssl/certs/ca-certificates.crt
command=${CAPVCO_FRESH_COMMAND:-make demo && make smoke && hack/user-path.sh}

# The new machine: built once, kept as an image (its content is fixed by the list above).
"$here/hack/debian-image.sh" bookworm "$image" "$packages"

work=$(mktemp -d /var/tmp/capvco-fresh.XXXXXX)
name=capvco-fresh-$$
# shellcheck disable=SC2317  # run by the EXIT trap
cleanup() {
  podman rm -f -t 0 "$name" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

# A fresh clone of the working tree as it is now: what git tracks, plus new files that git does not ignore
# (no .venv, no build output), committed in a new repository.
mkdir -p "$work/capvco"
(cd "$here" && git ls-files -z --cached --others --exclude-standard |
  tar --null -T - --ignore-failed-read -cf - 2>/dev/null) | tar -C "$work/capvco" -xf -
git -C "$work/capvco" init -q
git -C "$work/capvco" add -A
git -C "$work/capvco" -c user.name=fresh -c user.email=fresh@example.invalid commit -qm "fresh clone"
mounts=(-v "$work/capvco:/src/capvco")
# the platform's spec sits beside the checkout, as in CI, when there is one
if [ -d "$here/../shared" ]; then mounts+=(-v "$(cd "$here/../shared" && pwd):/src/shared:ro"); fi
mkdir -p "$cache/pip" "$cache/apt"
mounts+=(-v "$cache/pip:/root/.cache/pip" -v "$cache/apt:/var/cache/apt/archives")
# PyPI answers over TLS only with this machine's CA bundle
if [ -f "$ca" ]; then mounts+=(-v "$ca:$ca:ro"); fi

echo "fresh: $command (in $image, clone of $here)"
started=$(date +%s)
rc=0
podman run --rm --name "$name" --privileged --network host "${mounts[@]}" \
  -e HOME=/root -e PIP_CERT="$ca" -e SSL_CERT_FILE="$ca" -e PIP_DISABLE_PIP_VERSION_CHECK=1 \
  -w /src/capvco "$image" bash -c "set -e; $command" || rc=$?
echo "fresh: rc $rc after $(( $(date +%s) - started )) s"
exit $rc
