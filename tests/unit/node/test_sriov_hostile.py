"""Everything the node agent and the CNI plugin read from outside is parsed as hostile (issue 25), without root or
a server: the network configuration and ``prevResult`` into typed records with the spec's error codes, every
answer and log line through the one scrubber, and the ledger's settling decisions."""

from __future__ import annotations

import io
import itertools
import json
import logging
import os
import subprocess
import sys
import threading
import types

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_sriov_units import ENTRY

from ansible_collections.whitesky.capvco.plugins.module_utils.platform.errors import ApiError
from capvco_lab.netlab import install_plugin
from capvco_sriov import shim, wire
from capvco_sriov.agent import Redact, serve_one
from capvco_sriov.commands import NicAgent
from capvco_sriov.ledger import Ledger
from capvco_sriov.reclaimer import Reclaimer
from capvco_sriov.settle import settle_decision

from properties import examples

CS, LOC, VM = "cs-demo", "be-gen-1", 7
NET = {
    "external_network_id": 101,
    "name": "sriov-ext",
    "subnet_mask": "255.255.255.0",
    "gateway": "198.51.100.1",
}
TOKEN = "tok-5f2c1a9e-agent-credential"  # noqa: S105 (a test's own credential)
#: What the spec lets a plugin answer (and 100, this plugin's CHECK mismatch).
SPEC_CODES = {1, 2, 3, 4, 5, 6, 7, 11, 50, 51, 100}


class FakeTransport:
    """What the agent reads of its client's transport: the deadlines of a call, and the redaction of its token."""

    def __init__(self):
        self.deadlines = types.SimpleNamespace(timeout=30.0, retry_budget=30.0)

    def redact(self, text):
        return str(text).replace(TOKEN, "***")


class FakePlatform:
    """The platform's NIC operations in memory, as the agent's client calls them (no server)."""

    def __init__(self):
        self.nics = {}  # ip -> NIC
        self.macs = 0
        self.transport = FakeTransport()
        self.calls = []

    def external_networks(self, location):
        return [dict(NET)]

    def free_addresses(self, location, net_id):
        return ["198.51.100.%d" % i for i in range(10, 20) if "198.51.100.%d" % i not in self.nics]

    def attach_nic(self, cs, vm_id, net_id, model=None, ip_address=None, **hooks):
        self.calls.append(("attach", ip_address))
        if ip_address in self.nics:
            raise ApiError("POST", "/external-nics", 409, "address %s is not available" % ip_address)
        self.macs += 1
        self.nics[ip_address] = {
            "mac_address": "52:54:00:00:00:%02x" % self.macs,
            "ip_address": ip_address,
            "network_id": net_id,
            "model": model,
        }
        return {"success": True}

    def nic(self, cs, vm_id, ip):
        if ip not in self.nics:
            raise ApiError("GET", "/external-nics/%s" % ip, 404, "no NIC at %s" % ip)
        return dict(self.nics[ip])

    def detach_nic(self, cs, vm_id, ip, net_id, **hooks):
        self.calls.append(("detach", ip))
        if self.nics.pop(ip, None) is None:
            raise ApiError("DELETE", "/external-nics/%s" % ip, 404, "no NIC at %s" % ip)
        return {"success": True}


class FakeNetlink:
    def __init__(self):
        self.pods = {}

    def wait_for(self, mac, timeout):
        return True

    def configure(self, mac, netns, ifname, address, prefixlen, mtu, routes):
        self.pods[(netns, ifname)] = {
            "mac": mac,
            "addresses": ["%s/%d" % (address, prefixlen)],
            "routes": [r["dst"] for r in routes],
        }
        return True  # the link runs

    def release(self, netns, ifname, mac):
        self.pods.pop((netns, ifname), None)

    def inspect(self, netns, ifname):
        return self.pods.get((netns, ifname))


def make_agent(directory, clock=None):
    os.makedirs(directory, exist_ok=True)
    netns = os.path.join(directory, "netns")
    open(netns, "w").close()
    agent = NicAgent(
        FakePlatform(),
        LOC,
        CS,
        VM,
        Ledger(os.path.join(directory, "ledger")),
        FakeNetlink(),
        clock=clock or (lambda: 1000.0),
    )
    agent.test_netns = netns
    agent.reclaimer = Reclaimer(agent)
    return agent


