#!/usr/bin/env bash
# A user's path, as README's "Install" section and docs/lifecycle.md give it, from outside the checkout:
#   1. a clean venv with ansible-core and the collection's requirements.txt only, and the emulator installed the
#      plain way (`pip install ./emulator`, not editable) in a venv of its own (hack/consumer-venv.sh); the
#      collection artifact built (ansible-galaxy collection build) and installed with
#      `ansible-galaxy collection install` (its dependency kubernetes.core comes from Galaxy for a user; Galaxy is
#      not reachable here, so it is taken from the ansible package on PyPI and the install runs --offline), then
#      `ansible-playbook whitesky.capvco.site` by its FQCN against that emulator
# then, against one emulator (hack/with-emulator.sh), the walk of a cluster with a GPU pool, each step checked:
#   2. cluster_create --check --diff: the plan and its price in the output, and nothing created on the platform
#   3. cluster_create: the cluster made
#   4. cluster_create with the GPU pool scaled up: one machine and its vGPU more; run again: changed=0
#   5. machine_delete -e force=true: the warning names the vGPU left billed and its price per hour
#   6. gpu_orphans: the orphan check finds that vGPU (and fails, as it must while one is billed)
#   7. gpu_orphans -e plan_file, then -e reclaim_plan: the reviewed reclaim releases exactly it
#   8. cluster_delete
#   9. nothing left: no VM, no vGPU reservation, no cloudspace of the cluster, nothing accruing (the emulator's
#      admin API, and whitesky.capvco.vgpu_info as a user would ask)
# Every playbook runs by its FQCN from the installed artifact, through the default callback, with no ansible.cfg of
# this machine and no ANSIBLE_* variable of the caller's; each step fails loudly with its name when an expectation
# is not met. `make fresh` runs it in a bare Debian container; it also runs on a developer's machine (nothing of
# .venv used).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)

# what the user writes: the cluster with a GPU pool of REPLICAS machines x 1 "NVIDIA A100" (image 12 is the emulator's)
cluster=walk
cloudspace="walk-cs"
location=be-gen-1
spec() {
  cat <<EOF
cluster: {name: $cluster, location: $location, cloudspace: $cloudspace}
control_plane: {replicas: 1, vcpus: 2, memory: 4096, image: 12}
pools:
  - name: gpu
    replicas: $1
    vcpus: 8
    memory: 32768
    image: 12
    gpu: {type: NVIDIA A100, count: 1, driverVersion: "550"}
EOF
}

step() { current=$1; echo "user-path: $* ($(( $(date +%s) - started )) s)"; }
fail() { echo "user-path: FAILED at step '$current': $*" >&2; exit 1; }

# play NAME RC ARGS...: ansible-playbook whitesky.capvco.NAME ARGS, its output shown and kept in $log; its exit
# status must be RC
play() {
  local want=$2 rc=0
  name=$1
  shift 2
  log="$walk/$(( ++runs ))-$name.log"
  echo "\$ ansible-playbook whitesky.capvco.$name $*"
  "$bin/ansible-playbook" "whitesky.capvco.$name" "$@" >"$log" 2>&1 || rc=$?
  cat "$log"
  [ "$rc" = "$want" ] || fail "ansible-playbook whitesky.capvco.$name $* exited $rc, expected $want"
}

# expect REGEX...: each extended regular expression matches a line of the last playbook's output
expect() {
  local re
  for re in "$@"; do
    grep -Eq -- "$re" "$log" || fail "no line of the output of $name matches: $re"
  done
}

