# -*- coding: utf-8 -*-
# Copyright: (c) 2026, whitesky.capvco contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The cluster spec: one typed contract, written once (pure Python).

The spec is what a user writes (``cluster``, ``control_plane``, ``pools``, ``sriov``, ``first_boot``).  It is
checked whole here (:func:`check`, with the schema's parser, ``schema``), for every entry that takes it: the cluster
playbooks (through the ``cluster`` module), the AWX surveys (whose answers become a spec) and the controller (the
CRDs' OpenAPI schemas are tested against ``reference.openapi``).  :func:`check` returns a :class:`ClusterSpec`,
frozen and typed, that the cluster core plans from; its ``document`` is the checked spec as the module returns it.
docs/lifecycle.md's reference is generated from :data:`SPEC` (``reference.reference``).  A new field of the spec
goes into :data:`SPEC`, and, when the cluster core reads it, into the records below.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from ansible_collections.whitesky.capvco.plugins.module_utils.firstboot.render import RETRIES
from ansible_collections.whitesky.capvco.plugins.module_utils.ownership import notes
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.errors import InputError
from ansible_collections.whitesky.capvco.plugins.module_utils.spec.pool import GpuSpec, Pool
from ansible_collections.whitesky.capvco.plugins.module_utils.spec.schema import (
    CLOUDSPACE,
    DRIVER_VERSION,
    GPU_PROFILE,
    GPU_TYPE,
    LABEL,
    MISSING,
    PACKAGE,
    Errors,
    Field,
    copy_value,
    int_field,
    misspelt,
    parse,
)

CONTROL_PLANE = "cp"
#: Where a user finds an image's id.
IMAGE_HINT = "whitesky.capvco.image_info lists a location's images"
MAX_REPLICAS = 100
MAX_POOLS = 20


def cidr_error(value: str) -> str | None:
    try:
        ipaddress.ip_network(value, strict=False)
    except ValueError:
        return "is not a CIDR (such as 203.0.113.0/24)"
    return None if "/" in value else "is not a CIDR (such as 203.0.113.0/24): it has no prefix length"


_GPU = Field(
    "object",
    "vGPUs by type on every machine of the pool: the type is resolved against the location's profiles.",
    fields={
        "type": Field(
            "str",
            "The GPU type, for example NVIDIA A100 (case and spacing aside).",
            required=True,
            pattern=GPU_TYPE,
            max_length=64,
        ),
        "count": int_field("vGPUs per machine.", 1, 16, default=1),
        "profile": Field(
            "str",
            "Which of the type's profiles: full (the one with the most GPU memory, a whole card, as the NVIDIA vGPU "
            "type in its id or description says: A100-40C has 40 GB; what a pool that names none gets), a profile "
            "id (gpu_profile_info lists them; a partial card only this way) or any (any of the type's, whichever "
            "has room, a partial card included). A profile the type does not have at the location is refused "
            "before anything is created, naming the ones it has.",
            pattern=GPU_PROFILE,
            max_length=64,
        ),
        "driverVersion": Field(
            "str",
            "The NVIDIA driver branch (550) or version (550.127.05) the first boot installs, pinned, and verifies; "
            "empty verifies a driver the image has.",
            pattern=DRIVER_VERSION,
            max_length=32,
            default="",
            numeric_text=True,
        ),
    },
)


def machine_fields(vcpus: int | None = None, memory: int | None = None) -> dict[str, Field]:
    """What a machine is made of (the control plane, each pool, and the VCOMachine CRD): without defaults,
    vcpus and memory are required."""
    size: dict[str, Any] = {"default": vcpus} if vcpus else {"required": True}
    mem: dict[str, Any] = {"default": memory} if memory else {"required": True}
    return {
        "vcpus": int_field("Virtual CPUs of each machine.", 1, 256, **size),
        "memory": int_field("Memory of each machine, in MiB.", 512, 4194304, **mem),
        "image": int_field(
            "The platform image id to boot, required with replicas above 0 (a spec of the cluster alone, as a teardown "
            "takes, needs none): %s." % IMAGE_HINT,
            1,
        ),
        "diskSize": int_field("Boot disk size in GiB.", 1, 65536),
    }


_NETWORK = Field(
    "object",
    "An external network pods may ask for.",
    fields={
        "name": Field("str", "The NetworkAttachmentDefinition's name.", required=True, pattern=LABEL, max_length=63),
        "network": Field("str", "The platform's external network, by name or id.", required=True, max_length=128),
        "namespace": Field("str", "The NetworkAttachmentDefinition's namespace.", pattern=LABEL, max_length=63),
        "mtu": int_field("The pod interface's MTU.", 576, 9216),
        "routes": Field(
            "list",
            "Routes to add in the pod through this NIC.",
            items=Field(
                "object",
                "A route.",
                fields={"dst": Field("str", "A CIDR.", required=True, max_length=64, check=cidr_error)},
            ),
            max_items=64,
        ),
    },
)


FIRST_BOOT = {
    "packages": Field(
        "list",
        "Debian packages the first boot installs (retried), as name or name=version.",
        items=Field("str", "A package.", pattern=PACKAGE, max_length=128),
        max_items=100,
        default=[],
    ),
    "attempts": int_field("Attempts of each install before the first boot fails.", 1, 20, default=RETRIES["attempts"]),
    "delay": int_field("Seconds before the first retry (doubled each time).", 0, 600, default=RETRIES["delay"]),
    "lock_timeout": int_field("Seconds to wait for the dpkg lock.", 0, 7200, default=RETRIES["lock_timeout"]),
}

SRIOV = {
    "enabled": Field("bool", "Deploy the SR-IOV NICs-per-pod add-on.", default=False),
    "networks": Field("list", "The external networks pods may ask for.", items=_NETWORK, max_items=32, default=[]),
    "credential": Field("str", "The node agent's own platform token (never the cluster's).", secret=True),
    "credentialSecretRef": Field(
        "object",
        "A Secret with the node agent's token, instead of credential.",
        fields={
            "name": Field("str", "The Secret's name.", required=True, max_length=253),
            "key": Field("str", "The key that holds the token.", default="token", max_length=253),
        },
    ),
    "kubeconfig": Field(
        "str",
        "The workload cluster's kubeconfig file (an absolute path where the playbook runs): the add-on is deployed "
        "there, never to the default kubeconfig's cluster. The cluster playbooks require it with sriov.enabled "
        "unless they only render the manifests (capvco_render_dir).",
        max_length=4096,
        check=lambda value: None if value.startswith("/") else "is not an absolute path",
    ),
}

#: The whole cluster spec: the playbooks' top-level variables.
SPEC = Field(
    "object",
    "The cluster spec.",
    fields={
        "cluster": Field(
            "object",
            "Who the cluster is and where it lives.",
            required=True,
            fields={
                "name": Field(
                    "str",
                    "The cluster's name: the owner in its machines' markers and its vGPU reservations' names.",
                    required=True,
                    pattern=LABEL,
                    max_length=32,
                ),
                "location": Field(
                    "str", "The whitesky.cloud location, e.g. be-gen-1.", required=True, pattern=LABEL, max_length=64
                ),
                "cloudspace": Field(
                    "str",
                    "The cloudspace of the machines, by name; created (and recorded as the cluster's) when missing. "
                    "Default: the cluster's name.",
                    pattern=CLOUDSPACE,
                    max_length=64,
                ),
            },
        ),
        "control_plane": Field(
            "object",
            "The control plane's machines (pool cp).",
            default={},
            fields=dict(
                {"replicas": int_field("How many machines.", 0, MAX_REPLICAS, default=1)}, **machine_fields(2, 4096)
            ),
        ),
        "pools": Field(
            "list",
            "The worker pools. A pool at replicas 0 keeps its definition and has no machine. A pool that is no longer "
            "listed while it has machines is refused (naming them) unless remove_pools names it: a spec that leaves a "
            "pool out never deletes its machines by accident (the pool_scale playbook changes one pool's count).",
            default=[],
            max_items=MAX_POOLS,
            items=Field(
                "object",
                "A pool of identical machines.",
                fields=dict(
                    {
                        "name": Field("str", "The pool's name (not cp).", required=True, pattern=LABEL, max_length=20),
                        "replicas": int_field("How many machines.", 0, MAX_REPLICAS, required=True),
                    },
                    **machine_fields(),
                    gpu=_GPU,
                ),
            ),
        ),
        "remove_pools": Field(
            "list",
            "Pools no longer listed in pools whose machines (those whose marker names the pool) this run deletes, "
            "with their vGPUs released first. A pool named here and in pools, or cp, is refused.",
            default=[],
            max_items=MAX_POOLS,
            items=Field("str", "A pool's name.", pattern=LABEL, max_length=20),
        ),
        "sriov": Field("object", "The SR-IOV add-on.", default={}, fields=SRIOV),
        "first_boot": Field("object", "What every machine's first boot installs.", default={}, fields=FIRST_BOOT),
    },
)


def check(spec: Mapping[str, Any] | None, variables: Iterable[str] | None = ()) -> ClusterSpec:
    """The cluster spec, checked whole and with its defaults: a :class:`ClusterSpec`, or :class:`InputError` naming
    every bad field by its path (``pools[1].gpu.driverversion: unknown key; did you mean driverVersion?``).

    ``variables`` are the names of the caller's variables, when the spec was read from variables of its keys' names
    (the playbooks): one close to a key that is not one (``pool``, ``control-plane``) is a typo the caller could not
    see, and is refused the same way.
    """
    errors = Errors()
    for name, hint in misspelt(variables or (), SPEC.fields):
        errors.add(name, "unknown variable of the cluster spec; did you mean %s?" % hint)
    out: dict[str, Any] = parse(spec if spec is not None else {}, SPEC, "", errors)
    if out is not MISSING and not errors:
        _cross_checks(out, errors, "control_plane" in spec if isinstance(spec, Mapping) else False)
    if errors:
        raise InputError(
            "the cluster spec is invalid (%d error(s)), nothing was changed: %s" % (len(errors), "; ".join(errors)),
            {"spec_errors": list(errors)},
        )
    return _typed(out)


def secrets(raw: object) -> list[str]:
    """The secret values in a spec as given (checked or not), to be hidden wherever output shows them."""
    out: list[str] = []

    def walk(value: object, field: Field) -> None:
        if field.secret and isinstance(value, (str, int, float)) and not isinstance(value, bool):
            out.append(str(value))
        elif field.kind == "object" and isinstance(value, dict):
            for key, sub in field.fields.items():
                walk(value.get(key), sub)
        elif field.kind == "list" and isinstance(value, list):
            for item in value:
                walk(item, field.items)

    walk(raw, SPEC)
    return out


def _cross_checks(spec: dict[str, Any], errors: Errors, control_plane: bool) -> None:
    """The checks across fields; ``control_plane``: whether the spec states its control plane (a spec of the cluster
    alone, what a teardown takes, needs no image: the converge of one refuses to create the default control plane
    without an image, ``machines.need_size``)."""
    cluster = spec["cluster"]
    cluster.setdefault("cloudspace", cluster["name"])
    machines = [("pools[%d]" % i, p) for i, p in enumerate(spec["pools"])]
    if control_plane:
        machines.insert(0, ("control_plane", spec["control_plane"]))
    for where, pool in machines:
        if pool["replicas"] and pool.get("image") is None:
            errors.add(
                where + ".image",
                "is required to create its %d machine(s): the id of the image they boot, from location %r (%s)"
                % (pool["replicas"], cluster["location"], IMAGE_HINT),
            )
    _pool_names(spec, errors)
    sriov = spec["sriov"]
    seen: dict[tuple[str | None, str], int] = {}
    for i, net in enumerate(sriov["networks"]):
        key = (net.get("namespace"), net["name"])
        if key in seen:
            errors.add("sriov.networks[%d].name" % i, "%r is taken (by sriov.networks[%d])" % (net["name"], seen[key]))
        seen[key] = i
    if sriov.get("enabled"):
        if not sriov["networks"]:
            errors.add("sriov.networks", "is required (at least one network) when sriov.enabled is true")
        if bool(sriov.get("credential")) == bool(sriov.get("credentialSecretRef")):
            errors.add("sriov", "give one of credential and credentialSecretRef when sriov.enabled is true")


def _pool_names(spec: dict[str, Any], errors: Errors) -> None:
    """Each pool's name once (cp is the control plane's), and a pool removed only when the spec no longer lists it."""
    taken = {CONTROL_PLANE: "control_plane"}
    for i, pool in enumerate(spec["pools"]):
        name = pool["name"]
        if name in taken:
            errors.add(
                "pools[%d].name" % i,
                "%r is taken (by %s); pool names are unique and cp is the control plane's" % (name, taken[name]),
            )
        taken[name] = "pools[%d]" % i
    for i, name in enumerate(spec["remove_pools"]):
        if name in taken:
            errors.add(
                "remove_pools[%d]" % i,
                "%r is %s: a pool removed is one the spec no longer lists"
                % (name, "the control plane" if name == CONTROL_PLANE else "listed in " + taken[name]),
            )


def pools(spec: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Every pool of a checked spec, the control plane first, with its machines' names: ``[{name, names, vcpus,
    memory, image, diskSize, gpu}]`` (``gpu`` None for a pool without GPUs)."""
    out: list[dict[str, Any]] = []
    name = spec["cluster"]["name"]
    for pool in [dict(spec["control_plane"], name=CONTROL_PLANE)] + spec["pools"]:
        machines = ["%s-%s-%d" % (name, pool["name"], i) for i in range(pool["replicas"])]
        out.append(dict(pool, names=machines, gpu=pool.get("gpu")))
    return out


# --- the checked spec, typed and frozen: what the cluster core plans from ---


@dataclass(frozen=True)
class PoolSpec(Pool):
    """One pool of a checked spec, the control plane's (``cp``) included: a :class:`~spec.pool.Pool` whose name and
    size are known (the spec requires them), its machines' names in order."""

    name: str
    vcpus: int
    memory: int


@dataclass(frozen=True)
class ClusterSpec:
    """A cluster spec, checked (:func:`check`): who the cluster is, where, its pools (the control plane first), what
    its machines' first boot installs, and ``document``, the checked spec whole (the module's ``spec``)."""

    name: str
    location: str
    cloudspace: str
    pools: tuple[PoolSpec, ...]
    first_boot: Mapping[str, Any]
    document: Mapping[str, Any]
    #: ``remove_pools``: the pools no longer listed whose machines a converge deletes
    remove_pools: tuple[str, ...] = ()

    @property
    def names(self) -> list[str]:
        """Every machine's name, pool by pool."""
        return [n for pool in self.pools for n in pool.names]

    def as_dict(self) -> dict[str, Any]:
        """The checked spec as a new plain dict (what the module returns and a spec file holds)."""
        return copy_value(self.document)


def _typed(doc: dict[str, Any]) -> ClusterSpec:
    out = []
    for pool in pools(doc):
        g = pool.get("gpu")
        out.append(
            PoolSpec(
                name=pool["name"],
                names=tuple(pool["names"]),
                vcpus=pool["vcpus"],
                memory=pool["memory"],
                image=pool.get("image"),
                disk_size=pool.get("diskSize"),
                gpu=GpuSpec(g["type"], g["count"], g["driverVersion"], g.get("profile")) if g else None,
            )
        )
    c = doc["cluster"]
    return ClusterSpec(
        name=c["name"],
        location=c["location"],
        cloudspace=c["cloudspace"],
        pools=tuple(out),
        first_boot=MappingProxyType(copy_value(doc["first_boot"])),
        document=MappingProxyType(doc),
        remove_pools=tuple(doc.get("remove_pools") or ()),
    )


# --- what a cluster records of its spec (its pools note), and the spec made from that record ---


def record(spec: ClusterSpec) -> notes.NotedCluster:
    """What the cluster's pools note records of ``spec``: every pool (the control plane first) with what its
    machines are made from, and the first boot when it is not the default one (``notes.pools_note``)."""
    pools = tuple(
        notes.NotedPool(
            p.name,
            len(p.names),
            p.vcpus,
            p.memory,
            p.gpu.type if p.gpu else None,
            p.gpu.count if p.gpu else 0,
            p.image,
            p.disk_size,
            p.gpu.driver_version if p.gpu else "",
            p.gpu.profile if p.gpu else None,
        )
        for p in spec.pools
    )
    fb = spec.first_boot
    defaults = {k: f.default for k, f in FIRST_BOOT.items()}
    boot = None
    if any(fb.get(k) != v for k, v in defaults.items()):
        boot = notes.NotedBoot(tuple(fb["packages"]), fb["attempts"], fb["delay"], fb["lock_timeout"])
    return notes.NotedCluster(spec.name, pools, boot)


def from_record(cluster: Mapping[str, Any], recorded: notes.NotedCluster) -> dict[str, Any]:
    """The spec (as a user writes it, to :func:`check`) of ``cluster`` (its ``cluster`` key) that its pools note
    ``recorded``: the control plane and every pool as the cluster's last converge left them, and its first boot."""
    out: dict[str, Any] = {"cluster": dict(cluster), "pools": []}
    for p in recorded.pools:
        pool: dict[str, Any] = {"replicas": p.replicas, "vcpus": p.vcpus, "memory": p.memory}
        pool.update({k: v for k, v in (("image", p.image), ("diskSize", p.disk_size)) if v is not None})
        if p.gpu_type is not None:
            pool["gpu"] = {"type": p.gpu_type, "count": p.gpu_count, "driverVersion": p.driver_version}
            if p.profile is not None:
                pool["gpu"]["profile"] = p.profile
        if p.name == CONTROL_PLANE:
            out["control_plane"] = pool
        else:
            out["pools"].append(dict(name=p.name, **pool))
    if recorded.boot is not None:
        b = recorded.boot
        out["first_boot"] = {
            "packages": list(b.packages),
            "attempts": b.attempts,
            "delay": b.delay,
            "lock_timeout": b.lock_timeout,
        }
    return out
