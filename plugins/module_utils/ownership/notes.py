# -*- coding: utf-8 -*-
# Copyright: (c) 2026, whitesky.capvco contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A cloudspace a cluster creates is owned by a note written on it at once (the platform keeps notes on
cloudspaces): title ``capvco/v1``, content ``creator cluster=<cluster>`` (:func:`creator_note`).  A cluster that has
machines in a cloudspace it did not create says so with a note ``member cluster=<cluster>`` (:func:`member_note`),
written the first time it holds its lease there: with the creator notes, the clusters a cloudspace holds are read
with one call, so the inventory reads the markers of those clusters' VMs only.  Neither note is proof that a
machine is a cluster's: the marker is (``markers``).  A creator torn down while other clusters' machines remain
hands the cloudspace over (:func:`handover_note`).

The cluster's pools note, under the same title, is information and no proof of anything: ``poolsnote`` writes it,
``poolsread`` reads it back.
"""

from __future__ import annotations

from collections.abc import Iterable

from ansible_collections.whitesky.capvco.plugins.module_utils.ownership.markers import MARKER
from ansible_collections.whitesky.capvco.plugins.module_utils.ownership.naming import NAME, check_name

NOTE_TITLE = MARKER


def creator_note(cluster: str) -> tuple[str, str]:
    """``(title, content)`` of the note that records ``cluster`` as the creator of a cloudspace."""
    check_name("cluster", cluster)
    return NOTE_TITLE, "creator cluster=" + cluster


def member_note(cluster: str) -> tuple[str, str]:
    """``(title, content)`` of the note that records ``cluster`` as having machines in a cloudspace."""
    check_name("cluster", cluster)
    return NOTE_TITLE, "member cluster=" + cluster


def handover_note(creator: str, successor: str) -> tuple[str, str]:
    """``(title, content)`` of the note by which the cloudspace's creator ``creator``, torn down while the machines
    of cluster ``successor`` are still in the cloudspace, hands it over: ``successor``'s teardown deletes it."""
    check_name("cluster", creator)
    check_name("cluster", successor)
    return NOTE_TITLE, "handover from=%s to=%s" % (creator, successor)


def note_handover(title: object, content: object) -> tuple[str, str] | None:
    """``(creator, successor)`` of a handover note, or None (the whole note must match)."""
    if title != NOTE_TITLE or not isinstance(content, str) or not content.startswith("handover from="):
        return None
    head, sep, successor = content[len("handover from=") :].partition(" to=")
    if not sep or not NAME.fullmatch(head) or not NAME.fullmatch(successor):
        return None
    return head, successor


def note_cluster(title: object, content: object) -> str | None:
    """The cluster a creator or member note names, or None (the whole note must match)."""
    if title != NOTE_TITLE or not isinstance(content, str):
        return None
    head, sep, cluster = content.partition("=")
    if head not in ("creator cluster", "member cluster") or not sep or not NAME.fullmatch(cluster):
        return None
    return cluster


def clusters_in(notes: Iterable[object]) -> set[str]:
    """The clusters a cloudspace's notes (``[{title, content, ...}]``) name as its creator or as having machines in
    it (:func:`note_cluster`): where the inventory reads markers."""
    found = (note_cluster(n.get("title"), n.get("content")) for n in notes if isinstance(n, dict))
    return {c for c in found if c is not None}


def note_creator(title: object, content: object) -> str | None:
    """The cluster a cloudspace note records as the cloudspace's creator, or None (the whole note must match)."""
    if title != NOTE_TITLE or not isinstance(content, str):
        return None
    head, sep, cluster = content.partition("=")
    if head != "creator cluster" or not sep or not NAME.fullmatch(cluster):
        return None
    return cluster
