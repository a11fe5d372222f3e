"""The documents a new user reads first say what is true: the emulator's default world, the playbooks there are,
how the playbooks get their connection, how to install the collection, what the SR-IOV add-on needs."""

from __future__ import annotations

import glob
import os
import re

from whitesky_emulator.world import DEFAULT_WORLD

from helpers import ROOT, read_text

README = read_text(os.path.join(ROOT, "README.md"))


def doc(name):
    return read_text(os.path.join(ROOT, "docs", name))


def test_the_emulators_default_world_is_the_one_documented():
    """Each location's row names its profiles, networks and cloudspaces as the modules see them: a cloudspace by
    its name (what the modules look up), with its id beside it."""
    rows = {m.group(1): m.group(0) for m in re.finditer(r"^\| location `([^`]+)` \|.*$", doc("emulator.md"), re.M)}
    assert set(rows) == {loc["name"] for loc in DEFAULT_WORLD["locations"]}, sorted(rows)
    for loc in DEFAULT_WORLD["locations"]:
        row = rows[loc["name"]]
        for gpu in loc["gpus"]:
            assert "`%s`" % gpu["id"] in row, (loc["name"], gpu["id"])
        for net in loc["external_networks"]:
            assert "%d `%s`" % (net["external_network_id"], net["name"]) in row, (loc["name"], net["name"])
        for cs in loc["cloudspaces"]:
            assert "cloudspace `%s` (its id `%s`" % (cs["name"], cs["cloudspace_id"]) in row, row
        for image in loc["images"]:
            assert "%d `%s`" % (image["image_id"], image["name"]) in row, (loc["name"], image["image_id"])
        assert 12 in [i["image_id"] for i in loc["images"]], "image 12, which the tests and the docs boot, is there"


def test_every_playbook_is_documented():
    playbooks = sorted(os.path.basename(p)[:-4] for p in glob.glob(os.path.join(ROOT, "playbooks", "*.yml")))
    docs = "".join(read_text(p) for p in glob.glob(os.path.join(ROOT, "docs", "*.md")))
    assert "gpu_profiles" in playbooks
    for name in playbooks:
        assert re.search(r"`(whitesky\.capvco\.)?%s`" % name, README), "README names no playbook %s" % name
        named = r"`(whitesky\.capvco\.)?%s`|playbooks/%s\.yml" % (name, name)
        assert re.search(named, docs), "docs/ names no playbook %s" % name


def test_the_playbooks_connection_is_documented():
    text = doc("lifecycle.md")
    section = text.split("## The playbooks", 1)[1].split("\n## ", 1)[0]
    for var in ("WHITESKY_API_URL", "WHITESKY_API_TOKEN", "WHITESKY_CUSTOMER_ID"):
        assert "export %s=" % var in section, var


def test_the_readme_says_how_to_install():
    section = README.split("## Install", 1)[1].split("\n## ", 1)[0]
    assert "ansible-galaxy collection install whitesky.capvco" in section
    assert re.search(r"pip install -r \S*requirements\.txt", section)
    assert "CHANGELOG.rst" in section and os.path.isfile(os.path.join(ROOT, "CHANGELOG.rst"))


def test_the_sriov_add_ons_prerequisites_are_documented():
    prereq = doc("sriov.md").split("## Prerequisites", 1)[1].split("\n## ", 1)[0]
    assert "Multus" in prereq and "NetworkAttachmentDefinition" in prereq and "kubeconfig" in prereq
    assert "Multus" in README.split("## Install", 1)[1].split("\n## ", 1)[0]
    lifecycle = doc("lifecycle.md")
    assert "sriov.kubeconfig" in lifecycle and "never fall" in lifecycle


def test_no_system_package_is_asked_for_that_nothing_uses():
    """bindep.txt lists what the collection's content needs where it runs: the modules need Python, no iproute."""
    lines = [x for x in read_text(os.path.join(ROOT, "bindep.txt")).splitlines() if x and not x.startswith("#")]
    assert [x.split()[0] for x in lines] == ["python3"], lines


def test_every_module_has_a_readme_row():
    """The README's table of content names every module of plugins/modules (alone, or beside another in its row)."""
    modules = sorted(os.path.basename(p)[:-3] for p in glob.glob(os.path.join(ROOT, "plugins", "modules", "*.py")))
    assert "image_info" in modules and "location_info" in modules
    rows = [line for line in README.splitlines() if line.startswith("| `whitesky.capvco.")]
    for name in modules:
        named = r"`(whitesky\.capvco\.)?%s`" % name
        assert any(re.search(named, row) for row in rows), "README has no row for module %s" % name


def test_docs_testing_names_every_planted_fault_of_the_mutation_check():
    """docs/testing.md's table of the mutation check is hack/mutants.py's list: each mutant once, with its file."""
    import importlib.util
    import sys

    spec = importlib.util.spec_from_file_location("capvco_mutants", os.path.join(ROOT, "hack", "mutants.py"))
    mutants = sys.modules["capvco_mutants"] = importlib.util.module_from_spec(spec)  # (its dataclass needs it there)
    spec.loader.exec_module(mutants)
    rows = re.findall(r"^\| `([a-z-]+)` \| `([a-z/_.]+)` \|", read_text(os.path.join(ROOT, "docs", "testing.md")), re.M)
    assert sorted(rows) == sorted((m.name, m.path[len(mutants.CORE) :]) for m in mutants.MUTANTS)
