"""Every playbook refuses a misspelt variable before any change (issue 46, point 13), and the lists it checks
against (playbooks/vars/variables.yml) are what the playbooks read: read from the playbooks themselves (every
template and condition, the tasks files they include, the spec's variables they query), without running them."""

from __future__ import annotations

import os
import re

import jinja2
import pytest
import yaml
from jinja2 import meta

from ansible_collections.whitesky.capvco.plugins.filter.misspelt import misspelt as misspelt_filter
from ansible_collections.whitesky.capvco.plugins.module_utils.spec import clusterspec, schema, speccheck

from helpers import ROOT, read_text

PLAYS = os.path.join(ROOT, "playbooks")
#: What a template may name that no playbook sets and no person gives: Ansible's and Jinja's own.
MAGIC = {
    "ansible_check_mode",
    "ansible_playbook_python",
    "inventory_hostname",
    "groups",
    "hostvars",
    "omit",
    "lookup",
    "query",
    "now",
    "playbook_dir",
}
#: The keys whose values are conditions (Jinja expressions without braces).
CONDITIONS = {"when", "that", "changed_when", "failed_when", "until"}


class _Any(dict):
    """Every filter and test name is known: a template is read for its variables, never run."""

    def __contains__(self, key):
        return True

    def __getitem__(self, key):
        return lambda *a, **k: None

    def get(self, key, default=None):
        return self[key]


ENV = jinja2.Environment()
ENV.filters, ENV.tests = _Any(), _Any()


def load(path):
    with open(path, encoding="utf-8") as fh:
        return yaml.safe_load(fh)


def variables():
    return load(os.path.join(PLAYS, "vars", "variables.yml"))


def flat(value):
    return [n for item in value for n in flat(item)] if isinstance(value, list) else [value]


def templates(node, key=None):
    if isinstance(node, dict):
        for k, v in node.items():
            yield from templates(v, k)
    elif isinstance(node, list):
        for v in node:
            yield from templates(v, key)
    elif isinstance(node, str) and key in CONDITIONS:
        yield "{{ %s }}" % node
    elif isinstance(node, str) and ("{{" in node or "{%" in node):
        yield node


def named(text):
    return meta.find_undeclared_variables(ENV.parse(text))


def queried(text):
    """The names a template asks for by ``query('ansible.builtin.varnames', '^(a|b)$')``."""
    return {n for group in re.findall(r"varnames', '\^\(([a-z_|]+)\)\$'", text) for n in group.split("|")}


def set_here(node):
    """The names a task, play or tasks file sets itself: what it registers, its facts and hosts' variables, its
    tasks' and roles' variables, loop variables."""
    out = set()
    if isinstance(node, dict):
        if "register" in node:
            out.add(node["register"])
        if isinstance(node.get("ansible.builtin.set_fact"), dict):
            out |= set(node["ansible.builtin.set_fact"])
        if isinstance(node.get("ansible.builtin.add_host"), dict):  # its host's variables, not its own options
            out |= set(node["ansible.builtin.add_host"]) - {"name", "groups"}
        if "hosts" not in node and isinstance(node.get("vars"), dict):
            out |= set(node["vars"])
        if "loop" in node:
            out.add((node.get("loop_control") or {}).get("loop_var", "item"))
        for value in node.values():
            out |= set_here(value)
    elif isinstance(node, list):
        for value in node:
            out |= set_here(value)
    return out


