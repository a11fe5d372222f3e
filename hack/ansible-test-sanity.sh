#!/usr/bin/env bash
# Run `ansible-test sanity` over the built collection, offline.
set -euo pipefail
# It must run outside this git checkout, or ansible-test would only see what git tracks there.
root=$(mktemp -d "${TMPDIR:-/tmp}/capvco-sanity.XXXXXX")
trap 'rm -rf "$root"' EXIT
here=$(cd "$(dirname "$0")/.." && pwd)
# ansible-test fetches a get-pip script from the internet; give it the offline stand-in.
pipver=$(grep -oP "pip='\K[0-9.]+" "$("$here/.venv/bin/python" -c 'import ansible_test, os; print(os.path.dirname(ansible_test.__file__))')/_internal/python_requirements.py")
mkdir -p ~/.ansible/test/cache
cp "$here/hack/get_pip_standin.py" ~/.ansible/test/cache/"get_pip_${pipver//./_}.py"
"$here/.venv/bin/ansible-galaxy" collection install --force --no-deps -p "$root" "$here"/.build/dist/whitesky-capvco-*.tar.gz >/dev/null
cd "$root/ansible_collections/whitesky/capvco"
py=$("$here/.venv/bin/python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
"$here/.venv/bin/ansible-test" sanity --venv --python "$py" --color no
