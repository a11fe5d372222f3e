"""The slowest tests of a ``make test`` run: read every JUnit XML file the pytest layers wrote (``.build/logs/*.xml``)
and print the ``N`` slowest test cases (20 by default), each with its layer and its time, and the share of the
layers' test time they take; under each, what it proves, the first sentence of its docstring (docs/testing.md says
why each slow one is worth its time).

    python hack/slowest.py [N]
"""

from __future__ import annotations

import ast
import re
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LOGS = ROOT / ".build" / "logs"
_docs: dict[str, dict[str, str]] = {}


def proves(name: str, width: int = 150) -> str:
    """The first sentence of the docstring of test ``path::function[params]`` (or of its test class), else ''."""
    path, _, function = name.partition("::")
    function = function.split("[")[0].split("::")[-1]
    if path not in _docs:
        try:
            tree = ast.parse((ROOT / path).read_text(encoding="utf-8"))
        except (OSError, SyntaxError, ValueError):
            tree = ast.Module(body=[], type_ignores=[])
        _docs[path] = {
            n.name: ast.get_docstring(n) or ""
            for n in ast.walk(tree)
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
        }
    text = " ".join(_docs[path].get(function, "").split())
    first = re.split(r"(?<=\.)\s", text, maxsplit=1)[0] if text else ""
    return first if len(first) <= width else first[: width - 3] + "..."


def cases() -> list[tuple[float, str, str]]:
    out = []
    for path in sorted(LOGS.glob("*.xml")):
        try:
            root = ET.parse(path).getroot()  # noqa: S314 (pytest's own file, written by this run)
        except ET.ParseError:
            continue
        for case in root.iter("testcase"):
            name = "%s::%s" % (case.get("classname", "").replace(".", "/") + ".py", case.get("name", ""))
            out.append((float(case.get("time") or 0.0), path.stem, name))
    return sorted(out, reverse=True)


def main(argv: list[str]) -> int:
    n = int(argv[1]) if len(argv) > 1 else 20
    got = cases()
    if not got:
        return 0
    total = sum(t for t, _layer, _name in got)
    top = got[:n]
    print(
        "=== make test: the %d slowest of %d tests (%.0f s of %.0f s of test time) ==="
        % (len(top), len(got), sum(t for t, _l, _n in top), total)
    )
    print("%8s  %-12s %s" % ("seconds", "layer", "test"))
    for seconds, layer, name in top:
        print("%8.1f  %-12s %s" % (seconds, layer, name[:160]))
        said = proves(name)
        print("%8s  %-12s   %s" % ("", "", said or "(no docstring: say what it proves)"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
