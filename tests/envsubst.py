"""clusterctl's variable substitution, written again in Python so that the tests read the provider files as
clusterctl does, without a clusterctl binary.

clusterctl (kubernetes-sigs/cluster-api, ``cmd/clusterctl/client/yamlprocessor/simple_processor.go``) hands a
components YAML or a cluster template to drone/envsubst (``github.com/drone/envsubst/v2``, the commit its go.mod
pins: 179042472c46, ``parse/scan.go``, ``parse/parse.go``, ``template.go``, ``funcs.go``):

- ``convertLegacyVars`` first turns ``${ VAR }``, ``${ VAR}`` and ``${VAR }`` into ``${VAR}``;
- ``inspectVariables`` parses the text and records every substitution at the top level (the ones inside another's
  default are not listed), each with its "default": the text of its arguments, a nested substitution as
  ``${NAME}``; an empty default means the variable is required (``GetVariableMap``, ``Process``);
- ``Process`` refuses the file when a required variable has no value (the ``value for variables [...] is not set``
  error), then evaluates it: a variable without a value is the empty string, ``${VAR:=default}`` (and ``=``, ``:-``,
  every default form) is the default when the value is empty, ``${VAR// /-}`` replaces, and so on.

Only ``${`` starts a substitution (``$VAR`` is text); ``$$`` is an escape for ``$``. The parser and the scanner are
ported line by line, quirks included (a scan reads and unreads by the width of the last character read).  The
evaluation ports every function but the glob trims (``#``, ``##``, ``%``, ``%%`` with a pattern), which raise: no
provider file here uses them, and a use is refused loudly rather than evaluated wrongly.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field

EOF = "\x00"  # Go's eof rune, rune(0): a NUL in the text reads as the end, as it does there

# tokens
ILLEGAL, TOK_EOF, IDENT, LBRACK, RBRACK = range(5)
# scan modes
SCAN_IDENT, SCAN_LBRACK, SCAN_RBRACK, SCAN_ESCAPE = 1, 2, 4, 8
# escape characters
DOLLAR, BACKSLASH = 1, 2
ESCAPE_ALL = DOLLAR | BACKSLASH


class EnvsubstError(ValueError):
    """drone/envsubst's parse errors, with its messages."""


BAD_SUBSTITUTION = "bad substitution"
MISSING_CLOSING_BRACE = "missing closing brace"
PARSE_VARIABLE_NAME = "unable to parse variable name"
PARSE_FUNC_SUBSTITUTION = "unable to parse substitution within function"
PARSE_DEFAULT_FUNCTION = "unable to parse default function"


@dataclass
class Text:
    value: str


@dataclass
class Func:
    param: str
    name: str = ""
    args: list = field(default_factory=list)


@dataclass
class Group:
    """A ListNode: the nodes in order."""

    nodes: list


EMPTY = Text("")  # the parser's ``empty``, compared by identity


def _is_letter(r):
    return unicodedata.category(r).startswith("L")


def _is_digit(r):
    return unicodedata.category(r) == "Nd"


def accept_rune(_r, _i):
    return True


def accept_ident(r, _i):
    return _is_letter(r) or _is_digit(r) or r == "_"


def accept_colon(r, _i):
    return r == ":"


def accept_one_hash(r, i):
    return r == "#" and i == 1


def accept_not_closing(r, _i):
    return r != "}"


def accept_hash_func(r, i):
    return r == "#" and i < 3


def accept_percent_func(r, i):
    return r == "%" and i < 3


def accept_default_func(r, i):
    return (i == 1 and r == ":") or (i == 2 and r in "=-?+")


def accept_replace_func(r, i):
    return (i == 1 and r == "/") or (i == 2 and r in "/#%")


def accept_one_equal(r, i):
    return i == 1 and r == "="


def accept_one_colon(r, i):
    return i == 1 and r == ":"


def reject_colon_close(r, _i):
    return r not in (":", "}")


def accept_slash(r, _i):
    return r == "/"


