#!/usr/bin/python3 -IS
"""capvco-sriov: the thin CNI plugin (spec 1.0.0 and 1.1.0), and the wire format it shares with the node agent.

This one file is both sides' contract: the plugin runs it (installed as
``/opt/cni/bin/capvco-sriov.d/capvco_sriov_shim.py``, run by the launcher ``capvco-sriov``
beside it (``launcher.py``); standard library only, so it starts fast and
needs nothing on the host), and the agent imports it for the CNI versions,
the error codes and the framing of a request and its answer.

The wire format, on the agent's unix socket: one JSON line from the plugin,
``{"env": {CNI_* variables}, "stdin": "<the network configuration>"}``, and
one JSON line back, ``{"code": <exit code>, "result": <CNI result or error>}``.
VERSION is answered here, never by the agent.
"""

from __future__ import annotations

import sys
import time

#: ``typing.TYPE_CHECKING`` without importing typing (the plugin never does): False when it runs, true to mypy.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import Any, NoReturn, TypedDict

    class Route(TypedDict, total=False):
        """One of the network configuration's ``routes`` (the agent checks them; ``gw`` defaults to the
        network's gateway)."""

        dst: str
        gw: str

    class Attachment(TypedDict, total=False):
        """One of GC's ``cni.dev/valid-attachments``."""

        containerID: str
        ifname: str

    #: The network configuration (the plugin's stdin), as :func:`check` returns it: a JSON object whose
    #: ``cniVersion`` is one of :data:`VERSIONS`; the agent checks the rest of it (``sriov.parse_request``).
    CniConfig = TypedDict(
        "CniConfig",
        {
            "cniVersion": str,
            "name": str,
            "type": str,
            "network": str | int,  # an external network's name or id
            "mtu": int,
            "routes": list[Route],
            "model": str,
            "agentSocket": str,
            "timeoutSeconds": int | float,
            "prevResult": dict[str, Any],
            "cni.dev/valid-attachments": list[Attachment],
        },
        total=False,
    )

ENVIRON: Mapping[str, str]
try:  # the environment without importing os (a millisecond of each run), decoded as os.environ does
    import posix

    ENVIRON = {
        k.decode("utf-8", "surrogateescape"): v.decode("utf-8", "surrogateescape") for k, v in posix.environ.items()
    }
except ImportError:  # not a POSIX system: the plain module
    import os

    ENVIRON = os.environ

if TYPE_CHECKING:  # the C halves, as the type checker sees them (their fallbacks below go by the same names)
    import _json
    import _socket as socket
else:
    try:  # the C halves of json and socket: the pure-Python modules cost more to import than the rest of a run
        import _json
        import _socket as socket
    except ImportError:  # an interpreter without them: the plain modules
        import json as _json
        import socket

#: The CNI spec versions this plugin speaks; the last one is what it answers in.
VERSIONS = ("1.0.0", "1.1.0")
COMMANDS = ("ADD", "DEL", "CHECK", "GC", "STATUS", "VERSION")
#: The CNI variables the plugin forwards to the agent.
ENV_KEYS = ("CNI_COMMAND", "CNI_CONTAINERID", "CNI_NETNS", "CNI_IFNAME", "CNI_ARGS", "CNI_PATH")
SOCKET = "/run/capvco/sriov.sock"
#: How long the plugin waits for the agent's answer, in seconds, well under the kubelet's own deadline; the
#: network configuration's ``timeoutSeconds`` overrides it.  When it passes the answer is 11 (try again later).
TIMEOUT = 60
#: The liveness probe's request (``capvco-sriov --probe [SOCKET]``): the agent answers it from its serving
#: thread, so a hung agent fails the probe, and the kubelet restarts it.
PROBE = b'{"probe": true}\n'
PROBE_TIMEOUT = 5

# CNI spec error codes (those the plugin answers with)
INCOMPATIBLE_VERSION = 1
UNKNOWN_CONTAINER = 3
INVALID_ENV = 4
IO_FAILURE = 5
DECODE_FAILURE = 6
INVALID_CONFIG = 7
TRY_AGAIN_LATER = 11
PLUGIN_NOT_AVAILABLE = 50
CHECK_MISMATCH = 100  # plugin-specific: live state differs from prevResult


#: CNI_CONTAINERID as the spec allows it: alphanumerics, then also '_', '.' and '-' (the pattern, for reference;
#: :func:`valid_container_id` checks it without ``re``, which costs more to import than the rest of a run).
CONTAINER_ID = r"^[A-Za-z0-9][A-Za-z0-9_.-]*$"
_ALNUM = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")
_ID_CHARS = _ALNUM | frozenset("_.-")


