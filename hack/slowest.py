"""The slowest tests of a ``make test`` run: read every JUnit XML file the pytest layers wrote (``.build/logs/*.xml``)
and print the ``N`` slowest test cases (20 by default), each with its layer and its time, and the share of the
layers' test time they take.

    python hack/slowest.py [N]
"""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET
from pathlib import Path

LOGS = Path(__file__).resolve().parents[1] / ".build" / "logs"


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
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