def cni(agent, command, conf=None, container="c1", raw_conf=None, version="1.1.0"):
    """A request through the plugin's check (its own answer when it refuses), then the agent: ``(code, doc)``."""
    config = {"cniVersion": version, "name": "ext", "type": "capvco-sriov", "network": "sriov-ext"}
    config.update(conf or {})
    env = {
        "CNI_COMMAND": command,
        "CNI_CONTAINERID": container,
        "CNI_IFNAME": "net1",
        "CNI_NETNS": agent.test_netns,
        "CNI_ARGS": "K8S_POD_UID=uid-" + container,
    }
    try:
        checked = shim.check(env, raw_conf if raw_conf is not None else json.dumps(config))
    except wire.CniError as exc:
        return 1, exc.to_dict()
    return serve_one(agent, wire.encode_request(env, checked))


@pytest.fixture
def agent(tmp_path):
    return make_agent(str(tmp_path))


def well_formed_error(doc, version=None):
    assert isinstance(doc, dict) and set(doc) == {"cniVersion", "code", "msg", "details"}, doc
    assert doc["cniVersion"] in wire.VERSIONS and (version is None or doc["cniVersion"] == version), doc
    assert doc["code"] in SPEC_CODES, doc
    assert isinstance(doc["msg"], str) and doc["msg"] and isinstance(doc["details"], str), doc
    assert "internal error" not in doc["msg"], doc
    assert len(doc["msg"]) <= 1024 and len(doc["details"]) <= 1024, doc


# -- point 1: the configuration and prevResult, typed, with the spec's codes ---------------------------------------


@pytest.mark.parametrize(
    ("prev", "field"),
    [
        ({"ips": [{"interface": 0}]}, "prevResult.ips[0].address"),  # the case: an ips entry, no address
        ({"ips": [{"address": "not-an-address"}]}, "prevResult.ips[0].address"),
        ({"ips": [{"address": 5}]}, "prevResult.ips[0].address"),
        ({"ips": ["198.51.100.10/24"]}, "prevResult.ips[0]"),
        ({"ips": {"address": "198.51.100.10/24"}}, "prevResult.ips"),
        ({"ips": [{"address": "198.51.100.10/24", "interface": "0"}]}, "prevResult.ips[0].interface"),
        ({"ips": [{"address": "198.51.100.10/24", "interface": 3}]}, "prevResult.ips[0].interface"),
        ({"interfaces": [{"mac": "52:54:00:00:00:01"}]}, "prevResult.interfaces[0].name"),
        ({"interfaces": [None]}, "prevResult.interfaces[0]"),
        ({"interfaces": [{"name": "net1", "mac": ["x"]}]}, "prevResult.interfaces[0].mac"),
        ({"routes": [{"gw": "198.51.100.1"}]}, "prevResult.routes[0].dst"),
        ({"routes": [7]}, "prevResult.routes[0]"),
        ("a string", "prevResult"),
        ([], "prevResult"),
    ],
)
def test_check_with_a_malformed_prev_result_is_a_config_error_naming_the_field(agent, prev, field):
    code, result = cni(agent, "ADD")
    assert code == 0, result
    code, doc = cni(agent, "CHECK", conf={"prevResult": prev})
    assert code == 1, doc
    well_formed_error(doc)
    assert doc["code"] == wire.INVALID_CONFIG and field in doc["msg"], doc


def test_check_with_a_well_formed_prev_result_still_passes_and_mismatches(agent):
    code, result = cni(agent, "ADD", conf={"routes": [{"dst": "203.0.113.0/24"}]})
    assert code == 0, result
    assert cni(agent, "CHECK", conf={"prevResult": result}) == (0, {})
    other = dict(result, ips=[{"address": "198.51.100.99/24", "interface": 0}])
    code, doc = cni(agent, "CHECK", conf={"prevResult": other})
    assert (code, doc["code"]) == (1, wire.CHECK_MISMATCH) and "198.51.100.99/24" in doc["msg"], doc


