"""The collection as users get it: ansible-doc renders, the built tarball leaves dev-only folders out."""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile

import pytest
import yaml

from helpers import COLLECTIONS, ROOT, build_collection, read_text

BIN = os.path.dirname(sys.executable)
ENV = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=COLLECTIONS, ANSIBLE_NOCOLOR="1")


@pytest.mark.parametrize(
    "module",
    [
        "gpu_profile_info",
        "vgpu",
        "vgpu_info",
        "vgpu_reclaim",
        "external_nic",
        "external_network_info",
        "gpu_driver_verify",
        "gpu_driver_install",
        "first_boot_info",
        "machine",
        "machine_pool",
        "machine_info",
        "cloudspace",
        "cloudspace_info",
        "vgpu_billing_info",
        "vco_status",
    ],
)
def test_ansible_doc_renders(module):
    out = subprocess.run(
        [os.path.join(BIN, "ansible-doc"), "whitesky.capvco." + module],
        env=ENV,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "EXAMPLES" in out and "RETURN VALUES" in out
    platform = module not in ("gpu_driver_verify", "gpu_driver_install", "vco_status")
    assert ("api_token" in out) == platform, "platform modules share the connection options"


def test_galaxy_build_leaves_dev_only_folders_out(tmp_path):
    tarball = build_collection(tmp_path)
    with tarfile.open(tarball) as tar:
        names = tar.getnames()
    assert "plugins/modules/vgpu.py" in names and "meta/runtime.yml" in names and "docs/gpus.md" in names
    assert "playbooks/gpu_orphans.yml" in names
    assert "roles/gpu_driver/meta/argument_specs.yml" in names and "roles/sriov_agent/meta/argument_specs.yml" in names
    # what operator/Containerfile installs: the playbooks operator/watches.yaml names, and the controller's role
    watches = yaml.safe_load(read_text(os.path.join(ROOT, "operator", "watches.yaml")))
    prefix = "/usr/share/ansible/collections/ansible_collections/whitesky/capvco/"
    for path in [w["playbook"] for w in watches] + [w["finalizer"]["playbook"] for w in watches]:
        assert path[len(prefix) :] in names, path
    assert "roles/capvco_controller/files/crds.yaml" in names and "playbooks/vars/vcomachine.yml" in names
    for dev_only in (
        "emulator",
        "bin",
        "hack",
        "benchmarks",
        "tests/integration",
        "tests/unit",
        ".venv",
        ".build",
        ".ci",
        "Makefile",
        "requirements-dev.txt",
        "node",
        "molecule",
        "demo-out",
        "operator",
        "tests/kubefake.py",
    ):
        assert not any(n == dev_only or n.startswith(dev_only + "/") for n in names), dev_only