def accept_not_slash(r, _i):
    return r != "/"


def accept_casing_func(r, i):
    return r in (",", "^") and i < 3


class Scanner:
    """``parse/scan.go``'s scanner, over characters."""

    def __init__(self, buf):
        self.buf = buf
        self.pos = self.start = self.width = 0
        self.mode = 0
        self.escape_chars = 0
        self.accept = accept_rune

    def read(self):
        if self.pos >= len(self.buf):
            self.width = 0
            return EOF
        r = self.buf[self.pos]
        self.width = 1
        self.pos += 1
        return r

    def unread(self):
        self.pos -= self.width

    def skip(self):
        self.buf = self.buf[: self.pos - 1] + self.buf[self.pos :]

    def peek(self):
        r = self.read()
        self.unread()
        return r

    def string(self):
        return self.buf[self.start : self.pos]

    def scan(self):
        self.start = self.pos
        r = self.read()
        if r == EOF:
            return TOK_EOF
        if self.scan_lbrack(r):
            return LBRACK
        if self.scan_rbrack(r):
            return RBRACK
        if self.scan_ident(r):
            return IDENT
        return ILLEGAL

    def scan_ident(self, r):
        if not self.mode & SCAN_IDENT:
            return False
        if self.scan_escaped(r):
            self.skip()
        elif not self.accept(r, self.pos - self.start):
            return False
        while True:
            r = self.read()
            if r == EOF:
                self.unread()
                break
            if self.scan_lbrack(r):
                self.unread()
                self.unread()
                break
            if self.scan_escaped(r):
                self.skip()
                continue
            if not self.accept(r, self.pos - self.start):
                self.unread()
                break
        return True

    def scan_lbrack(self, r):
        if not self.mode & SCAN_LBRACK:
            return False
        if r == "$":
            if self.read() == "{":
                return True
            self.unread()
        return False

    def scan_rbrack(self, r):
        return bool(self.mode & SCAN_RBRACK) and r == "}"

    def scan_escaped(self, r):
        if not self.mode & SCAN_ESCAPE:
            return False
        if r == "$" and self.escape_chars & DOLLAR and self.peek() == "$":
            return True
        if r == "\\" and self.escape_chars & BACKSLASH:
            return self.peek() in ("/", "\\")
        return False


