"""The wire format of capvco-sriov: what the CNI plugin (``shim``) and the node agent say to each other.

Standard library only, and light: the plugin imports it on every run (installed beside the plugin's body, as
``capvco-sriov.d/capvco_sriov/wire.py``), so it imports no ``typing``, ``json``, ``re`` nor ``socket`` (their C
halves only), and never anything of the agent's.

On the agent's unix socket, one JSON line each way:

- the plugin's request, sent once the plugin has checked it (``shim.check``): ``{"env": {CNI_* variables},
  "config": {the network configuration, as an object}}``;
- the agent's answer: the very document the plugin prints, ``{}`` for an empty success (DEL, CHECK, GC,
  STATUS), a CNI result, or a CNI error document (with ``code``: the plugin exits 1).  The plugin decodes it once,
  checks it, and prints the line it read.

The liveness probe's request is :data:`PROBE`; the agent answers it ``{}``.  VERSION is answered by the plugin,
never by the agent.  Both sides read the CNI versions, the error codes and the bounds of the CNI variables
(:func:`check_version`, :func:`check_env`) from here.
"""

from __future__ import annotations

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

    #: The network configuration, as the plugin sends it: a JSON object whose ``cniVersion`` is one of
    #: :data:`VERSIONS`; the agent reads the fields it uses into typed records (``config.parse_config``).
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

if TYPE_CHECKING:  # the C halves, as the type checker sees them (their fallbacks below go by the same names)
    import _json
else:
    try:  # the C half of json: the pure-Python module costs more to import than the rest of a plugin's run
        import _json
    except ImportError:  # an interpreter without it: the plain module
        import json as _json

#: The CNI spec versions spoken; the last one is what an answer is in when the request's version is unknown.
VERSIONS = ("1.0.0", "1.1.0")
#: The commands the agent runs (VERSION is the plugin's own).
AGENT_COMMANDS = ("ADD", "DEL", "CHECK", "GC", "STATUS")
#: The CNI variables the plugin forwards to the agent.
ENV_KEYS = ("CNI_COMMAND", "CNI_CONTAINERID", "CNI_NETNS", "CNI_IFNAME", "CNI_ARGS", "CNI_PATH")
#: Where the agent listens, unless the configuration's ``agentSocket`` or ``CAPVCO_SRIOV_SOCKET`` says otherwise.
SOCKET = "/run/capvco/sriov.sock"
#: The liveness probe's request (``capvco-sriov --probe [SOCKET]``): the agent answers it from its serving
#: thread, so a hung agent fails the probe, and the kubelet restarts it.
PROBE = b'{"probe": true}\n'

# CNI spec error codes (those the plugin and the agent answer with)
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
#: The most characters of a value from outside that a message shows.
SHOWN = 40
_PLAIN = _ID_CHARS | frozenset("/")


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


def error(code: int, msg: str, details: object = "", version: str = VERSIONS[-1]) -> dict[str, Any]:
    """A CNI error document."""
    return {"cniVersion": version, "code": code, "msg": msg, "details": str(details)}


class CniError(Exception):
    """A CNI error with the spec's code: what the plugin refuses by itself, and every error the agent answers."""

    def __init__(self, code: int, msg: str, details: object = "") -> None:
        super().__init__(msg)
        self.code = code
        self.msg = msg
        self.details = details

    def to_dict(self, version: str = VERSIONS[-1]) -> dict[str, Any]:
        return error(self.code, self.msg, self.details, version)


# -- the bounds of a request, which both sides check ---------------------------------------------------------------


def valid_ifname(name: str) -> bool:
    """A Linux interface name: 1 to 15 characters, no ``/``, ``:`` or white space, not ``.`` or ``..``."""
    return (
        bool(name) and len(name) <= 15 and name not in (".", "..") and not any(c in "/:" or c.isspace() for c in name)
    )


def valid_container_id(text: str) -> bool:
    return bool(text) and text[0] in _ALNUM and all(c in _ID_CHARS for c in text)


def shown(text: str, limit: int = SHOWN) -> str:
    """A value from outside as a message shows it: ``repr`` (control characters escaped) of at most ``limit``
    characters of it.  Only for what is no secret (a CNI variable's value, a version, a path)."""
    return repr(text[:limit]) + ("..." if len(text) > limit else "")


