#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, whitesky.capvco contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: vgpu_reclaim
short_description: Release the vGPU reservations a cluster owns, or the ones that escaped
version_added: 0.1.0
description:
  - With O(scope=cluster), releases every reservation the cluster owns, attached or not, including those of
    machines deleted with force (the platform detaches them and keeps billing).
  - With O(scope=orphans), releases owned reservations whose machine no longer exists, once they are older than
    O(grace_period), so that it never races a machine that is being created.
  - Never touches a reservation whose name does not decode as this collection's, or that another cluster owns.
  - With O(cluster), a reservation to release that is attached to a machine whose marker does not name O(cluster)
    fails the call before anything is released, naming the machine.
  - In check mode it is a report of what would be released and kept.
  - A reviewed reclaim is two runs. In check mode, O(plan_file) writes what would be released to a plan file on
    the machine the module runs on (the controller, for these playbooks) - each reservation with its id, name,
    profile, status, attached VM and cost, the scope it was planned under, when, and a digest. Then O(plan)
    releases exactly that plan's reservations that still match, and reports the others as RV(not_released), each with
    its reason. It never releases a reservation that is not in the plan. docs/gpus.md, "Reviewed reclaim", has
    the file's format and the matching rules.
author:
  - whitesky.capvco contributors (@whitesky)
