# -*- coding: utf-8 -*-
# Copyright: (c) 2026, whitesky.capvco contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Machines are owned by a marker in the VM's ``description``, written when the collection creates the VM (the
platform has no tags):

``capvco/v1 cluster=<cluster> [pool=<pool>]``

It is read back with ``getVirtualMachineInfo`` (listings do not carry the
description) and compared whole: cluster ``web`` never matches ``web-gpu``'s
machines, nor a VM made by hand.

A cluster's machines are also named ``<cluster>-<rest>`` (:func:`check_machine_name`; the collection creates no
other): a read of a cluster's machines describes only the VMs of such names, so that it costs one call per VM of
the cluster, never one per VM of its neighbours.  The name is a filter, never proof: ``web-gpu-cp-0`` is read for
cluster ``web`` too, and its marker (``web-gpu``) says it is not ``web``'s.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

from ansible_collections.whitesky.capvco.plugins.module_utils.ownership.naming import NAME, check_name
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.errors import InputError


class Marker(NamedTuple):
    """What a machine's marker says: its cluster, and its pool (None when it names none)."""

    cluster: str
    pool: str | None


MARKER = "capvco/v1"


def machine_marker(cluster: str, pool: str | None = None) -> str:
    """The ``description`` a machine of ``cluster`` is created with."""
    check_name("cluster", cluster)
    parts = [MARKER, "cluster=" + cluster]
    if pool:
        check_name("pool", pool)
        parts.append("pool=" + pool)
    return " ".join(parts)


def machine_name_prefix(cluster: str) -> str:
    """What every machine name of ``cluster`` starts with: the cluster's name and ``-``."""
    check_name("cluster", cluster)
    return cluster + "-"


def may_own(cluster: str, name: object) -> bool:
    """True when a VM named ``name`` may be one of ``cluster``'s machines (its name follows the rule); only its
    marker says whether it is."""
    prefix = machine_name_prefix(cluster)
    return isinstance(name, str) and name.startswith(prefix) and len(name) > len(prefix)


def check_machine_name(cluster: str, name: object) -> None:
    """Refuse a machine name of ``cluster`` that does not start with ``<cluster>-``."""
    if not may_own(cluster, name):
        raise InputError(
            "machine name %r does not start with the cluster's name and '-' (%r): a cluster's machines are named "
            "<cluster>-<rest>, e.g. %r, so that reading a cluster costs one call per machine of its own, not per VM "
            "of the cloudspace" % (name, machine_name_prefix(cluster), machine_name_prefix(cluster) + "gpu-0")
        )


def check_machine_names(cluster: str, names: Iterable[object]) -> None:
    """Refuse, naming every one, the machine names of ``cluster`` that do not start with ``<cluster>-``."""
    bad = [name for name in names if not may_own(cluster, name)]
    if len(bad) == 1:
        check_machine_name(cluster, bad[0])
    if bad:
        raise InputError(
            "machine names %s do not start with the cluster's name and '-' (%r): a cluster's machines are named "
            "<cluster>-<rest>, so that reading a cluster costs one call per machine of its own, not per VM of the "
            "cloudspace" % (", ".join(repr(n) for n in bad), machine_name_prefix(cluster))
        )


def parse_marker(description: object) -> Marker | None:
    """The :class:`Marker` a VM's description carries, or None when it carries none."""
    if not isinstance(description, str):
        return None
    tokens = description.split(" ")
    if tokens[0] != MARKER:
        return None
    fields: dict[str, str] = {}
    for token in tokens[1:]:
        key, sep, value = token.partition("=")
        if not sep or key in fields or key not in ("cluster", "pool"):
            return None
        fields[key] = value
    if not NAME.fullmatch(fields.get("cluster", "")):
        return None
    if "pool" in fields and not NAME.fullmatch(fields["pool"]):
        return None
    return Marker(fields["cluster"], fields.get("pool"))


def machine_owned(description: object, cluster: str) -> bool:
    """True when a VM's description says it is ``cluster``'s (the whole name, never a prefix)."""
    marker = parse_marker(description)
    return marker is not None and marker.cluster == cluster
