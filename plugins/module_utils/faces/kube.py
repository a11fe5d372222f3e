# -*- coding: utf-8 -*-
# Copyright: (c) 2026, whitesky.capvco contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The controller's one write seam to Kubernetes: status, providerID and Events of the CAPVCO kinds (plain Python,
no Ansible; it writes through the Kubernetes API).

Every write of the controller's own results (the controller process, and the
module ``vco_status``) goes through ``write_status`` here, with the
``kubernetes`` client, which reaches the API through ``K8S_AUTH_KUBECONFIG``, a
kubeconfig, or the pod's service account.

Conditions are ``metav1.Condition``s (``faces/conditions.py``: the shape Cluster
API's v1beta2 contract reads), and the v1beta1 shape beside them at
``status.deprecated.v1beta1.conditions`` of a VCOCluster or VCOMachine while
Cluster API serves v1beta1; a condition's ``lastTransitionTime`` moves only
when its ``status`` changes, so that a reconcile that finds nothing new writes
nothing.
"""

from __future__ import annotations

import copy
import datetime
import os
import traceback
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Union, cast

from ansible_collections.whitesky.capvco.plugins.module_utils.faces import conditions as conds
from ansible_collections.whitesky.capvco.plugins.module_utils.faces.conditions import Condition
from ansible_collections.whitesky.capvco.plugins.module_utils.faces.errors import KubeError
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.errors import InputError, WhiteskyError
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.scrub import scrub

KUBERNETES_IMPORT_ERROR: str | None
try:
    from kubernetes import client as k8s_client
    from kubernetes import config as k8s_config
    from kubernetes.client.exceptions import ApiException
except ImportError:
    KUBERNETES_IMPORT_ERROR = traceback.format_exc()
else:
    KUBERNETES_IMPORT_ERROR = None

GROUP = "infrastructure.cluster.x-k8s.io"
VERSION = "v1beta1"
PLURALS = {"VCOCluster": "vcoclusters", "VCOMachine": "vcomachines", "VCOMachineTemplate": "vcomachinetemplates"}
COMPONENT = "capvco-controller"
#: The longest message of a condition or a status field (``failureMessage``), and of an Event (the API's limit).
MESSAGE_LIMIT = 4096
EVENT_MESSAGE_LIMIT = 1024


def now_iso(now: datetime.datetime | None = None) -> str:
    now = now or datetime.datetime.now(datetime.timezone.utc)
    return now.strftime("%Y-%m-%dT%H:%M:%SZ")


def merge_patch(target: Any, patch: Any) -> Any:
    """``target`` with an RFC 7386 JSON merge ``patch`` applied (``None`` removes a key)."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
            continue
        result[key] = merge_patch(result.get(key), value)
    return result


#: The kinds Cluster API reads (the contract's InfraCluster and InfraMachine): their v1beta1 conditions are kept.
CONTRACT_KINDS = ("VCOCluster", "VCOMachine")
#: A condition as a caller gives it: checked already, or a mapping of ``conditions.KEYS`` (``vco_status``).
ConditionInput = Union[Condition, Mapping[str, Any]]  # noqa: UP007 (evaluated at import, on Python 3.10 too)


def checked_conditions(given: Iterable[ConditionInput] | None) -> list[Condition]:
    """The conditions given, each checked (``conditions.given`` for a mapping)."""
    return [c if isinstance(c, Condition) else conds.given(c) for c in given or []]


def plan_status(
    obj: Mapping[str, Any],
    status: Mapping[str, Any] | None,
    conditions: Iterable[ConditionInput] | None,
    now: str,
    v1beta1: bool = False,
) -> tuple[dict[str, Any] | None, Any]:
    """``(status patch or None, status after)`` for an object: ``status`` merged, ``conditions`` by type (their
    ``observedGeneration`` the object's generation), and with ``v1beta1`` the same in the v1beta1 shape at
    ``status.deprecated.v1beta1.conditions``."""
    before = obj.get("status") or {}
    patch = dict(status or {})
    given = checked_conditions(conditions)
    if given:
        generation = (obj.get("metadata") or {}).get("generation")
        generation = generation if isinstance(generation, int) and not isinstance(generation, bool) else None
        patch["conditions"] = conds.merge(before.get("conditions"), given, now, generation)
        if v1beta1:
            old = ((before.get("deprecated") or {}).get("v1beta1") or {}).get("conditions")
            deprecated = dict(patch.get("deprecated") or {})
            deprecated["v1beta1"] = dict(
                deprecated.get("v1beta1") or {}, conditions=conds.merge_v1beta1(old, given, now)
            )
            patch["deprecated"] = deprecated
    after = merge_patch(before, patch)
    return (patch if after != before else None), after


def reservation_status(items: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """``status.gpu.reservations`` from the reservations the vgpu modules return."""
    return [
        {
            "name": r.get("vgpu_name"),
            "vgpuID": r.get("vgpu_id"),
            "profile": r.get("gpu_id"),
            "attached": r.get("status") == "ATTACHED",
        }
        for r in sorted(items, key=lambda r: r.get("vgpu_name") or "")
    ]


def orphan_status(
    rows: Sequence[Mapping[str, Any]], cost_per_hour: float | None = None, currency: str | None = None
) -> dict[str, Any]:
    """``status.gpu`` of a VCOCluster from the orphan check's rows (vgpu_info)."""
    out: dict[str, Any] = {"orphans": len(rows), "orphanNames": sorted(r.get("vgpu_name") or "" for r in rows)}
    if cost_per_hour is not None:
        out["costPerHour"] = ("%s %s" % (cost_per_hour, currency or "")).strip()
    return out


def api_client(kubeconfig: str | None = None, context: str | None = None) -> Any:
    """A ``kubernetes`` ApiClient: a kubeconfig (the operator's proxy sets ``K8S_AUTH_KUBECONFIG``), else in-cluster."""
    if KUBERNETES_IMPORT_ERROR:
        raise WhiteskyError("the kubernetes Python library is required (pip install kubernetes)")
    cfg = k8s_client.Configuration()
    path = kubeconfig or os.environ.get("K8S_AUTH_KUBECONFIG") or os.environ.get("KUBECONFIG")
    if path or not os.environ.get("KUBERNETES_SERVICE_HOST"):
        k8s_config.load_kube_config(config_file=path, context=context, client_configuration=cfg)
    else:
        k8s_config.load_incluster_config(client_configuration=cfg)
    return k8s_client.ApiClient(cfg)


def event_body(obj: Mapping[str, Any], etype: str, reason: str, message: str, now: str) -> dict[str, Any]:
    meta = obj["metadata"]
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"generateName": meta["name"] + ".", "namespace": meta["namespace"]},
        "involvedObject": {
            "apiVersion": obj.get("apiVersion"),
            "kind": obj.get("kind"),
            "name": meta["name"],
            "namespace": meta["namespace"],
            "uid": meta.get("uid"),
            "resourceVersion": meta.get("resourceVersion"),
        },
        "type": etype,
        "reason": reason,
        "message": scrub(message, EVENT_MESSAGE_LIMIT),
        "source": {"component": COMPONENT},
        "reportingComponent": COMPONENT,
        "firstTimestamp": now,
        "lastTimestamp": now,
        "count": 1,
    }


