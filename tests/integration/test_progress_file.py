"""The progress file is the run's own (issue 46, point 6): a FIFO at its path would block the module in ``open`` while
its lease kept the cluster locked, and another user's 0666 file got the lines appended.  The core of the ``cluster``
module is driven here against a served emulator: each hostile path is refused with its reason, before anything is
read or changed, and a path that does not exist is made new and private."""

from __future__ import annotations

import os
import stat
import threading

import pytest

from ansible_collections.whitesky.capvco.plugins.module_utils.cluster import progress
from ansible_collections.whitesky.capvco.plugins.module_utils.cluster.run import run
from ansible_collections.whitesky.capvco.plugins.module_utils.ownership import lease
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.client import WhiteskyClient
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.errors import InputError
from capvco_lab.specs import cluster_spec

DEADLINE = 30.0


def converge(emulator, path, check_mode=False):
    """The cluster core with ``progress_file=path``; what it answered or raised, or ``"blocked"`` after DEADLINE."""
    client = emulator.client(backoff=0.01)
    spec = cluster_spec("pf", "pf-cs", gpu_replicas=1, count=1)
    outcome = {}

    def go():
        try:
            outcome["result"] = run(client, spec=spec, progress_file=str(path), check_mode=check_mode)
        except InputError as exc:
            outcome["refused"] = str(exc)

    worker = threading.Thread(target=go, daemon=True)
    worker.start()
    worker.join(DEADLINE)
    if worker.is_alive():  # the old code, blocked in open(): let it go, so the test ends
        with open(path, "rb"):
            worker.join(DEADLINE)
        return "blocked"
    return outcome


def nothing_made(emulator):
    snap = emulator.snapshot()
    return not snap["vms"] and not snap["vgpus"] and not [c for c in snap["cloudspaces"] if c["name"] == "pf-cs"]


def test_a_fifo_at_the_path_is_refused_before_anything_and_never_blocks(emulator, tmp_path):
    fifo = tmp_path / "progress"
    os.mkfifo(fifo)
    for check_mode in (True, False):
        outcome = converge(emulator, fifo, check_mode)
        assert outcome != "blocked", "the run waited on the FIFO"
        assert "already exists (a FIFO)" in outcome["refused"], outcome
    assert nothing_made(emulator)


@pytest.mark.skipif(os.geteuid() != 0, reason="making another user's file needs root")
def test_another_users_file_is_refused_and_left_as_it_was(emulator, tmp_path):
    theirs = tmp_path / "theirs.log"
    theirs.write_text("their own lines\n")
    os.chown(theirs, 4242, 4242)
    os.chmod(theirs, 0o666)
    outcome = converge(emulator, theirs)
    assert "already exists (a regular file of user id 4242)" in outcome["refused"], outcome
    assert theirs.read_text() == "their own lines\n" and nothing_made(emulator)


def test_a_link_an_own_file_and_an_open_folder_are_refused(emulator, tmp_path):
    own = tmp_path / "own.log"
    own.write_text("")
    link = tmp_path / "link.log"
    link.symlink_to(tmp_path / "elsewhere.log")
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o777)  # anyone may write and rename there: no sticky bit
    expected = {
        own: "already exists (a regular file)",
        link: "already exists (a symbolic link)",
        shared / "progress": "may be written by any user",
    }
    for path, why in expected.items():
        outcome = converge(emulator, path)
        assert why in outcome["refused"], (path, outcome)
    assert not (tmp_path / "elsewhere.log").exists() and own.read_text() == "" and nothing_made(emulator)


def test_a_new_path_is_made_private_and_gets_the_lines(emulator, tmp_path):
    sticky = tmp_path / "tmp"
    sticky.mkdir()
    os.chmod(sticky, 0o1777)  # as /tmp: anyone may write, only the owner may rename or remove
    path = sticky / "progress"
    outcome = converge(emulator, path)
    assert outcome["result"]["changed"], outcome
    mode = os.lstat(path).st_mode
    assert stat.S_ISREG(mode) and stat.S_IMODE(mode) == 0o600
    assert "machine pf-gpu-0: vGPU slot 0 reserved" in path.read_text()


def test_the_observed_client_is_the_runs_client_typed_and_no_proxy(emulator, tmp_path):
    """Issue 47, point 1: the observed client was a ``__getattr__`` proxy (``Any`` to the appliers, and to mypy);
    now it is a :class:`WhiteskyClient` of the run's own parts: the same transport, markers and leases (a lease taken
    through it is the run's), its five observed calls the client's with a line each, every other call inherited."""
    with emulator.client() as client:
        observed = progress.observe(client, str(tmp_path / "progress"))
        assert isinstance(observed, progress.Observed) and isinstance(observed, WhiteskyClient)
        assert "__getattr__" not in vars(progress.Observed) and observed.client is client
        assert observed.transport is client.transport
        assert observed.markers is client.markers and observed.leases is client.leases
        with lease.held(observed, "cs-demo", "pf") as took:
            assert took is not None
            with lease.held(client, "cs-demo", "pf") as inner:  # the run holds it already: not taken again
                assert inner is None
        vm_id = observed.create_vm("cs-demo", "pf-a", "made by hand", 1, 512, image_id=12)
        observed.delete_vm("cs-demo", vm_id)
        progress.finish(observed)
    assert (tmp_path / "progress").read_text().splitlines() == [
        "machine pf-a: created (VM %s, 1 vCPUs, 512 MiB)" % vm_id,
        "machine pf-a: deleted",
    ]