@pytest.mark.parametrize(
    ("command", "conf", "field"),
    [
        ("ADD", {"network": ["sriov-ext"]}, "network"),
        ("ADD", {"network": True}, "network"),
        ("ADD", {"name": 5}, "name"),
        ("ADD", {"mtu": True}, "mtu"),
        ("ADD", {"mtu": "1500"}, "mtu"),
        ("ADD", {"model": {"x": 1}}, "model"),
        ("ADD", {"routes": [{"dst": "203.0.113.0/24", "gw": 5}]}, "routes[0].gw"),
        ("ADD", {"routes": [{"dst": "203.0.113.0/24", "gw": "gateway"}]}, "routes[0].gw"),
        ("ADD", {"routes": ["203.0.113.0/24"]}, "routes[0]"),
        ("ADD", {"routes": [{"dst": "::/0"}]}, "default route"),
        ("ADD", {"timeoutSeconds": "soon"}, "timeoutSeconds"),
        ("ADD", {"agentSocket": 5}, "agentSocket"),
        ("ADD", {"agentSocket": "relative.sock"}, "agentSocket"),
        ("GC", {"cni.dev/valid-attachments": [None]}, "cni.dev/valid-attachments[0]"),
        ("GC", {"cni.dev/valid-attachments": [{"ifname": "net1"}]}, "cni.dev/valid-attachments[0].containerID"),
        ("GC", {"cni.dev/valid-attachments": [{"containerID": "c1", "ifname": 1}]}, "[0].ifname"),
        ("GC", {"cni.dev/valid-attachments": {"containerID": "c1"}}, "cni.dev/valid-attachments"),
        ("GC", {"cni.dev/valid-attachments": None}, "cni.dev/valid-attachments"),
        ("GC", {}, "cni.dev/valid-attachments"),
    ],
)
def test_a_malformed_configuration_field_is_a_config_error_naming_it(agent, command, conf, field):
    code, doc = cni(agent, command, conf=conf)
    assert code == 1, doc
    well_formed_error(doc)
    assert doc["code"] == wire.INVALID_CONFIG and field in doc["msg"], doc
    assert agent.client.calls == [] and agent.ledger.items() == {}


#: Secrets as they might be planted in a configuration: each holds SECRET, which must never come out.
SECRET = "Zq8wPLANTEDk3Vx"
PLANTED = [
    "Bearer " + SECRET,
    "password=" + SECRET,
    "https://admin:%s@portal.example" % SECRET,
    "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIx%s.c2lnbmF0dXJlX3g" % SECRET,
    '{"api_token": "%s"}' % SECRET,
    "token: " + SECRET,
]
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=4),
    max_leaves=16,
)
FIELDS = [
    "cniVersion",
    "name",
    "network",
    "mtu",
    "routes",
    "model",
    "prevResult",
    "cni.dev/valid-attachments",
    "timeoutSeconds",
    "agentSocket",
    "extra",
]


def plant(value, secret, path):
    """``value`` with ``secret`` put where ``path`` (a list of choices) leads: a leaf, a new key, a list item."""
    if not path:
        return secret
    choice, rest = path[0], path[1:]
    if isinstance(value, dict) and value:
        keys = sorted(value, key=str)
        key = keys[choice % len(keys)]
        return dict(value, **{key: plant(value[key], secret, rest)})
    if isinstance(value, list) and value:
        i = choice % len(value)
        return value[:i] + [plant(value[i], secret, rest)] + value[i + 1 :]
    return secret if choice % 2 else {"password": secret, "value": value}


@pytest.fixture(scope="module")
def fuzz_agent(tmp_path_factory):
    return make_agent(str(tmp_path_factory.mktemp("fuzz")))


SOCKETS = itertools.count()