# state WANT: the cluster's live VMs, vGPU reservations (the recycle bin's included), cloudspaces and reservations
# still accruing, as the emulator's admin API has them, must be WANT (for example "vms=3 vgpus=2 cloudspaces=1
# accruing=2"); the python of the user's venv reads the JSON (the new machine has no jq)
state() {
  local got
  got=$("$bin/python" - "$WHITESKY_EMULATOR_ADMIN" "$cluster" "$cloudspace" <<'PY'
import json, sys, urllib.request
admin, cluster, cloudspace = sys.argv[1:]
get = lambda path: json.load(urllib.request.urlopen(admin + path, timeout=30))
snap, ledger = get("/snapshot"), get("/ledger")
ours = lambda vgpu: vgpu["vgpu_name"].startswith("capvco.%s." % cluster)
vms = [v for v in snap["vms"] if v["deleted_at"] is None
       and (v["name"].startswith(cluster + "-") or v["description"].startswith("capvco/v1 cluster=%s " % cluster))]
vgpus = [r for r in snap["vgpus"] if r["deleted_at"] is None and ours(r)]
spaces = [c for c in snap["cloudspaces"] if c["deleted_at"] is None and c["name"] == cloudspace]
accruing = [r for r in ledger["reservations"] if r["accruing"] and ours(r)]
print("vms=%d vgpus=%d cloudspaces=%d accruing=%d" % (len(vms), len(vgpus), len(spaces), len(accruing)))
if ledger["double_reservations"]:
    print("double reservations: %d" % ledger["double_reservations"])
PY
  )
  echo "user-path: the emulator has $got"
  [ "$got" = "$1" ] || fail "the emulator has $got, expected $1"
}

snapshot() {
  "$bin/python" -c 'import sys, urllib.request; sys.stdout.write(urllib.request.urlopen(sys.argv[1]).read().decode())' \
    "$WHITESKY_EMULATOR_ADMIN/snapshot"
}

# The walk, run by the script itself inside hack/with-emulator.sh (WHITESKY_* set for that emulator)
if [ "${1:-}" = --walk ]; then
  work=$2 started=$3 runs=0
  bin="$work/ansible/bin" walk="$work/walk"
  mkdir -p "$walk"
  cd "$walk"
  spec 2 >cluster.yml
  spec 3 >cluster-scaled.yml

  step "1. the main job, by its FQCN: ansible-playbook whitesky.capvco.site"
  play site 0
  expect 'leaked +0' 'changed=[1-9]'

  step "2. the plan and its price: cluster_create --check --diff, nothing created"
  before=$(snapshot)
  play cluster_create 0 -e @cluster.yml --check --diff
  # the diff carries the price, and the plan line says what it makes and costs (the default callback)
  expect '^\+machine walk-gpu-1$' '^\+vgpus 2$' '^\+price [0-9]+\.[0-9]{2} EUR/h$' \
    'plan: create cloudspace walk-cs, create 3 machines \(walk-cp-0, walk-gpu-0, walk-gpu-1\), reserve 2 x NVIDIA A100.*: \+[0-9]+\.[0-9]{2} EUR/h, [0-9]+\.[0-9]{2} EUR/h after'
  [ "$(snapshot)" = "$before" ] || fail "--check changed the emulator's state"
  state "vms=0 vgpus=0 cloudspaces=0 accruing=0"

  step "3. create the cluster: cluster_create"
  play cluster_create 0 -e @cluster.yml
  expect 'done: create cloudspace walk-cs, create 3 machines.*: \+[0-9]+\.[0-9]{2} EUR/h, [0-9]+\.[0-9]{2} EUR/h after' 'changed=1'
  state "vms=3 vgpus=2 cloudspaces=1 accruing=2"

  step "4. scale the GPU pool from 2 to 3 machines, then converge again: changed=0"
  play cluster_create 0 -e @cluster-scaled.yml
  expect 'done: create 1 machine \(walk-gpu-2\), reserve 1 x NVIDIA A100.*: \+[0-9]+\.[0-9]{2} EUR/h, [0-9]+\.[0-9]{2} EUR/h after'
  state "vms=4 vgpus=3 cloudspaces=1 accruing=3"
  play cluster_create 0 -e @cluster-scaled.yml
  expect 'localhost +: ok=[0-9]+ +changed=0 +unreachable=0 +failed=0'
  state "vms=4 vgpus=3 cloudspaces=1 accruing=3"

  step "5. force delete a GPU machine: machine_delete -e force=true warns of the vGPU it leaves billed"
  play machine_delete 0 -e @cluster-scaled.yml -e machine=walk-gpu-2 -e force=true
  expect '\[WARNING\]: machine walk-gpu-2 was deleted by force with 1 vGPU attached: still reserved and billed \(1\.00 EUR/h\)' \
    'done: delete 1 machine \(walk-gpu-2\)'
  state "vms=3 vgpus=3 cloudspaces=1 accruing=3"

  step "6. the orphan check finds the force-deleted machine's vGPU (and fails while it is billed)"
  play gpu_orphans 2 -e "location=$location" -e "cluster=$cluster"
  expect '^ *"capvco\.walk\.walk-gpu-2\.00\.[^ ]+ +walk +walk-gpu-2 ' '1 reservation\(s\), costing 1\.0 EUR per hour' \
    '1 orphaned vGPU reservation\(s\) are still billed \(1\.0 EUR per hour\): capvco\.walk\.walk-gpu-2\.00\.'
  state "vms=3 vgpus=3 cloudspaces=1 accruing=3"

  step "7. the reviewed reclaim: a plan file written (nothing released), reviewed, then applied"
  play gpu_orphans 0 -e "location=$location" -e "cluster=$cluster" -e grace_period=0 -e plan_file=orphans.json
  # a relative plan_file lands where ansible-playbook was started, never inside the installed collection
  expect "plan written to $walk/orphans\.json: 1 reservation\(s\) to release \(1\.0 EUR per hour\), digest sha256:[0-9a-f]{64}; nothing was released"
  [ -f orphans.json ] || fail "no plan file $walk/orphans.json"
  [ "$(stat -c %a orphans.json)" = 600 ] || fail "the plan file's mode is $(stat -c %a orphans.json), not 600"
  state "vms=3 vgpus=3 cloudspaces=1 accruing=3"
  "$bin/python" - orphans.json "$cluster" <<'PY' || fail "the plan file is not the force-deleted machine's one vGPU"
