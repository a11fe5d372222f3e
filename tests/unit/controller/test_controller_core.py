"""The controller's pure parts: the work queue's guarantees, the drift rule, what wakes a reconcile, the Lease's
expiry."""

from __future__ import annotations

import threading

import pytest

from ansible_collections.whitesky.capvco.plugins.module_utils.platform.errors import ApiError, InputError
from capvco_controller import controller, credentials, drift, leader
from capvco_controller.objects import VCOMachine
from capvco_controller.workqueue import WorkQueue


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def test_a_key_waits_once_and_is_never_worked_on_twice_at_once():
    q = WorkQueue()
    q.add("a")
    q.add("a")
    assert q.depth() == 1
    key, _ = q.get(timeout=1)
    q.add("a")  # added while worked on: held back until done
    assert q.get(timeout=0.05) is None
    q.done(key)
    assert q.get(timeout=1)[0] == "a"


def test_delayed_adds_and_backoff_per_key():
    clock = Clock()
    q = WorkQueue(base_delay=1.0, max_delay=8.0, clock=clock)
    assert [q.add_rate_limited("k") for _ in range(5)] == [1.0, 2.0, 4.0, 8.0, 8.0]
    q.forget("k")
    assert q.add_rate_limited("k") == 1.0
    q2 = WorkQueue(clock=clock)
    q2.add_after("x", 5)
    assert q2.get(timeout=0) is None
    clock.now = 5.0
    assert q2.get(timeout=0)[0] == "x"


def test_shutdown_wakes_the_workers_and_starts_nothing_more():
    q = WorkQueue()
    got = []
    t = threading.Thread(target=lambda: got.append(q.get()))
    t.start()
    q.shutdown()
    t.join(5)
    q.add("late")
    assert got == [None] and q.get(timeout=0) is None


def machine(**status):
    return VCOMachine.read(
        {
            "metadata": {
                "name": "c1-m0",
                "namespace": "default",
                "labels": {"cluster.x-k8s.io/cluster-name": "c1"},
                "finalizers": ["vcomachine.infrastructure.cluster.x-k8s.io"],
            },
            "spec": {"vcpus": 1, "memory": 512, "gpu": {"type": "NVIDIA A100", "count": 1}, "providerID": "p"},
            "status": dict(
                {"ready": True, "vmID": 7, "gpu": {"reservations": [{"vgpuID": "g1", "attached": True}]}}, **status
            ),
        }
    )


def vm(vgpus=("g1",), vm_id=7, name="c1-m0"):
    return {"vm_id": vm_id, "name": name, "devices": [{"type": "VGPU", "reference_id": g} for g in vgpus]}


def test_the_drift_rule():
    m = machine()
    owned = [{"vgpu_id": "g1", "status": "ATTACHED"}]
    assert drift.machine_drift(m, [vm()], owned, "p") is None
    assert "gone" in drift.machine_drift(m, [], owned, "p")
    assert "gone" in drift.machine_drift(m, [vm(name="other")], owned, "p")  # the id came back under another name
    assert "cloudspace is gone" in drift.machine_drift(m, None, owned, "p")
    assert "attached" in drift.machine_drift(m, [vm(vgpus=())], owned, "p")
    assert "reservations" in drift.machine_drift(m, [vm()], [{"vgpu_id": "g1", "status": "DELETED"}], "p")
    assert "providerID" in drift.machine_drift(m, [vm()], owned, "q")


def test_what_wakes_a_reconcile():
    obj = {"metadata": {"name": "a", "resourceVersion": "1", "finalizers": ["x"]}, "spec": {"v": 1}, "status": {"x": 1}}
    same = {"metadata": {"name": "a", "resourceVersion": "2", "finalizers": []}, "spec": {"v": 1}, "status": {"x": 2}}
    assert controller.fingerprint(obj) == controller.fingerprint(same)  # its own status and finalizer writes
    assert controller.fingerprint(obj) != controller.fingerprint(dict(obj, spec={"v": 2}))
    annotated = dict(obj, metadata=dict(obj["metadata"], annotations={"cluster.x-k8s.io/paused": ""}))
    assert controller.fingerprint(obj) != controller.fingerprint(annotated)


def test_a_lease_expires_by_how_long_this_replica_saw_it_unchanged_not_by_its_renew_time():
    """A Lease lapses ``leaseDurationSeconds`` after this replica first saw its record unchanged, on this replica's
    clock; the holder's ``renewTime`` (another clock, here a day ahead or a day behind) is not read."""
    for renewed in ("2026-12-03T12:00:00.000000Z", "2026-12-01T12:00:00.000000Z", "garbage"):
        spec = {"holderIdentity": "a", "leaseDurationSeconds": 15, "renewTime": renewed}
        assert not leader.expired(spec, 1000.0, 1000.0)
        assert not leader.expired(spec, 1000.0, 1014.9)
        assert leader.expired(spec, 1000.0, 1015.0)
    assert leader.expired({"holderIdentity": None, "leaseDurationSeconds": 15}, 1000.0, 1000.0)
    assert leader.expired({"holderIdentity": "a", "leaseDurationSeconds": "15"}, 1000.0, 1000.0)
    assert leader.expired({"holderIdentity": "a"}, 1000.0, 1000.0)


def credential_folder(path, token, url="https://portal.example/api/1", customer="acme"):
    path.mkdir(exist_ok=True)
    for key, value in (("api_url", url), ("customer_id", customer), ("api_token", token)):
        (path / key).write_text(value + "\n")


def test_the_credential_is_read_again_when_its_files_change(tmp_path):
    clock = Clock()
    folder = tmp_path / "credentials"
    credential_folder(folder, "token-one")
    got = credentials.Credentials(str(folder), {}, check_every=1.0, clock=clock)
    assert got.current() == (got.connection, 0) and got.connection.api_token == "token-one"
    credential_folder(folder, "token-two")
    assert got.current()[0].api_token == "token-one", "looked at again only once check_every has passed"
    clock.now = 1.0
    connection, generation = got.current()
    assert (connection.api_token, connection.customer_id, generation) == ("token-two", "acme", 1)
    # a folder that cannot be read keeps the credential it had, and the error names the file, never a value
    (folder / "api_token").unlink()
    clock.now = 2.0
    assert got.current() == (connection, 1)
    (folder / "api_token").write_text("  \n")
    assert got.current(force=True) == (connection, 1)
    refused = ApiError("GET", "/customers/acme/cloudspaces", 401, "Unauthorized: token-two is revoked")
    said = got.say(refused)
    assert "token-two" not in said and "token-one" not in said and "WHITESKY_API_TOKEN" not in said
    assert "refused the controller's platform credential, for customer acme" in said and str(folder) in said
    assert got.say(ApiError("GET", "/x", 500, "token-one")) == "GET /x failed: HTTP 500: ***"


def test_without_a_folder_the_credential_is_the_environment_read_once():
    env = {"WHITESKY_API_URL": "https://p.example", "WHITESKY_CUSTOMER_ID": "acme", "WHITESKY_API_TOKEN": "t0ken"}
    got = credentials.Credentials(None, env)
    env["WHITESKY_API_TOKEN"] = "changed"
    assert got.current(force=True)[0].api_token == "t0ken"
    said = got.say(ApiError("GET", "/x", 401, "no"))
    assert "from its environment (WHITESKY_API_URL" in said and "restart the controller" in said
    with pytest.raises(InputError, match="cannot read api_url .of the controller's credential. in /nonexistent"):
        credentials.Credentials("/nonexistent", {})