@settings(max_examples=examples(400), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    command=st.sampled_from(["ADD", "DEL", "CHECK", "GC", "STATUS"]),
    overrides=st.dictionaries(st.sampled_from(FIELDS), JSON, max_size=4),
    prev=st.one_of(
        st.none(),
        JSON,
        st.fixed_dictionaries(
            {},
            optional={
                "interfaces": st.lists(st.dictionaries(st.sampled_from(["name", "mac", "sandbox"]), JSON), max_size=3),
                "ips": st.lists(
                    st.dictionaries(st.sampled_from(["address", "interface", "gateway"]), JSON), max_size=3
                ),
                "routes": st.lists(st.dictionaries(st.sampled_from(["dst", "gw"]), JSON), max_size=3),
            },
        ),
    ),
    secret=st.sampled_from(PLANTED),
    where=st.lists(st.integers(0, 7), max_size=5),
    keep_version=st.booleans(),
)
def test_fuzz_the_configuration_and_prev_result(fuzz_agent, command, overrides, prev, secret, where, keep_version):
    """Arbitrary JSON shapes in every field the agent reads, a secret planted anywhere in them: a result or a
    well-formed CNI error comes out, never an internal error, and never the secret."""
    agent = fuzz_agent
    for key in list(agent.ledger.items()):
        agent.ledger.delete(key)
    agent.client.nics.clear()
    agent.netlink.pods.clear()
    config = {"cniVersion": "1.1.0", "name": "ext", "type": "capvco-sriov", "network": "sriov-ext"}
    config.update(overrides)
    if keep_version:
        config["cniVersion"] = "1.0.0"
    if prev is not None:
        config["prevResult"] = prev
    config = plant(config, secret, where)
    try:
        raw_conf = json.dumps(config)
    except ValueError:  # NaN and the infinities: JSON says nothing of them, Python writes them anyway
        raw_conf = json.dumps(config, allow_nan=True)
    if command == "CHECK":  # a ready attachment to check against
        cni(agent, "ADD")
    code, doc = cni(agent, command, raw_conf=raw_conf)
    text = json.dumps(doc)
    assert SECRET not in text, text
    if code:
        well_formed_error(doc)
    else:
        assert isinstance(doc, dict)


@settings(max_examples=examples(300), deadline=None)
@given(raw=st.binary(max_size=300) | st.text(max_size=200).map(str.encode))
def test_fuzz_the_agents_wire_line(fuzz_agent, raw):
    """Whatever arrives on the agent's socket: a well-formed answer."""
    code, doc = serve_one(fuzz_agent, raw + b"\n")
    if code or doc:
        well_formed_error(doc)


def run_shim(monkeypatch, env, stdin):
    """The plugin's main() in this process: ``(exit code, stdout)``."""
    out = io.StringIO()
    monkeypatch.setattr(shim, "ENVIRON", env)
    monkeypatch.setattr(sys, "argv", ["capvco-sriov"])
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8"))
    monkeypatch.setattr(sys, "stdout", out)
    with pytest.raises(SystemExit) as exit_:
        shim.main()
    return exit_.value.code or 0, out.getvalue()


@settings(max_examples=examples(400), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    command=st.sampled_from(["ADD", "DEL", "CHECK", "GC", "STATUS", "VERSION", "FROB", ""]),
    stdin=st.one_of(
        st.binary(max_size=300),
        JSON.map(lambda doc: json.dumps(doc).encode()),
        st.builds(
            lambda over, secret, where: json.dumps(
                plant(dict({"cniVersion": "1.1.0", "network": "n"}, **over), secret, where)
            ).encode(),
            st.dictionaries(st.sampled_from(FIELDS), JSON, max_size=3),
            st.sampled_from(PLANTED),
            st.lists(st.integers(0, 7), max_size=4),
        ),
        st.sampled_from([b"[" * 100000, b'{"a":' * 50000, b"\xff\xfe{}", b'{"cniVersion": "1.1.0"}\x00']),
    ),
)
def test_fuzz_the_plugins_stdin(monkeypatch, tmp_path, command, stdin):
    """Arbitrary bytes where the plugin reads its configuration, no agent listening: exit 0 or 1 with one
    well-formed CNI document on stdout, never a traceback, never a planted secret."""
    env = {
        "CNI_COMMAND": command,
        "CNI_CONTAINERID": "c1",
        "CNI_IFNAME": "net1",
        "CNI_NETNS": "/var/run/netns/x",
        "CAPVCO_SRIOV_SOCKET": str(tmp_path / "no-agent.sock"),
    }
    code, out = run_shim(monkeypatch, env, stdin)
    assert SECRET not in out
    if command == "VERSION":
        assert code == 0 and json.loads(out)["supportedVersions"] == list(wire.VERSIONS)
        return
    assert code == 1, out
    well_formed_error(json.loads(out))


