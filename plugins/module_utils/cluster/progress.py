# -*- coding: utf-8 -*-
# Copyright: (c) 2026, whitesky.capvco contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A converge's progress, line by line, while it runs: each machine created or deleted, each vGPU reserved or
released, written to a file the moment the platform said so (the ``cluster`` action plugin shows each line under
its task as it comes, at default verbosity).

Nothing here plans or decides: :func:`observe` gives the appliers the run's client observed (:class:`Observed`, a
client of the same parts), which writes a line after each write call that succeeded (or whose lost answer was
resolved); what fails is said by the module's failure, with what the run did before it.  A line is scrubbed and
bounded; a progress file that cannot be written is never the run's failure.  The file is the run's own: made new,
private, never an existing path (see :func:`refusal`)."""

from __future__ import annotations

import os
import stat
from typing import Any

from ansible_collections.whitesky.capvco.plugins.module_utils.ownership import naming
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.client import WhiteskyClient
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.errors import InputError
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.scrub import scrub

#: The longest progress line.
LIMIT = 200


#: How the run makes its progress file: new (never an existing file, whatever it is), never through a link, never
#: waiting on what is at the path (a FIFO), for writing only, and not handed to a child process.
FLAGS = (
    os.O_WRONLY
    | os.O_APPEND
    | os.O_CREAT
    | os.O_EXCL
    | getattr(os, "O_NOFOLLOW", 0)
    | getattr(os, "O_NONBLOCK", 0)
    | getattr(os, "O_CLOEXEC", 0)
)


def refusal(path: str) -> str | None:
    """Why ``path`` cannot be this run's progress file (``None``: it can).  The run makes the file itself, new:
    something already there (a file of another user, a FIFO that would block the run in its ``open``, a link) is
    refused, naming what it is; so is a folder that is not there or that another user may write to (without the
    sticky bit, anyone could swap the file)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        pass
    except OSError as exc:
        return "progress_file %r cannot be checked: %s" % (path, exc.strerror)
    else:
        kind = (
            "a regular file"
            if stat.S_ISREG(st.st_mode)
            else "a FIFO"
            if stat.S_ISFIFO(st.st_mode)
            else "a symbolic link"
            if stat.S_ISLNK(st.st_mode)
            else "a directory"
            if stat.S_ISDIR(st.st_mode)
            else "not a regular file"
        )
        whose = "" if st.st_uid == os.geteuid() else " of user id %d" % st.st_uid
        return (
            "progress_file %r already exists (%s%s): the run writes a new file of its own; name a path that does "
            "not exist" % (path, kind, whose)
        )
    folder = os.path.dirname(os.path.abspath(path))
    try:
        st = os.stat(folder)
    except OSError as exc:
        return "progress_file %r: its folder %r cannot be used: %s" % (path, folder, exc.strerror)
    if not stat.S_ISDIR(st.st_mode):
        return "progress_file %r: %r is not a folder" % (path, folder)
    if st.st_mode & stat.S_IWOTH and not st.st_mode & stat.S_ISVTX:
        return "progress_file %r: its folder %r may be written by any user (and has no sticky bit)" % (path, folder)
    return None


class Progress:
    """Lines appended to the run's own new file at ``path`` (one write each: a reader sees whole lines).  Made by
    :meth:`create`, before the run changes anything; a line that cannot be written is never the run's failure."""

    def __init__(self, fd: int) -> None:
        self.fd: int | None = fd

    @classmethod
    def create(cls, path: str) -> Progress:
        """The progress file, made new and private (0600); :class:`InputError` with the reason when ``path`` cannot
        be (see :func:`refusal`)."""
        why = refusal(path)
        if why is not None:
            raise InputError(why)
        try:
            fd = os.open(path, FLAGS, 0o600)
        except OSError as exc:  # made or swapped between the check and here: refused as well
            raise InputError("progress_file %r cannot be made: %s" % (path, exc.strerror)) from exc
        return cls(fd)

    def say(self, text: str) -> None:
        if self.fd is None:
            return
        try:
            os.write(self.fd, (scrub(text, LIMIT) + "\n").encode("utf-8", "replace"))
        except OSError:
            self.close()

    def close(self) -> None:
        if self.fd is not None:
            fd, self.fd = self.fd, None
            os.close(fd)


