#!/usr/bin/env python3
"""Every public function and public method of the core and the node agent is annotated whole.

A function or method is public when its name does not start with ``_``; it is annotated whole when each of its
parameters (``self`` or ``cls`` of a method aside) has an annotation and it has a return annotation.  Functions
nested in a function are its own business and are not looked at.  Prints each offender as ``path:line: name`` and
exits 1 when there is one.

    hack/typed_public.py [FILE ...]    (default: plugins/module_utils/*/*.py and node/capvco_sriov/*.py)
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT = ("plugins/module_utils/*/*.py", "node/capvco_sriov/*.py")

Function = ast.FunctionDef | ast.AsyncFunctionDef


def _is_static(func: Function) -> bool:
    return any(isinstance(d, ast.Name) and d.id == "staticmethod" for d in func.decorator_list)


def _missing(func: Function, method: bool) -> bool:
    """True when a parameter (the bound one of a method aside) or the return has no annotation."""
    args = func.args
    positional = args.posonlyargs + args.args
    if method and not _is_static(func) and positional:
        positional = positional[1:]  # self, or cls
    params = positional + args.kwonlyargs + [a for a in (args.vararg, args.kwarg) if a is not None]
    return func.returns is None or any(p.annotation is None for p in params)


def _definitions(body: list[ast.stmt], prefix: str, in_class: bool) -> Iterator[tuple[Function, str, bool]]:
    """The functions and methods defined in a module or class body (through ``if``, ``try`` and ``with`` blocks,
    never into a function's body): ``(node, qualified name, is a method)``."""
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node, prefix + node.name, in_class
        elif isinstance(node, ast.ClassDef):
            yield from _definitions(node.body, prefix + node.name + ".", True)
        elif isinstance(node, (ast.If, ast.Try, ast.With, ast.AsyncWith)):
            blocks = [node.body, getattr(node, "orelse", []), getattr(node, "finalbody", [])]
            blocks += [handler.body for handler in getattr(node, "handlers", [])]
            for block in blocks:
                yield from _definitions(block, prefix, in_class)


def offenders(path: Path) -> list[str]:
    """``path:line: name`` of each public function or method of a file that is not annotated whole."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    shown = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
    return [
        "%s:%d: %s" % (shown, func.lineno, name)
        for func, name, method in _definitions(tree.body, "", False)
        if not func.name.startswith("_") and _missing(func, method)
    ]


def main(argv: list[str]) -> int:
    files = [Path(a).resolve() for a in argv] or sorted(p for pattern in DEFAULT for p in ROOT.glob(pattern))
    if not files:
        print("typed_public: no file matches %s: the tree moved, and this check would pass on nothing" % (DEFAULT,))
        return 2
    found = [line for path in files for line in offenders(path)]
    for line in found:
        print(line)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
