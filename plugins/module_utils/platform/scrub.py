# -*- coding: utf-8 -*-
# Copyright: (c) 2026, whitesky.capvco contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one scrubber: every message that leaves the process goes through :func:`scrub` (pure Python, standard
library only; the node agent imports it too).

What comes from outside (the platform's error texts, a machine's first-boot report, a CNI runtime's input) may
carry a credential, a terminal escape, or a megabyte.  ``scrub`` returns text that is safe to show:

1. **secrets removed** (each replaced by ``***``): the caller's own (``secrets``: a credential it holds, whatever
   its form, e.g. an API token that is no JWT); bearer tokens (``Bearer xxx``); JWTs (``eyJ...`` base64url
   segments, two or three); the credentials of a URL (``https://user:pass@host`` -> ``https://***@host``);
   the value of a secret-ish key (a name with ``token``, ``password``, ``passwd``, ``passphrase``, ``secret``,
   ``api_key``/``apikey``, ``access_key``, ``private_key``, ``authorization``, ``credential``, ``cookie``) in
   the forms ``key=value``, ``"key": "value"`` (JSON, or a Python repr with ``'``), and ``key: value`` where the
   value ends its line or field, or is anything but a short word in lower case (``password: hunter2 was
   refused`` loses ``hunter2``; ``sriov.credential: must be a string`` is a message about a field, and stays);
2. **controls escaped**: every C0 control character (NUL to US, ESC and BEL among them), DEL, the C1 controls
   (U+0080-U+009F, where CSI can hide), the bidirectional overrides and isolates, and lone surrogates, as
   ``\\xNN`` (``\\n``, ``\\r``, ``\\t`` for those three) or ``\\uNNNN``.  With ``multiline=True`` (a log tail,
   nvidia-smi's lines) ``\\n`` and ``\\t`` are kept as they are; ``\\r`` never is (it rewrites a terminal's line).
   A backslash already in the text is left alone: the result is for reading, not for decoding;
3. **length bounded**: at most ``limit`` characters, the end cut and replaced by ``... (N bytes cut)`` (N counts
   the UTF-8 bytes of what was cut), the marker included in the limit.

The order is that: secrets first (a cut never halves a secret so that its rest escapes the patterns), then the
escapes, then the cut.  ``scrub`` never raises.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

#: The default bound of a scrubbed text, in characters.
LIMIT = 1024
#: The most of a text that is looked at: what lies beyond cannot be shown within any sane limit.
_SCAN = 65536

_STEMS = (
    r"token|passw(?:or)?d|passphrase|secret|api[_-]?key|access[_-]?key|private[_-]?key|authori[sz]ation"
    r"|credential|cookie"
)
#: A secret-ish key: a whole name with a stem in it, at most 64 characters before the stem and 64 after (so that
#: the scan stays linear: a key starts only where a name does).
_KEY = r"(?<![A-Za-z0-9_.-])[A-Za-z0-9_.-]{0,64}?(?:%s)[A-Za-z0-9_.-]{0,64}" % _STEMS
#: An unquoted value: up to a separator; an HTTP authorization scheme goes with its credential.
_BARE = r"(?:(?:bearer|basic|digest|token|negotiate)[ \t]+)?[^\s,;&'\"<>{}()\[\]\x00-\x1f\x7f]+"
#: A quoted value, or one whose closing quote was lost (cut off): to the end then.
_QUOTED = r"\"(?:\\.|[^\"\\])*(?:\"|\Z)|'(?:\\.|[^'\\])*(?:'|\Z)"

_SECRETS = (
    # the credentials of a URL
    (re.compile(r"(?i)\b([a-z][a-z0-9+.-]{0,15}://)[^\s/?#@]+@"), r"\1***@"),
    # "key": "value" (JSON) and 'key': 'value' (a Python repr)
    (re.compile(r"(?i)([\"'])(%s)\1(\s*:\s*)(?:%s)" % (_KEY, _QUOTED)), r"\1\2\1\3***"),
    # key=value, key="value"
    (re.compile(r"(?i)(%s)([ \t]*=[ \t]*)(?:%s|%s)" % (_KEY, _QUOTED, _BARE)), r"\1\2***"),
    # key: value, where the value ends its line or its field ...
    (
        re.compile(r"(?i)(%s)([ \t]*:[ \t]*)(?:%s|%s)(?=[ \t]*(?:[,;&})\]'\"\r\n]|\Z))" % (_KEY, _QUOTED, _BARE)),
        r"\1\2***",
    ),
    # ... or is no short word in lower case (``must`` in ``credential: must be a string`` is prose)
    (re.compile(r"(?i)(%s)([ \t]*:[ \t]*)(?!(?-i:[a-z]{1,11})\b)(?:%s|%s)" % (_KEY, _QUOTED, _BARE)), r"\1\2***"),
    # Bearer xxx, wherever it stands
    (re.compile(r"(?i)\b(bearer\s+)[A-Za-z0-9._~+/=-]+"), r"\1***"),
    # a JWT (or its first two segments, when the signature was cut off)
    (re.compile(r"(?<![A-Za-z0-9])eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{2,}(?:\.[A-Za-z0-9_-]*)?"), "***"),
)

_CONTROLS = "\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff"
_ONE_LINE = re.compile("[\t\n%s]" % _CONTROLS)
_MULTI_LINE = re.compile("[%s]" % _CONTROLS)
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(found: re.Match[str]) -> str:
    char = found.group()
    named = _NAMED.get(char)
    if named:
        return named
    code = ord(char)
    return "\\x%02x" % code if code < 0x100 else "\\u%04x" % code


def _text(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("utf-8", "replace")
    try:
        return value if isinstance(value, str) else str(value)
    except Exception:  # a hostile __str__: say what it was, not what it says
        return "<%s object>" % type(value).__name__


def _size(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


def _given(text: str, secrets: Iterable[str], mask: str) -> str:
    for secret in secrets:
        if secret and secret.strip():
            text = text.replace(secret, mask)
    return text


def mask_secrets(text: str, secrets: Iterable[str] = (), mask: str = "***") -> str:
    """Step 1 of :func:`scrub` alone: ``text`` with each of ``secrets`` replaced by ``mask`` wherever it stands, then
    every form of a secret that the scrubber knows (a bearer token, a URL's credentials, a JWT, a secret-ish key's
    value); controls and length are left as they are (the ``redact`` filter masks inside a structure's strings with
    it)."""
    text = _given(text, secrets, mask)
    template = mask.replace("\\", "\\\\")
    for pattern, replacement in _SECRETS:
        text = pattern.sub(replacement.replace("***", template), text)
    return text


def scrub(text: object, limit: int = LIMIT, *, multiline: bool = False, secrets: Iterable[str] = ()) -> str:
    """``text`` (``str()`` of it; bytes are decoded, None is empty) fit to leave the process: secrets removed (each of
    ``secrets`` first, wherever it stands: the one way to hide a credential the caller holds; an empty or blank one
    is no secret), controls escaped, at most ``limit`` characters (see the module's documentation for the rules)."""
    limit = max(0, int(limit))
    scan = max(_SCAN, 4 * limit)
    whole = _given(_text(text), secrets, "***")  # the whole text: a given secret across the scan's end goes too
    shown, beyond = mask_secrets(whole[:scan]), whole[scan:]
    shown = (_MULTI_LINE if multiline else _ONE_LINE).sub(_escape, shown)
    if len(shown) <= limit and not beyond:
        return shown
    keep = limit
    while keep > 0:  # the marker's length depends on the number it carries: a few rounds settle it
        marker = "... (%d bytes cut)" % (_size(shown[keep:]) + _size(beyond))
        if keep + len(marker) <= limit:
            return shown[:keep] + marker
        keep = max(0, min(keep - 1, limit - len(marker)))
    return shown[:limit]


def scrub_tree(value: object, limit: int = LIMIT, *, multiline: bool = False, depth: int = 16) -> object:
    """``value`` with every string in it scrubbed (through dicts, lists and tuples, ``depth`` levels deep; what is
    deeper becomes its scrubbed text).  Keys stay as they are; numbers, booleans and None too."""
    if isinstance(value, str):
        return scrub(value, limit, multiline=multiline)
    if isinstance(value, (bool, int, float)) or value is None:
        return value
    if depth <= 0:
        return scrub(value, limit, multiline=multiline)
    if isinstance(value, Mapping):
        return {k: scrub_tree(v, limit, multiline=multiline, depth=depth - 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [scrub_tree(v, limit, multiline=multiline, depth=depth - 1) for v in value]
    return scrub(value, limit, multiline=multiline)


def scrub_lines(text: object, limit: int = LIMIT) -> str:
    """``text`` of many lines (a diff's side) scrubbed line by line: each line as :func:`scrub` makes it (at most
    ``limit`` characters), the line breaks kept."""
    return "\n".join(scrub(line, limit) for line in _text(text).split("\n"))
