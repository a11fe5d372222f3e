"""The core's layer rule, read from the tree (``plugins/module_utils``): a package imports only from the packages below
it, no two modules import each other (not even for type annotations only), every module is in a package, and only
the faces' Ansible module base imports Ansible.  docs/architecture.md lists the packages in the same order.

The maps of the tree hold too: docs/architecture.md's tables ("Each file's reason to change") name every source
file of the core, the node agent, the controller and the emulator, and no file that is not there; so do
docs/controller.md's file map (the controller) and docs/sriov.md's (the node agent); and the diagram names no file
that is not there and every file of the core, the node agent and the emulator.

The rules are checked on the real tree, and each checker is shown to catch what it is for (a planted upward import,
a planted type-level cycle, a planted file no map names, a planted stale entry), in a copy of the tree."""

from __future__ import annotations

import ast
import os
import re
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
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


# -- the maps of the tree ----------------------------------------------------------------------------------------

#: The trees whose files the maps name: the core, the node agent, the controller, the emulator (repository paths).
CORE_TREE = "plugins/module_utils"
TREES = (CORE_TREE, "node/capvco_sriov", "controller/capvco_controller", "emulator/whitesky_emulator")
#: Where a file that the diagram names may be (the trees, and the plugins, the event source and the lab beside them).
NAMED_FROM = ("plugins", "extensions", "node", "controller", "emulator", "lab")
#: A map's row: its first cell is a file's path in backticks.
ROW = re.compile(r"^\|\s*`([^`\s]+\.py)`\s*\|", re.M)


def is_source(path: Path) -> bool:
    """Whether the maps name ``path``: every ``.py`` file, ``__main__.py`` included, but an ``__init__.py`` that holds
    nothing or only its docstring (one that holds code, as the emulator's ``store/`` and ``routes/`` do, is named)."""
    if path.name != "__init__.py":
        return True
    body = ast.parse(path.read_text(encoding="utf-8"), str(path)).body
    docstring = [b for b in body[:1] if isinstance(b, ast.Expr) and isinstance(getattr(b.value, "value", None), str)]
    return len(body) > len(docstring)


def sources(root: Path, tree: str) -> set[str]:
    """The repository paths of the source files of ``tree`` (one of :data:`TREES`) under ``root``."""
    files = (root / tree).rglob("*.py")
    return {p.relative_to(root).as_posix() for p in files if "__pycache__" not in p.parts and is_source(p)}


def section(text: str, title: str) -> str:
    """The text of the section ``## title``, to the next heading of its level (empty when there is none)."""
    parts = re.split(r"^## (.+)$", text, flags=re.M)
    return next((body for head, body in zip(parts[1::2], parts[2::2], strict=True) if head.strip() == title), "")


def drift(doc: str, named: list[str], files: set[str]) -> list[str]:
    """What a map gets wrong: each file it does not name, each path it names that is no file, each path named twice."""
    out = ["%s: %s is a source file the map does not name" % (doc, p) for p in sorted(files - set(named))]
    out += ["%s: %s is named, and no such file is there" % (doc, p) for p in sorted(set(named) - files)]
    return out + ["%s: %s has two rows" % (doc, p) for p in sorted({p for p in named if named.count(p) > 1})]


def map_drift(root: Path) -> list[str]:
    """Every way the maps of the tree at ``root`` differ from its files, one line each (empty: they agree)."""
    docs = root / "docs"
    arch = (docs / "architecture.md").read_text(encoding="utf-8")
    files = {tree: sources(root, tree) for tree in TREES}
    # architecture.md: a core file by its path in the core (``cluster/plan.py``), the others by their own
    rows = ROW.findall(section(arch, "Each file's reason to change"))
    rows = [p if p.startswith(TREES[1:]) else "%s/%s" % (CORE_TREE, p) for p in rows]
    out = drift("docs/architecture.md", rows, set().union(*files.values()))
    controller = ROW.findall(section((docs / "controller.md").read_text(encoding="utf-8"), "Its files"))
    out += drift("docs/controller.md", controller, files["controller/capvco_controller"])
    node = ROW.findall(section((docs / "sriov.md").read_text(encoding="utf-8"), "The pieces"))
    out += drift("docs/sriov.md", ["node/capvco_sriov/" + p for p in node], files["node/capvco_sriov"])
    # the diagram, by file names: it names each file of the core, the node agent and the emulator, and nothing gone
    diagram = arch.split("```")[1]
    named = set(re.findall(r"\b\w+\.py\b", diagram))
    for tree in (CORE_TREE, "node/capvco_sriov", "emulator/whitesky_emulator"):
        out += [
            "docs/architecture.md's diagram names no %s" % p
            for p in sorted(files[tree])
            if p.split("/")[-1] not in named
        ]
    there = {p.name for folder in NAMED_FROM for p in (root / folder).rglob("*.py")}
    return out + [
        "docs/architecture.md's diagram names %s, and no such file is there" % n for n in sorted(named - there)
    ]


def test_the_maps_name_every_file_and_nothing_gone():
    assert map_drift(ROOT) == []


#: The most lines a source file of the trees has: a longer one holds more than one reason to change (issue 47).
LONGEST = 400
#: The files still over it, each to be split by its concerns: none since issue 47, and no file joins.
LONG: frozenset[str] = frozenset()


