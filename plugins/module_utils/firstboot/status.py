# -*- coding: utf-8 -*-
# Copyright: (c) 2026, whitesky.capvco contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a machine's first boot reports: its status file read through the platform's guest agent, and a GPU
machine's ``GPUDriverReady`` condition (plain Python, no Ansible).

The file comes from the machine, so it is parsed as hostile: at most :data:`STATUS_LIMIT` bytes and
:data:`DEPTH_LIMIT` levels of nesting, both checked before it is parsed as JSON; then read into a
:class:`FirstBootStatus`, whose fields are exactly what ``script.PRELUDE``'s ``status`` writes, each of its
type.  Anything else (an unknown field, a field of another type, a state that is none of the three) is an
:class:`InvalidStatus` whose message is bounded and scrubbed; what the record carries is scrubbed too.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from ansible_collections.whitesky.capvco.plugins.module_utils.firstboot.errors import InvalidStatus, MachineNotFound
from ansible_collections.whitesky.capvco.plugins.module_utils.firstboot.script import STATUS_FILE
from ansible_collections.whitesky.capvco.plugins.module_utils.platform import documents
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.errors import ApiError, missing_is_none
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.scrub import scrub

if TYPE_CHECKING:
    from ansible_collections.whitesky.capvco.plugins.module_utils.platform.client import WhiteskyClient

#: The largest status document read, in bytes (the script writes 30 lines of log and nvidia-smi's lines).
STATUS_LIMIT = 64 * 1024
#: The deepest nesting parsed (the document is flat: anything nested is refused after parsing, but never recursed
#: into first).
DEPTH_LIMIT = 32
#: The longest message a condition or an error carries.
MESSAGE_LIMIT = 1024
STATES = ("running", "ready", "failed")

_STEP = re.compile(r"[A-Za-z0-9._-]{0,64}")
_VERSION = re.compile(r"(?:[0-9]{1,6}(?:\.[0-9]{1,6}){0,3})?")


@dataclass(frozen=True)
class FirstBootStatus:
    """A first boot's report (``first-boot.status``, or ``gpu-driver.status`` of the driver's own script), its
    texts scrubbed.  The script writes every field; a document needs only ``state``, and a field it leaves out
    reads as empty (``""``, ``False``)."""

    state: str
    step: str = ""
    reason: str = ""
    gpu_driver_version: str = ""
    nvidia_smi: str = ""
    changed: bool = False
    log_tail: str = ""

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


#: Each field: its type, and how its text is bounded (characters; multi-line keeps its lines) or checked.
_TEXTS = {"step": (64, False), "reason": (4096, True), "nvidia_smi": (8192, True), "log_tail": (16384, True)}
_FIELDS: dict[str, type] = {
    "state": str,
    "step": str,
    "reason": str,
    "gpu_driver_version": str,
    "nvidia_smi": str,
    "changed": bool,
    "log_tail": str,
}


def _kind(value: object) -> str:
    names = {bool: "a boolean", int: "an integer", float: "a number", str: "a string", list: "a list"}
    names[dict] = "an object"
    return "null" if value is None else names.get(type(value), type(value).__name__)


def _invalid(what: str) -> InvalidStatus:
    return InvalidStatus(scrub("not a first-boot status: " + what, MESSAGE_LIMIT))


def _field(name: str, value: object) -> Any:
    wanted = _FIELDS[name]
    if isinstance(value, bool) is not (wanted is bool) or not isinstance(value, wanted):
        raise _invalid("%s is %s, not %s" % (name, _kind(value), "a boolean" if wanted is bool else "a string"))
    if name == "state" and value not in STATES:
        raise _invalid("state %r is none of %s" % (value, ", ".join(STATES)))
    if name == "step" and not _STEP.fullmatch(str(value)):
        raise _invalid("step %r is not a step's name" % value)
    if name == "gpu_driver_version" and not _VERSION.fullmatch(str(value)):
        raise _invalid("gpu_driver_version %r is not a driver version" % value)
    if name in _TEXTS:
        limit, multiline = _TEXTS[name]
        return scrub(value, limit, multiline=multiline)
    return value


def parse(text: object) -> FirstBootStatus:
    """The :class:`FirstBootStatus` a status file's text says, or :class:`InvalidStatus` (never another error)."""
    if isinstance(text, (bytes, bytearray)):
        text = bytes(text).decode("utf-8", "replace")
    if not isinstance(text, str):
        raise _invalid("the file's text is %s" % _kind(text))
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > STATUS_LIMIT:
        raise _invalid("it is larger than %d bytes" % STATUS_LIMIT)
    if documents.text_depth(text, DEPTH_LIMIT) > DEPTH_LIMIT:
        raise _invalid("it nests deeper than %d levels" % DEPTH_LIMIT)
    try:
        doc = documents.loads(text, "a first-boot status")
    except documents.NotJson as exc:
        raise _invalid("not JSON (%s)" % exc) from None
    if not isinstance(doc, dict):
        raise _invalid("the document is %s, not an object" % _kind(doc))
    unknown = sorted(str(k) for k in doc if k not in _FIELDS)
    if unknown:
        raise _invalid("unknown field(s) %s" % ", ".join(repr(k[:64]) for k in unknown[:8]))
    if "state" not in doc:
        raise _invalid("it has no state")
    return FirstBootStatus(**{name: _field(name, value) for name, value in doc.items()})