class _Context:
    """What the C scanner reads from a ``json.JSONDecoder``: json.loads' defaults."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = float  # NaN, Infinity, -Infinity


def _codec() -> tuple[Callable[[str | bytes | bytearray], Any], Callable[[Any], str]]:
    """``(loads, dumps)`` on the C scanner and encoder (the same results as json's), else on ``json``."""
    try:
        # typeshed asks for a scanner as the context: the C scanner reads only the attributes _Context has
        scan = _json.make_scanner(_Context())  # type: ignore[arg-type]
        encode = _json.make_encoder(
            None, _unserialisable, _json.encode_basestring_ascii, None, ": ", ", ", False, False, True
        )
    except (AttributeError, TypeError):  # not the C accelerator: the json module itself
        import json

        return _json_loads, json.dumps

    def skip(text: str, i: int) -> int:
        while i < len(text) and text[i] in " \t\n\r":
            i += 1
        return i

    def loads(text: str | bytes | bytearray) -> Any:
        if isinstance(text, (bytes, bytearray)):
            text = text.decode("utf-8")
        try:
            obj, end = scan(text, skip(text, 0))
        except StopIteration as exc:
            raise ValueError("Expecting value: char %d" % exc.value) from None
        except RecursionError:
            raise ValueError("nested too deeply") from None
        except SystemError:  # malformed: the C scanner reports it through json.decoder, which only json imports
            return _json_loads(text)
        end = skip(text, end)
        if end != len(text):
            raise ValueError("Extra data: char %d" % end)
        return obj

    def dumps(obj: Any) -> str:
        return "".join(encode(obj, 0))

    return loads, dumps


def _json_loads(text: str | bytes | bytearray) -> Any:
    """``json.loads`` (imported on this path only), with nesting too deep for it a ValueError too."""
    import json  # noqa: PLC0415 (the error path, or an interpreter without the C halves)

    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError("nested too deeply") from None


def _unserialisable(obj: object) -> NoReturn:
    raise TypeError("Object of type %s is not JSON serializable" % type(obj).__name__)


loads, dumps = _codec()


class Refusal(Exception):
    """A request the spec lets the plugin refuse by itself, with the spec's error code."""

    def __init__(self, code: int, msg: str, details: object = "") -> None:
        super().__init__(msg)
        self.code = code
        self.msg = msg
        self.details = details


def valid_ifname(name: str) -> bool:
    return (
        bool(name) and len(name) <= 15 and name not in (".", "..") and not any(c in "/:" or c.isspace() for c in name)
    )


def valid_container_id(text: str) -> bool:
    return bool(text) and text[0] in _ALNUM and all(c in _ID_CHARS for c in text)


#: The most characters of a value from outside that a message of the plugin shows.
SHOWN = 40
_PLAIN = _ID_CHARS | frozenset("/")


def shown(text: str, limit: int = SHOWN) -> str:
    """A value from outside as a message shows it: ``repr`` (control characters escaped) of at most ``limit``
    characters of it.  Only for what is no secret (a CNI variable's value, a version, a path)."""
    return repr(text[:limit]) + ("..." if len(text) > limit else "")


def plain(text: str) -> bool:
    """Whether ``text`` is only letters, digits and ``_ . - /``: a path or a version, never a credential's form."""
    return all(c in _PLAIN for c in text)


def socket_path(value: object) -> bool:
    """An absolute path that a unix socket can have (at most 107 bytes, no NUL)."""
    return (
        isinstance(value, str)
        and value.startswith("/")
        and "\0" not in value
        and len(value.encode("utf-8", "surrogatepass")) <= 107
    )


def _check_env(command: str, env: Mapping[str, str]) -> None:
    """The CNI variables the command needs (4, naming the variable)."""
    if command in ("ADD", "DEL", "CHECK"):
        container_id = env.get("CNI_CONTAINERID", "")
        if not container_id:
            raise Refusal(INVALID_ENV, "CNI_CONTAINERID is required")
        if not valid_container_id(container_id):
            raise Refusal(
                INVALID_ENV,
                "invalid CNI_CONTAINERID %s" % shown(container_id),
                "letters and digits, then also '_', '.' and '-'",
            )
        ifname = env.get("CNI_IFNAME", "")
        if not valid_ifname(ifname):
            raise Refusal(
                INVALID_ENV,
                "invalid CNI_IFNAME %s" % shown(ifname),
                "1 to 15 characters, no '/', ':' or white space, not '.' or '..'",
            )
    if command in ("ADD", "CHECK") and not env.get("CNI_NETNS"):
        raise Refusal(INVALID_ENV, "CNI_NETNS is required")


def _check_plugin_fields(config: CniConfig) -> None:
    """The fields the plugin itself reads (7, naming the field; their values are never shown)."""
    if "agentSocket" in config and not socket_path(config["agentSocket"]):
        raise Refusal(INVALID_CONFIG, "invalid agentSocket: an absolute path to a unix socket, at most 107 bytes")
    timeout = config.get("timeoutSeconds", TIMEOUT)
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout <= 3600:
        raise Refusal(INVALID_CONFIG, "invalid timeoutSeconds: a number of seconds, more than 0 and at most 3600")


def check(env: Mapping[str, str], stdin: str) -> CniConfig:
    """Everything the spec lets the plugin decide from the request alone; returns the network configuration.

    An unknown command or missing or malformed CNI variables (4), a configuration that does not parse (6), an
    unsupported version (1) and a malformed field of the plugin's own (``agentSocket``, ``timeoutSeconds``: 7) are
    answered here, with no agent.  The agent runs the same check first.  A message shows a value from outside
    only when it is no secret (a CNI variable, a version), bounded and escaped; never a configuration's value.
    """
    command = env.get("CNI_COMMAND", "")
    if command not in COMMANDS or command == "VERSION":  # VERSION is answered before any of this
        raise Refusal(INVALID_ENV, "invalid CNI_COMMAND %s" % shown(command), "valid: %s" % ", ".join(COMMANDS[:-1]))
    try:
        config: CniConfig = loads(stdin or "")  # an object: checked next
    except ValueError as exc:
        raise Refusal(DECODE_FAILURE, "failed to decode the network configuration", exc) from None
    if not isinstance(config, dict):
        raise Refusal(DECODE_FAILURE, "the network configuration must be a JSON object")
    version = config.get("cniVersion")
    if version not in VERSIONS:
        if isinstance(version, str) and plain(version):
            seen = shown(version)
        else:
            seen = "(none)" if version is None else "(a %s, not shown)" % type(version).__name__
        raise Refusal(INCOMPATIBLE_VERSION, "incompatible CNI version %s" % seen, "supported: %s" % ", ".join(VERSIONS))
    _check_env(command, env)
    _check_plugin_fields(config)
    return config


def error(code: int, msg: str, details: object = "", version: str = VERSIONS[-1]) -> dict[str, Any]:
    """A CNI error document."""
    return {"cniVersion": version, "code": code, "msg": msg, "details": str(details)}


def version_result() -> dict[str, Any]:
    return {"cniVersion": VERSIONS[-1], "supportedVersions": list(VERSIONS)}


def encode_request(env: Mapping[str, str], stdin: str) -> bytes:
    return dumps({"env": {k: env[k] for k in ENV_KEYS if k in env}, "stdin": stdin}).encode() + b"\n"


def decode_request(raw: bytes) -> tuple[dict[str, str], str]:
    """``(env, stdin)`` of one request line; ValueError when it is not one."""
    msg = loads(raw)
    env = (msg.get("env") or {}) if isinstance(msg, dict) else None
    stdin = (msg.get("stdin") or "") if isinstance(msg, dict) else None
    if (
        not isinstance(env, dict)
        or not isinstance(stdin, str)
        or not all(isinstance(k, str) and isinstance(v, str) for k, v in env.items())
    ):
        raise ValueError("not a request (%d bytes)" % len(raw))
    return env, stdin


def encode_reply(code: int, doc: Any) -> bytes:
    return dumps({"code": code, "result": doc}).encode() + b"\n"


def _error_doc(doc: object) -> bool:
    return (
        isinstance(doc, dict)
        and isinstance(doc.get("code"), int)
        and not isinstance(doc.get("code"), bool)
        and isinstance(doc.get("msg"), str)
        and isinstance(doc.get("details", ""), str)
        and doc.get("cniVersion") in VERSIONS
    )


def decode_reply(raw: bytes) -> tuple[int, Any]:
    """``(code, result)`` of one answer line; ValueError when it is not one: a code, and a result that is an object
    (a CNI error document when the code is not 0)."""
    msg = loads(raw)
    code = msg.get("code") if isinstance(msg, dict) else None
    if not isinstance(code, int) or isinstance(code, bool) or not isinstance(msg.get("result"), dict):
        raise ValueError("not an answer (%d bytes)" % len(raw))
    if code and not _error_doc(msg["result"]):
        raise ValueError("not an error document (%d bytes)" % len(raw))
    return code, msg["result"]


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


def ask(path: str, request: bytes, timeout: float = TIMEOUT) -> tuple[int, Any]:
    """Send one request to the agent; return its ``(code, result)``."""
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
        code, _result = ask(path, PROBE, timeout=PROBE_TIMEOUT)
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
    except Refusal as exc:
        reply(1, error(exc.code, exc.msg, exc.details))
    version = conf["cniVersion"]  # check() made sure it is one of VERSIONS: the errors below answer in it
    path = conf.get("agentSocket") or ENVIRON.get("CAPVCO_SRIOV_SOCKET", SOCKET)
    where = path if plain(path) else "(the configured socket)"
    timeout = conf.get("timeoutSeconds", TIMEOUT)
    try:
        code, result = ask(path, encode_request(ENVIRON, stdin), timeout=timeout)
    except TimeoutError as exc:
        reply(1, error(TRY_AGAIN_LATER, "the capvco node agent did not answer within %ss" % timeout, exc, version))
    except (OSError, ValueError) as exc:
        code = PLUGIN_NOT_AVAILABLE if command == "STATUS" else TRY_AGAIN_LATER
        reply(1, error(code, "the capvco node agent is not available", "%s: %s" % (where, exc), version))
    if code == 0 and result == {}:
        sys.exit(0)  # DEL, CHECK, GC and STATUS print nothing on success
    reply(code, result)


if __name__ == "__main__":
    main()