def plain(text: str) -> bool:
    """Whether ``text`` is only letters, digits and ``_ . - /``: a path or a version, never a credential's form."""
    return all(c in _PLAIN for c in text)


def check_version(config: Mapping[str, Any]) -> str:
    """The configuration's ``cniVersion``, one of :data:`VERSIONS`; else 1, showing it only when it is plain."""
    version = config.get("cniVersion")
    if version not in VERSIONS:
        if isinstance(version, str) and plain(version):
            seen = shown(version)
        else:
            seen = "(none)" if version is None else "(a %s, not shown)" % type(version).__name__
        supported = "supported: %s" % ", ".join(VERSIONS)
        raise CniError(INCOMPATIBLE_VERSION, "incompatible CNI version %s" % seen, supported)
    return str(version)


def check_env(command: str, env: Mapping[str, str]) -> None:
    """The CNI variables the command needs, within their bounds (4, naming the variable): a container id that is a
    file name of the ledger, an interface name the kernel takes."""
    if command in ("ADD", "DEL", "CHECK"):
        container_id = env.get("CNI_CONTAINERID", "")
        if not container_id:
            raise CniError(INVALID_ENV, "CNI_CONTAINERID is required")
        if not valid_container_id(container_id):
            raise CniError(
                INVALID_ENV,
                "invalid CNI_CONTAINERID %s" % shown(container_id),
                "letters and digits, then also '_', '.' and '-'",
            )
        ifname = env.get("CNI_IFNAME", "")
        if not valid_ifname(ifname):
            raise CniError(
                INVALID_ENV,
                "invalid CNI_IFNAME %s" % shown(ifname),
                "1 to 15 characters, no '/', ':' or white space, not '.' or '..'",
            )
    if command in ("ADD", "CHECK") and not env.get("CNI_NETNS"):
        raise CniError(INVALID_ENV, "CNI_NETNS is required")


# -- the framing ----------------------------------------------------------------------------------------------------


def encode_request(env: Mapping[str, str], config: CniConfig) -> bytes:
    """One request line: the CNI variables (those of :data:`ENV_KEYS` only) and the checked configuration."""
    return dumps({"env": {k: env[k] for k in ENV_KEYS if k in env}, "config": config}).encode() + b"\n"


def decode_request(raw: bytes) -> tuple[dict[str, str], dict[str, Any]]:
    """``(env, config)`` of one request line; ValueError when it is not one (the framing: the agent reads the
    rest as the plugin checked it, and checks the bounds of what it acts on)."""
    msg = loads(raw)
    env = msg.get("env") if isinstance(msg, dict) else None
    config = msg.get("config") if isinstance(msg, dict) else None
    if (
        not isinstance(env, dict)
        or not isinstance(config, dict)
        or not all(isinstance(k, str) and isinstance(v, str) for k, v in env.items())
    ):
        raise ValueError("not a request (%d bytes)" % len(raw))
    return env, config


def encode_reply(doc: Mapping[str, Any]) -> bytes:
    """One answer line: the document the plugin prints (a result, ``{}``, or an error document)."""
    return dumps(doc).encode() + b"\n"


def _error_doc(doc: Mapping[str, Any]) -> bool:
    code = doc.get("code")
    return (
        isinstance(code, int)
        and not isinstance(code, bool)
        and code > 0
        and isinstance(doc.get("msg"), str)
        and isinstance(doc.get("details", ""), str)
        and doc.get("cniVersion") in VERSIONS
    )


def decode_reply(raw: bytes) -> tuple[int, dict[str, Any], str]:
    """``(exit code, document, its text)`` of one answer line; ValueError when it is not one.  A document with a
    ``code`` is an error (exit 1) and must be a CNI error document; any other must be ``{}`` or carry a
    ``cniVersion`` of :data:`VERSIONS` (exit 0).  The text is the line as read, for the plugin to print."""
    text = raw.decode("utf-8").strip()
    doc = loads(text)
    if not isinstance(doc, dict):
        raise ValueError("not an answer (%d bytes)" % len(raw))
    if "code" in doc:
        if not _error_doc(doc):
            raise ValueError("not an error document (%d bytes)" % len(raw))
        return 1, doc, text
    if doc and doc.get("cniVersion") not in VERSIONS:
        raise ValueError("not a result (%d bytes)" % len(raw))
    return 0, doc, text
