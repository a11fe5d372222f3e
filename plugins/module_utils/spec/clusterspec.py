# -*- coding: utf-8 -*-
# Copyright: (c) 2026, whitesky.capvco contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The cluster spec's fields: one typed contract, written once (pure Python).

The spec is what a user writes (``cluster``, ``control_plane``, ``pools``, ``sriov``, ``first_boot``).  :data:`SPEC`
says what each field may be (its kind, bounds, default and doc, in the schema's language, ``schema``); a spec is
checked whole against it (``speccheck.check``), for every entry that takes it: the cluster playbooks (through the
``cluster`` module), the AWX surveys (whose answers become a spec) and the controller (the CRDs' OpenAPI schemas are
tested against ``reference.openapi``).  docs/lifecycle.md's reference is generated from :data:`SPEC`
(``reference.reference``).  A new field of the spec goes into :data:`SPEC`, and, when the cluster core reads it,
into the checked spec's records (``typed``).
"""

from __future__ import annotations

import ipaddress
from typing import Any

from ansible_collections.whitesky.capvco.plugins.module_utils.firstboot.render import RETRIES
from ansible_collections.whitesky.capvco.plugins.module_utils.spec.schema import (
    CLOUDSPACE,
    DRIVER_VERSION,
    GPU_PROFILE,
    GPU_TYPE,
    LABEL,
    PACKAGE,
    Field,
    int_field,
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