@settings(max_examples=examples(200), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    answer=st.binary(max_size=200)
    | JSON.map(lambda doc: json.dumps(doc).encode())
    | st.sampled_from([b"[" * 100000, b'{"code": 1, "result": ' * 50000, b'{"code": 300, "result": []}'])
)
def test_fuzz_what_the_plugin_reads_from_the_agent(monkeypatch, tmp_path, answer):
    """Whatever the agent's socket answers, the plugin prints one well-formed document (or nothing, on success)."""
    import socket

    path = str(tmp_path / ("a%d.sock" % next(SOCKETS)))
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen(1)

    def answer_once():
        conn, _ = server.accept()
        conn.recv(65536)
        conn.sendall(answer + b"\n")
        conn.close()

    worker = threading.Thread(target=answer_once)
    worker.start()
    try:
        env = {"CNI_COMMAND": "DEL", "CNI_CONTAINERID": "c1", "CNI_IFNAME": "net1", "CAPVCO_SRIOV_SOCKET": path}
        code, out = run_shim(monkeypatch, env, b'{"cniVersion": "1.0.0", "network": "n"}')
    finally:
        worker.join(5)
        server.close()
    assert code in (0, 1), out
    if code == 0:
        assert not out or isinstance(json.loads(out), dict), out
        return
    doc = json.loads(out)
    assert isinstance(doc, dict) and isinstance(doc.get("code"), int) and isinstance(doc.get("msg"), str), doc


# -- point 2: every answer and log line through the one scrubber ----------------------------------------------------


class Raising:
    def __init__(self, client, exc):
        self.client = client
        self.exc = exc

    def handle(self, req):
        raise self.exc


@pytest.mark.parametrize(
    "echo",
    [
        "password=hunter2-%s" % SECRET,
        "https://admin:%s@portal.example/api" % SECRET,
        "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIx%s.c2ln" % SECRET,
        "Authorization: Bearer %s" % SECRET,
        '{"token": "%s"}' % SECRET,
    ],
)
def test_every_error_the_agent_answers_is_scrubbed(agent, echo):
    for exc in (
        ApiError("POST", "/x", 500, "bad request; echo: %s; %s" % (echo, TOKEN)),
        RuntimeError("a bug with %s and \x1b[31mred\x1b[0m and %s" % (echo, "x" * 5000)),
    ):
        code, doc = serve_one(Raising(agent.client, exc), wire_request("ADD", agent.test_netns))
        text = json.dumps(doc)
        assert code == 1 and SECRET not in text and TOKEN not in text, text
        assert "\x1b" not in doc["details"] and len(doc["details"]) <= 1024, doc
        if isinstance(exc, ApiError):
            well_formed_error(doc)


def test_every_log_line_is_scrubbed_and_keeps_the_clients_own_redaction(agent):
    records = []
    handler = logging.Handler()
    handler.emit = records.append
    handler.addFilter(Redact(agent.client.transport.redact))
    log = logging.getLogger("capvco-scrub-test")
    log.addHandler(handler)
    try:
        try:
            raise ApiError("GET", "/y", 500, "echo: password=%s %s \x1b]0;title\x07" % (SECRET, TOKEN))
        except ApiError:
            log.exception("failed with %s", "https://u:%s@h/" % SECRET)
    finally:
        log.removeHandler(handler)
    text = handler.format(records[0])
    assert SECRET not in text and TOKEN not in text and "\x1b" not in text and "\x07" not in text, text
    assert "Traceback" in text and "***" in text


def wire_request(command, netns, container="c1", version="1.1.0"):
    config = {"cniVersion": version, "name": "ext", "type": "capvco-sriov", "network": "sriov-ext"}
    env = {"CNI_COMMAND": command, "CNI_CONTAINERID": container, "CNI_IFNAME": "net1", "CNI_NETNS": netns}
    return wire.encode_request(env, config)


# -- point 4: which intent settling may release ---------------------------------------------------------------------


def entry(state, **kw):
    base = dict(ENTRY, state=state, netns="/var/run/netns/p", ip="198.51.100.77")
    base.update(kw)
    return base


MINE = {"mac_address": "52:54:00:00:00:01", "ip_address": "198.51.100.77", "network_id": 101}
OTHER = {"mac_address": "52:54:00:00:00:99", "ip_address": "198.51.100.77", "network_id": 101}


