"""The platform boundary (issue 13): one retry layer with a deadline, TLS failures final, safe paths, complete
paging, and an emulator that answers every malformed request with a 4xx that names the field."""

from __future__ import annotations

import datetime
import http.server
import ipaddress
import ssl
import threading
import time

import httpx
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from ansible_collections.whitesky.capvco.plugins.module_utils.gpu import vgpus as gpu
from ansible_collections.whitesky.capvco.plugins.module_utils.gpu.ops import Ops
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.client import WhiteskyClient
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.errors import (
    ApiError,
    InputError,
    PartialFailure,
)
from ansible_collections.whitesky.capvco.plugins.module_utils.reclaim import report, sweep

from helpers import CUSTOMER, run_playbook, task_results

LOC, CS = "be-gen-1", "cs-demo"


def seed(emulator, names, gpu_id="nvidia-a100-20c", vm_id=None):
    body = {"location": LOC, "gpu_id": gpu_id, "vgpu_names": names, "vm_id": vm_id}
    return emulator.admin("POST", "/seed-vgpu", body)["vgpu_ids"]


def test_one_release_under_a_steady_503_makes_at_most_the_clients_attempts(emulator):
    (vgpu,) = seed(emulator, ["capvco.c1.w0.00.0000001"])
    client = emulator.client(backoff=0.001, max_attempts=6)
    emulator.faults(error_rates={"503": 1.0}, operations=["deleteVGPU"])
    ops = Ops(client, LOC)
    with pytest.raises(ApiError) as err:
        ops.release({"vgpu_id": vgpu, "status": "RESERVED", "virtual_machine": None})
    assert emulator.op_count("deleteVGPU") == 6
    assert err.value.status == 503 and "gave up after 6 attempt(s)" in str(err.value)


def test_vgpu_reclaim_under_a_steady_503_is_bounded_by_attempts_and_deadline(emulator):
    seed(emulator, ["capvco.c1.w0.00.0000001"])
    emulator.faults(error_rates={"503": 1.0}, operations=["deleteVGPU"])
    client = emulator.client(timeout=2, retry_budget=3, backoff=0.2)
    t0 = time.monotonic()
    with pytest.raises(PartialFailure) as err:
        sweep.reclaim(client, location=LOC, scope="cluster", cluster="c1", grace_period=0, parallel=4)
    assert time.monotonic() - t0 < 5 + 1, "the call's deadline is timeout + retry budget"
    assert emulator.op_count("deleteVGPU") <= 6 and "gave up after" in str(err.value)


def test_a_retry_after_longer_than_the_deadline_is_not_waited_for(emulator):
    seed(emulator, ["capvco.c1.w0.00.0000001"])
    emulator.faults(error_rates={"429": 1.0}, retry_after=60, operations=["listCustomerVGPUS"])
    client = emulator.client(timeout=2, retry_budget=3)
    t0 = time.monotonic()
    with pytest.raises(ApiError) as err:
        list(client.vgpus(LOC))
    assert time.monotonic() - t0 < 2
    assert emulator.op_count("listCustomerVGPUS") == 1
    assert "asked to wait 60s" in str(err.value) and "gave up after 1 attempt(s)" in str(err.value)


def test_a_vm_lock_is_waited_out_through_the_callers_hook(emulator):
    client = emulator.client(backoff=0.05)
    vm = client.create_vm(CS, name="locked", description="t", vcpus=1, memory=1024)
    emulator.faults(vm_op_seconds=1.0)
    holder = threading.Thread(target=client.attach_nic, args=(CS, vm, 101))
    holder.start()
    other = emulator.client(backoff=0.05)
    assert wait_locked(other, vm)
    item = gpu.Ops(other, LOC, CS).reserve("c1", "locked", vm, 0, "nvidia-a100-20c")
    holder.join()
    assert item["vgpu_name"].startswith("capvco.c1.locked.00.")
    assert emulator.stats()["vm_lock_conflicts"] >= 1 and len(emulator.ledger()["reservations"]) == 1


