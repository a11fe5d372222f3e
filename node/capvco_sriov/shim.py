"""capvco-sriov: the thin CNI plugin (spec 1.0.0 and 1.1.0), which forwards to the node agent.

Installed as ``/opt/cni/bin/capvco-sriov.d/capvco_sriov_shim.py``, with the wire format beside it
(``capvco-sriov.d/capvco_sriov/wire.py``), and run by the launcher ``capvco-sriov`` (``launcher.py``), so that
Python keeps both compiled; standard library only, so it starts fast and needs nothing on the host.

It answers by itself what the request alone decides (:func:`check`: VERSION, the CNI variables, a configuration
that does not parse, an unsupported version, its own fields), sends the checked configuration to the agent as an
object (``wire.encode_request``), and prints the agent's answer as it read it, once it has checked it
(``wire.decode_reply``).
"""

from __future__ import annotations

import sys
import time

from capvco_sriov.wire import (
    AGENT_COMMANDS,
    DECODE_FAILURE,
    INVALID_CONFIG,
    INVALID_ENV,
    PLUGIN_NOT_AVAILABLE,
    PROBE,
    SOCKET,
    TRY_AGAIN_LATER,
    VERSIONS,
    CniError,
    check_env,
    check_version,
    decode_reply,
    dumps,
    encode_request,
    error,
    loads,
    plain,
    shown,
)

#: ``typing.TYPE_CHECKING`` without importing typing (the plugin never does): False when it runs, true to mypy.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any, NoReturn

    from capvco_sriov.wire import CniConfig

ENVIRON: Mapping[str, str]
try:  # the environment without importing os (a millisecond of each run), decoded as os.environ does
    import posix

    ENVIRON = {
        k.decode("utf-8", "surrogateescape"): v.decode("utf-8", "surrogateescape") for k, v in posix.environ.items()
    }
except ImportError:  # not a POSIX system: the plain module
    import os

    ENVIRON = os.environ

if TYPE_CHECKING:  # the C half, as the type checker sees it (its fallback below goes by the same name)
    import _socket as socket
else:
    try:  # the C half of socket: the pure-Python module costs more to import than the rest of a run
        import _socket as socket
    except ImportError:  # an interpreter without it: the plain module
        import socket

COMMANDS = (*AGENT_COMMANDS, "VERSION")
#: How long the plugin waits for the agent's answer, in seconds, well under the kubelet's own deadline; the
#: network configuration's ``timeoutSeconds`` overrides it.  When it passes the answer is 11 (try again later).
TIMEOUT = 60
PROBE_TIMEOUT = 5


def socket_path(value: object) -> bool:
    """An absolute path that a unix socket can have (at most 107 bytes, no NUL)."""
    return (
        isinstance(value, str)
        and value.startswith("/")
        and "\0" not in value
        and len(value.encode("utf-8", "surrogatepass")) <= 107
    )


def _check_plugin_fields(config: CniConfig) -> None:
    """The fields the plugin itself reads (7, naming the field; their values are never shown)."""
    if "agentSocket" in config and not socket_path(config["agentSocket"]):
        raise CniError(INVALID_CONFIG, "invalid agentSocket: an absolute path to a unix socket, at most 107 bytes")
    timeout = config.get("timeoutSeconds", TIMEOUT)
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout <= 3600:
        raise CniError(INVALID_CONFIG, "invalid timeoutSeconds: a number of seconds, more than 0 and at most 3600")


def check(env: Mapping[str, str], stdin: str) -> CniConfig:
    """Everything the spec lets the plugin decide from the request alone; returns the network configuration.

    An unknown command or missing or malformed CNI variables (4), a configuration that does not parse (6), an
    unsupported version (1) and a malformed field of the plugin's own (``agentSocket``, ``timeoutSeconds``: 7) are
    answered here, with no agent.  A message shows a value from outside only when it is no secret (a CNI
    variable, a version), bounded and escaped; never a configuration's value.
    """
    command = env.get("CNI_COMMAND", "")
    if command not in AGENT_COMMANDS:  # VERSION is answered before any of this
        raise CniError(INVALID_ENV, "invalid CNI_COMMAND %s" % shown(command), "valid: %s" % ", ".join(AGENT_COMMANDS))
    try:
        config: CniConfig = loads(stdin or "")  # an object: checked next
    except ValueError as exc:
        raise CniError(DECODE_FAILURE, "failed to decode the network configuration", exc) from None
    if not isinstance(config, dict):
        raise CniError(DECODE_FAILURE, "the network configuration must be a JSON object")
    check_version(config)
    check_env(command, env)
    _check_plugin_fields(config)
    return config


