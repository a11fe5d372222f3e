# -*- coding: utf-8 -*-
# Copyright: (c) 2026, whitesky.capvco contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Cloudspaces by name (pure Python).

The platform keeps no owner for a cloudspace.  A cluster's teardown deletes one
only when the cluster created it (recorded as ``cloudspace=created`` in its
machines' markers, see ``ownership``) and no VM is left in it: a VM there after
the cluster's own are gone is a neighbour's, and the cloudspace stays.
"""

from __future__ import annotations

from ansible_collections.whitesky.capvco.plugins.module_utils.errors import ApiError, InputError, gone_is_done
from ansible_collections.whitesky.capvco.plugins.module_utils.lookups import cloudspace_by_name as find
from ansible_collections.whitesky.capvco.plugins.module_utils.lookups import described


def view(cs):
    return {k: cs.get(k) for k in ("cloudspace_id", "name", "location", "status", "private_network")} if cs else {}


def info(req):
    """Core of ``cloudspace_info``."""
    p = req.params
    spaces = req.client.cloudspaces()
    if p.get("name"):
        spaces = [c for c in spaces if c["name"] == p["name"]]
    if p.get("location"):
        spaces = [c for c in spaces if c.get("location") == p["location"]]
    return {"cloudspaces": [view(c) for c in spaces]}


def ensure(req):
    """Core of ``cloudspace``: a cloudspace of this name exists in the location, or not."""
    p = req.params
    client = req.client
    cs = find(client, p["name"], p["location"])
    result = {"changed": False, "cloudspace": view(cs)}
    if p["state"] == "present":
        if cs:
            return result
        result.update(changed=True, diff={"before": {}, "after": {"name": p["name"], "location": p["location"]}})
        if not req.check_mode:
            result["cloudspace"] = create(client, p["name"], p["location"], p.get("private_network"))
        return result
    if not cs:
        return result
    if p.get("cluster"):
        why = keep_reason(client, cs, p["cluster"], p.get("created_by_cluster"))
        if why:
            result.update(kept=why, warnings=["cloudspace %r is kept: %s" % (p["name"], why)])
            return result
    result.update(changed=True, diff={"before": view(cs), "after": {}})
    if not req.check_mode:
        try:
            gone_is_done(client.delete_cloudspace, cs["cloudspace_id"], permanently=True)
        except ApiError as exc:
            if exc.status == 409:
                raise InputError("cloudspace %r still has machines: %s" % (p["name"], exc.message)) from None
            raise
    return result


def create(client, name, location, private_network=None):
    """A new cloudspace, viewed; a lost answer is resolved by looking for it by name."""

    def resolve(_exc):  # the answer was lost: created after all?
        found = find(client, name, location)
        return {"cloudspace_id": found["cloudspace_id"]} if found else None

    cs_id = client.create_cloudspace(name, location, private_network, resolve=resolve)
    return view(client.get_cloudspace(cs_id))


def keep_reason(client, cs, cluster, created):
    """Why cluster ``cluster``'s teardown must leave cloudspace ``cs``, or None when it may delete it."""
    if not created:
        return "cluster %r did not create it (none of its machines records cloudspace=created)" % cluster
    left = described(client, cs["cloudspace_id"])
    foreign = sorted(v["name"] for v in left if v["owner"] != cluster)
    if foreign:
        return "it holds %d machine(s) cluster %r does not own: %s" % (len(foreign), cluster, ", ".join(foreign))
    if left:
        return "cluster %r's machines are still in it: %s" % (cluster, ", ".join(sorted(v["name"] for v in left)))
    return None
