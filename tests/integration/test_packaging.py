"""The collection as users get it: ansible-doc renders, the built tarball leaves dev-only folders out."""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile

import pytest

from helpers import COLLECTIONS, ROOT

BIN = os.path.dirname(sys.executable)
ENV = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=COLLECTIONS, ANSIBLE_NOCOLOR="1")


@pytest.mark.parametrize("module", ["gpu_profile_info", "vgpu", "vgpu_info", "vgpu_reclaim", "external_nic",
                                    "external_network_info", "gpu_driver_verify", "machine", "machine_info",
                                    "cloudspace", "cloudspace_info", "vgpu_billing_info"])
def test_ansible_doc_renders(module):
    out = subprocess.run([os.path.join(BIN, "ansible-doc"), "whitesky.capvco." + module], env=ENV,
                         capture_output=True, text=True, check=True).stdout
    assert "EXAMPLES" in out and "RETURN VALUES" in out
    assert ("api_token" in out) == (module != "gpu_driver_verify"), "platform modules share the connection options"


def test_galaxy_build_leaves_dev_only_folders_out(tmp_path):
    subprocess.run([os.path.join(BIN, "ansible-galaxy"), "collection", "build", "--output-path", str(tmp_path), ROOT],
                   env=ENV, capture_output=True, text=True, check=True, cwd=ROOT)
    (tarball,) = tmp_path.glob("whitesky-capvco-*.tar.gz")
    with tarfile.open(tarball) as tar:
        names = tar.getnames()
    assert "plugins/modules/vgpu.py" in names and "meta/runtime.yml" in names and "docs/gpus.md" in names
    assert "playbooks/gpu_orphans.yml" in names
    assert "roles/gpu_driver/meta/argument_specs.yml" in names and "roles/sriov_agent/meta/argument_specs.yml" in names
    for dev_only in ("emulator", "bin", "hack", "benchmarks", "tests/integration", "tests/unit", ".venv", ".build",
                     ".ci", "Makefile", "requirements-dev.txt", "node", "molecule", "demo-out"):
        assert not any(n == dev_only or n.startswith(dev_only + "/") for n in names), dev_only