def version_result() -> dict[str, Any]:
    return {"cniVersion": VERSIONS[-1], "supportedVersions": list(VERSIONS)}


def reply(code: int, doc: Any) -> NoReturn:
    sys.stdout.write(dumps(doc))
    sys.stdout.write("\n")
    sys.exit(1 if code else 0)


def connect(path: str, timeout: float) -> socket.socket:
    """A connection to the agent.  A full listen backlog (a burst of pod starts) answers EAGAIN at once; that is
    waited out, with a short backoff, for up to ``timeout`` seconds; an absent agent fails at once."""
    deadline = time.monotonic() + timeout
    delay = 0.01
    while True:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(timeout)
        try:
            sock.connect(path)
            return sock
        except BlockingIOError:
            sock.close()
            if time.monotonic() + delay >= deadline:
                raise
        except BaseException:
            sock.close()
            raise
        time.sleep(delay)
        delay = min(delay * 2, 0.2)


def ask(path: str, request: bytes, timeout: float = TIMEOUT) -> tuple[int, dict[str, Any], str]:
    """Send one request to the agent; return its answer, checked (``wire.decode_reply``)."""
    sock = connect(path, timeout)
    try:
        sock.sendall(request)
        data = b""
        while not data.endswith(b"\n"):
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
    finally:
        sock.close()
    return decode_reply(data)


def probe(path: str) -> NoReturn:
    """Exit 0 when the agent answers a probe within ``PROBE_TIMEOUT`` seconds, else 1 (with the reason)."""
    try:
        code, _doc, _text = ask(path, PROBE, timeout=PROBE_TIMEOUT)
    except (OSError, ValueError) as exc:
        sys.stderr.write("capvco-sriov: the agent at %s did not answer: %s\n" % (path, exc))
        sys.exit(1)
    sys.exit(0 if code == 0 else 1)


def read_config() -> str:
    """The network configuration from stdin, as text: UTF-8, else 6 (a decoding failure)."""
    raw = sys.stdin.buffer.read()
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        reply(1, error(DECODE_FAILURE, "the network configuration is not UTF-8 text", "at byte %d" % exc.start))


def main() -> None:
    if sys.argv[1:2] == ["--probe"]:
        probe(sys.argv[2] if len(sys.argv) > 2 else ENVIRON.get("CAPVCO_SRIOV_SOCKET", SOCKET))
    command = ENVIRON.get("CNI_COMMAND", "")
    if command == "VERSION":
        reply(0, version_result())
    stdin = read_config()
    try:
        conf = check(ENVIRON, stdin)
    except CniError as exc:
        reply(1, exc.to_dict())
    version = conf["cniVersion"]  # check() made sure it is one of VERSIONS: the errors below answer in it
    path = conf.get("agentSocket") or ENVIRON.get("CAPVCO_SRIOV_SOCKET", SOCKET)
    where = path if plain(path) else "(the configured socket)"
    timeout = conf.get("timeoutSeconds", TIMEOUT)
    try:
        code, doc, text = ask(path, encode_request(ENVIRON, conf), timeout=timeout)
    except TimeoutError as exc:
        reply(1, error(TRY_AGAIN_LATER, "the capvco node agent did not answer within %ss" % timeout, exc, version))
    except (OSError, ValueError) as exc:
        code = PLUGIN_NOT_AVAILABLE if command == "STATUS" else TRY_AGAIN_LATER
        reply(1, error(code, "the capvco node agent is not available", "%s: %s" % (where, exc), version))
    if doc:  # the answer, as the agent wrote it; DEL, CHECK, GC and STATUS print nothing on success
        sys.stdout.write(text)
        sys.stdout.write("\n")
    sys.exit(code)


if __name__ == "__main__":
    main()
