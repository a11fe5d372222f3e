# -*- coding: utf-8 -*-
# Copyright: (c) 2026, whitesky.capvco contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A cluster spec as given, checked whole (pure Python).

:func:`check` parses a spec against ``clusterspec.SPEC`` (the schema's parser, ``schema``), makes the checks across
its fields, and returns the checked spec, typed (``typed.ClusterSpec``), or an :class:`InputError` that names every
bad field by its path; :func:`secrets` finds the secret values of a spec as given, checked or not.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ansible_collections.whitesky.capvco.plugins.module_utils.platform.errors import InputError
from ansible_collections.whitesky.capvco.plugins.module_utils.spec.clusterspec import CONTROL_PLANE, IMAGE_HINT, SPEC
from ansible_collections.whitesky.capvco.plugins.module_utils.spec.schema import MISSING, Errors, Field, misspelt, parse
from ansible_collections.whitesky.capvco.plugins.module_utils.spec.typed import ClusterSpec, from_document


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
    return from_document(out)


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