def _not_found(client: WhiteskyClient, cloudspace_id: str, vm_id: int) -> MachineNotFound | None:
    """After a 404 from readFile: the error when the VM or its cloudspace does not exist, None when both do (the
    file is what is not there yet) or when the platform cannot tell now."""
    try:
        client.get_vm(cloudspace_id, vm_id)
    except ApiError as exc:
        if exc.status != 404:
            return None
    else:
        return None
    try:
        cloudspace = missing_is_none(client.get_cloudspace, cloudspace_id)
    except ApiError:
        cloudspace = {}
    what = (
        "cloudspace %r does not exist" % cloudspace_id
        if cloudspace is None
        else "VM %s does not exist in cloudspace %r" % (vm_id, cloudspace_id)
    )
    return MachineNotFound(
        scrub("%s: no first boot will report (the machine was deleted, or never made)" % what, MESSAGE_LIMIT),
        {"machine_not_found": True, "cloudspace_id": cloudspace_id, "vm_id": vm_id},
    )


def read_status(
    client: WhiteskyClient, cloudspace_id: str, vm_id: int, path: str = STATUS_FILE
) -> tuple[FirstBootStatus | None, str]:
    """What the first boot reports, read through the platform's guest agent (``readFile``): ``(status, "")``, or
    ``(None, why)`` while there is none yet (no file, no agent yet, an empty file).

    Raises :class:`InvalidStatus` for a file that is not a status document, :class:`MachineNotFound` when the VM
    or its cloudspace does not exist, and the platform's 401 and 403.
    """
    try:
        text = client.read_file(cloudspace_id, vm_id, path, size=STATUS_LIMIT + 1)
    except ApiError as exc:
        if exc.status in (401, 403):
            raise
        missing = _not_found(client, cloudspace_id, vm_id) if exc.status == 404 else None
        if missing is not None:
            raise missing from None
        return None, scrub("the platform cannot read %s on VM %s yet: %s" % (path, vm_id, exc.message), MESSAGE_LIMIT)
    if not text.strip():
        return None, scrub("%s on VM %s is empty: no report yet" % (path, vm_id), MESSAGE_LIMIT)
    return parse(text), ""


def gpu_driver_condition(status: FirstBootStatus | None, why: str = "", invalid: bool = False) -> dict[str, str]:
    """The ``GPUDriverReady`` condition of a GPU machine from what its first boot reports.

    Unknown while there is no verdict (no report, or the first boot still running); False with the step and
    the reason when the first boot failed (or reported ready without having verified a driver, or wrote a report
    that is not one: ``invalid``, with ``why``); True with the driver version seen.  None of these sets a failure
    reason: a first boot can be run again on the machine, and a machine whose first boot failed never becomes a
    Node (Cluster API's health checks replace it).
    """
    cond = {"type": "GPUDriverReady"}
    if invalid:
        msg = scrub(why or "the first boot's report is not a status document", MESSAGE_LIMIT)
        return dict(cond, status="False", severity="Warning", reason="InvalidStatus", message=msg)
    if status is None:
        return dict(cond, status="Unknown", reason="WaitingForFirstBoot", message=scrub(why or "no report yet"))
    if status.state == "running":
        msg = scrub("the first boot is at step %s" % status.step, MESSAGE_LIMIT)
        return dict(cond, status="Unknown", reason="FirstBootRunning", message=msg)
    if status.state == "failed":
        msg = scrub("the first boot failed at %s: %s" % (status.step, status.reason.strip()), MESSAGE_LIMIT)
        return dict(cond, status="False", severity="Error", reason="FirstBootFailed", message=msg)
    seen = status.gpu_driver_version
    if not seen:
        msg = "the first boot reported ready without a gpu-driver step (created before it had one?)"
        return dict(cond, status="False", severity="Warning", reason="DriverNotVerified", message=msg)
    gpus = len([line for line in status.nvidia_smi.splitlines() if line.strip()])
    return dict(cond, status="True", reason="DriverVerified", message="NVIDIA driver %s, %d GPU(s)" % (seen, gpus))


def info(
    client: WhiteskyClient,
    *,
    cloudspace_id: str,
    vm_id: int,
    path: str = STATUS_FILE,
    gpu: bool = False,
) -> dict[str, Any]:
    """Core of ``first_boot_info``: a machine's first-boot status, through the platform; with ``gpu``, its
    ``GPUDriverReady`` condition.  A report that is not one is reported (``invalid``, and why in ``message``); a
    VM or cloudspace that does not exist is an error (:class:`MachineNotFound`)."""
    invalid = False
    try:
        status, why = read_status(client, cloudspace_id, vm_id, path)
    except InvalidStatus as exc:
        status, why, invalid = None, scrub("%s on VM %s is %s" % (path, vm_id, exc), MESSAGE_LIMIT), True
    result: dict[str, Any] = {
        "reported": status is not None or invalid,
        "invalid": invalid,
        "status": status.as_dict() if status is not None else {},
        "message": why,
    }
    if gpu:
        result["gpu_driver_ready"] = gpu_driver_condition(status, why, invalid)
    return result