class Observed(WhiteskyClient):
    """The run's client (``client``), observed: a :class:`WhiteskyClient` that holds the same parts (its transport,
    what the run learned, the leases it holds: one client, not a second one), whose five calls that make or take a
    machine or a vGPU, and the listing that names the machines, are the client's with a progress line after each
    write that succeeded; every other call is the client's own, inherited."""

    def __init__(self, client: WhiteskyClient, progress: Progress) -> None:
        vars(self).update(vars(client))  # the same transport, markers and leases, shared (not copied)
        self.client = client
        self.progress = progress
        self._names: dict[int, str] = {}  # vm id -> machine name: those this run listed or created

    def __enter__(self) -> Observed:
        return self

    def __exit__(self, *exc: object) -> None:
        return None  # the run's client is closed by whoever made it

    def _machine(self, vm_id: object, vgpu_name: object = None) -> str:
        if isinstance(vm_id, int) and vm_id in self._names:
            return "machine %s" % self._names[vm_id]
        owner = naming.decode(vgpu_name)
        return "VM %s" % vm_id if owner is None else "VM %s (%s)" % (vm_id, owner.machine)

    def vms(self, cloudspace_id: str) -> list[Any]:
        """The client's, the machines' names remembered (a line names the machine, not only its VM id)."""
        listed = super().vms(cloudspace_id)
        for vm in listed if isinstance(listed, list) else ():
            vm_id, name = (vm.get("vm_id"), vm.get("name")) if isinstance(vm, dict) else (None, None)
            if isinstance(vm_id, int) and isinstance(name, str):
                self._names.setdefault(vm_id, name)
        return listed

    def create_vm(
        self, cloudspace_id: str, name: str, description: str, vcpus: int, memory: int, *a: Any, **kw: Any
    ) -> Any:
        vm_id = super().create_vm(cloudspace_id, name, description, vcpus, memory, *a, **kw)
        value = getattr(vm_id, "value", vm_id)
        if isinstance(value, int):
            self._names[value] = name
        self.progress.say("machine %s: created (VM %s, %d vCPUs, %d MiB)" % (name, value, vcpus, memory))
        return vm_id

    def delete_vm(
        self, cloudspace_id: str, vm_id: int, permanently: bool = True, detach_gpu: bool = False, **hooks: Any
    ) -> Any:
        answer = super().delete_vm(cloudspace_id, vm_id, permanently, detach_gpu, **hooks)
        self.progress.say("%s: deleted" % self._machine(vm_id))
        return answer

    def reserve_attach_vgpu(self, cloudspace_id: str, vm_id: int, gpu_id: str, vgpu_name: str, **hooks: Any) -> Any:
        vgpu_id = super().reserve_attach_vgpu(cloudspace_id, vm_id, gpu_id, vgpu_name, **hooks)
        owner = naming.decode(vgpu_name)
        slot = "" if owner is None else " slot %d" % owner.slot
        self.progress.say("%s: vGPU%s reserved (%s, billed from now)" % (self._machine(vm_id, vgpu_name), slot, gpu_id))
        return vgpu_id

    def delete_vgpu(
        self, location: str, vgpu_id: str, detach: bool = True, permanently: bool = True, **hooks: Any
    ) -> Any:
        answer = super().delete_vgpu(location, vgpu_id, detach, permanently, **hooks)
        self.progress.say("vGPU %s: released" % vgpu_id)
        return answer


def observe(client: WhiteskyClient, path: str | None, check_mode: bool = False) -> WhiteskyClient:
    """``client``, observed when ``path`` (the module's ``progress_file``) is given; the file is made here, before
    the run reads or changes anything (:class:`InputError` when it cannot be).  Check mode writes nothing, so makes
    no file, but refuses the same paths (it fails where the real run would)."""
    if not path:
        return client
    if check_mode:
        why = refusal(path)
        if why is not None:
            raise InputError(why)
        return client
    return Observed(client, Progress.create(path))


def finish(client: WhiteskyClient) -> None:
    """Close the progress file of a client that :func:`observe` made (nothing for a plain client)."""
    if isinstance(client, Observed):
        client.progress.close()
