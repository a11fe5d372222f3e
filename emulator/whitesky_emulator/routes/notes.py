"""Cloudspace notes: list, create, update, delete.

A note lives as long as its cloudspace: it stays while the cloudspace is in
the recycle bin (unreachable, as the cloudspace is) and goes when the
cloudspace is deleted permanently.  Its author (``created_by``,
``modified_by``) is the caller; the emulator knows one caller per customer
(its bearer token has no user in it), so that is the customer id.
"""

from __future__ import annotations

from ..http import Ctx, JsonObject, found, op
from ..store import Cloudspace, Note


def note_view(r: Note) -> JsonObject:
    return {
        "id": r.note_id,
        "title": r.title,
        "content": r.content,
        "creation_time": r.created,
        "last_update_time": r.updated,
        "created_by": r.created_by,
        "modified_by": r.modified_by,
    }


def target_note(ctx: Ctx) -> tuple[str, Cloudspace, Note]:
    """(customer, cloudspace row, note row) of a note's path; 404 for what does not exist."""
    cid = ctx.customer()
    cs = ctx.emu.cloudspace(cid, ctx.path_text("cloudspace_id"))
    note_id = ctx.path_text("note_id")
    note = found(
        ctx.store.notes.get(cs.cloudspace_id, note_id),
        "note %r not found in cloudspace %r" % (note_id, cs.cloudspace_id),
    )
    return cid, cs, note


def note_text(ctx: Ctx) -> tuple[str, str]:
    """The body's title and content (both required by the operation)."""
    body = ctx.body or {}
    return body["title"], body["content"]


@op("getCloudspaceNotes")
async def list_notes(ctx: Ctx) -> JsonObject:
    cs = ctx.emu.cloudspace(ctx.customer(), ctx.path_text("cloudspace_id"))
    return {"result": [note_view(r) for r in ctx.store.notes.listing(cs.cloudspace_id)]}


@op("createCloudspaceNote", mutating=True)
async def create_note(ctx: Ctx) -> JsonObject:
    cid = ctx.customer()
    cs = ctx.emu.cloudspace(cid, ctx.path_text("cloudspace_id"))
    ctx.store.notes.create(cs.cloudspace_id, *note_text(ctx), cid)
    return {"success": True}


@op("updateCloudspaceNote", mutating=True)
async def update_note(ctx: Ctx) -> JsonObject:
    cid, _cs, note = target_note(ctx)
    ctx.store.notes.update(note.note_id, *note_text(ctx), cid)
    return {"success": True}


@op("deleteCloudspaceNote", mutating=True)
async def delete_note(ctx: Ctx) -> JsonObject:
    _cid, _cs, note = target_note(ctx)
    ctx.store.notes.delete(note.note_id)
    return {"success": True}
