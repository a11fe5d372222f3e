#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, whitesky.capvco contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: cluster
short_description: A whole cluster from its spec, checked and planned (with its capacity and price) before any change
version_added: 0.1.0
description:
  - Takes the cluster spec as a user writes it (O(spec), the same keys as the cluster playbooks' variables) and
    checks it whole before anything is read or changed - strict types (C("2") is read as 2, C("two") or C(1.5)
    never), bounds, names matched whole, unknown keys refused with a suggestion. Every error names its path, for
    example C(pools[1].gpu.driverversion) as an unknown key, with C(did you mean driverVersion?). docs/lifecycle.md
    has the spec's reference, generated from the same schema.
  - Then it reads the platform (the cloudspace by name, the cluster's machines and their markers, the location's
    reservations, GPU profiles and prices) and computes a plan - the cloudspace to create, the machines to create
    and delete, the vGPUs to reserve, attach and release - and checks it whole - the ownership of every machine it
    touches, the GPU types and profiles (C(gpu.profile) - V(full), the type's profile with the most GPU memory,
    a whole card, what a pool that names none gets; a profile id; or V(any) of the type's; one the type does not
    have at the location is refused, naming those it has), the
    location's capacity, each pool's user data against the platform's limit and O(max_hourly_cost). A plan that
    cannot be carried out fails here, and nothing is created.
  - In check mode the module returns that plan (RV(plan)) with its price. The real run applies it and returns what
    it did; a run that fails halfway says what it had done (RV(created), RV(deleted), RV(reserved), RV(released)),
    with C(changed) true when it did anything.
  - With O(state=present), the cluster converges to the spec - pools scaled up and down (a machine gone is
    deleted gracefully, its vGPUs released first), each GPU pool's vGPUs by type, a pool without C(gpu) holding
    none. A cloudspace it creates is recorded as the cluster's by a note on it.
  - A pool may be at C(replicas) 0 (a GPU pool too) - its machines are deleted and every reservation they hold
    released, so nothing is billed, and the pool keeps its definition - the cluster's pools note on its cloudspace
    (information only, never proof of ownership) records every pool, so the inventory plugin
    P(whitesky.capvco.vms#inventory) and RV(plan) (C(pools)) show a pool at zero with its price per machine.
    The same spec with another count scales it up again.
  - A pool the spec no longer lists while it has machines (by the pool their marker names) is refused, naming the
    pool and its machines, before anything is changed - unless the spec's C(remove_pools) names it (its machines are
    then deleted, their vGPUs released first) - so that a spec given for one pool never deletes the others.
  - With O(scale), one pool's count changes and nothing else - the spec is the cluster alone (C(cluster)), and its
    pools, what their machines are made from and its first boot are those the cluster recorded in its pools note
    (written by every converge). A plan that would also create or delete a machine of another pool is refused.
  - With O(state=absent), every machine the cluster owns is deleted and every reservation it owns released
    (recycle bin included), and each cloudspace of the name that a note records as the cluster's and that holds
    nothing the cluster does not own is deleted; from a cloudspace that stays, the cluster's pools note is deleted.
    With O(machine), only that machine is deleted.
author:
  - whitesky.capvco contributors (@whitesky)
options:
  spec:
    description:
      - The cluster spec, with the keys C(cluster) (C(name), C(location), C(cloudspace)), C(control_plane),
        C(pools) (each with C(name), C(replicas), C(vcpus), C(memory), and C(gpu) with C(type), C(count),
        C(driverVersion) and C(profile)), C(remove_pools) (the pools no longer listed whose machines to delete),
        C(sriov) and C(first_boot). See docs/lifecycle.md for every key, its type and bounds.
      - The credential (C(sriov.credential)) is never shown in the module's output, nor logged.
    type: dict
    required: true
  variables:
    description:
      - The names of the caller's variables (the cluster playbooks pass them). A name close to one of the spec's
        keys that is not one (C(pool), C(control-plane)) is refused as a typo, since the playbooks read the spec
        from variables of those names and would otherwise not see it.
    type: list
    elements: str
  scale:
    description:
      - With O(state=present), change one pool's count only (the pool_scale playbook) - O(spec) holds the cluster
        alone, and every pool is converged as the cluster's pools note recorded it, but this one at O(scale.replicas).
      - Refused, before anything is changed, when the cluster has no pools note that parses, when the pool is not
        one it recorded, when what it recorded cannot make the pool's machines (a note written before this version
        has no image - converge the whole spec once) and when the plan would also create or delete another pool's
        machines.
    type: dict
    suboptions:
      pool:
        description: The pool, by name (V(cp) is the control plane).
        type: str
        required: true
      replicas:
        description: Its new count of machines (0 to 100).
        type: int
        required: true
  state:
    description: V(present) converges the cluster to O(spec); V(absent) tears it down (or deletes O(machine)).
    type: str
    choices: [present, absent]
    default: present
  machine:
    description:
      - With O(state=absent), delete only this machine of the cluster (gracefully, its vGPUs released first,
        unless O(force)); the cloudspace and the other reservations stay.
    type: str
  force:
    description:
      - With O(state=absent), delete machines with their vGPUs attached (C(detach_gpu)); a teardown's sweep then
        releases them, while a single O(machine) leaves them to the teardown or the orphan sweep.
    type: bool
    default: false
  delete_cloudspace:
    description: With O(state=absent), delete the cloudspace when the cluster created it and nothing else is in it.
    type: bool
    default: true
  max_hourly_cost:
    description:
      - Refuse a plan that would cost more than this per hour once applied, whole (in the location's currency) - the
        cluster's machines' vCPUs, memory and boot disks, its cloudspace's public address and its vGPUs, at the
        location's prices - before anything is created. A plan that holds some of a unit whose price the platform
        does not give (missing, null, negative or not a number) is refused too - its price is not known, never 0.
    type: float
  parallel:
    description: How many machines are created, read or deleted at once.
    type: int
    default: 32
  plan_file:
    description:
      - With O(state=absent), in check mode only, also write the reservations the teardown would release to this
        file - a reclaim plan (scope C(cluster)) to review, which O(whitesky.capvco.vgpu_reclaim#module:plan) applies
        (releasing those that are still the cluster's and still match). Refused outside check mode, with
        O(machine), and with O(state=present), before anything is read.
      - Written on the machine the module runs on (the controller, for these playbooks), mode 0600, whole or not at
        all; a file that exists is never replaced. docs/gpus.md, "Reviewed reclaim", has the format.
    type: path
  progress_file:
    description:
      - Write a line to this file for each machine created or deleted and each vGPU reserved or released, the
        moment the platform says so (not in check mode, which writes nothing).
      - The run makes the file itself, new and private (mode 0600), before it reads or changes anything, never
        through a link and never waiting on what is at the path. A path that exists (a file of anyone's, a FIFO, a
        link, a folder), or whose folder any user may write to without the sticky bit, is refused with the reason,
        before anything is changed; check mode refuses the same paths.
      - Set by the collection's action plugin for this module (a file in a new private folder), which shows each
        line under the task as it comes, at default verbosity; set it yourself only to follow a run from elsewhere
        (C(tail -F), which waits for the file to appear).
    type: path
extends_documentation_fragment:
  - whitesky.capvco.connection
  - whitesky.capvco.connection.actiongroups
attributes:
  check_mode:
    description: Returns the plan, with its price, and fails exactly where the real run would.
    support: full
  diff_mode:
    description: The cloudspace, the machines, the number of vGPUs and the price per hour (whole, then each unit held
      with its amount), before and after.
    support: full
seealso:
  - module: whitesky.capvco.machine_pool
"""

EXAMPLES = r"""
- name: The cluster spec, as the cluster playbooks take it - one control-plane machine, two GPU workers (whole A100s)
  ansible.builtin.set_fact:
    demo_spec:
      cluster: {name: demo, location: be-gen-1, cloudspace: demo}
      control_plane: {replicas: 1, image: 12}
      pools:
        - name: gpu
          replicas: 2
          vcpus: 8
          memory: 32768
          image: 12
          # profile full: the A100 profile with the most GPU memory (a whole card); without it, any A100 profile
          gpu: {type: NVIDIA A100, count: 1, driverVersion: "550", profile: full}

- name: What would this spec change, and what would it cost?
  whitesky.capvco.cluster:
    spec: "{{ demo_spec }}"
    max_hourly_cost: 10
  check_mode: true
  register: plan
# plan.plan.price.hourly_after is what the cluster would cost per hour, whole, in plan.plan.price.currency
# (plan.plan.price.units: the same by unit - vcu, mu, su, fsu, piu, vgu)

- name: Converge to it (a plan above max_hourly_cost is refused before anything is made)
  whitesky.capvco.cluster:
    spec: "{{ demo_spec }}"
    max_hourly_cost: 10

- name: Scale the GPU pool to 3 machines, every other pool kept as the cluster recorded it
  whitesky.capvco.cluster:
    spec: {cluster: {name: demo, location: be-gen-1, cloudspace: demo}}
    scale: {pool: gpu, replicas: 3}

- name: A spec that no longer lists pool cpu deletes its machines only when it says so
  whitesky.capvco.cluster:
    spec: "{{ demo_spec | combine({'remove_pools': ['cpu']}) }}"

- name: What would a teardown release? Written to a reclaim plan, to review
  whitesky.capvco.cluster:
    spec: {cluster: {name: demo, location: be-gen-1, cloudspace: demo}}
    state: absent
    plan_file: ~/demo-teardown-plan.json
  check_mode: true

- name: Tear it down - its machines, every vGPU it owns, and the cloudspace it made
  whitesky.capvco.cluster:
    spec: {cluster: {name: demo, location: be-gen-1, cloudspace: demo}}
    state: absent

- name: The reviewed plan is spent (whitesky.capvco.vgpu_reclaim applies one with its plan option instead)
  ansible.builtin.file:
    path: ~/demo-teardown-plan.json
    state: absent
"""

RETURN = r"""
spec:
  description: The spec as checked, with its defaults filled in.
  returned: success
  type: dict
summary:
  description:
    - What a person reads of the plan (in check mode) or of the run, one line of what changes and what it costs
      per hour at the location's prices, whole and by unit (C(unknown price) when a unit's price is not a finite
      number of 0 or more), then a line for each pool at zero machines with the price of one machine if scaled up.
      The collection's playbooks print it at default verbosity.
  returned: success
  type: list
  elements: str
  sample:
    - "plan: create cloudspace web, create 3 machines (web-cp-0, web-gpu-0, web-gpu-1), reserve 2 x NVIDIA A100
      (nvidia-a100-40c): +2.63 EUR/h, 2.63 EUR/h after (vcu 0.30, mu 0.33, su 0.00, piu 0.01, vgu 2.00)"
    - "pool burst at 0 machines: nothing billed; 2.29 EUR/h a machine of 8 vCPUs, 32768 MiB, 10 GiB disk,
      2 x NVIDIA A100 (profile full) when scaled up"
plan:
  description:
    - What the run changes (in check mode, would change). With O(state=present) - C(cloudspace) (C(name),
      C(cloudspace_id), C(create)), C(create) (C(name), C(pool)), C(delete), C(keep), C(reserve) (C(machine),
      C(slot), C(type), and the C(profile) it comes from - one the pool's C(gpu.profile) allows, chosen for all
      pools at once), C(release) and C(attach)
      (reservation names), C(capacity) (per type, C(needed) and C(available)), C(price), C(user_data_bytes) (per
      pool), C(pools) and C(pools_note). With O(state=absent) - C(cloudspaces) (each with C(delete), why it is
      C(kept), and C(pools_notes), the ids of the cluster's pools notes deleted from a cloudspace that stays),
      C(delete), C(release) and C(price).
    - C(price) is the whole price per hour of what the cluster holds, at the location's prices (the price list's
      monthly price of each unit / 730) - C(currency), C(hourly_before) (what it holds now), C(hourly_added) (what
      the plan creates and reserves), C(hourly_removed) (what it deletes and releases), C(hourly_after) (what
      O(max_hourly_cost) caps), and C(units), the same by unit - for each of C(vcu) (a vCPU), C(mu) (a GiB of
      memory), C(su) (a GiB of boot disk), C(fsu) (a GiB of flash storage), C(piu) (a public IP address, the
      cloudspace's) and C(vgu) (a vGPU) - C(size) (what one unit is), C(per_hour) (null when not known), the
      amounts C(before), C(added), C(removed) and C(after), and C(hourly_after). A price is null when the cluster
      holds some of a unit whose price is not known (never 0). C(per_vgpu_hour), C(vgpus_before) and
      C(vgpus_after) count the vGPUs alone.
    - C(pools) has one entry per pool of the spec, the control plane (C(cp)) first - C(name), C(replicas),
      C(vcpus), C(memory), C(disk_size) (GiB of each machine's boot disk - its C(diskSize), else its image's;
      null when neither is known), C(gpu) (C(type), C(count), C(profile) - the profile it takes, its C(gpu.profile)
      or V(full) when it names none - and C(memory), the GB of GPU memory of each of its vGPUs, the least with
      V(any), null when not known; or null), C(per_machine_hourly) (one machine of it whole at the location's prices -
      its vCPUs, memory, boot disk and vGPUs; null when a price is not known, never 0) and C(hourly) (its C(replicas)
      machines; 0 for a pool at zero). A pool at zero keeps its price per machine - what scaling it up costs.
    - C(pools_note) is the cluster's pools note on its cloudspace (title C(capvco/v1), what the inventory plugin
      reads to show a pool with no machine) - C(content) (C(pools cluster=<cluster>
      <pool>:<replicas>:<vcpus>:<memory>:<gpu count>:<gpu type>[:<disk>];...)), C(write) (V(create), V(update) of
      the note C(note_id), or null when it says so already) and C(remove) (the ids of other pools notes of the cluster
      there, deleted). It is written last, under the cluster's lease; an idle run writes nothing.
  returned: success
  type: dict
  sample:
    cloudspace: {name: demo, cloudspace_id: null, create: true}
    create: [{name: demo-cp-0, pool: cp}, {name: demo-gpu-0, pool: gpu}]
    reserve: [{machine: demo-gpu-0, slot: 0, type: NVIDIA A100, profile: nvidia-a100-40c}]
    price:
      currency: EUR
      hourly_before: 0.0
      hourly_added: 1.3466
      hourly_removed: 0.0
      hourly_after: 1.3466
      per_vgpu_hour: 1.0
      vgpus_before: 0
      vgpus_after: 1
      units:
        vcu: {size: vCPU, per_hour: 0.016438, before: 0.0, added: 10.0, removed: 0.0, after: 10.0,
              hourly_after: 0.1644}
        mu: {size: GiB of memory, per_hour: 0.004795, before: 0.0, added: 36.0, removed: 0.0, after: 36.0,
             hourly_after: 0.1726}
        su: {size: GiB of boot disk, per_hour: 0.000137, before: 0.0, added: 20.0, removed: 0.0, after: 20.0,
             hourly_after: 0.0027}
        fsu: {size: GiB of flash storage, per_hour: 0.000342, before: 0.0, added: 0.0, removed: 0.0, after: 0.0,
              hourly_after: 0.0}
        piu: {size: public IP address, per_hour: 0.006849, before: 0.0, added: 1.0, removed: 0.0, after: 1.0,
              hourly_after: 0.0068}
        vgu: {size: vGPU, per_hour: 1.0, before: 0.0, added: 1.0, removed: 0.0, after: 1.0, hourly_after: 1.0}
    pools:
      - {name: cp, replicas: 1, vcpus: 2, memory: 4096, disk_size: 10, gpu: null, per_machine_hourly: 0.0534,
         hourly: 0.0534}
      - {name: gpu, replicas: 1, vcpus: 8, memory: 32768, disk_size: 10,
         gpu: {type: NVIDIA A100, count: 1, profile: full, memory: 40}, per_machine_hourly: 1.2863,
         hourly: 1.2863}
    pools_note:
      write: create
      note_id: null
      remove: []
      content: "pools cluster=demo cp:1:2:4096:0:-:10;gpu:1:8:32768:1:NVIDIA%20A100:10"
cloudspace_id:
  description: With O(state=present), the cluster's cloudspace (null in check mode when it would be created).
  returned: state is present
  type: str
cloudspace_created:
  description: Whether the cloudspace was (or would be) created by this run.
  returned: state is present
  type: bool
created:
  description: The machines created (or that would be).
  returned: state is present
  type: list
  elements: str
deleted:
  description: The machines deleted (or that would be).
  returned: always
  type: list
  elements: str
reserved:
  description: The vGPU slots reserved, as C(MACHINE/SLOT).
  returned: state is present
  type: list
  elements: str
released:
  description: The names of the reservations released.
  returned: always
  type: list
  elements: str
cloudspaces_deleted:
  description: The ids of the cloudspaces deleted.
  returned: state is absent
  type: list
  elements: str
plan_file:
  description: With O(plan_file), the absolute path of the reclaim plan written.
  returned: when plan_file is given
  type: str
reclaim_plan:
  description:
    - With O(plan_file), the reclaim plan written - C(path), C(digest), C(created) (UTC), C(made_by), C(scope)
      (C(kind) V(cluster), C(location), C(cluster), C(grace_period), C(permanently)) and C(summary) (C(count),
      C(cost_per_hour), C(cost_so_far), C(currency)).
  returned: when plan_file is given
  type: dict
spec_errors:
  description: Every error of an invalid spec, each naming its path.
  returned: failure, when the spec is invalid
  type: list
  elements: str
"""

from ansible_collections.whitesky.capvco.plugins.module_utils.cluster import run as cluster
from ansible_collections.whitesky.capvco.plugins.module_utils.faces.module import WhiteskyModule
from ansible_collections.whitesky.capvco.plugins.module_utils.spec import speccheck


def main():
    WhiteskyModule(
        dict(
            # checked by the collection's own schema (clusterspec), whole, with every error named by its path
            spec=dict(type="dict", required=True),
            variables=dict(type="list", elements="str"),
            state=dict(type="str", choices=["present", "absent"], default="present"),
            machine=dict(type="str"),
            force=dict(type="bool", default=False),
            delete_cloudspace=dict(type="bool", default=True),
            max_hourly_cost=dict(type="float"),
            parallel=dict(type="int", default=32),
            plan_file=dict(type="path"),
            progress_file=dict(type="path"),
            scale=dict(
                type="dict",
                options=dict(pool=dict(type="str", required=True), replicas=dict(type="int", required=True)),
            ),
        ),
        secrets=lambda params: speccheck.secrets(params.get("spec")),
    ).run(cluster.run)


if __name__ == "__main__":
    main()
