#!/usr/bin/env bash
# A user's path, as README's "Install" section gives it, from outside the checkout:
#   1. a clean venv with ansible-core and the collection's requirements.txt only, and the emulator installed the
#      plain way (`pip install ./emulator`, not editable) in a venv of its own (hack/consumer-venv.sh)
#   2. the collection artifact built (ansible-galaxy collection build) and installed with
#      `ansible-galaxy collection install` (its dependency kubernetes.core comes from Galaxy for a user; Galaxy is
#      not reachable here, so it is taken from the ansible package on PyPI and the install runs --offline)
#   3. `ansible-playbook whitesky.capvco.site` by its FQCN against that emulator
# `make fresh` runs it in a bare Debian container; it also runs on a developer's machine (nothing of .venv used).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d /var/tmp/capvco-user.XXXXXX)
trap 'rm -rf "$work"' EXIT
step() { echo "user-path: $* ($(( $(date +%s) - started )) s)"; }
started=$(date +%s)

step "a venv with ansible-core and requirements.txt, and the emulator by pip install ./emulator in its own"
"$here/hack/consumer-venv.sh" "$work" newest
"$work/ansible/bin/ansible-galaxy" --version | awk 'NR == 1'

step "the collection artifact, installed with ansible-galaxy"
(cd "$here" && "$work/ansible/bin/ansible-galaxy" collection build --output-path "$work/dist" . >/dev/null)
"$work/ansible/bin/pip" download -q --no-deps -d "$work/pypi" "ansible>=12,<13"
"$work/ansible/bin/python" - "$work/pypi" "$work/deps" <<'PY'
import glob, sys, zipfile
wheel = glob.glob(sys.argv[1] + "/ansible-*.whl")[0]
with zipfile.ZipFile(wheel) as z:
    z.extractall(sys.argv[2], [n for n in z.namelist() if n.startswith("ansible_collections/kubernetes/core/")])
PY
# only these two folders: nothing installed elsewhere on this machine may stand in for the artifact
export ANSIBLE_COLLECTIONS_PATH="$work/collections:$work/deps" ANSIBLE_COLLECTIONS_SCAN_SYS_PATH=false
"$work/ansible/bin/ansible-galaxy" collection install --offline -p "$work/collections" "$work"/dist/whitesky-capvco-*.tar.gz
"$work/ansible/bin/ansible-galaxy" collection list whitesky.capvco
"$work/ansible/bin/ansible-galaxy" collection list kubernetes.core

step "ansible-playbook whitesky.capvco.site, from $work"
cd "$work"
CAPVCO_EMULATOR="$work/emulator/bin/whitesky-emulator" "$here/hack/with-emulator.sh" \
  "$work/ansible/bin/ansible-playbook" whitesky.capvco.site
step "passed"