def read_by(playbook):
    """``(reads, sets)`` of a playbook: the variables its templates and conditions name that it does not set
    itself (play variables are defaults a person overrides: reads), with those of the tasks files it includes and
    of the playbooks it imports; and what it sets."""
    path = os.path.join(PLAYS, playbook + ".yml")
    text = read_text(path)
    included = sorted(set(re.findall(r"tasks/(\w+\.yml)", text)))
    docs = [load(path)] + [load(os.path.join(PLAYS, "tasks", t)) for t in included]
    texts = [text] + [read_text(os.path.join(PLAYS, "tasks", t)) for t in included]
    refs = set().union(*(named(t) for d in docs for t in templates(d)))
    asked = set().union(*(queried(t) for t in texts))  # the spec's variables, by name
    sets = set().union(*(set_here(d) for d in docs))
    # a vars file's variables are the playbook's own; what their templates name is read when they are
    for vf in sorted(set(re.findall(r"vars/(\w+\.yml)", text))):
        found = load(os.path.join(PLAYS, "vars", vf))
        sets |= set(found)
        refs |= set().union(*(named(t) for k, v in found.items() if k in refs for t in templates(v)))
    play_vars = set().union(*(set(p.get("vars") or {}) for p in docs[0] if "hosts" in p))
    imported = set()
    for other in re.findall(r"import_playbook: (\w+)\.yml", text):  # what it imports reads and sets too
        more, more_sets = read_by(other)
        imported |= more
        sets |= more_sets
    reads = (refs - sets - MAGIC) | play_vars | asked | imported
    return reads, {n for n in sets - reads if not n.startswith("ansible_")}


def playbooks():
    return sorted(f[: -len(".yml")] for f in os.listdir(PLAYS) if f.endswith(".yml"))


def test_every_playbook_checks_its_variables_first():
    lists = variables()["capvco_variables"]
    assert set(lists) - {"spec"} == set(playbooks()), "every playbook has its list, and no list is a playbook's gone"
    for name in playbooks():
        first = load(os.path.join(PLAYS, name + ".yml"))[0]
        assert "vars/variables.yml" in first["vars_files"], name
        check = first["tasks"][0]
        assert check["ansible.builtin.import_tasks"] == "tasks/check_variables.yml", name
        assert check["vars"] == {"capvco_playbook": name}, name


@pytest.mark.parametrize("playbook", playbooks())
def test_each_playbooks_list_is_what_it_reads(playbook):
    reads, _sets = read_by(playbook)
    listed = set(flat(variables()["capvco_variables"][playbook]))
    assert listed == reads, (
        "listed but not read",
        sorted(listed - reads),
        "read but not listed",
        sorted(reads - listed),
    )


def test_what_the_playbooks_set_is_never_refused_and_is_no_read():
    found = variables()
    sets = set().union(*(read_by(p)[1] for p in playbooks()))
    reads = set(flat(list(found["capvco_variables"].values())))
    listed = set(found["capvco_sets"])
    assert sets - reads <= listed, sorted(sets - reads - listed)
    assert not listed & reads, sorted(listed & reads)
    # the spec's variables are the spec's keys and the survey's answers that spec_from_survey reads
    assert set(clusterspec.SPEC.fields) <= set(found["capvco_variables"]["spec"])


def test_a_misspelt_name_is_the_spec_checks_own():
    """One function for the spec's variables and every playbook's (``schema.misspelt``): case, '_' and '-' aside, or
    very close; never a name that is known or exempt, never a name that is merely long or short."""
    known = ["max_hourly_cost", "grace_period", "pools", "force", "location"]
    names = ["max_hourly_cots", "Grace-Period", "pool", "Force", "locations", "max_hourly_cost", "colour", "ansible_x"]
    assert schema.misspelt(names, known, exempt=["locations"]) == [
        ("Force", "force"),
        ("Grace-Period", "grace_period"),
        ("max_hourly_cots", "max_hourly_cost"),
        ("pool", "pools"),
    ]
    # the filter the playbooks call: nested lists flattened, each with its hint
    assert misspelt_filter(names, [["max_hourly_cost"], "pools"], [["locations"]]) == [
        "max_hourly_cots (did you mean max_hourly_cost?)",
        "pool (did you mean pools?)",
    ]
    # the spec's variables: the same check
    with pytest.raises(Exception, match=r"pool: unknown variable of the cluster spec; did you mean pools\?"):
        speccheck.check({"cluster": {"name": "c", "location": "l"}}, ["pool", "cluster"])
