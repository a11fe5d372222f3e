"""The release: the built artifact ships what a user needs and nothing of the repository's own (tests, lint and CI
settings, the changelog's fragments, caches); the version is written once (galaxy.yml) and every copy agrees
(hack/versions.py); the release notes are antsibull-changelog's, lint clean, and speak of a first release."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile

import pytest
import yaml

from helpers import ROOT, build_collection, read_text

BIN = os.path.dirname(sys.executable)
ENV = dict(os.environ, PATH=BIN + os.pathsep + os.environ.get("PATH", ""), ANSIBLE_NOCOLOR="1")

#: Top-level entries of the repository that are the project's, never the collection's.
DEV_ONLY = (
    "tests",
    "hack",
    "emulator",
    "lab",
    "node",
    "controller",
    "benchmarks",
    "bin",
    "demo-out",
    "Makefile",
    "pyproject.toml",
    "requirements-dev.txt",
)
#: The folders whose every file a user of the installed collection gets.
SHIPPED_DIRS = ("plugins", "roles", "playbooks", "docs", "awx", "meta", "extensions")
SHIPPED_FILES = (
    "MANIFEST.json",
    "FILES.json",
    "README.md",
    "CHANGELOG.rst",
    "changelogs/changelog.yaml",
    "meta/runtime.yml",
    "requirements.txt",
    "bindep.txt",
)
#: What the copies of the repository leave out (never read by the checks, or rebuilt).
COPY_IGNORE = {".git", ".venv", ".build", "demo-out", ".hypothesis", ".pytest_cache", ".ruff_cache", ".mypy_cache"}


def galaxy_version(root=ROOT):
    return str(yaml.safe_load(read_text(os.path.join(root, "galaxy.yml")))["version"])


def tar_names(tarball):
    with tarfile.open(tarball) as tar:
        return [n.rstrip("/") for n in tar.getnames()]


def dev_files(names):
    """The names of ``names`` that are the repository's own: hidden files and folders (``.ansible-lint``, ``.ci``,
    caches), the dev-only top-level entries, the changelog's fragments, byte code and egg-info."""
    return sorted(
        n
        for n in names
        if any(part.startswith(".") or part == "__pycache__" or part.endswith(".egg-info") for part in n.split("/"))
        or n.split("/")[0] in DEV_ONLY
        or n == "changelogs/fragments"
        or n.startswith(("extensions/molecule/", "changelogs/fragments/"))
        or n.endswith(".pyc")
    )


def user_files(root):
    """Every file a user gets from the checkout at ``root``: the shipped folders (less byte code and tarballs)."""
    for top in SHIPPED_DIRS:
        for dirpath, dirnames, filenames in os.walk(os.path.join(root, top)):
            dirnames[:] = [d for d in dirnames if d != "__pycache__"]
            if os.path.relpath(dirpath, root) == "extensions":
                dirnames[:] = [d for d in dirnames if d != "molecule"]  # the scenarios: the project's tests
            for name in filenames:
                if not name.endswith((".pyc", ".tar.gz")):
                    yield os.path.relpath(os.path.join(dirpath, name), root)


def copy_repo(dest):
    """A copy of the checkout, without git, the venv and build output."""

    def ignore(directory, names):
        top = os.path.abspath(directory) == os.path.abspath(ROOT)
        return [n for n in names if n == "__pycache__" or (top and (n in COPY_IGNORE or n == "tests"))]

    shutil.copytree(ROOT, dest, ignore=ignore, symlinks=True)
    return str(dest)


def run(cmd, cwd):
    return subprocess.run(cmd, cwd=cwd, env=ENV, capture_output=True, text=True, timeout=300)


def test_the_artifact_ships_what_a_user_needs_and_nothing_of_the_repository(tmp_path):
    for kind in (".ansible-lint", ".ci", "tests", "hack", "changelogs/fragments"):
        assert os.path.exists(os.path.join(ROOT, kind)), "the checkout has %s: its exclusion is tested" % kind
    tarball = build_collection(tmp_path)
    version = galaxy_version()
    assert os.path.basename(tarball) == "whitesky-capvco-%s.tar.gz" % version
    names = tar_names(tarball)
    assert dev_files(names) == []
    missing = sorted((set(SHIPPED_FILES) | set(user_files(ROOT))) - set(names))
    assert missing == [], "the artifact lacks what a user needs"
    assert any(n.startswith("plugins/modules/") for n in names) and any(n.startswith("docs/samples/") for n in names)
    with tarfile.open(tarball) as tar:
        manifest = json.load(tar.extractfile("MANIFEST.json"))
        changelog = yaml.safe_load(tar.extractfile("changelogs/changelog.yaml"))
        notes = tar.extractfile("CHANGELOG.rst").read().decode()
    assert manifest["collection_info"]["version"] == version
    assert version in changelog["releases"] and "\nv%s\n" % version in notes