def write_status(
    *,
    kind: str,
    name: str,
    namespace: str,
    status: Mapping[str, Any] | None = None,
    conditions: Iterable[ConditionInput] | None = None,
    gpu_reservations: Iterable[Mapping[str, Any]] | None = None,
    vm_id: str | int | None = None,
    gpu_orphans: Mapping[str, Any] | None = None,
    provider_id: str | None = None,
    event: Mapping[str, Any] | None = None,
    kubeconfig: str | None = None,
    context: str | None = None,
    api: Any = None,
    check_mode: bool = False,
    events: Sequence[Mapping[str, Any]] = (),
    v1beta1: bool = True,
) -> dict[str, Any]:
    """Core of ``vco_status``: merge status and conditions, set providerID once, emit Events (``event``, then
    ``events``).  Status is written with one merge patch of the status subresource.

    ``api`` is an ApiClient (made from ``kubeconfig`` and ``context`` when None).  The object is read, the inputs
    checked, the patches planned (pure: :func:`plan_status`), then written unless in check mode.  ``v1beta1``: a
    VCOCluster's or VCOMachine's conditions are kept in the v1beta1 shape too (while Cluster API serves it).
    """
    ns = namespace
    now = now_iso()
    api = api or api_client(kubeconfig, context)
    custom = k8s_client.CustomObjectsApi(api)
    try:
        # a custom object comes back as its JSON document (a dict); the client types it as object
        obj = cast("dict[str, Any]", custom.get_namespaced_custom_object(GROUP, VERSION, ns, PLURALS[kind], name))
    except ApiException as exc:
        raise KubeError("reading %s %s/%s" % (kind, ns, name), exc) from None
    current = (obj.get("spec") or {}).get("providerID")
    emitted = [e for e in (_checked_event(x) for x in ([event] if event else []) + list(events)) if e]
    fields: dict[str, Any] = {
        "status": status,
        "conditions": conditions,
        "gpu_reservations": gpu_reservations,
        "vm_id": vm_id,
        "gpu_orphans": gpu_orphans,
        "v1beta1": v1beta1,
    }
    set_provider, patch, after = plan_write(obj, kind, now, provider_id=provider_id, **fields)
    provider = provider_id if set_provider else current
    result: dict[str, Any] = {
        "changed": bool(patch is not None or set_provider or emitted),
        "status": after,
        "provider_id": provider,
        "diff": {
            "before": {"providerID": current, "status": obj.get("status") or {}},
            "after": {"providerID": provider, "status": after},
        },
    }
    if check_mode:
        return result
    try:
        written: Any = None
        if set_provider:
            written = custom.patch_namespaced_custom_object(
                GROUP, VERSION, ns, PLURALS[kind], name, {"spec": {"providerID": provider}}
            )
            if isinstance(written, dict):  # a spec write moves the generation: the conditions observe the new one
                _set, patch, after = plan_write(written, kind, now, **fields)
                result["status"] = result["diff"]["after"]["status"] = after
        if patch is not None:
            written = custom.patch_namespaced_custom_object_status(
                GROUP, VERSION, ns, PLURALS[kind], name, {"status": patch}
            )
        if isinstance(written, dict):  # the object's version after this write (a controller's cache waits for it)
            result["resource_version"] = (written.get("metadata") or {}).get("resourceVersion")
        for one in emitted:
            body = event_body(obj, one.get("type") or "Normal", one["reason"], one["message"], now)
            # the client validates a dict body into its CoreV1Event (its annotation names only the model)
            created = k8s_client.CoreV1Api(api).create_namespaced_event(ns, body)  # type: ignore[arg-type]
            result.setdefault("events", []).append(created.metadata.name)
            result["event"] = created.metadata.name
    except ApiException as exc:
        raise KubeError("writing %s %s/%s" % (kind, ns, name), exc) from None
    return result


