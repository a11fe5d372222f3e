"""Where a VCOMachine's VM is, recorded before it is made (``status.placement``), and the one condition that says
whether its cluster label still agrees (``ClusterLabelUnchanged``): a machine never moves to another cluster."""

from __future__ import annotations

from typing import Any

from ansible_collections.whitesky.capvco.plugins.module_utils.faces import conditions as conds
from capvco_controller import objects
from capvco_controller.objects import VCOCluster, VCOMachine
from capvco_controller.scope import Scope

CONDITION = "ClusterLabelUnchanged"


def place(scope: Scope, m: VCOMachine, vcc: VCOCluster) -> VCOMachine:
    """Record where the machine's VM is: its cluster, location, cloudspace and VM name. From then on the controller
    acts for that cluster and in that cloudspace only (a changed label is reported, never followed; an edited
    VCOCluster never moves it), and the finalizer releases and deletes what it records.  The machine as recorded."""
    placement = {
        "cluster": m.cluster,
        "location": vcc.location,
        "cloudspace": vcc.cloudspace,
        "cloudspaceID": vcc.cloudspace_id,
        "vmName": m.vm_name,
    }
    scope.set(placement=placement)
    recorded = VCOMachine.read({"metadata": dict(scope.obj.get("metadata") or {}), "spec": m.spec,
                                "status": dict(m.status, placement=placement)})  # fmt: skip
    label_check(scope, recorded)
    return recorded


def label_check(scope: Scope, m: VCOMachine) -> None:
    """``ClusterLabelUnchanged`` of a placed machine: True while the ``cluster.x-k8s.io/cluster-name`` label names
    the recorded cluster; False (a Warning Event when it becomes so) when it names another one, or none: the
    controller keeps acting for the recorded cluster."""
    if m.label_cluster == m.cluster:
        scope.condition(
            conds.true(CONDITION, "AsRecorded", "cluster %s, as recorded before its VM was made" % m.cluster)
        )
        return
    message = (
        "the label %s says %r, but this machine is cluster %s's: recorded before its VM %s was made in cloudspace "
        "%s (%s). A machine never moves to another cluster: the controller acts for %s only, and its finalizer "
        "deletes what it recorded. Put the label back, or delete the machine and make one in the other cluster"
        % (
            objects.CLUSTER_NAME_LABEL,
            m.label_cluster,
            m.cluster,
            m.vm_name,
            m.placement.get("cloudspace"),
            m.placement.get("cloudspaceID"),
            m.cluster,
        )
    )
    cond = conds.false(CONDITION, "ClusterLabelChanged", message, "Warning")
    was: dict[str, Any] = m.condition(CONDITION)
    if was.get("status") != "False" or was.get("message") != cond.message:
        scope.event("ClusterLabelChanged", message, warning=True)
    scope.condition(cond)