import json, sys
plan = json.load(open(sys.argv[1]))
print("user-path: reviewed %s: %s" % (sys.argv[1], json.dumps(plan["summary"])))
names = [r["vgpu_name"] for r in plan["entries"]]
assert len(names) == 1 and names[0].startswith("capvco.%s.%s-gpu-2.00." % (sys.argv[2], sys.argv[2])), names
PY
  play gpu_orphans 0 -e "location=$location" -e "cluster=$cluster" -e reclaim_plan=orphans.json
  expect "plan $walk/orphans\.json: released now 1 \(saving 1\.0 EUR per hour\), skipped 0" 'No orphaned vGPU reservations'
  state "vms=3 vgpus=2 cloudspaces=1 accruing=2"

  step "8. delete the cluster: cluster_delete"
  play cluster_delete 0 -e @cluster-scaled.yml
  expect 'done: delete 3 machines \(walk-cp-0, walk-gpu-0, walk-gpu-1\), release 2 vGPUs, delete cloudspace walk-cs: -[0-9]+\.[0-9]{2} EUR/h, 0\.00 EUR/h after'

  step "9. nothing left: no VM, no vGPU reservation, no cloudspace of the cluster"
  state "vms=0 vgpus=0 cloudspaces=0 accruing=0"
  name=vgpu_info log="$walk/$(( ++runs ))-vgpu_info.log"
  echo "\$ ansible localhost -m whitesky.capvco.vgpu_info -a 'location=$location cluster=$cluster'"
  "$bin/ansible" localhost -m whitesky.capvco.vgpu_info -a "location=$location cluster=$cluster" >"$log" 2>&1 ||
    { cat "$log"; fail "whitesky.capvco.vgpu_info failed"; }
  cat "$log"
  expect '"reservations": \[\]'
  exit 0
fi

work=$(mktemp -d /var/tmp/capvco-user.XXXXXX)
trap 'rm -rf "$work"' EXIT
started=$(date +%s)
# the user's own set-up only: no ansible.cfg of this machine (~/.ansible.cfg, /etc/ansible), no ANSIBLE_* of the
# caller's (a callback, colours, another collections path)
while read -r name; do unset "$name"; done < <(compgen -e | grep '^ANSIBLE_' || true)
: >"$work/ansible.cfg"
export ANSIBLE_CONFIG="$work/ansible.cfg" ANSIBLE_NOCOLOR=1

step "1. a venv with ansible-core and requirements.txt, and the emulator by pip install ./emulator in its own"
"$here/hack/consumer-venv.sh" "$work" newest
"$work/ansible/bin/ansible-galaxy" --version | awk 'NR == 1'

step "1. the collection artifact, installed with ansible-galaxy --offline"
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

cd "$work"
CAPVCO_EMULATOR="$work/emulator/bin/whitesky-emulator" "$here/hack/with-emulator.sh" \
  "$here/hack/user-path.sh" --walk "$work" "$started"
current="the end"
step "passed: install, plan and price, create, scale, force delete, orphans, reviewed reclaim, delete, nothing left"