def long_files(root: Path) -> dict[str, int]:
    """The source files of the trees under ``root`` over :data:`LONGEST` lines, with their lengths."""
    lengths = {p: len((root / p).read_text(encoding="utf-8").splitlines()) for t in TREES for p in sources(root, t)}
    return {p: n for p, n in lengths.items() if n > LONGEST}


def test_no_source_file_is_longer_than_one_reason_to_change_takes():
    """``faces/vm_inventory.py`` (563 lines), ``reclaim/planfile.py`` (574), ``node/capvco_sriov/commands.py`` (473),
    ``spec/clusterspec.py`` (456), ``platform/client.py`` (443) and ``ownership/notes.py`` (405) each held several
    concerns; split, no file of the trees is over :data:`LONGEST` lines but those :data:`LONG` names."""
    assert {p: n for p, n in long_files(ROOT).items() if p not in LONG} == {}


@pytest.fixture
def tree(tmp_path):
    """A copy of what the maps describe: the docs and the source folders."""
    for folder in ("docs",) + NAMED_FROM:
        shutil.copytree(ROOT / folder, tmp_path / folder, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    assert map_drift(tmp_path) == []
    return tmp_path


def test_a_planted_file_that_no_map_names_is_caught(tree):
    (tree / "node" / "capvco_sriov" / "bonding.py").write_text('"""Bonds."""\n', encoding="utf-8")
    (tree / "controller" / "capvco_controller" / "webhook.py").write_text('"""A webhook."""\n', encoding="utf-8")
    (tree / "emulator" / "whitesky_emulator" / "routes" / "dns.py").write_text('"""DNS."""\n', encoding="utf-8")
    (tree / "plugins" / "module_utils" / "cluster" / "loadbalancer.py").write_text('"""An LB."""\n', encoding="utf-8")
    got = map_drift(tree)
    assert got == [
        "docs/architecture.md: controller/capvco_controller/webhook.py is a source file the map does not name",
        "docs/architecture.md: emulator/whitesky_emulator/routes/dns.py is a source file the map does not name",
        "docs/architecture.md: node/capvco_sriov/bonding.py is a source file the map does not name",
        "docs/architecture.md: plugins/module_utils/cluster/loadbalancer.py is a source file the map does not name",
        "docs/controller.md: controller/capvco_controller/webhook.py is a source file the map does not name",
        "docs/sriov.md: node/capvco_sriov/bonding.py is a source file the map does not name",
        "docs/architecture.md's diagram names no plugins/module_utils/cluster/loadbalancer.py",
        "docs/architecture.md's diagram names no node/capvco_sriov/bonding.py",
        "docs/architecture.md's diagram names no emulator/whitesky_emulator/routes/dns.py",
    ], got


def test_an_init_with_code_is_a_file_the_maps_name(tree):
    """An ``__init__.py`` that holds only its docstring is no file of the maps; one that holds code is."""
    _append(tree / "node" / "capvco_sriov" / "__init__.py", "\nVERSION = 1\n")
    got = map_drift(tree)
    assert "docs/architecture.md: node/capvco_sriov/__init__.py is a source file the map does not name" in got, got
    assert "docs/sriov.md: node/capvco_sriov/__init__.py is a source file the map does not name" in got, got


def test_a_planted_stale_entry_is_caught(tree):
    """A file gone while the maps still name it; a row for a file that never was; a row written twice."""
    (tree / "controller" / "capvco_controller" / "drift.py").unlink()
    (tree / "node" / "capvco_sriov" / "rtnl.py").unlink()
    (tree / "plugins" / "module_utils" / "cluster" / "progress.py").unlink()
    arch = tree / "docs" / "architecture.md"
    text = arch.read_text(encoding="utf-8")
    row = "| `platform/api.py` |"
    assert text.count(row) == 1
    arch.write_text(
        text.replace(row, "| `platform/ghost.py` | nothing |\n" + row + " twice |\n" + row), encoding="utf-8"
    )
    got = map_drift(tree)
    assert got == [
        "docs/architecture.md: controller/capvco_controller/drift.py is named, and no such file is there",
        "docs/architecture.md: node/capvco_sriov/rtnl.py is named, and no such file is there",
        "docs/architecture.md: plugins/module_utils/cluster/progress.py is named, and no such file is there",
        "docs/architecture.md: plugins/module_utils/platform/ghost.py is named, and no such file is there",
        "docs/architecture.md: plugins/module_utils/platform/api.py has two rows",
        "docs/controller.md: controller/capvco_controller/drift.py is named, and no such file is there",
        "docs/sriov.md: node/capvco_sriov/rtnl.py is named, and no such file is there",
        "docs/architecture.md's diagram names progress.py, and no such file is there",
        "docs/architecture.md's diagram names rtnl.py, and no such file is there",
    ], got


def test_the_controllers_usage_line_names_every_flag():
    """main.py's docstring shows the command line with every flag its parser takes, and no other."""
    from capvco_controller import main

    flags = {s for action in main.parser()._actions for s in action.option_strings if s.startswith("--")}
    usage = (main.__doc__ or "").split("\n\n")[1]
    assert set(re.findall(r"--[\w-]+", usage)) == flags - {"--help"}
