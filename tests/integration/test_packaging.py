"""The collection as users get it: ansible-doc renders, the built tarball leaves dev-only folders out."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile

import pytest

from helpers import COLLECTIONS, ROOT, TOKEN, build_collection, run_consumer_check

BIN = os.path.dirname(sys.executable)
ENV = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=COLLECTIONS, ANSIBLE_NOCOLOR="1")


@pytest.mark.parametrize(
    "module",
    [
        "gpu_profile_info",
        "image_info",
        "location_info",
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
    # what controller/Containerfile installs from the artifact: the controller's role (the SR-IOV add-on's
    # sriov_agent role) and the core the controller imports
    assert "roles/capvco_controller/files/crds.yaml" in names and "roles/sriov_agent/tasks/main.yml" in names
    assert "plugins/module_utils/cluster/run.py" in names
    assert not [n for n in names if n.startswith("playbooks/vco")], "the Ansible operator's playbooks are gone"
    for dev_only in (
        "emulator",
        "lab",
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
        "controller",
        "tests/helpers.py",
    ):
        assert not any(n == dev_only or n.startswith(dev_only + "/") for n in names), dev_only


def test_every_diff_shows_through_the_default_callback_without_a_warning():
    """tests/consumers/check_diff.py with this venv's ansible-core (``make consumers`` runs it on the oldest and the
    newest): every module that reports a diff, through --diff and the default callback."""
    proc = run_consumer_check("check_diff.py")
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert "every diff shown, no warning" in proc.stdout


def test_a_plain_pip_install_of_the_emulator_is_whole(tmp_path):
    """``pip install ./emulator`` (not editable) installs every package (routes included) and the table of the
    API's operations, and the installed emulator serves; no build output is tracked by git."""
    src = tmp_path / "src"
    shutil.copytree(
        os.path.join(ROOT, "emulator"), src / "emulator", ignore=shutil.ignore_patterns("*.egg-info", "build")
    )
    shutil.copytree(os.path.join(ROOT, "plugins", "module_utils"), src / "plugins" / "module_utils")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", str(src / "emulator")],
        capture_output=True,
        text=True,
    )
    assert pip.returncode == 0, pip.stdout + pip.stderr
    site = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import whitesky_emulator, sys; print(whitesky_emulator.__file__)"],
        capture_output=True,
        text=True,
        check=True,
        cwd=str(tmp_path),
    ).stdout.strip()
    assert site.startswith(str(venv)), site
    installed = os.path.dirname(site)
    assert os.path.isfile(os.path.join(installed, "routes", "__init__.py")) and os.path.isfile(
        os.path.join(installed, "_api.py")
    ), sorted(os.listdir(installed))
    state = tmp_path / "state"
    proc = subprocess.Popen(
        [str(venv / "bin" / "whitesky-emulator"), "--port", "0", "--state-dir", str(state)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=str(tmp_path),
        env=dict(os.environ, PYTHONPATH=""),
    )
    try:
        url = proc.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:"), url + proc.stdout.read()
        import httpx

        answer = httpx.get(url + "/customers/capvco-demo/cloudspaces", headers={"Authorization": "Bearer " + TOKEN})
        assert answer.status_code == 200 and "capvco-demo" in answer.text, answer.text
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    tracked = subprocess.run(["git", "ls-files"], capture_output=True, text=True, cwd=ROOT).stdout.split()
    build_output = ("emulator/build/", "lab/build/", "node/build/")
    assert not [p for p in tracked if ".egg-info" in p or p.startswith(build_output)]