def test_caches_and_leftovers_in_a_checkout_stay_out_of_the_artifact(tmp_path):
    src = copy_repo(tmp_path / "repo")
    planted = [
        ".hypothesis/examples/x",
        ".pytest_cache/v/cache/lastfailed",
        ".ruff_cache/CACHEDIR.TAG",
        ".mypy_cache/3.11/x.json",
        ".ansible/collections/x",
        "tests/output/x.txt",
        "tests/integration/test_x.py",
        "changelogs/fragments/99-later.yml",
        "changelogs/.plugin-cache.yaml",
        "plugins/modules/__pycache__/vgpu.cpython-311.pyc",
        "emulator/capvco_dev_emulator.egg-info/PKG-INFO",
        "awx/whitesky-capvco-%s.tar.gz" % galaxy_version(),
        "demo-out/capvco-sriov.yaml",
    ]
    for rel in planted:
        os.makedirs(os.path.dirname(os.path.join(src, rel)), exist_ok=True)
        with open(os.path.join(src, rel), "w", encoding="utf-8") as fh:
            fh.write("x\n")
    out = tmp_path / "dist"
    proc = run([os.path.join(BIN, "ansible-galaxy"), "collection", "build", "--output-path", str(out), src], src)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (tarball,) = out.iterdir()
    names = tar_names(tarball)
    assert "plugins/modules/vgpu.py" in names
    assert dev_files(names) == []
    assert not set(planted) & set(names)


def test_dev_files_names_each_kind():
    """The artifact's check names each kind of repository file (so that a shipped one fails the tests above)."""
    kinds = [
        ".ansible-lint",
        ".ci/run",
        "tests/config.yml",
        "hack/versions.py",
        "changelogs/fragments",
        "changelogs/fragments/1-x.yml",
        "plugins/__pycache__/x.pyc",
        "emulator/x.egg-info/PKG-INFO",
        "Makefile",
    ]
    assert dev_files(kinds + ["plugins/modules/vgpu.py", "changelogs/changelog.yaml", "docs/gpus.md"]) == sorted(kinds)


def versions(root):
    return run([sys.executable, os.path.join(ROOT, "hack", "versions.py"), "--root", str(root), "--list"], ROOT)


def test_every_copy_of_the_version_agrees_with_galaxy_yml():
    proc = versions(ROOT)
    version = galaxy_version()
    assert proc.returncode == 0, proc.stdout + proc.stderr
    listed = proc.stdout.splitlines()
    for place in (
        "changelogs/changelog.yaml:",
        "CHANGELOG.rst:",
        "node/pyproject.toml:",
        "emulator/pyproject.toml:",
        "awx/requirements.yml:",
        "roles/capvco_controller/defaults/main.yml:",
        "roles/sriov_agent/meta/argument_specs.yml:",
        "docs/controller.md:",
    ):
        assert any(line.startswith(place) and line.endswith(" " + version) for line in listed), place
    assert "agree with galaxy.yml's %s" % version in proc.stdout


def _line(path, text):
    with open(path, encoding="utf-8") as fh:
        return next(number for number, line in enumerate(fh, 1) if text in line)


