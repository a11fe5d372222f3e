# -*- coding: utf-8 -*-
# Copyright: (c) 2026, whitesky.capvco contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Cloudspaces by name (pure Python)."""

from __future__ import annotations

from ansible_collections.whitesky.capvco.plugins.module_utils.errors import ApiError, InputError, gone_is_done


def find(client, name, location):
    for cs in client.cloudspaces():
        if cs["name"] == name and cs.get("location") == location:
            return cs
    return None


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
        if req.check_mode:
            return result

        def resolve(_exc):  # the answer was lost: created after all?
            found = find(client, p["name"], p["location"])
            return {"cloudspace_id": found["cloudspace_id"]} if found else None

        cs_id = client.create_cloudspace(p["name"], p["location"], p.get("private_network"), resolve=resolve)
        result["cloudspace"] = view(client.get_cloudspace(cs_id))
        return result
    if not cs:
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