class Parser:
    """``parse/parse.go``'s Tree."""

    def __init__(self, buf):
        self.s = Scanner(buf)

    def parse_any(self):
        # Go recurses once per node (left, then the rest as a ListNode of two); the same nesting, in a loop
        nodes = []
        while True:
            self.s.accept = accept_rune
            self.s.mode = SCAN_IDENT | SCAN_LBRACK | SCAN_ESCAPE
            self.s.escape_chars = DOLLAR
            tok = self.s.scan()
            if tok == IDENT:
                nodes.append(Text(self.s.string()))
            elif tok == TOK_EOF:
                break
            elif tok == LBRACK:
                nodes.append(self.parse_func())
            else:
                raise EnvsubstError(BAD_SUBSTITUTION)
        if not nodes:
            return EMPTY
        if len(nodes) == 1:
            return nodes[0]
        return Group(nodes)

    def parse_func(self):
        s = self.s
        s.escape_chars = ESCAPE_ALL
        if s.peek() == "#":
            return self.parse_len_func()
        name = self._ident(accept_ident, PARSE_VARIABLE_NAME)
        nxt = s.peek()
        if nxt == ":":
            return self.parse_default_or_substr(name)
        if nxt == "=":
            return self.parse_default_func(name)
        if nxt in (",", "^"):
            return self.parse_casing_func(name)
        if nxt == "/":
            return self.parse_replace_func(name)
        if nxt == "#":
            return self.parse_remove_func(name, accept_hash_func)
        if nxt == "%":
            return self.parse_remove_func(name, accept_percent_func)
        s.accept = accept_ident
        s.mode = SCAN_RBRACK
        if s.scan() == RBRACK:
            return Func(name)
        raise EnvsubstError(MISSING_CLOSING_BRACE)

    def parse_param(self, accept, mode):
        s = self.s
        s.accept = accept
        s.mode = mode | SCAN_LBRACK
        tok = s.scan()
        if tok == LBRACK:
            return self.parse_func()
        if tok in (IDENT, RBRACK):
            return Text(s.string())
        raise EnvsubstError(PARSE_FUNC_SUBSTITUTION)

    def parse_default_or_substr(self, name):
        s = self.s
        s.read()
        r = s.peek()
        s.unread()
        if r in ("=", "-", "?", "+"):
            return self.parse_default_func(name)
        return self.parse_substr_func(name)

    def _ident(self, accept, error=BAD_SUBSTITUTION):
        """One identifier token (a name, or a function's operator) scanned with ``accept``."""
        s = self.s
        s.accept = accept
        s.mode = SCAN_IDENT
        if s.scan() != IDENT:
            raise EnvsubstError(error)
        return s.string()

    def parse_substr_func(self, name):
        node = Func(name)
        node.name = self._ident(accept_one_colon)
        node.args.append(self.parse_param(reject_colon_close, SCAN_IDENT))
        s = self.s
        s.accept = accept_colon
        s.mode = SCAN_IDENT | SCAN_RBRACK
        tok = s.scan()
        if tok == RBRACK:
            return node
        if tok != IDENT:
            raise EnvsubstError(BAD_SUBSTITUTION)
        node.args.append(self.parse_param(accept_not_closing, SCAN_IDENT))
        self.consume_rbrack()
        return node

    def parse_remove_func(self, name, accept):
        node = Func(name)
        node.name = self._ident(accept)
        node.args.append(self.parse_param(accept_not_closing, SCAN_IDENT))
        self.consume_rbrack()
        return node

    def parse_replace_func(self, name):
        node = Func(name)
        node.name = self._ident(accept_replace_func)
        node.args.append(self.parse_param(accept_not_slash, SCAN_IDENT | SCAN_ESCAPE))
        s = self.s
        s.accept = accept_slash
        s.mode = SCAN_IDENT
        if s.scan() != IDENT:
            raise EnvsubstError(BAD_SUBSTITUTION)
        if s.peek() == "}":
            self.consume_rbrack()
            return node
        node.args.append(self.parse_param(accept_not_closing, SCAN_IDENT | SCAN_ESCAPE))
        self.consume_rbrack()
        return node

    def parse_default_func(self, name):
        node = Func(name)
        s = self.s
        accept = accept_one_equal if s.peek() == "=" else accept_default_func
        node.name = self._ident(accept, PARSE_DEFAULT_FUNCTION)
        while True:
            if s.peek() == "}":
                self.consume_rbrack()
                return node
            node.args.append(self.parse_param(accept_not_closing, SCAN_IDENT))

    def parse_casing_func(self, name):
        node = Func(name)
        node.name = self._ident(accept_casing_func)
        self.consume_rbrack()
        return node

    def parse_len_func(self):
        node = Func("")
        node.name = self._ident(accept_one_hash)
        node.param = self._ident(accept_ident)
        self.consume_rbrack()
        return node

    def consume_rbrack(self):
        self.s.mode = SCAN_RBRACK
        if self.s.scan() != RBRACK:
            raise EnvsubstError(BAD_SUBSTITUTION)


def parse(text):
    """The parse tree of ``text`` (raises :class:`EnvsubstError` with drone/envsubst's message)."""
    return Parser(text).parse_any()


_WS = "[\t\n\f\r ]"  # RE2's \s
_LEGACY = re.compile(
    r"(\$\{(%(ws)s+([A-Za-z0-9_$]+)%(ws)s+)\})|(\$\{(%(ws)s+([A-Za-z0-9_$]+))\})|(\$\{(([A-Za-z0-9_$]+)%(ws)s+)\})"
    % {"ws": _WS}
)