def wait_locked(client, vm, timeout=10):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if client.get_vm(CS, vm)["locked"]:
            return True
    return False


@pytest.fixture(scope="module")
def tls_server(tmp_path_factory):
    """An HTTPS server on loopback with a self-signed certificate that no client trusts."""
    d = tmp_path_factory.mktemp("tls")
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False)
        .sign(key, hashes.SHA256())
    )
    (d / "cert.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (d / "key.pem").write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    hits = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (the stdlib's name)
            hits.append(self.path)
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(b'{"result": []}')

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(d / "cert.pem", d / "key.pem")
    server.socket = ctx.wrap_socket(server.socket, server_side=True)
    connections = []
    accept = server.get_request

    def counted():
        conn = accept()
        connections.append(1)
        return conn

    server.get_request = counted
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield "https://127.0.0.1:%d/api/1" % server.server_address[1], connections, hits
    server.shutdown()


def test_a_certificate_that_fails_verification_is_final(tls_server):
    url, connections, hits = tls_server
    client = WhiteskyClient(url, "t", CUSTOMER, max_attempts=6, backoff=0.5)
    t0 = time.monotonic()
    with pytest.raises(ApiError) as err:
        client.gpu_profiles(LOC)
    assert time.monotonic() - t0 < 2 and client.transport.retry.retries == 0
    assert "TLS failed" in str(err.value) and "certificate" in str(err.value).lower()
    assert hits == []
    trusting = WhiteskyClient(url, "t", CUSTOMER, validate_certs=False)
    assert trusting.gpu_profiles(LOC) == [] and len(hits) == 1


def test_plain_http_warns_unless_loopback():
    assert WhiteskyClient("http://127.0.0.1:9/api/1", "t", CUSTOMER).transport.warnings == []
    assert WhiteskyClient("http://localhost:9", "t", CUSTOMER).transport.warnings == []
    (warning,) = WhiteskyClient("http://portal.example:8080/api/1", "t", CUSTOMER).transport.warnings
    assert "portal.example:8080" in warning and "unencrypted" in warning
    assert WhiteskyClient("https://portal.example/api/1", "t", CUSTOMER).transport.warnings == []
    with pytest.raises(InputError):
        WhiteskyClient("ftp://portal.example/api/1", "t", CUSTOMER)


def test_the_module_shows_the_plain_http_warning(emulator, tmp_path):
    play = tmp_path / "p.yml"
    play.write_text(
        "- hosts: localhost\n  gather_facts: false\n  tasks:\n"
        "    - name: Profiles\n      whitesky.capvco.gpu_profile_info:\n        location: be-gen-1\n"
        "        api_url: http://portal.invalid:1/api/1\n        timeout: 1\n      ignore_errors: true\n"
    )
    _rc, _out, data = run_playbook(str(play), emulator)
    (res,) = task_results(data, "Profiles")
    assert any("unencrypted" in w for w in res.get("warnings", [])), res


def test_a_missing_connection_setting_names_its_option_and_its_variable(emulator, tmp_path):
    """Without a token (neither the option nor WHITESKY_API_TOKEN) the module says which of both to set, before
    any call."""
    play = tmp_path / "p.yml"
    play.write_text(
        "- hosts: localhost\n  gather_facts: false\n  tasks:\n"
        "    - name: Profiles\n      whitesky.capvco.gpu_profile_info:\n        location: be-gen-1\n"
    )
    for env, says in [
        (
            {"WHITESKY_API_TOKEN": ""},
            "missing the platform connection: api_token. Set the option, or the "
            "environment variable WHITESKY_API_TOKEN.",
        ),
        (
            {"WHITESKY_API_TOKEN": " ", "WHITESKY_CUSTOMER_ID": ""},  # white space alone is no token
            "api_token, customer_id. Set the options, or the "
            "environment variables WHITESKY_API_TOKEN, WHITESKY_CUSTOMER_ID.",
        ),
    ]:
        emulator.reset_stats()
        rc, out, data = run_playbook(str(play), emulator, env=env)
        (res,) = task_results(data, "Profiles")
        assert rc != 0 and says in res["msg"] and res["invalid_input"] is True, res
        assert emulator.stats()["requests"] == 0


@pytest.mark.parametrize(
    ("kind", "bad"),
    [
        ("customer_id", "capvco-demo/locations/be-gen-1/vgpus/x?"),
        ("customer_id", "../other"),
        ("location", "be-gen-1/vgpus/x?"),
        ("location", ""),
    ],
)
def test_customer_and_location_ids_are_validated_where_they_enter(emulator, kind, bad):
    if kind == "customer_id":
        with pytest.raises(InputError) as err:
            WhiteskyClient(emulator.url, emulator.token, bad)
    else:
        with pytest.raises(InputError) as err:
            emulator.client().gpu_profiles(bad)
    assert kind in str(err.value) and repr(bad) in str(err.value)
    assert emulator.stats()["requests"] == 0


def test_every_path_parameter_is_percent_encoded(emulator):
    (theirs,) = seed(emulator, ["hand-made"])
    client = emulator.client()
    for vgpu_id in ("%s/../%s" % (theirs, theirs), "x?permanently=true", "x#y", "../../cloudspaces/cs-demo"):
        with pytest.raises(ApiError) as err:
            client.delete_vgpu(LOC, vgpu_id)
        assert err.value.status in (400, 404), (vgpu_id, err.value)
    assert emulator.op_count("deleteCloudspace") == 0
    (row,) = emulator.ledger()["reservations"]
    assert row["deleted_at"] is None and row["touched"] == 0, "nothing else was reached"


@pytest.mark.parametrize("faults", [{"page_cap": 100}, {"page_cap": 40, "no_count": True}, {"page_cap": 7}])
def test_paging_lists_everything_when_the_platform_pages_smaller_than_asked(emulator, faults):
    names = ["capvco.c1.w%d.00.0000001" % i for i in range(250)]
    seed(emulator, names)
    emulator.faults(**faults)
    client = emulator.client()
    listed = [v["vgpu_name"] for v in client.vgpus(LOC)]
    assert listed == names
    info = report.info(client, location=LOC, cluster="c1")
    assert len(info["reservations"]) == 250


def test_paging_fills_a_short_page_in_the_middle(emulator):
    names = ["v%03d" % i for i in range(30)]
    seed(emulator, names)
    client = emulator.client()
    real = client.call
    calls = []

    def shorting(operation, query=None, **kw):  # a platform whose second page comes back short
        body = real(operation, query=query, **kw)
        calls.append(query["start_after"])
        if query["start_after"] == 10:
            body["data"] = body["data"][:4]
        return body

    client.call = shorting
    assert [v["vgpu_name"] for v in client.paginate("listCustomerVGPUS", limit=10, location=LOC)] == names
    assert 14 in calls, "the gap after the short page was fetched"


@pytest.mark.parametrize(
    ("method", "path", "params", "body", "field"),
    [
        ("POST", "/cloudspaces", None, {"name": "x", "location": "be-gen-1", "firewall": {}, "extra": 1}, "extra"),
        ("POST", "/cloudspaces", None, {"name": 5, "location": "be-gen-1", "firewall": {}}, "body.name"),
        ("POST", "/cloudspaces", None, {"name": "x", "location": 7, "firewall": {}}, "body.location"),
        ("POST", "/cloudspaces", None, {"name": "x", "location": "be-gen-1"}, "body.firewall"),
        ("POST", "/locations/be-gen-1/gpus/nvidia-l4-24q", None, {"vgpu_name": "a", "other": 1}, "other"),
        ("POST", "/cloudspaces/cs-demo/vms/1/gpus/nvidia-l4-24q", None, {"vgpu_name": "a", "x": 1}, "body.x"),
        (
            "POST",
            "/cloudspaces/cs-demo/vms",
            {"name": "n", "description": "d", "vcpus": 1, "memory": 1024},
            {"foo": 1},
            "body.foo",
        ),
        ("GET", "/cloudspaces/cs-demo/vms/abc", None, None, "vm_id"),
        ("GET", "/cloudspaces/cs-demo/vms/1.5", None, None, "vm_id"),
        ("GET", "/cloudspaces/cs-demo/vms/%d" % 2**70, None, None, "vm_id"),
        ("GET", "/locations/be-gen-1/external-networks/abc", None, None, "external_network_id"),
        ("GET", "/locations/be-gen-1/vgpus", {"start_after": 2**70}, None, "start_after"),
        ("GET", "/locations/be-gen-1/vgpus", {"limit": -1}, None, "limit"),
        ("GET", "/locations/be-gen-1/consumption", {"start": "yesterday", "end": 1}, None, "start"),
        ("DELETE", "/cloudspaces/cs-demo", {"permanently": "maybe"}, None, "permanently"),
    ],
)
def test_the_emulator_answers_bad_input_with_400_naming_the_field(emulator, method, path, params, body, field):
    resp = httpx.request(
        method,
        emulator.url + "/customers/%s%s" % (CUSTOMER, path),
        params=params,
        json=body,
        headers={"Authorization": "Bearer " + emulator.token},
    )
    assert resp.status_code == 400, resp.text
    assert field in resp.json()["message"], resp.json()


def test_the_emulator_follows_the_spec_where_it_used_to_deviate(emulator):
    headers = {"Authorization": "Bearer " + emulator.token}
    base = emulator.url + "/customers/%s" % CUSTOMER
    seed(emulator, ["a", "b", "c"])
    everything = httpx.get(base + "/locations/be-gen-1/vgpus", params={"limit": 0}, headers=headers).json()
    assert len(everything["data"]) == 3, "limit=0 means no limit"
    huge = httpx.get(base + "/locations/be-gen-1/vgpus", params={"start_after": 2**62}, headers=headers)
    assert huge.status_code == 200 and huge.json()["data"] == []
    prices = httpx.get(base + "/locations", headers=headers).json()
    assert {"fsu", "nu", "ou", "tu", "wu", "vgu"} <= set(prices["locations"][0]["resources"])
    client = emulator.client()
    vm = client.create_vm(CS, name="n1", description="d", vcpus=1, memory=1024)
    client.attach_nic(CS, vm, 101)
    (iface,) = client.vms(CS)[0]["network_interfaces"]  # a listing's VmsModelNetworkInterfaces
    assert iface["external_network_type"] == "external" and "nic_type" not in iface
    (iface,) = client.get_vm(CS, vm)["network_interfaces"]  # a VM's info: VmInfoModelNetworkInterfaces
    assert iface["nic_type"] == "external" and "external_network_type" not in iface
    assert client.nics(CS, vm)[0]["nic_type"] == "external"  # the NIC listing's own name for it
    no_private = httpx.post(
        base + "/cloudspaces", json={"name": "fw", "location": LOC, "firewall": {}}, headers=headers
    )
    assert no_private.status_code == 400 and "body.firewall.private" in no_private.json()["message"]
    wrong = httpx.put(base + "/cloudspaces/cs-demo/vms/%d" % vm, headers=headers)
    assert wrong.status_code == 405 and set(wrong.headers["allow"].split(", ")) == {"DELETE", "GET"}
    for permanently, listed in ((False, True), (True, False)):
        cs = client.create_cloudspace("gone-%s" % permanently, LOC)
        client.delete_cloudspace(cs, permanently=permanently)
        deleted = httpx.get(base + "/cloudspaces", params={"include_deleted": "true"}, headers=headers).json()
        assert (cs in [c["cloudspace_id"] for c in deleted["result"]]) is listed
        assert cs not in [c["cloudspace_id"] for c in client.cloudspaces()]
