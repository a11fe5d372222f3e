#!/usr/bin/env bash
# A user's setup for the consumer checks (hack/consumers.sh), in two venvs under DIR:
#   DIR/ansible   an ansible-core and the collection's requirements.txt, nothing else: what a user installs
#   DIR/emulator  the emulator installed the plain way (`pip install ./emulator`, not editable, from a copy of
#                 the checkout so that its build leaves nothing behind), and jsonschema for the fake Kubernetes
#                 API of the checks (lab/capvco_lab/kubefake.py, run from the checkout)
# MODE oldest: the oldest ansible-core that meta/runtime.yml's requires_ansible admits, and every requirement of
# requirements.txt at its floor (each `>=X` installed as `==X`), so the floors are what is tested;
# newest: the newest of each; anything else: a pip requirement for ansible-core.
#
#   hack/consumer-venv.sh DIR oldest|newest|SPEC
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
dir=$1 mode=$2
reqs=$(grep -v '^\s*\(#\|$\)' "$here/requirements.txt")
case "$mode" in
  oldest)
    floor=$(sed -n 's/^requires_ansible: *"*>=\([0-9]*\.[0-9]*\).*/\1/p' "$here/meta/runtime.yml")
    [ -n "$floor" ] || { echo "no requires_ansible floor in meta/runtime.yml" >&2; exit 1; }
    core="ansible-core==$floor.*"
    # shellcheck disable=SC2001  # one substitution per line of the file
    reqs=$(echo "$reqs" | sed 's/>=\([^,]*\).*/==\1/') ;;
  newest) core="ansible-core" ;;
  *) core=$mode ;;
esac
stamp="$dir/.consumer-venv"
want="$core $(echo "$reqs" | tr '\n' ' ')$(cat "$here/emulator/pyproject.toml" "$here/emulator/setup.py" \
  "$here/plugins/module_utils/platform/api.py" "$0" | sha256sum | cut -c1-16)"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then exit 0; fi
rm -rf "$dir"
src=$(mktemp -d)
trap 'rm -rf "$src"' EXIT
mkdir -p "$src/plugins"
cp -r "$here/emulator" "$src/emulator"
cp -r "$here/plugins/module_utils" "$src/plugins/module_utils"
rm -rf "$src/emulator/build" "$src"/emulator/*.egg-info
python3 -m venv "$dir/ansible"
python3 -m venv "$dir/emulator"
# shellcheck disable=SC2086  # one argument per requirement
"$dir/ansible/bin/pip" install -q "$core" $reqs
"$dir/emulator/bin/pip" install -q "$src/emulator" jsonschema
echo "$want" > "$stamp"
echo "consumer venvs in $dir: $("$dir/ansible/bin/ansible-playbook" --version | awk 'NR == 1'), $(echo "$reqs" | tr '\n' ' ')"
