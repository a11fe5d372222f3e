#!/usr/bin/env python3
"""The collection's version is written once, in galaxy.yml; every other place that carries it must agree.

The places that carry a copy (each checked here):

- the latest release of ``changelogs/changelog.yaml`` and the first release heading of ``CHANGELOG.rst``
  (both written by ``antsibull-changelog release``, which reads galaxy.yml);
- the ``[project]`` version of every ``pyproject.toml`` that has one (``node/``, ``emulator/``, ``lab/``,
  ``controller/``);
- in any text file outside tests/ and the changelogs: an image tag of this project
  (``capvco-controller:X``, ``capvco-sriov-agent:X``, ``capvco-ee:X``: the roles' defaults and argument specs,
  ``controller/Containerfile``, the docs' commands) and the collection's tarball name
  (``whitesky-capvco-X.tar.gz``: ``awx/requirements.yml``).

The files in ``EXPECTED`` must each carry one: a place that stops carrying the version is reported too (a tag
changed to another form would otherwise drop out of the check unseen). ``version_added`` is not a copy (it is the
release a module or option came with); one later than galaxy.yml's version is reported as a warning. The tests
derive the version from galaxy.yml or the built artifact and are not scanned.

    .venv/bin/python hack/versions.py [--root DIR] [--list]

Exit status 0 when every place agrees (``--list`` prints them), 1 naming each ``FILE:LINE`` that does not.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent

#: Semantic versions as galaxy.yml takes them (a pre-release and build part allowed).
SEMVER = r"\d+\.\d+\.\d+(?:-[0-9A-Za-z.-]*[0-9A-Za-z])?(?:\+[0-9A-Za-z.-]*[0-9A-Za-z])?"

#: Copies found by pattern in any scanned text file: (what, pattern with the version as group 1).
PATTERNS = (
    ("image tag", re.compile(r"\bcapvco-[a-z0-9-]*[a-z0-9]:v?(%s)" % SEMVER)),
    ("collection tarball", re.compile(r"\bwhitesky-capvco-(%s)\.tar\.gz" % SEMVER)),
)

#: The files that must carry the version (relative to the root).
EXPECTED = (
    "changelogs/changelog.yaml",
    "CHANGELOG.rst",
    "node/pyproject.toml",
    "emulator/pyproject.toml",
    "lab/pyproject.toml",
    "awx/requirements.yml",
    "roles/capvco_controller/defaults/main.yml",
    "roles/capvco_controller/meta/argument_specs.yml",
    "roles/sriov_agent/defaults/main.yml",
    "roles/sriov_agent/meta/argument_specs.yml",
    "controller/Containerfile",
    "controller/pyproject.toml",
    "docs/awx.md",
    "docs/controller.md",
)

#: Top-level folders never scanned: not ours, build output, history (the changelogs name old versions; their
#: latest release is checked above), and the tests (they derive the version, or pass a tag of their own as input).
SKIP_TOP = {".git", ".venv", ".build", ".ansible", "demo-out", "changelogs", "tests"}
#: Folders never scanned, wherever they are: caches.
SKIP_ANY = {"__pycache__", ".hypothesis", ".pytest_cache", ".ruff_cache", ".mypy_cache", "node_modules"}
SKIP_FILES = {"CHANGELOG.rst", "galaxy.yml"}
TEXT_SUFFIXES = {".py", ".yml", ".yaml", ".md", ".rst", ".toml", ".txt", ".cfg", ".ini", ".sh", ".j2", ".json", ""}


@dataclass(frozen=True)
class Copy:
    """One place that carries a version: where, what it says, and what kind of copy it is."""

    path: str
    line: int
    version: str
    what: str


def galaxy_version(root: Path) -> str:
    """The version galaxy.yml says (the one place it is written)."""
    data = yaml.safe_load((root / "galaxy.yml").read_text(encoding="utf-8"))
    version = str(data.get("version", "")) if isinstance(data, dict) else ""
    if not re.fullmatch(SEMVER, version):
        raise SystemExit("galaxy.yml: version %r is not a semantic version" % version)
    return version


def _line_of(text: str, pattern: str) -> int:
    """The 1-based number of the first line matching ``pattern`` (0 when none does)."""
    for number, line in enumerate(text.splitlines(), 1):
        if re.search(pattern, line):
            return number
    return 0


def _semver_key(version: str) -> tuple[int, int, int, int, str]:
    """Sort key: a release sorts after its pre-releases."""
    core, _, pre = version.partition("+")[0].partition("-")
    major, minor, patch = (int(x) for x in core.split("."))
    return (major, minor, patch, 0 if pre else 1, pre)


def changelog_copies(root: Path) -> Iterator[Copy]:
    """The latest release of changelogs/changelog.yaml and the first release heading of CHANGELOG.rst."""
    path = root / "changelogs" / "changelog.yaml"
    if path.exists():
        text = path.read_text(encoding="utf-8")
        releases = (yaml.safe_load(text) or {}).get("releases") or {}
        if releases:
            latest = max((str(v) for v in releases), key=_semver_key)
            line = _line_of(text, r"^  ['\"]?%s['\"]?:\s*$" % re.escape(latest))
            yield Copy("changelogs/changelog.yaml", line, latest, "latest release")
    path = root / "CHANGELOG.rst"
    if path.exists():
        lines = path.read_text(encoding="utf-8").splitlines()
        for number, (line, under) in enumerate(zip(lines, lines[1:] + [""], strict=True), 1):
            match = re.fullmatch(r"v(%s)" % SEMVER, line.strip())
            if match and under.startswith("==="):
                yield Copy("CHANGELOG.rst", number, match.group(1), "latest release heading")
                break


def pyproject_copies(root: Path, rel: str) -> Iterator[Copy]:
    """A pyproject.toml's ``[project]`` version, when it has one (a static ``version = "..."`` line)."""
    section = ""
    for number, line in enumerate((root / rel).read_text(encoding="utf-8").splitlines(), 1):
        header = re.match(r"\s*\[([^\]]+)\]\s*(#.*)?$", line)
        if header:
            section = header.group(1).strip()
            continue
        match = re.match(r"""\s*version\s*=\s*["']([^"']*)["']""", line)
        if section == "project" and match:
            yield Copy(rel, number, match.group(1), "package version")