def convert_legacy_vars(text):
    """``convertLegacyVars``: ``${ VAR }``, ``${ VAR}``, ``${VAR }`` become ``${VAR}``."""
    return _LEGACY.sub(lambda m: re.sub(_WS, "", m.group(0)), text)


def variables(text):
    """``inspectVariables`` after ``convertLegacyVars``: ``{name: default}`` in the order they first occur, the
    default as clusterctl records it (``""`` for a required variable)."""
    out = {}
    for name, _function, default in occurrences(text):
        out.setdefault(name, default)
    return out


#: The functions whose arguments are a default (``toDefault``), and the plain ``${VAR}``.
DEFAULT_FUNCS = ("", "=", ":=", ":-", ":?", ":+", "-", "+")


def occurrences(text):
    """Every top-level substitution of ``text`` in order: ``(name, function, arguments' text)``, each recorded as
    :func:`variables` records the first (a later use with another default is not what clusterctl lists)."""
    root = parse(convert_legacy_vars(text))
    return [
        (node.param, node.name, "".join("${%s}" % a.param if isinstance(a, Func) else a.value for a in node.args))
        for node in (root.nodes if isinstance(root, Group) else [root])
        if isinstance(node, Func)
    ]


def required(text):
    """The variables clusterctl refuses the file without (no default)."""
    return sorted(name for name, default in variables(text).items() if default == "")


class MissingVariables(EnvsubstError):
    def __init__(self, missing):
        self.missing = sorted(missing)
        super().__init__(
            "value for variables [%s] is not set. Please set the value using os environment variables or the "
            "clusterctl config file" % ", ".join(self.missing)
        )


def _substr(s, args):
    try:
        pos = int(args[0])
    except ValueError:
        return s
    if pos < 0:
        pos = max(len(s) + pos, 0)
    if len(args) == 1:
        return s[pos:] if pos < len(s) else ""
    try:
        length = int(args[1])
    except ValueError:
        return s
    if pos + length >= len(s):
        return s[pos:] if pos < len(s) else ""
    return s[pos : pos + length]


def _replace(s, args, count):
    if not args:
        return s
    return s.replace(args[0], args[1] if len(args) > 1 else "", count)


def _prefix(s, args):
    return s.replace(args[0], args[1], 1) if len(args) == 2 and s.startswith(args[0]) else s


def _suffix(s, args):
    return s[: len(s) - len(args[0])] + args[1] if len(args) == 2 and s.endswith(args[0]) else s


def _default(s, args):
    return "".join(args) if not s and args else s


def _trim(_s, _args):
    raise NotImplementedError("a glob trim (#, ##, %, %% with a pattern): not ported (see the module's docstring)")


FUNCS = {
    ",": lambda s, a: s[:1].lower() + s[1:],
    ",,": lambda s, a: s.lower(),
    "^": lambda s, a: s[:1].upper() + s[1:],
    "^^": lambda s, a: s.upper(),
    "##": _trim,
    "%": _trim,
    "%%": _trim,
    ":": _substr,
    "/#": _prefix,
    "/%": _suffix,
    "/": lambda s, a: _replace(s, a, 1),
    "//": lambda s, a: _replace(s, a, -1),
}


def _eval(node, values):
    if isinstance(node, Text):
        return node.value
    if isinstance(node, Group):
        return "".join(_eval(n, values) for n in node.nodes)
    args = [_eval(a, values) for a in node.args]
    value = values.get(node.param, "")
    if node.name == "#":
        return str(len(value.encode())) if not args else _trim(value, args)
    return FUNCS.get(node.name, _default)(value, args)


def process(text, values):
    """``SimpleProcessor.Process``: the text with every variable substituted from ``values`` (a dict of the
    variables that are set), or :class:`MissingVariables` naming the required ones that are not."""
    text = convert_legacy_vars(text)
    missing = [name for name, default in variables(text).items() if name not in values and default == ""]
    if missing:
        raise MissingVariables(missing)
    return _eval(parse(text), values)
