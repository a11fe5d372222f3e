"""The project's images, built from this working tree on a local base: the SR-IOV agent's (``node/Containerfile``)
and the controller's (``controller/Containerfile``).

No registry is reachable here, so the base is made from the local Debian image
the container tests use (``localhost/capvco-debian:bookworm``) plus
``python3-venv`` from Debian's mirror.  Each image is tagged by a hash of
what goes into it, so a test run builds it once per change.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import tempfile

from capvco_lab.netlab import ROOT

DEBIAN = "localhost/capvco-debian:bookworm"
BASE = "localhost/capvco-python:bookworm"
CA = "/etc/ssl/certs/ca-certificates.crt"
INPUTS = ("node/Containerfile", "node/install-cni-plugin.sh", "node/capvco_sriov", "plugins/module_utils")
#: What the controller's image is built from: the collection as ansible-galaxy builds it, and the controller package.
CONTROLLER_INPUTS = (
    "controller/Containerfile",
    "controller/pyproject.toml",
    "controller/capvco_controller",
    "requirements.txt",
    "galaxy.yml",
    "meta",
    "plugins",
    "roles",
    "playbooks",
    "docs",
)
BASE_FILE = """FROM %s
RUN echo "deb http://deb.debian.org/debian bookworm main" > /etc/apt/sources.list.d/debian.list \\
 && apt-get update -qq && apt-get install -y -qq --no-install-recommends python3-venv >/dev/null \\
 && rm -rf /var/lib/apt/lists/* /etc/apt/sources.list.d/debian.list
"""


def exists(image):
    return subprocess.run(["podman", "image", "exists", image], check=False).returncode == 0


def build(*args):
    proc = subprocess.run(["podman", "build", "-q", "--network", "host", *args], capture_output=True, text=True)
    if proc.returncode:
        raise AssertionError("podman build %s failed:\n%s" % (" ".join(args), proc.stderr[-3000:]))


def content_hash(inputs=INPUTS):
    digest = hashlib.sha256()
    for top in inputs:
        path = os.path.join(ROOT, top)
        files = (
            [path]
            if os.path.isfile(path)
            else sorted(
                os.path.join(d, f) for d, _dirs, names in os.walk(path) if "__pycache__" not in d for f in names
            )
        )
        for name in files:
            digest.update(os.path.relpath(name, ROOT).encode())
            with open(name, "rb") as fh:
                digest.update(fh.read())
    return digest.hexdigest()[:16]


def agent_image():
    """The agent image for this working tree (built when missing); its tag."""
    return tree_image("localhost/capvco-sriov-agent", "node/Containerfile", INPUTS)


def controller_image():
    """The controller's image for this working tree (built when missing); its tag."""
    return tree_image("localhost/capvco-controller", "controller/Containerfile", CONTROLLER_INPUTS)


def tree_image(repository, containerfile, inputs):
    """REPOSITORY:test-<hash of INPUTS>, built from CONTAINERFILE on the local Python base when missing; the tag.
    The images of earlier trees are removed."""
    if not exists(DEBIAN):
        raise AssertionError("%s is missing: `make image` builds it" % DEBIAN)
    if not exists(BASE):
        with tempfile.TemporaryDirectory() as ctx:
            with open(os.path.join(ctx, "Containerfile"), "w", encoding="utf-8") as fh:
                fh.write(BASE_FILE % DEBIAN)
            build("-f", os.path.join(ctx, "Containerfile"), "-t", BASE, ctx)
    tag = "%s:test-%s" % (repository, content_hash(inputs))
    if not exists(tag):
        extra = ["--build-arg", "PIP_CERT=" + CA, "-v", "%s:%s:ro" % (CA, CA)] if os.path.exists(CA) else []
        build("--build-arg", "BASE=" + BASE, *extra, "-f", os.path.join(ROOT, containerfile), "-t", tag, ROOT)
        stale = subprocess.run(
            ["podman", "images", "--format", "{{.Repository}}:{{.Tag}}", repository],
            capture_output=True,
            text=True,
            check=False,
        ).stdout.split()
        for old in stale:
            if old.split(":")[-1].startswith("test-") and old != tag:  # earlier trees' images
                subprocess.run(["podman", "rmi", "-f", old], capture_output=True, check=False)
    return tag
