# -*- coding: utf-8 -*-
# Copyright: (c) 2026, whitesky.capvco contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A converge's progress, line by line, while it runs: each machine created or deleted, each vGPU reserved or
released, written to a file the moment the platform said so (the ``cluster`` action plugin shows each line under
its task as it comes, at default verbosity).

Nothing here plans or decides: :func:`observe` wraps the platform client that the appliers are given, and writes a
line after each write call that succeeded (or whose lost answer was resolved); what fails is said by the module's
failure, with what the run did before it.  A line is scrubbed and bounded; a progress file that cannot be written
is never the run's failure."""

from __future__ import annotations

import os
from typing import Any

from ansible_collections.whitesky.capvco.plugins.module_utils.ownership import naming
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.scrub import scrub

#: The longest progress line.
LIMIT = 200


class Progress:
    """Lines appended to ``path`` (one write each, flushed: a reader sees whole lines)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.broken = False

    def say(self, text: str) -> None:
        if self.broken:
            return
        try:
            # never through a symbolic link (a progress file named in a shared folder such as /tmp)
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o600)
            try:
                os.write(fd, (scrub(text, LIMIT) + "\n").encode("utf-8", "replace"))
            finally:
                os.close(fd)
        except OSError:
            self.broken = True


class Observed:
    """The platform client, with a progress line after each machine or vGPU write that succeeded; everything else
    is the client's own."""

    def __init__(self, client: Any, progress: Progress) -> None:
        self._client = client
        self._progress = progress
        self._names: dict[int, str] = {}  # vm id -> machine name: those this run listed or created

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    def __enter__(self) -> Observed:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def _machine(self, vm_id: object, vgpu_name: object = None) -> str:
        if isinstance(vm_id, int) and vm_id in self._names:
            return "machine %s" % self._names[vm_id]
        owner = naming.decode(vgpu_name)
        return "VM %s" % vm_id if owner is None else "VM %s (%s)" % (vm_id, owner.machine)

    def vms(self, cloudspace_id: str, *a: Any, **kw: Any) -> Any:
        """The client's, the machines' names remembered (a line names the machine, not only its VM id)."""
        listed = self._client.vms(cloudspace_id, *a, **kw)
        for vm in listed if isinstance(listed, list) else ():
            vm_id, name = (vm.get("vm_id"), vm.get("name")) if isinstance(vm, dict) else (None, None)
            if isinstance(vm_id, int) and isinstance(name, str):
                self._names.setdefault(vm_id, name)
        return listed

    def create_vm(
        self, cloudspace_id: str, name: str, description: str, vcpus: int, memory: int, *a: Any, **kw: Any
    ) -> Any:
        vm_id = self._client.create_vm(cloudspace_id, name, description, vcpus, memory, *a, **kw)
        value = getattr(vm_id, "value", vm_id)
        if isinstance(value, int):
            self._names[value] = name
        self._progress.say("machine %s: created (VM %s, %d vCPUs, %d MiB)" % (name, value, vcpus, memory))
        return vm_id

    def delete_vm(self, cloudspace_id: str, vm_id: int, *a: Any, **kw: Any) -> Any:
        answer = self._client.delete_vm(cloudspace_id, vm_id, *a, **kw)
        self._progress.say("%s: deleted" % self._machine(vm_id))
        return answer

    def reserve_attach_vgpu(self, cloudspace_id: str, vm_id: int, gpu_id: str, vgpu_name: str, **kw: Any) -> Any:
        vgpu_id = self._client.reserve_attach_vgpu(cloudspace_id, vm_id, gpu_id, vgpu_name, **kw)
        owner = naming.decode(vgpu_name)
        slot = "" if owner is None else " slot %d" % owner.slot
        self._progress.say(
            "%s: vGPU%s reserved (%s, billed from now)" % (self._machine(vm_id, vgpu_name), slot, gpu_id)
        )
        return vgpu_id

    def delete_vgpu(self, location: str, vgpu_id: str, *a: Any, **kw: Any) -> Any:
        answer = self._client.delete_vgpu(location, vgpu_id, *a, **kw)
        self._progress.say("vGPU %s: released" % vgpu_id)
        return answer


def observe(client: Any, path: str | None) -> Any:
    """``client``, observed when ``path`` (the module's ``progress_file``) is given."""
    return client if not path else Observed(client, Progress(path))