@pytest.mark.parametrize(
    ("state", "extra", "nic", "now", "decision"),
    [
        # chosen, never sent: nothing of the agent's can be there; the NIC at the address is someone else's
        ("chosen", {}, None, 1000.0, "drop"),
        ("chosen", {}, OTHER, 1000.0, "drop"),
        # sent, no answer: no NIC there once the attach can no longer land; one there is not provably the agent's
        ("sent", {"sent_at": 1000.0}, None, 1001.0, "wait"),
        ("sent", {"sent_at": 1000.0}, None, 1000.0 + 3600, "drop"),
        ("sent", {"sent_at": 1000.0}, OTHER, 1001.0, "hold"),
        ("sent", {"sent_at": 1000.0}, OTHER, 1000.0 + 3600, "hold"),
        # answered, its MAC not read yet: the first read after the answer names it
        ("attached", {}, MINE, 1001.0, "detach"),
        ("attached", {}, None, 1001.0, "drop"),
        # answered, with the MAC the platform gave: that NIC, and only that one
        ("attached", {"mac": MINE["mac_address"]}, MINE, 1001.0, "detach"),
        ("attached", {"mac": MINE["mac_address"]}, None, 1001.0, "drop"),
        ("attached", {"mac": MINE["mac_address"]}, OTHER, 1001.0, "hold"),
        # ready: the node saw its MAC; another MAC at the address means its NIC is gone
        ("ready", {"mac": MINE["mac_address"]}, MINE, 1001.0, "detach"),
        ("ready", {"mac": MINE["mac_address"]}, None, 1001.0, "drop"),
        ("ready", {"mac": MINE["mac_address"]}, OTHER, 1001.0, "drop"),
    ],
)
def test_the_settling_decision(state, extra, nic, now, decision):
    got, why = settle_decision(entry(state, **extra), nic, now, in_flight=120.0)
    assert got == decision, why
    assert why


def test_recovery_never_detaches_a_nic_at_an_address_whose_attach_was_never_sent(agent):
    """Point 7 of the issue: the agent chose .77 and died before sending the attach; an operator then attached a
    NIC at .77. Recovery drops the intent and leaves the operator's NIC."""
    agent.ledger.put("c9@net1", entry("chosen", netns=agent.test_netns))
    agent.client.attach_nic(CS, VM, 101, ip_address="198.51.100.77")  # the operator's
    agent.reclaimer.recover()
    assert list(agent.client.nics) == ["198.51.100.77"] and agent.ledger.items() == {}


def test_recovery_holds_an_attach_sent_with_no_answer_and_reports_it(tmp_path, caplog):
    """Sent, the answer lost with the agent: a NIC at the address may be the agent's or an operator's. It stays,
    the entry stays (the agent never forgets it), and a log line says so; once the NIC is gone (and the attach
    can no longer land), the entry goes."""
    now = [1000.0]
    agent = make_agent(str(tmp_path), clock=lambda: now[0])
    agent.ledger.put("c9@net1", entry("sent", netns=agent.test_netns, sent_at=999.0))
    agent.client.attach_nic(CS, VM, 101, ip_address="198.51.100.77")
    with caplog.at_level(logging.WARNING):
        assert agent.reclaimer.recover() == []
    assert list(agent.client.nics) == ["198.51.100.77"]
    assert agent.ledger.get("c9@net1")["held"] and "198.51.100.77" in caplog.text and "c9@net1" in caplog.text
    assert agent.reclaimer.reclaim_once() == [] and "198.51.100.77" in agent.client.nics
    agent.client.nics.clear()  # a person detached it
    assert agent.reclaimer.reclaim_once() == [] and agent.ledger.get("c9@net1"), "the attach might still land"
    now[0] += agent.in_flight
    (settled,) = agent.reclaimer.reclaim_once()
    assert settled["key"] == "c9@net1" and agent.ledger.items() == {}


def test_an_add_after_a_held_intent_attaches_elsewhere_and_keeps_the_held_one(agent):
    """The runtime retries ADD while the earlier attempt's NIC is held: the held entry is kept aside, its address
    is never chosen again, and the new attach gets its own NIC."""
    agent.ledger.put("c1@net1", entry("sent", netns=agent.test_netns, sent_at=999.0, ip="198.51.100.10"))
    agent.client.attach_nic(CS, VM, 101, ip_address="198.51.100.10")
    code, result = cni(agent, "ADD")
    assert code == 0, result
    assert result["ips"][0]["address"] != "198.51.100.10/24"
    held = [e for e in agent.ledger.items().values() if e.get("held")]
    assert [e["ip"] for e in held] == ["198.51.100.10"] and len(agent.ledger.items()) == 2


