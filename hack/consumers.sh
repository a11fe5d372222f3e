#!/usr/bin/env bash
# `make consumers`: what the collection ships, in the real consumers, on the oldest ansible-core that
# meta/runtime.yml admits (a venv here) and on the newest release (in a Debian trixie container: ansible-core
# 2.20 and later need Python 3.12+, which bookworm lacks).  Each Ansible is a user's venv (hack/consumer-venv.sh:
# ansible-core, requirements.txt, the emulator installed the plain way); on each:
#   tests/consumers/check_diff.py  every module that reports a diff, through --diff and the default callback
#   tests/consumers/check_awx.py   awx/register.yml into a fake AWX, its injectors rendered by AWX's rules, a job
#   tests/consumers/check_inventory.py  the inventory plugin with hostile VM names (Jinja, all, ungrouped, unowned)
# awx.awx comes from the development venv's ansible package (Galaxy is not reachable).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
image=${CAPVCO_NEWEST_IMAGE:-localhost/capvco-fresh:trixie}
cache=${CAPVCO_FRESH_CACHE:-$HOME/.cache/capvco-fresh}
ca=/etc/ssl/certs/ca-certificates.crt
collections=$("$here/.venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
[ -d "$collections/ansible_collections/awx/awx" ] || { echo "no awx.awx in $collections (make venv)" >&2; exit 1; }
failed=()

echo "=== the oldest ansible-core (a venv here) ==="
oldest=$here/.build/consumers/oldest
hack/consumer-venv.sh "$oldest" oldest
run=("$oldest/ansible/bin/python")
args=(--ansible-bin "$oldest/ansible/bin" --tools-bin "$oldest/emulator/bin")
"${run[@]}" tests/consumers/check_diff.py "${args[@]}" || failed+=("diff (oldest)")
"${run[@]}" tests/consumers/check_awx.py "${args[@]}" --collections "$collections" || failed+=("awx (oldest)")
"${run[@]}" tests/consumers/check_inventory.py "${args[@]}" || failed+=("inventory (oldest)")

echo "=== the newest ansible-core (Debian trixie, in a container) ==="
hack/debian-image.sh trixie "$image" python3,python3-venv,ca-certificates
mkdir -p "$cache/pip"
mounts=(-v "$here:/src/capvco:ro" -v "$collections/ansible_collections:/collections/ansible_collections:ro"
  -v "$cache/pip:/root/.cache/pip")
if [ -f "$ca" ]; then mounts+=(-v "$ca:$ca:ro"); fi
podman run --rm --network host "${mounts[@]}" -e HOME=/root -e PIP_CERT="$ca" -e SSL_CERT_FILE="$ca" \
  -e PIP_DISABLE_PIP_VERSION_CHECK=1 -e PYTHONDONTWRITEBYTECODE=1 -w /src/capvco "$image" bash -c '
    set -e
    hack/consumer-venv.sh /root/venv newest
    rc=0
    args="--ansible-bin /root/venv/ansible/bin --tools-bin /root/venv/emulator/bin"
    /root/venv/ansible/bin/python tests/consumers/check_diff.py $args || rc=1
    /root/venv/ansible/bin/python tests/consumers/check_awx.py $args --collections /collections || rc=$((rc + 2))
    /root/venv/ansible/bin/python tests/consumers/check_inventory.py $args || rc=$((rc + 4))
    exit $rc' || failed+=("newest (rc $?: the sum of 1 diff, 2 awx, 4 inventory)")

if [ ${#failed[@]} -gt 0 ]; then
  echo "consumers: FAILED: ${failed[*]}" >&2
  exit 1
fi
echo "consumers: every check passed on the oldest and the newest ansible-core"