options:
  location:
    description: The location (G8).
    type: str
    required: true
  scope:
    description:
      - V(cluster) releases all the cluster owns; V(orphans) only what escaped.
      - Required, unless O(plan) is given (the plan has its scope; when given too, it must be the plan's).
    type: str
    choices: [cluster, orphans]
  cluster:
    description:
      - The cluster. Required with O(scope=cluster); with O(scope=orphans) it limits the sweep to this cluster
        (all clusters otherwise).
      - With O(plan), when given, it must be the plan's cluster.
    type: str
  grace_period:
    description:
      - With O(scope=orphans), the minimum age in seconds of a reservation before it is released.
      - With O(plan), the plan's is used (its reservations were past it when it was made).
    type: int
    default: 900
  permanently:
    description:
      - Delete permanently (a vGPU in the recycle bin is assumed to still bill).
      - With O(plan), the plan's is used.
    type: bool
    default: true
  plan_file:
    description:
      - Write what would be released to this file, a reclaim plan to review, and release nothing. Only in check
        mode (C(check_mode) true on the task, or C(--check)); refused otherwise, before anything is read.
      - The file is written on the machine the module runs on, mode 0600, whole or not at all (a temporary file
        in the same folder, then linked into place). A file that exists is never replaced - the plan that was
        reviewed must be the one applied - so the call fails, naming it. C(~) is expanded; a relative path is
        refused (a module works in the playbook's folder); the playbooks C(gpu_orphans) and C(cluster_delete) take
        a relative one from the directory C(ansible-playbook) was started in (E(PWD)).
    type: path
  plan:
    description:
      - Release exactly the reservations of this reclaim plan (written by O(plan_file), or by the
        M(whitesky.capvco.cluster) module's teardown in check mode) that still match - the same id, the same name
        (so the same owner), not attached to another VM than when planned, and, for a plan of orphans, its machine
        still gone. The others are returned in RV(not_released), with why. A reservation not in the plan is never
        released.
      - A plan that cannot be read, is not one, whose digest does not match its content, or that was made for
        another O(location) (or O(scope), or O(cluster)) is refused before anything is read from the platform.
      - In check mode, what would be released and skipped. Applied twice, the second run releases nothing.
    type: path
  parallel:
    description: How many VMs' reservations are released at once (32 by default, a typical pool in one round).
    type: int
    default: 32
extends_documentation_fragment:
  - whitesky.capvco.connection
  - whitesky.capvco.connection.actiongroups
attributes:
  check_mode:
    description: A report; nothing is released. O(plan_file) is written in check mode only; with O(plan), what
      would be released and skipped.
    support: full
  diff_mode:
    description: The owned reservation names before and after, a line C(vgpu <name>) each.
    support: full
seealso:
  - module: whitesky.capvco.vgpu_info
"""

EXAMPLES = r"""
# Set-up: two GPU workers of cluster demo, each with an NVIDIA A100 vGPU, in the cluster's cloudspace
- name: Cluster demo's GPU workers
  whitesky.capvco.machine_pool:
    cloudspace: demo
    location: be-gen-1
    cluster: demo
    pools:
      - {name: gpu, names: [demo-gpu-0, demo-gpu-1], vcpus: 8, memory: 32768, image_id: 12, gpu: {type: NVIDIA A100}}
  register: demo

- name: Delete demo-gpu-1 by force - its vGPU stays reserved, and billed, an orphan
  whitesky.capvco.machine:
    cloudspace_id: "{{ demo.cloudspace_id }}"
    name: demo-gpu-1
    cluster: demo
    state: absent
    force: true

- name: Report orphans without releasing them (one younger than the grace period is kept)
  whitesky.capvco.vgpu_reclaim:
    location: be-gen-1
    scope: orphans
    grace_period: 3600
  check_mode: true

- name: Plan - write cluster demo's orphans that would be released to a file, to review
  whitesky.capvco.vgpu_reclaim:
    location: be-gen-1
    scope: orphans
    cluster: demo
    grace_period: 0  # nothing of cluster demo is being created now, so none of its orphans is a machine in the making
    plan_file: ~/orphans-plan.json
  check_mode: true
  register: planned

- name: Act - release exactly the reviewed plan's reservations that still match
  whitesky.capvco.vgpu_reclaim:
    location: be-gen-1
    plan: ~/orphans-plan.json
  register: applied

- name: The reviewed plan is spent
  ansible.builtin.file:
    path: ~/orphans-plan.json
    state: absent

# Teardown: the machines by force, then the sweep releases everything the cluster still owns, then its cloudspace
- name: Delete cluster demo's machines by force
  whitesky.capvco.machine_pool:
    cloudspace_id: "{{ demo.cloudspace_id }}"
    cluster: demo
    exclusive: true
    force: true
    state: absent

- name: Teardown - release everything the cluster owns
  whitesky.capvco.vgpu_reclaim:
    location: be-gen-1
    scope: cluster
    cluster: demo

- name: Delete its cloudspace
  whitesky.capvco.cloudspace:
    name: demo
    location: be-gen-1
    cluster: demo
    state: absent
"""

RETURN = r"""
released:
  description: The reservations released (in check mode, that would be).
  returned: always
  type: list
  elements: dict
kept:
  description:
    - Owned reservations kept, each with a C(reason), and C(eligible_at) - when an orphan kept for the grace period
      becomes eligible, in seconds since the epoch (null for the others).
  returned: always
  type: list
  elements: dict
ignored:
  description: How many reservations of the location are not in scope (not ours, or another cluster's).
  returned: always
  type: int
saved_per_hour:
  description: What the released reservations cost per hour, in RV(currency).
  returned: always
  type: float
currency:
  description: The location's currency (when anything is released).
  returned: always
  type: str
not_released:
  description:
    - With O(plan), the plan's reservations that are not released (in check mode, would not be), each with
      C(vgpu_id), C(vgpu_name), C(reason) and C(message).
    - C(reason) is V(gone) (no longer listed - released already - or, for a plan that does not release
      permanently, in the recycle bin already), V(renamed) (its name changed, its owner did not), V(owner_changed)
      (its name now says another cluster or machine), V(attached) (attached now to a VM other than when planned),
      or V(not_orphaned) (a plan of orphans - its machine exists again).
  returned: when plan is given
  type: list
  elements: dict
  sample:
    - {vgpu_id: vgpu-3f2a, vgpu_name: capvco.demo.demo-gpu-1.00.0tj8k2w, reason: not_orphaned,
       message: "no longer orphaned: machine 'demo-gpu-1' exists again"}
plan_file:
  description: With O(plan_file), the absolute path of the plan file written.
  returned: when plan_file is given
  type: str
reclaim_plan:
  description:
    - The plan written (with O(plan_file)) or applied (with O(plan)) - C(path), C(digest), C(created) (UTC),
      C(made_by), C(scope) (C(kind), C(location), C(cluster), C(grace_period), C(permanently)) and C(summary)
      (C(count), C(cost_per_hour), C(cost_so_far), C(currency)).
    - A plan of orphans written (O(plan_file) with O(scope=orphans)) also has C(left_out), the orphans it left out
      because they are within the grace period - C(count), C(grace_period), C(first_eligible_at) and
      C(last_eligible_at) (UTC, when they become eligible; null when there is none), and C(reservations) (the first
      20 by when, each with C(vgpu_id), C(vgpu_name) and C(eligible_at)). The plan file holds it too, outside its
      digest (information for the reviewer; the act never reads it).
  returned: when plan or plan_file is given
  type: dict
  sample:
    path: /var/tmp/orphans-plan.json
    digest: sha256:6f1c0e...
    created: "2026-05-04T09:12:44Z"
    made_by: whitesky.capvco.vgpu_reclaim
    scope: {kind: orphans, location: be-gen-1, cluster: null, grace_period: 3600, permanently: true}
    summary: {count: 2, cost_per_hour: 2.1918, cost_so_far: 7.3, currency: EUR}
    left_out: {count: 1, grace_period: 3600, first_eligible_at: "2026-05-04T09:40:02Z",
               last_eligible_at: "2026-05-04T09:40:02Z",
               reservations: [{vgpu_id: vgpu-77aa, vgpu_name: capvco.demo.demo-gpu-4.00.0tj8m1q,
                               eligible_at: "2026-05-04T09:40:02Z"}]}
"""

from ansible_collections.whitesky.capvco.plugins.module_utils.faces.module import WhiteskyModule
from ansible_collections.whitesky.capvco.plugins.module_utils.reclaim import sweep


def main():
    WhiteskyModule(
        dict(
            location=dict(type="str", required=True),
            scope=dict(type="str", choices=["cluster", "orphans"]),
            cluster=dict(type="str"),
            grace_period=dict(type="int", default=900),
            permanently=dict(type="bool", default=True),
            parallel=dict(type="int", default=32),
            plan_file=dict(type="path"),
            plan=dict(type="path"),
        ),
        required_if=[("scope", "cluster", ("cluster",))],
        required_one_of=[("scope", "plan")],
        mutually_exclusive=[("plan", "plan_file")],
    ).run(sweep.reclaim)


if __name__ == "__main__":
    main()