def _files(root: Path) -> Iterator[str]:
    """The text files to scan, relative to the root, in a stable order."""
    for dirpath, dirnames, filenames in os.walk(root):
        top = Path(dirpath) == root
        dirnames[:] = sorted(
            d for d in dirnames if d not in SKIP_ANY and not (top and d in SKIP_TOP) and not d.endswith(".egg-info")
        )
        for name in sorted(filenames):
            rel = os.path.relpath(os.path.join(dirpath, name), root)
            if rel in SKIP_FILES or Path(name).suffix not in TEXT_SUFFIXES:
                continue
            yield rel.replace(os.sep, "/")


def scan(root: Path) -> list[Copy]:
    """Every copy of a version in the repository at ``root``."""
    copies = list(changelog_copies(root))
    for rel in _files(root):
        try:
            text = (root / rel).read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        if rel.endswith("pyproject.toml"):
            copies.extend(pyproject_copies(root, rel))
        for number, line in enumerate(text.splitlines(), 1):
            for what, pattern in PATTERNS:
                copies.extend(Copy(rel, number, m.group(1), what) for m in pattern.finditer(line))
    return copies


def version_added_later(root: Path, version: str) -> Iterator[Copy]:
    """``version_added`` values later than the collection's version (a plugin or option from the future)."""
    for rel in _files(root):
        if not rel.startswith(("plugins/", "roles/")):
            continue
        text = (root / rel).read_text(encoding="utf-8", errors="replace")
        for number, line in enumerate(text.splitlines(), 1):
            match = re.search(r"\bversion_added:\s*['\"]?(%s)" % SEMVER, line)
            if match and _semver_key(match.group(1)) > _semver_key(version):
                yield Copy(rel, number, match.group(1), "version_added")


def check(root: Path) -> tuple[str, list[Copy], list[str], list[Copy]]:
    """The version, the copies found, the problems (one line each) and the warnings."""
    version = galaxy_version(root)
    copies = scan(root)
    problems = [
        "%s:%d: %s %s, expected %s (galaxy.yml)" % (c.path, c.line, c.what, c.version, version)
        for c in copies
        if c.version != version
    ]
    carried = {c.path for c in copies}
    problems += [
        "%s: carries no version any more, expected %s (galaxy.yml); if that is meant, take it out of EXPECTED in "
        "hack/versions.py" % (rel, version)
        for rel in EXPECTED
        if rel not in carried
    ]
    return version, copies, problems, list(version_added_later(root, version))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--root", type=Path, default=ROOT, help="the repository (default: this checkout)")
    parser.add_argument("--list", action="store_true", help="print every place that carries the version")
    args = parser.parse_args(argv)
    version, copies, problems, warnings = check(args.root.resolve())
    if args.list:
        for c in copies:
            print("%s:%d: %s %s" % (c.path, c.line, c.what, c.version))
    for w in warnings:
        print(
            "warning: %s:%d: version_added %s is later than the collection's %s" % (w.path, w.line, w.version, version),
            file=sys.stderr,
        )
    if problems:
        print(
            "versions: %d place(s) disagree with galaxy.yml's version %s:" % (len(problems), version), file=sys.stderr
        )
        for problem in problems:
            print("  " + problem, file=sys.stderr)
        if any(p.startswith(("changelogs/", "CHANGELOG.rst")) for p in problems):
            print(
                "hint: the changelog's release is made by `antsibull-changelog release` (from galaxy.yml)",
                file=sys.stderr,
            )
        return 1
    files = len({c.path for c in copies})
    print("versions: %d copies in %d files agree with galaxy.yml's %s" % (len(copies), files, version))
    return 0


if __name__ == "__main__":
    sys.exit(main())
