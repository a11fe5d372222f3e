"""What the core writes once (issue 47, point 1).

One way to converge: "read, make the pure plan, show it in check mode, take the lease, read and plan again once it
is held, apply" lives in ``ownership/converge.py`` and nowhere else.

No module of the core, the controller or the node agent takes a cluster's lease itself (``lease.held``, or a
``Lease`` acquired by hand), and each core that converges (the cluster and its teardown, ``machine_pool``'s
machines, ``machine``, ``vgpu``, the reclaims, and so the controller's machine, which calls the cores) is a
``Concern`` handed to ``converge.converge``.  The runner's behaviour is driven against the emulator by
``tests/integration/test_converge_runner.py``.

One allocation of vGPUs: the cluster's plan makes its pools' vGPU plans with the GPU core's planner
(``vgpus.plan_groups``, which ``vgpu``'s plan calls too), not with a copy of its own.

One pool record: ``spec/pool.py``'s ``Pool`` (and ``GpuSpec``), which the cluster spec's pools are and the machines
core takes; one shape of a pool shown (``PoolShown``, ``PoolGpu``), which the plan's ``PoolView`` and the
inventory's ``PoolRecord`` extend."""

from __future__ import annotations

import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[3]
CORE = ROOT / "plugins" / "module_utils"
RUNNER = CORE / "ownership" / "converge.py"
LEASE = CORE / "ownership" / "lease.py"

#: each core that converges, and the function of it that hands its concern to the runner
CONVERGING = [
    ("cluster/run.py", "converge"),
    ("cluster/teardown.py", "teardown"),
    ("machines/pools.py", "converge_machines"),
    ("machines/machine.py", "ensure"),
    ("gpu/vgpus.py", "ensure"),
    ("reclaim/sweep.py", "reclaim"),
    ("reclaim/reviewed.py", "apply_plan"),
]


def lease_takers(source: str) -> list[int]:
    """The lines of ``source`` that take a cluster's lease: ``lease.held(...)``, ``held(...)`` imported from the
    lease module, or ``Lease(...).acquire()``."""
    tree = ast.parse(source)
    imported = {
        alias.asname or alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and (node.module or "").endswith("ownership.lease")
        for alias in node.names
    }
    lines = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        by_module = isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == "lease"
        held = (by_module and getattr(f, "attr", "") == "held") or (isinstance(f, ast.Name) and f.id in imported)
        inner = f.value.func if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Call) else None
        named = (getattr(inner, "attr", ""), getattr(inner, "id", ""))
        acquired = getattr(f, "attr", "") == "acquire" and "Lease" in named
        if (held and getattr(f, "id", "held") == "held") or acquired:
            lines.append(node.lineno)
    return lines


def sources() -> list[pathlib.Path]:
    trees = [CORE, ROOT / "controller" / "capvco_controller", ROOT / "node" / "capvco_sriov"]
    return sorted(p for tree in trees for p in tree.rglob("*.py") if p not in (RUNNER, LEASE))


def test_only_the_runner_takes_a_clusters_lease():
    takers = {
        str(p.relative_to(ROOT)): lines for p in sources() if (lines := lease_takers(p.read_text(encoding="utf-8")))
    }
    assert takers == {}
    assert lease_takers(RUNNER.read_text(encoding="utf-8"))  # and the runner does


@pytest.mark.parametrize(
    "source",
    [
        "with lease.held(client, cs, cluster) as fresh:\n    pass\n",
        "from x.ownership.lease import held\nwith held(client, cs, cluster):\n    pass\n",
        "lease.Lease(client, cs, cluster).acquire()\n",
    ],
)
def test_a_planted_lease_of_its_own_is_caught(source):
    assert lease_takers(source) == [source.count("\n", 0, source.index("(")) + 1]


@pytest.mark.parametrize(("path", "function"), CONVERGING)
def test_each_converging_core_hands_a_concern_to_the_runner(path, function):
    tree = ast.parse((CORE / path).read_text(encoding="utf-8"))
    (body,) = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == function]
    called = {
        f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", None)
        for n in ast.walk(body)
        if isinstance(n, ast.Call)
        for f in [n.func]
    }
    assert "converge" in called or "apply_plan" in called, "%s's %s does not call the runner" % (path, function)
    concerns = [
        n.name
        for n in tree.body
        if isinstance(n, ast.ClassDef)
        and any("Concern" in ast.unparse(b) or "Releasing" in ast.unparse(b) for b in n.bases)
    ]
    assert concerns, "%s defines no concern" % path


def calls(node: ast.AST) -> set[str]:
    """The names ``node`` calls (``f(...)`` and ``x.f(...)``: ``f``)."""
    out = set()
    for n in ast.walk(node):
        if isinstance(n, ast.Call):
            f = n.func
            out.add(f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", ""))
    return out


def test_the_cluster_plans_its_vgpus_with_the_vgpu_cores_planner():
    plan = ast.parse((CORE / "cluster" / "plan.py").read_text(encoding="utf-8"))
    assert "plan_groups" in calls(plan)
    assert calls(plan) & {"allocate", "choose", "profiles_of_type", "type_profiles", "plan_machine"} == set()
    # and the core allocates profiles in one place: the GPU core's planner of groups of machines
    allocating = {
        "%s:%s" % (path.relative_to(CORE), fn.name)
        for path in sorted(CORE.rglob("*.py"))
        for fn in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(fn, ast.FunctionDef) and "allocate" in calls(fn) and fn.name != "allocate"
    }
    assert allocating == {"gpu/vgpus.py:plan_groups"}


POOL_RECORDS = ("Pool", "GpuSpec", "PoolSpec", "PoolGpu", "PoolShown", "PoolView", "PoolRecord", "GpuView")


def test_one_pool_record_and_one_shape_of_a_pool_shown():
    defined: dict[str, list[tuple[str, list[str]]]] = {}
    for path in sorted(CORE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef) and node.name in POOL_RECORDS:
                where = str(path.relative_to(CORE))
                defined.setdefault(node.name, []).append((where, [ast.unparse(b) for b in node.bases]))
    assert {name: len(places) for name, places in defined.items()} == dict.fromkeys(POOL_RECORDS, 1)
    assert defined["Pool"] == [("spec/pool.py", [])] and defined["GpuSpec"] == [("spec/pool.py", [])]
    assert defined["PoolSpec"] == [("spec/typed.py", ["Pool"])]
    assert defined["PoolGpu"] == [("spec/pool.py", ["TypedDict"])]
    assert defined["PoolShown"] == [("spec/pool.py", ["TypedDict"])]
    assert defined["PoolView"] == [("cluster/price.py", ["PoolShown"])]
    assert defined["GpuView"] == [("cluster/price.py", ["PoolGpu"])]
    assert defined["PoolRecord"] == [("faces/inventory_records.py", ["PoolShown"])]
    # and nothing turns a pool of the spec back into a dict for the machines core
    plan = (CORE / "cluster" / "plan.py").read_text(encoding="utf-8")
    assert "def machine_pools" not in plan and '"image_id": p.image' not in plan
