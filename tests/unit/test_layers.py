"""The core's layer rule, read from the tree (``plugins/module_utils``): a package imports only from the packages below
it, no two modules import each other (not even for type annotations only), every module is in a package, and only
the faces' Ansible module base imports Ansible.  docs/architecture.md lists the packages in the same order.

The rule is checked on the real tree, and the checker is shown to catch a planted upward import and a planted
type-level cycle (in a copy of the tree)."""

from __future__ import annotations

import ast
import os
import re
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CORE = ROOT / "plugins" / "module_utils"
PREFIX = "ansible_collections.whitesky.capvco.plugins.module_utils."
#: Bottom to top: each package may import the packages before it, never one after it.
LAYERS = ("platform", "ownership", "world", "firstboot", "spec", "gpu", "reclaim", "machines", "cluster", "faces")
#: The one module that may import Ansible (the AnsibleModule base).
ANSIBLE_FACE = "faces/module.py"


def imports_of(path: Path) -> list[tuple[int, str]]:
    """``(line, dotted module)`` of every import in a file, at any depth (``TYPE_CHECKING`` and functions too)."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.lineno, node.module))
            # ``from PKG import module``: each name that is a module of the core is an import of that module
            found += [(node.lineno, node.module + "." + alias.name) for alias in node.names]
    return found


def violations(core: Path) -> list[str]:
    """Every breach of the layer rule in the tree at ``core``, one line each (empty: the tree keeps the rule)."""
    out: list[str] = []
    modules = {p.relative_to(core).with_suffix("").as_posix() for p in core.rglob("*.py") if p.name != "__init__.py"}
    edges: dict[str, set[str]] = {m: set() for m in modules}
    for mod in sorted(modules):
        rel = mod + ".py"
        package = mod.split("/")[0]
        if "/" not in mod:
            out.append("%s: a module outside every package (put it in one of %s)" % (rel, ", ".join(LAYERS)))
            continue
        if package not in LAYERS:
            out.append("%s: package %r is not in the layer order %s" % (rel, package, LAYERS))
            continue
        for line, name in imports_of(core / rel):
            if (name == "ansible" or name.startswith("ansible.")) and rel != ANSIBLE_FACE:
                out.append("%s:%d imports Ansible (%s); only %s may" % (rel, line, name, ANSIBLE_FACE))
            if not name.startswith(PREFIX):
                continue
            target = name[len(PREFIX) :].replace(".", "/")
            if target not in modules:
                continue  # the package itself (``from PKG import module`` is counted by its module)
            other = target.split("/")[0]
            if other in LAYERS and LAYERS.index(other) > LAYERS.index(package):
                out.append("%s:%d imports %s: %s is above %s" % (rel, line, target, other, package))
            if target != mod:
                edges[mod].add(target)
    out += ["import cycle: %s" % " -> ".join(cycle) for cycle in _cycles(edges)]
    return out


def _path_back(edges: dict[str, set[str]], start: str, group: set[str]) -> list[str]:
    """The shortest import path from ``start`` back to itself within its strongly connected ``group``."""
    came: dict[str, str] = {}
    todo = [start]
    while todo:
        nxt = []
        for v in todo:
            for w in sorted(edges[v] & group):
                if w == start:
                    path = [v]
                    while path[-1] != start:
                        path.append(came[path[-1]])
                    return [start] + path[::-1][1:] + [start] if len(path) > 1 else [start, start]
                if w not in came:
                    came[w] = v
                    nxt.append(w)
        todo = nxt
    return sorted(group)


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """One cycle through each strongly connected group of modules (Tarjan's algorithm, iterative enough here)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(_path_back(edges, sorted(group)[0], set(group)))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def test_the_core_keeps_its_layers():
    assert violations(CORE) == []


def test_each_package_has_an_empty_init_and_a_place_in_the_order():
    packages = sorted(p.name for p in CORE.iterdir() if p.is_dir() and p.name != "__pycache__")
    assert sorted(LAYERS) == packages
    for name in packages:
        assert (CORE / name / "__init__.py").read_bytes() == b"", name  # ansible-test's empty-init


def test_docs_architecture_lists_the_packages_in_the_same_order():
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    listed = re.findall(r"^\s*plugins/module_utils/(\w+)/", text, re.M)
    assert tuple(dict.fromkeys(reversed(listed))) == LAYERS, "docs/architecture.md: the tree, top package first"


@pytest.fixture
def planted(tmp_path):
    copy = tmp_path / "module_utils"
    shutil.copytree(CORE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    return copy


def _append(path: Path, text: str) -> None:
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(text)


def test_a_planted_upward_import_is_caught(planted):
    _append(planted / "platform" / "client.py", "\nfrom %scluster import run  # noqa\n" % PREFIX)
    got = violations(planted)
    assert any(v.startswith("platform/client.py:") and "cluster is above platform" in v for v in got), got


def test_a_planted_type_level_cycle_is_caught(planted):
    _append(
        planted / "world" / "records.py",
        "\nif TYPE_CHECKING:\n    from %sworld.vms import describe  # noqa\n" % PREFIX,
    )
    got = violations(planted)
    assert "import cycle: world/records -> world/vms -> world/records" in got, got


def test_a_planted_ansible_import_and_a_loose_module_are_caught(planted):
    _append(planted / "gpu" / "billing.py", "\nfrom ansible.module_utils.basic import AnsibleModule  # noqa\n")
    (planted / "helpers.py").write_text("X = 1\n", encoding="utf-8")
    got = violations(planted)
    assert any("gpu/billing.py" in v and "imports Ansible" in v for v in got), got
    assert any(v.startswith("helpers.py: a module outside every package") for v in got), got


def test_the_rule_counts_from_package_import_module(planted):
    """``from ...module_utils.cluster import cluster`` is an import of the module, not only of the package."""
    _append(planted / "gpu" / "ops.py", "\nfrom %smachines import pools  # noqa\n" % PREFIX)
    assert any("gpu/ops.py" in v and "machines/pools" in v for v in violations(planted))
    assert os.path.exists(planted / "machines" / "pools.py")