def plan_write(
    obj: Mapping[str, Any],
    kind: str,
    now: str,
    *,
    status: Mapping[str, Any] | None = None,
    conditions: Iterable[ConditionInput] | None = None,
    gpu_reservations: Iterable[Mapping[str, Any]] | None = None,
    vm_id: str | int | None = None,
    gpu_orphans: Mapping[str, Any] | None = None,
    provider_id: str | None = None,
    v1beta1: bool = True,
) -> tuple[bool, dict[str, Any] | None, Any]:
    """What :func:`write_status` would write to ``obj`` (pure): ``(set providerID, status patch or None, status
    after)``.  A controller asks it of the object in its cache, to make no call at all when nothing changes."""
    meta = obj.get("metadata") or {}
    current = (obj.get("spec") or {}).get("providerID")
    set_provider = _provider_change(kind, str(meta.get("namespace")), str(meta.get("name")), current, provider_id)
    given = _status_input(status, vm_id, gpu_orphans, gpu_reservations)
    patch, after = plan_status(obj, given, conditions, now, v1beta1 and kind in CONTRACT_KINDS)
    return set_provider, patch, after


def _provider_change(kind: str, ns: str, name: str, current: str | None, provider_id: str | None) -> bool:
    """Whether providerID is to be set: once, on a VCOMachine, never changed."""
    if provider_id and kind != "VCOMachine":
        raise InputError("provider_id is a VCOMachine's; %s %s/%s has none" % (kind, ns, name))
    change = bool(provider_id) and current != provider_id
    if change and current:
        raise InputError(
            "%s %s/%s already has providerID %r; it cannot change to %r" % (kind, ns, name, current, provider_id)
        )
    return change


def _status_input(
    given: Mapping[str, Any] | None,
    vm_id: str | int | None,
    orphans: Mapping[str, Any] | None,
    reservations: Iterable[Mapping[str, Any]] | None,
) -> dict[str, Any]:
    """The status fields the module's options give: ``status``, ``vm_id``, the orphan check, the reservations."""
    status: dict[str, Any] = {
        k: scrub(v, MESSAGE_LIMIT) if isinstance(v, str) and k.lower().endswith("message") else v
        for k, v in (given or {}).items()
    }
    if vm_id is not None:
        status["vmID"] = vm_id
    if orphans is not None:  # beside what ``given`` says of status.gpu
        status["gpu"] = dict(
            status.get("gpu") or {},
            **orphan_status(orphans.get("reservations") or [], orphans.get("cost_per_hour"), orphans.get("currency")),
        )
    if reservations is not None:
        status["gpu"] = dict(status.get("gpu") or {}, reservations=reservation_status(reservations))
    return status


def _checked_event(event: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    if event is None:
        return None
    unknown = sorted(set(event) - {"type", "reason", "message"})
    if (
        unknown
        or not event.get("reason")
        or not event.get("message")
        or event.get("type", "Normal")
        not in (
            "Normal",
            "Warning",
        )
    ):
        raise InputError("event needs reason and message, and type Normal or Warning if given; got %r" % (event,))
    return event