# -- point 6: what only root or podman tests caught -----------------------------------------------------------------


@pytest.mark.parametrize("version", wire.VERSIONS)
def test_the_result_and_errors_carry_the_configurations_cni_version(agent, version):
    code, result = cni(agent, "ADD", version=version)
    assert code == 0 and result["cniVersion"] == version, result
    code, doc = cni(agent, "ADD", container="c2", conf={"network": "no-such-net"}, version=version)
    assert code == 1 and doc["cniVersion"] == version, doc


def test_status_with_no_agent_answering_is_plugin_not_available(tmp_path):
    """STATUS when the agent does not answer: 50 (the plugin is not available), not 11 (as an ADD gets)."""
    plugin = install_plugin(tmp_path / "cni-bin")
    for command, code in (("STATUS", wire.PLUGIN_NOT_AVAILABLE), ("ADD", wire.TRY_AGAIN_LATER)):
        netns = tmp_path / "netns"
        netns.touch()
        env = {
            "CNI_COMMAND": command,
            "CNI_CONTAINERID": "c1",
            "CNI_IFNAME": "net1",
            "CNI_NETNS": str(netns),
            "CAPVCO_SRIOV_SOCKET": str(tmp_path / "absent.sock"),
        }
        proc = subprocess.run(
            [plugin], env=env, input='{"cniVersion": "1.0.0", "network": "n"}', capture_output=True, text=True
        )
        assert proc.returncode == 1, proc.stderr
        doc = json.loads(proc.stdout)
        assert doc["code"] == code and doc["cniVersion"] == "1.0.0", doc


class OrderedNetlink(FakeNetlink):
    """The fake netlink, with each release written down (beside the platform's calls, in one order) and failing on
    demand."""

    def __init__(self, calls):
        super().__init__()
        self.calls = calls
        self.fail = False

    def release(self, netns, ifname, mac):
        self.calls.append(("move back", mac))
        if self.fail:
            raise OSError("injected: the move back failed")
        super().release(netns, ifname, mac)


def test_a_del_detaches_the_nic_where_it_is_and_then_looks_for_what_stayed(agent):
    """The detach comes first (the hot-unplug takes the device out of the pod; billing stops at once), the move
    back after it (nothing to move when the unplug took it)."""
    agent.netlink = OrderedNetlink(agent.client.calls)
    code, res = cni(agent, "ADD")
    assert code == 0, res
    ip = res["ips"][0]["address"].split("/")[0]
    del agent.client.calls[:]
    assert cni(agent, "DEL") == (0, {})
    assert agent.client.calls == [("detach", ip), ("move back", res["interfaces"][0]["mac"])]
    assert agent.ledger.items() == {} and agent.client.nics == {}


def test_a_detach_that_fails_answers_with_the_platforms_error_and_the_nic_goes_back(agent):
    """The platform refuses the detach: the NIC is moved back to the node (it stays attached), the DEL answers 11
    with the platform's reason, even when the move back fails too (that is written into the entry)."""
    agent.netlink = OrderedNetlink(agent.client.calls)
    code, res = cni(agent, "ADD")
    assert code == 0, res
    mac = res["interfaces"][0]["mac"]
    refuse = agent.client.detach_nic

    def busy(*args, **kwargs):
        agent.client.calls.append(("detach", args[2]))
        raise ApiError("DELETE", "/external-nics", 503, "the platform is busy")

    agent.client.detach_nic = busy
    agent.netlink.fail = True
    code, doc = cni(agent, "DEL")
    assert code == 1 and doc["code"] == wire.TRY_AGAIN_LATER and "busy" in doc["details"], doc
    assert agent.client.calls[-1] == ("move back", mac) and len(agent.client.nics) == 1
    (entry,) = agent.ledger.items().values()
    assert "back to the node failed" in entry["release_failed"]
    agent.client.detach_nic, agent.netlink.fail = refuse, False
    assert cni(agent, "DEL") == (0, {})
    assert agent.ledger.items() == {} and agent.client.nics == {}
