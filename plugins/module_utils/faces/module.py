# -*- coding: utf-8 -*-
# Copyright: (c) 2026, whitesky.capvco contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one AnsibleModule base of the collection.

Everything Ansible-specific lives here: the shared connection options, check
mode and diff plumbing, and the mapping of core errors to ``fail_json``.
Modules are an ``argument_spec`` and one call into the core through ``run``.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable
from typing import Any

from ansible.module_utils.basic import AnsibleModule, env_fallback, missing_required_lib

from ansible_collections.whitesky.capvco.plugins.module_utils.faces import diff
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.client import WhiteskyClient
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.connection import OPTIONS, Connection, Option
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.errors import InputError, WhiteskyError, known
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.scrub import scrub, scrub_lines, scrub_tree
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.transport import HTTPX_IMPORT_ERROR

#: The longest failure message or warning a module gives (``scrub``: secrets out, controls escaped, then cut).
MESSAGE_LIMIT = 4096
#: The longest text in a failure's details (a log tail keeps its lines).
DETAIL_LIMIT = 16384


def _argument(option: Option) -> dict[str, Any]:
    """A connection option as the argument spec has it.  The required ones are not ``required``: they may come from
    the variable, and ``WhiteskyModule`` checks them (``Connection.from_options``) so that the error names both
    (Ansible's own says only "missing required arguments: api_token")."""
    spec: dict[str, Any] = {"type": option.type}
    if option.no_log:
        spec["no_log"] = True
    if option.default is not None:
        spec["default"] = option.default
    if option.env is not None:
        spec["fallback"] = (env_fallback, [option.env])
    return spec


#: The connection options (``connection.OPTIONS``), each falling back to its environment variable.
CONNECTION_SPEC = {option.name: _argument(option) for option in OPTIONS}


class WhiteskyModule:
    """Build the AnsibleModule with the shared options and run one core function."""

    def __init__(
        self,
        argument_spec: dict[str, Any],
        supports_check_mode: bool = True,
        connection: bool = True,
        secrets: Callable[[dict[str, Any]], Iterable[str]] | None = None,
        **kwargs: Any,
    ) -> None:
        """``secrets(params)``: the secret values inside options that the collection checks itself (the cluster
        spec's credential); they are hidden wherever the module's output shows them, and the module does not log
        its invocation."""
        spec = dict(CONNECTION_SPEC) if connection else {}
        spec.update(argument_spec)
        self.connection = connection
        if secrets is not None:
            kwargs["no_log"] = True  # no invocation line in the system log: it would carry them
        self.module = AnsibleModule(argument_spec=spec, supports_check_mode=supports_check_mode, **kwargs)
        if secrets is not None:
            self.module.no_log_values.update(v for v in secrets(self.module.params) if v)
        self.platform: Connection | None = None
        if connection:
            try:
                self.platform = Connection.from_options(self.module.params)
            except InputError as exc:
                # white space alone is no secret: hiding it would mask every space of the message
                self.module.no_log_values.difference_update([v for v in self.module.no_log_values if not v.strip()])
                self.module.fail_json(msg=scrub(exc, MESSAGE_LIMIT), invalid_input=True)

    def client(self) -> WhiteskyClient:
        """The platform's client, from the connection options."""
        return WhiteskyClient.connect(known(self.platform, "the platform connection"))

    def run(
        self,
        func: Callable[..., dict[str, Any]],
        adapt: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
    ) -> None:
        """Call the core function ``func`` with the module's options as keyword arguments and exit with its result.

        ``func(client, *, check_mode, **options)`` (``func(*, check_mode, **options)`` without a connection;
        ``check_mode`` only to a function that takes it: an info module's core reads and never writes); ``adapt``
        maps the module's options to the core's arguments where they differ (a name that is a Python builtin, a
        single value that the core takes as a list).  The result may carry ``changed``, ``warnings`` and ``diff``
        (``{"before", "after"}``); diff is returned only when Ansible runs with ``--diff``.
        """
        if self.connection and HTTPX_IMPORT_ERROR:
            self.module.fail_json(msg=missing_required_lib("httpx"), exception=HTTPX_IMPORT_ERROR)
        params = {k: v for k, v in self.module.params.items() if k not in CONNECTION_SPEC or not self.connection}
        if adapt is not None:
            params = adapt(params)
        if "check_mode" in inspect.signature(func).parameters:
            params["check_mode"] = self.module.check_mode
        try:
            if self.connection:
                with self.client() as client:
                    for warning in client.transport.warnings:
                        self.module.warn(scrub(warning, MESSAGE_LIMIT))
                    result = func(client, **params)
            else:
                result = func(**params)
        except WhiteskyError as exc:
            # invalid_input tells a caller (the controller) that a retry cannot help; what the error says may come
            # from outside (the platform, a machine): scrubbed
            details = {k: scrub_tree(v, DETAIL_LIMIT, multiline=True) for k, v in exc.details.items()}
            self.module.fail_json(msg=scrub(exc, MESSAGE_LIMIT), invalid_input=isinstance(exc, InputError), **details)
        for warning in result.pop("warnings", []):  # through module.warn: exit_json(warnings=) is deprecated
            self.module.warn(scrub(warning, MESSAGE_LIMIT))
        result.setdefault("changed", False)
        if not self.module._diff:
            result.pop("diff", None)
        elif isinstance(result.get("diff"), dict):
            # Ansible's callback prints a diff as it is: a side of lines the core said (``world/changes.py``) as text
            # (``diff.render``), every string in it scrubbed (a text side line by line)
            result["diff"] = {
                side: scrub_lines(text, MESSAGE_LIMIT) if isinstance(text, str) else scrub_tree(text, MESSAGE_LIMIT)
                for side, text in diff.render(result["diff"]).items()
            }
        self.module.exit_json(**result)
