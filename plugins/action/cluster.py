# -*- coding: utf-8 -*-
# Copyright: (c) 2026, whitesky.capvco contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ``cluster`` module's action plugin: the module runs as it always does (one process, the plan made once and
applied exactly), and each line of its progress (a machine created or deleted, a vGPU reserved or released) is shown
under the task as it comes, at default verbosity, whatever the stdout callback (on standard error).

Ansible's callbacks say nothing until a task ends; ``async`` with a poll loop would run the module detached (out of
the run's process group) and could only show its lines as retries.  So the module appends its lines to a private
file (its ``progress_file`` option) and this plugin, on the controller, reads that file while it waits for the module
and displays each new line, on standard error (as Ansible's warnings are: a machine-readable stdout callback such
as ``json`` stays parseable; a terminal shows the lines under the task).  Only where the module runs on the
controller itself (a local connection, as in the collection's playbooks), not for an ``async`` or ``no_log`` task,
and not when the task names a progress file of its own."""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
from typing import Any

from ansible.plugins.action import ActionBase
from ansible.utils.display import Display

display = Display()

#: How often the progress file is read, in seconds.
POLL = 0.25


class ActionModule(ActionBase):
    _supports_check_mode = True
    _supports_async = True

    def run(self, tmp: str | None = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        result = super().run(tmp, task_vars)
        args = dict(self._task.args)
        local = getattr(self._connection, "transport", None) in ("local", "ansible.builtin.local")
        quiet = self._task.no_log  # a task whose output is hidden shows no progress either
        if not local or quiet or self._task.async_val or args.get("progress_file") or self._task.check_mode:
            result.update(self._execute_module(module_args=args, task_vars=task_vars, wrap_async=self._task.async_val))
            return result
        folder = tempfile.mkdtemp(prefix="capvco-progress.")
        args["progress_file"] = path = os.path.join(folder, "progress")
        host = (task_vars or {}).get("inventory_hostname", "localhost")
        done = threading.Event()
        reader = threading.Thread(target=_follow, args=(path, host, done), daemon=True)
        reader.start()
        try:
            result.update(self._execute_module(module_args=args, task_vars=task_vars))
        finally:
            done.set()
            reader.join(timeout=10)
            shutil.rmtree(folder, ignore_errors=True)
        return result


def _follow(path: str, host: str, done: threading.Event) -> None:
    """Display each whole line appended to ``path`` until ``done`` (then what is left)."""
    offset, rest = 0, b""
    while True:
        finished = done.wait(POLL)
        try:
            with open(path, "rb") as stream:
                stream.seek(offset)
                chunk = stream.read()
        except OSError:
            chunk = b""
        offset += len(chunk)
        *lines, rest = (rest + chunk).split(b"\n")
        for line in lines:
            display.display("  [%s] %s" % (host, line.decode("utf-8", "replace")), stderr=True)
        if finished:
            return
