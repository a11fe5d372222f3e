"""Cloudspace notes: list, create, update, delete.

A note lives as long as its cloudspace: it stays while the cloudspace is in
the recycle bin (unreachable, as the cloudspace is) and goes when the
cloudspace is deleted permanently.  Its author (``created_by``,
``modified_by``) is the caller; the emulator knows one caller per customer
(its bearer token has no user in it), so that is the customer id.
"""

from __future__ import annotations

from ..http import found, op


def note_view(r):
    return {
        "id": r["note_id"],
        "title": r["title"],
        "content": r["content"],
        "creation_time": r["created"],
        "last_update_time": r["updated"],
        "created_by": r["created_by"],
        "modified_by": r["modified_by"],
    }


def target_note(ctx):
    """(customer, cloudspace row, note row) of a note's path; 404 for what does not exist."""
    cid = ctx.customer()
    cs = ctx.emu.cloudspace(cid, ctx.path["cloudspace_id"])
    note = found(
        ctx.store.note(cs["cloudspace_id"], ctx.path["note_id"]),
        "note %r not found in cloudspace %r" % (ctx.path["note_id"], cs["cloudspace_id"]),
    )
    return cid, cs, note


@op("getCloudspaceNotes")
async def list_notes(ctx):
    cs = ctx.emu.cloudspace(ctx.customer(), ctx.path["cloudspace_id"])
    return {"result": [note_view(r) for r in ctx.store.notes(cs["cloudspace_id"])]}


@op("createCloudspaceNote", mutating=True)
async def create_note(ctx):
    cid = ctx.customer()
    cs = ctx.emu.cloudspace(cid, ctx.path["cloudspace_id"])
    ctx.store.new_note(cs["cloudspace_id"], ctx.body["title"], ctx.body["content"], cid)
    return {"success": True}


@op("updateCloudspaceNote", mutating=True)
async def update_note(ctx):
    cid, _cs, note = target_note(ctx)
    ctx.store.update_note(note["note_id"], ctx.body["title"], ctx.body["content"], cid)
    return {"success": True}


@op("deleteCloudspaceNote", mutating=True)
async def delete_note(ctx):
    _cid, _cs, note = target_note(ctx)
    ctx.store.delete_note(note["note_id"])
    return {"success": True}
