#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, whitesky.capvco contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: vco_status
short_description: Record a VCOCluster's or VCOMachine's status, providerID and Events (the controller's write seam)
version_added: 0.1.0
description:
  - A playbook that acts for the controller writes what it finds out through this module, the same seam the
    controller process (C(capvco-controller)) writes through. It merges O(status)
    into the object's C(status) subresource (a JSON merge patch; a V(null) value removes a field), merges
    O(conditions) by type, sets C(spec.providerID) once, and can emit a Kubernetes Event for the object.
  - A condition's C(lastTransitionTime) changes only when its C(status) changes, so a reconcile that finds nothing
    new writes nothing and reports no change.
  - The API is reached through E(K8S_AUTH_KUBECONFIG), a kubeconfig, or the pod's service account.
author:
  - whitesky.capvco contributors (@whitesky)
requirements:
  - kubernetes (the Python client)
options:
  kind:
    description:
      - The kind of the object. A V(VCOMachineTemplate)'s status is what one machine of it brings (the controller
        writes it for the cluster autoscaler); O(provider_id) is a V(VCOMachine)'s only.
    type: str
    choices: [VCOCluster, VCOMachine, VCOMachineTemplate]
    required: true
  name:
    description: The object's name.
    type: str
    required: true
  namespace:
    description: The object's namespace.
    type: str
    required: true
  status:
    description: Status fields to merge in (a JSON merge patch of C(status)).
    type: dict
    default: {}
  conditions:
    description:
      - Conditions to set, by type; the object's other conditions stay.
      - Each is a dict with C(type), C(status) (V(True), V(False) or V(Unknown)) and C(reason) (CamelCase, the form
        Kubernetes requires of a C(metav1.Condition)'s reason), and optionally C(message) and C(severity) (V(Error),
        V(Warning) or V(Info), with a status other than V(True)).
      - They are written as C(metav1.Condition)s in C(status.conditions) (the shape Cluster API's v1beta2 contract
        reads, with C(observedGeneration), without C(severity)); on a V(VCOCluster) or a V(VCOMachine) also in
        Cluster API's v1beta1 shape, with the C(severity), in C(status.deprecated.v1beta1.conditions).
    type: list
    elements: dict
    default: []
  gpu_reservations:
    description:
      - The machine's vGPU reservations, as M(whitesky.capvco.vgpu) or M(whitesky.capvco.vgpu_info) return them;
        recorded as C(status.gpu.reservations) (C(name), C(vgpuID), C(profile), C(attached)).
    type: list
    elements: dict
  vm_id:
    description: A VCOMachine's VM id, recorded as C(status.vmID).
    type: int
  gpu_orphans:
    description:
      - A VCOCluster's orphan check, as M(whitesky.capvco.vgpu_info) returns it (C(reservations), and
        C(cost_per_hour) and C(currency) with O(whitesky.capvco.vgpu_info#module:with_cost)); recorded as
        C(status.gpu) (C(orphans), C(orphanNames), C(costPerHour)).
    type: dict
  provider_id:
    description:
      - The C(spec.providerID) to set. It is set once; a different value later is an error (Cluster API treats it as
        immutable).
    type: str
  event:
    description:
      - An Event to emit for the object, a dict with C(reason) (CamelCase), C(message) (cut at 1024 characters), and
        optionally C(type) (V(Normal), the default, or V(Warning)).
    type: dict
  kubeconfig:
    description:
      - A kubeconfig file. Without it, E(K8S_AUTH_KUBECONFIG), then E(KUBECONFIG), then the in-cluster service
        account, then C(~/.kube/config).
    type: path
  context:
    description: The kubeconfig context.
    type: str
attributes:
  check_mode:
    description: Reports the status that would be written, and writes nothing.
    support: full
  diff_mode:
    description: The providerID and status before and after.
    support: full
notes:
  - Reading is left to M(kubernetes.core.k8s_info); this module is the one place where the controller writes.
seealso:
  - module: kubernetes.core.k8s_info
"""

EXAMPLES = r"""
- name: Record that the VM exists, with its vGPUs
  whitesky.capvco.vco_status:
    kind: VCOMachine
    name: demo-gpu-0
    namespace: default
    provider_id: whitesky://be-gen-1/cs-demo/17
    status:
      initialization: {provisioned: true}
      ready: true
      vmID: 17
      failureReason: null
      failureMessage: null
    conditions:
      - type: VMProvisioned
        status: "True"
        reason: Created

- name: Report orphaned reservations on the cluster, and warn
  whitesky.capvco.vco_status:
    kind: VCOCluster
    name: demo
    namespace: default
    status:
      gpu: {orphans: 2}
    conditions:
      - type: GPUReservationsClean
        status: "False"
        severity: Warning
        reason: OrphansFound
        message: 2 orphaned vGPU reservations are still billed
    event:
      type: Warning
      reason: GPUOrphansFound
      message: 2 orphaned vGPU reservations are still billed
"""

RETURN = r"""
status:
  description: The object's status after the write (or as it would be, in check mode).
  returned: success
  type: dict
provider_id:
  description: The object's C(spec.providerID) after the write.
  returned: success
  type: str
event:
  description: The name of the Event created (the last one, when there are more).
  returned: when O(event) is given and not in check mode
  type: str
resource_version:
  description: The object's C(metadata.resourceVersion) after the write (a controller's cache waits for it).
  returned: when the object was written (not in check mode)
  type: str
"""

from ansible_collections.whitesky.capvco.plugins.module_utils.faces import kube
from ansible_collections.whitesky.capvco.plugins.module_utils.faces.module import WhiteskyModule


def main():
    WhiteskyModule(
        dict(
            kind=dict(type="str", choices=sorted(kube.PLURALS), required=True),
            name=dict(type="str", required=True),
            namespace=dict(type="str", required=True),
            status=dict(type="dict", default={}),
            conditions=dict(type="list", elements="dict", default=[]),
            gpu_reservations=dict(type="list", elements="dict"),
            vm_id=dict(type="int"),
            gpu_orphans=dict(type="dict"),
            provider_id=dict(type="str"),
            event=dict(type="dict"),
            kubeconfig=dict(type="path"),
            context=dict(type="str"),
        ),
        connection=False,
    ).run(kube.write_status)


if __name__ == "__main__":
    main()