@pytest.mark.parametrize(
    ("rel", "old", "new"),
    [
        ("roles/sriov_agent/defaults/main.yml", "capvco-sriov-agent:{v}", "capvco-sriov-agent:9.9.9"),
        ("roles/capvco_controller/meta/argument_specs.yml", "capvco-controller:{v}", "capvco-controller:9.9.9"),
        ("node/pyproject.toml", 'version = "{v}"', 'version = "9.9.9"'),
        ("emulator/pyproject.toml", 'version = "{v}"', 'version = "9.9.9"'),
        ("awx/requirements.yml", "whitesky-capvco-{v}.tar.gz", "whitesky-capvco-9.9.9.tar.gz"),
        ("docs/controller.md", "capvco-controller:{v} .", "capvco-controller:9.9.9 ."),
        ("controller/Containerfile", "capvco-controller:{v}", "capvco-controller:9.9.9"),
        ("controller/pyproject.toml", 'version = "{v}"', 'version = "9.9.9"'),
        ("docs/awx.md", "capvco-ee:{v}", "capvco-ee:latest"),
        ("README.md", "# whitesky.capvco", "# whitesky.capvco (podman pull localhost/capvco-sriov-agent:9.9.9)"),
    ],
)
def test_a_copy_that_disagrees_is_named_with_its_line(tmp_path, rel, old, new):
    root = copy_repo(tmp_path / "repo")
    path = os.path.join(root, rel)
    text = read_text(path)
    old = old.format(v=galaxy_version())
    assert old in text, "%s no longer has %r: update this test" % (rel, old)
    with open(path, "w", encoding="utf-8") as fh:  # a changed copy: one place; a version dropped: every place
        fh.write(text.replace(old, new, 1 if "9.9.9" in new else -1))
    proc = versions(root)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    if "9.9.9" in new:
        assert "%s:%d: " % (rel, _line(path, new)) in proc.stderr, proc.stderr
        assert "9.9.9, expected %s (galaxy.yml)" % galaxy_version() in proc.stderr
    else:
        assert "%s: carries no version any more, expected %s" % (rel, galaxy_version()) in proc.stderr
    assert proc.stderr.count("\n  ") == 1, "only the changed place is named: " + proc.stderr


def test_a_new_version_in_galaxy_yml_names_every_copy_left_behind(tmp_path):
    root = copy_repo(tmp_path / "repo")
    path = os.path.join(root, "galaxy.yml")
    version = galaxy_version()
    text = read_text(path)
    assert "\nversion: %s\n" % version in text
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(text.replace("\nversion: %s\n" % version, "\nversion: 9.9.9\n"))
    proc = versions(root)
    assert proc.returncode == 1
    assert "disagree with galaxy.yml's version 9.9.9" in proc.stderr
    for place in ("changelogs/changelog.yaml:", "CHANGELOG.rst:", "node/pyproject.toml:", "awx/requirements.yml:"):
        assert "  %s" % place in proc.stderr, place


def changelog(root, *args):
    return run([os.path.join(BIN, "antsibull-changelog"), *args], root)


def test_the_changelog_lints_and_is_antsibull_changelogs_rendering(tmp_path):
    for args in (("lint",), ("lint-changelog-yaml", "changelogs/changelog.yaml")):
        proc = changelog(ROOT, *args)
        assert proc.returncode == 0 and proc.stdout == "", proc.stdout + proc.stderr
    root = copy_repo(tmp_path / "repo")
    os.remove(os.path.join(root, "CHANGELOG.rst"))
    proc = changelog(root, "generate")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert read_text(os.path.join(root, "CHANGELOG.rst")) == read_text(os.path.join(ROOT, "CHANGELOG.rst")), (
        "CHANGELOG.rst is not what `antsibull-changelog generate` renders from changelogs/changelog.yaml"
    )


def test_changelog_lint_fails_on_a_bad_fragment(tmp_path):
    root = copy_repo(tmp_path / "repo")
    with open(os.path.join(root, "changelogs", "fragments", "99-bad.yml"), "w", encoding="utf-8") as fh:
        fh.write("---\nbreaking_change:\n  - not a section antsibull-changelog knows.\n")
    proc = changelog(root, "lint")
    assert proc.returncode != 0 and "99-bad.yml" in proc.stdout + proc.stderr, proc.stdout + proc.stderr


def test_the_first_release_speaks_to_users():
    data = yaml.safe_load(read_text(os.path.join(ROOT, "changelogs", "changelog.yaml")))
    releases = data["releases"]
    first = min(releases, key=lambda v: tuple(int(x) for x in v.split("-")[0].split(".")))
    assert first == "0.1.0" and data["ancestor"] is None
    changes = releases[first]["changes"]
    assert changes["release_summary"] and changes["major_changes"] and changes["minor_changes"]
    # nothing was released before: no change is breaking, removed, deprecated or fixed relative to it
    assert not {"breaking_changes", "removed_features", "deprecated_features", "bugfixes"} & set(changes)
    assert len(releases[first]["modules"]) == len(
        [n for n in os.listdir(os.path.join(ROOT, "plugins", "modules")) if n.endswith(".py")]
    )
    objects = releases[first]["objects"]
    assert {r["name"] for r in objects["role"]} == set(os.listdir(os.path.join(ROOT, "roles")))
    assert {p["name"] for p in objects["playbook"]} == {
        n[: -len(".yml")] for n in os.listdir(os.path.join(ROOT, "playbooks")) if n.endswith(".yml")
    }
    assert [p["name"] for p in releases[first]["plugins"]["filter"]] == ["first_boot_status"]
