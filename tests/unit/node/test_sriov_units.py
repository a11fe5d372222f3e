"""The SR-IOV agent's request parsing, its ledger, the plugin (installed as a node has it) and the wire format,
without root or a server."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from capvco_lab.netlab import install_plugin
from capvco_sriov import shim, wire
from capvco_sriov.config import parse_request
from capvco_sriov.ledger import Ledger, ledger_key
from capvco_sriov.wire import CniError

from helpers import read_text

CONF = json.dumps({"cniVersion": "1.1.0", "name": "ext", "type": "capvco-sriov", "network": "sriov-ext"})


def env(tmp_path, **kw):
    netns = tmp_path / "netns"
    netns.touch()
    base = {
        "CNI_COMMAND": "ADD",
        "CNI_CONTAINERID": "c1",
        "CNI_IFNAME": "net1",
        "CNI_NETNS": str(netns),
        "CNI_ARGS": "IgnoreUnknown=1;K8S_POD_UID=u-1;K8S_POD_NAME=p",
    }
    base.update(kw)
    return {k: v for k, v in base.items() if v is not None}


@pytest.fixture
def plugin(tmp_path):
    """The plugin installed in a CNI bin directory as a node has it: ``(launcher, body)``."""
    launcher = install_plugin(tmp_path / "cni-bin")
    return launcher, os.path.join(launcher + ".d", "capvco_sriov_shim.py")


def validate(env, stdin):
    """A request as it reaches the agent's commands: checked by the plugin, then read by the agent."""
    return parse_request(env, shim.check(env, stdin))


def test_parse_request_reads_the_environment_and_the_config(tmp_path):
    req = validate(env(tmp_path), CONF)
    assert (req.command, req.container_id, req.ifname, req.version) == ("ADD", "c1", "net1", "1.1.0")
    assert req.pod_uid == "u-1" and req.args["K8S_POD_NAME"] == "p" and req.key == "c1@net1"
    assert validate(env(tmp_path, CNI_COMMAND="DEL", CNI_NETNS=None), CONF).netns == ""  # DEL needs no netns
    status = parse_request({"CNI_COMMAND": "STATUS"}, {"cniVersion": "1.0.0"})
    assert status.command == "STATUS"


@pytest.mark.parametrize(
    ("overrides", "stdin", "code", "words"),
    [
        ({"CNI_COMMAND": "VERSION"}, CONF, wire.INVALID_ENV, "CNI_COMMAND"),  # the plugin answers VERSION itself
        ({"CNI_COMMAND": "FROB"}, CONF, wire.INVALID_ENV, "CNI_COMMAND"),
        ({"CNI_CONTAINERID": None}, CONF, wire.INVALID_ENV, "CNI_CONTAINERID"),
        ({"CNI_IFNAME": "a/b"}, CONF, wire.INVALID_ENV, "CNI_IFNAME"),
        ({"CNI_IFNAME": "x" * 16}, CONF, wire.INVALID_ENV, "CNI_IFNAME"),
        ({"CNI_NETNS": None}, CONF, wire.INVALID_ENV, "CNI_NETNS is required"),
        ({"CNI_NETNS": "/nonexistent/netns"}, CONF, wire.INVALID_ENV, "does not exist"),
        ({}, "{not json", wire.DECODE_FAILURE, "decode"),
        ({}, "[1]", wire.DECODE_FAILURE, "JSON object"),
        ({}, json.dumps({"cniVersion": "0.3.1", "network": "n"}), wire.INCOMPATIBLE_VERSION, "0.3.1"),
        ({}, json.dumps({"cniVersion": "1.0.0"}), wire.INVALID_CONFIG, "network"),
        ({}, json.dumps({"cniVersion": "1.0.0", "network": "n", "mtu": 100}), wire.INVALID_CONFIG, "mtu"),
        (
            {},
            json.dumps({"cniVersion": "1.0.0", "network": "n", "routes": [{"dst": "0.0.0.0/0"}]}),
            wire.INVALID_CONFIG,
            "default route",
        ),
        (
            {},
            json.dumps({"cniVersion": "1.0.0", "network": "n", "routes": [{"dst": "bogus"}]}),
            wire.INVALID_CONFIG,
            "invalid route",
        ),
        ({}, json.dumps({"cniVersion": "1.0.0", "network": "n", "routes": 5}), wire.INVALID_CONFIG, "invalid routes"),
        ({}, json.dumps({"cniVersion": "1.0.0", "network": "n", "routes": [{"dst": 5}]}), wire.INVALID_CONFIG, "route"),
        ({"CNI_CONTAINERID": "x/y"}, CONF, wire.INVALID_ENV, "CNI_CONTAINERID"),
        ({"CNI_CONTAINERID": ".hidden"}, CONF, wire.INVALID_ENV, "CNI_CONTAINERID"),
    ],
)
def test_a_request_is_refused_with_the_specs_code(tmp_path, overrides, stdin, code, words):
    with pytest.raises(CniError) as err:
        validate(env(tmp_path, **overrides), stdin)
    assert err.value.code == code and words in err.value.msg, err.value.msg
    doc = err.value.to_dict("1.0.0")
    assert doc["cniVersion"] == "1.0.0" and doc["code"] == code and isinstance(doc["details"], str)


@pytest.mark.parametrize(
    ("overrides", "config", "code", "words"),
    [
        ({"CNI_COMMAND": "FROB"}, {}, wire.INVALID_ENV, "CNI_COMMAND"),
        ({"CNI_COMMAND": "VERSION"}, {}, wire.INVALID_ENV, "CNI_COMMAND"),
        ({}, {"cniVersion": "0.3.1"}, wire.INCOMPATIBLE_VERSION, "0.3.1"),
        ({}, {"cniVersion": None}, wire.INCOMPATIBLE_VERSION, "(none)"),
        ({"CNI_CONTAINERID": "../../etc/x"}, {}, wire.INVALID_ENV, "CNI_CONTAINERID"),
        ({"CNI_IFNAME": "a/b"}, {}, wire.INVALID_ENV, "CNI_IFNAME"),
        ({"CNI_IFNAME": "x" * 16}, {}, wire.INVALID_ENV, "CNI_IFNAME"),
        ({"CNI_NETNS": "/nonexistent/netns"}, {}, wire.INVALID_ENV, "does not exist"),
    ],
)
def test_the_agent_checks_the_bounds_of_what_it_acts_on_without_the_plugin(tmp_path, overrides, config, code, words):
    """The agent reads the configuration as the plugin checked it, but what it acts on (a ledger file name, an
    interface name, a netns, the version it answers in) it checks itself: any local root may write to its socket."""
    with pytest.raises(CniError) as err:
        parse_request(env(tmp_path, **overrides), dict(json.loads(CONF), **config))
    assert err.value.code == code and words in err.value.msg, err.value.msg


ENTRY = {
    "state": "ready",
    "pod_uid": "u1",
    "netns": "/var/run/netns/p1",
    "ifname": "net1",
    "network": "sriov-ext",
    "network_id": 101,
    "config_name": "ext",
    "since": 1000.0,
    "prefixlen": 24,
    "routes": [],
    "mtu": None,
    "ip": "198.51.100.2",
}


def test_ledger_replaces_atomically_and_lists_what_it_holds(tmp_path):
    ledger = Ledger(str(tmp_path / "ledger"))
    assert oct(os.stat(ledger.dir).st_mode & 0o777) == "0o700"
    assert ledger.get("c1@net1") is None and ledger.items() == {}
    ledger.put("c1@net1", dict(ENTRY, state="chosen"))
    ledger.put("c1@net1", dict(ENTRY, mac="52:54:00:00:00:01"))
    ledger.put(ledger_key("c2", "a/b"), ENTRY)
    assert ledger.get("c1@net1") == dict(ENTRY, mac="52:54:00:00:00:01")
    assert set(ledger.items()) == {"c1@net1", "c2@a%2Fb"}
    assert not [n for n in os.listdir(ledger.dir) if n.endswith(".tmp")], "no temporary file is left behind"
    with pytest.raises(ValueError):
        ledger.put("../escape", {})
    ledger.delete("c1@net1")
    ledger.delete("c1@net1")  # deleting what is gone is fine
    assert ledger.get("c1@net1") is None and Ledger(ledger.dir).items() == {"c2@a%2Fb": ENTRY}


@pytest.mark.parametrize("text", ["{not json", "[1]", '{"state": "attaching"}', json.dumps(dict(ENTRY, ip=None))])
def test_an_entry_that_is_not_one_is_left_alone_and_skipped(tmp_path, text):
    """A ledger file that is not an entry (a person's edit, a foreign file) stops neither recovery nor the
    reclaimer: it is skipped, logged, and left on disk."""
    ledger = Ledger(str(tmp_path / "ledger"))
    ledger.put("c2@net1", ENTRY)
    with open(os.path.join(ledger.dir, "c1@net1.json"), "w", encoding="utf-8") as fh:
        fh.write(text)
    assert ledger.get("c1@net1") is None and set(ledger.items()) == {"c2@net1"}
    assert os.path.exists(os.path.join(ledger.dir, "c1@net1.json"))


def test_the_wire_format_round_trips():
    config = json.loads(CONF)
    raw = wire.encode_request({"CNI_COMMAND": "ADD", "CNI_IFNAME": "net1", "HOME": "/root"}, config)
    assert raw.endswith(b"\n") and raw.count(b"\n") == 1
    # only CNI_* travel; the configuration travels as an object, not as the text of stdin
    assert wire.decode_request(raw) == ({"CNI_COMMAND": "ADD", "CNI_IFNAME": "net1"}, config)
    doc = wire.error(7, "invalid network configuration")
    assert wire.decode_reply(wire.encode_reply(doc)) == (1, doc, json.dumps(doc))
    assert wire.decode_reply(wire.encode_reply({})) == (0, {}, "{}")
    result = {"cniVersion": "1.1.0", "interfaces": [], "ips": []}
    assert wire.decode_reply(wire.encode_reply(result))[:2] == (0, result)
    bad_answers = (
        b'{"code": 1}\n',  # an error document without its fields
        b'{"code": 0, "msg": "m", "cniVersion": "1.1.0"}\n',  # no error has code 0
        b"[]\n",
        b'{"interfaces": []}\n',  # a result without its version
        b'{"code": 0, "result": {}}\n',  # the old envelope
    )
    for bad in bad_answers:
        with pytest.raises(ValueError):
            wire.decode_reply(bad)
    for bad in (b"[1, 2]\n", b'{"env": {}, "stdin": "{}"}\n', b'{"env": {"A": 1}, "config": {}}\n'):
        with pytest.raises(ValueError):
            wire.decode_request(bad)


def test_the_plugin_is_standard_library_only_and_answers_version_alone(plugin):
    for module in (shim, wire):
        tree = ast.parse(read_text(module.__file__))
        imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        froms = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)} - {"capvco_sriov.wire"}
        imported |= {name.split(".")[0] for name in froms}
        assert imported <= set(sys.stdlib_module_names), imported
    launcher, _body = plugin
    assert read_text(launcher).startswith("#!/usr/bin/python3 -IS\n") and os.access(launcher, os.X_OK)
    out = subprocess.run(
        [launcher],
        env={"CNI_COMMAND": "VERSION", "CAPVCO_SRIOV_SOCKET": "/nonexistent"},
        input="",
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert json.loads(out) == {"cniVersion": "1.1.0", "supportedVersions": ["1.0.0", "1.1.0"]}


def test_the_shim_waits_for_a_slot_in_a_full_listen_backlog(tmp_path):
    """A burst of pod starts fills the agent's backlog: connect() answers EAGAIN at once, which the shim waits out."""
    import socket
    import threading

    path = str(tmp_path / "agent.sock")
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen(1)
    queued = []
    while True:  # fill the backlog with connections nobody accepts yet
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.setblocking(False)
        try:
            sock.connect(path)
        except BlockingIOError:
            sock.close()
            break
        queued.append(sock)
    answered = threading.Event()

    def agent():
        answered.wait(0.5)  # the shim has met EAGAIN meanwhile
        while True:
            conn, _ = server.accept()
            data = conn.recv(65536)
            if data:
                conn.sendall(wire.encode_reply({}))
                conn.close()
                return
            conn.close()

    worker = threading.Thread(target=agent)
    worker.start()
    try:
        for sock in queued:
            sock.close()  # the agent accepts these (empty) and then the shim's
        request = wire.encode_request({"CNI_COMMAND": "STATUS"}, {"cniVersion": "1.1.0"})
        assert shim.ask(path, request, timeout=10) == (0, {}, "{}")
    finally:
        answered.set()
        worker.join(10)
        server.close()


def test_the_shim_fails_at_once_when_no_agent_listens(tmp_path):
    with pytest.raises(OSError):
        shim.ask(str(tmp_path / "absent.sock"), b"{}\n", timeout=10)


@pytest.mark.parametrize(
    ("overrides", "stdin", "code"),
    [
        ({}, json.dumps({"cniVersion": "0.4.0", "network": "n"}), wire.INCOMPATIBLE_VERSION),
        ({"CNI_IFNAME": None}, CONF, wire.INVALID_ENV),
        ({"CNI_COMMAND": "FROB"}, CONF, wire.INVALID_ENV),
        ({"CNI_CONTAINERID": "a b"}, CONF, wire.INVALID_ENV),
        ({"CNI_NETNS": None}, CONF, wire.INVALID_ENV),
        ({}, "{not json", wire.DECODE_FAILURE),
    ],
)
def test_the_shim_answers_what_the_request_alone_decides_with_no_agent(tmp_path, plugin, overrides, stdin, code):
    """With the agent down, these are the spec's own answers, not 11 (try again later)."""
    proc = subprocess.run(
        [plugin[0]],
        env=dict(env(tmp_path, **overrides), CAPVCO_SRIOV_SOCKET=str(tmp_path / "no-agent.sock")),
        input=stdin,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 1
    assert json.loads(proc.stdout)["code"] == code, proc.stdout


@given(
    a=st.tuples(st.from_regex(wire.CONTAINER_ID, fullmatch=True), st.text(min_size=1, max_size=15)),
    b=st.tuples(st.from_regex(wire.CONTAINER_ID, fullmatch=True), st.text(min_size=1, max_size=15)),
)
def test_ledger_keys_are_injective_file_names(a, b):
    """Container x.y with ifname n1 and container x with ifname y.n1 (and every other pair) never share a key."""
    ka, kb = ledger_key(*a), ledger_key(*b)
    assert (ka == kb) == (a == b)
    assert "/" not in ka and "\0" not in ka


def test_the_reported_collisions_are_apart():
    assert ledger_key("x.y", "n1") != ledger_key("x", "y.n1")
    assert ledger_key("c", "a/b") != ledger_key("c", "a_b")


class HungAgent:
    """A socket that accepts and never answers: an agent stopped with SIGSTOP."""

    def __init__(self, path):
        import socket

        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(path)
        self.sock.listen(16)

    def close(self):
        self.sock.close()


def test_a_hung_agent_answers_try_again_later_within_the_configured_deadline(tmp_path, plugin):
    import time

    hung = HungAgent(str(tmp_path / "hung.sock"))
    try:
        started = time.monotonic()
        proc = subprocess.run(
            [plugin[0]],
            env=dict(env(tmp_path), CAPVCO_SRIOV_SOCKET=str(tmp_path / "hung.sock")),
            input=json.dumps({"cniVersion": "1.1.0", "network": "n", "timeoutSeconds": 1}),
            capture_output=True,
            text=True,
            timeout=30,
        )
        elapsed = time.monotonic() - started
    finally:
        hung.close()
    assert proc.returncode == 1 and json.loads(proc.stdout)["code"] == wire.TRY_AGAIN_LATER, proc.stdout
    assert elapsed < 10, elapsed
    assert shim.TIMEOUT <= 60, "the default stays well under the kubelet's own deadline"


def test_a_bad_timeout_is_a_config_error(tmp_path, plugin):
    proc = subprocess.run(
        [plugin[0]],
        env=dict(env(tmp_path), CAPVCO_SRIOV_SOCKET=str(tmp_path / "none.sock")),
        input=json.dumps({"cniVersion": "1.1.0", "network": "n", "timeoutSeconds": "soon"}),
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 1 and json.loads(proc.stdout)["code"] == wire.INVALID_CONFIG


def test_the_liveness_probe_fails_on_a_hung_agent_and_passes_on_a_live_one(tmp_path, monkeypatch):
    import socket
    import threading

    monkeypatch.setattr(shim, "PROBE_TIMEOUT", 0.5)
    hung = HungAgent(str(tmp_path / "hung.sock"))
    try:
        with pytest.raises(SystemExit) as exit_:
            shim.probe(str(tmp_path / "hung.sock"))
        assert exit_.value.code == 1
    finally:
        hung.close()
    with pytest.raises(SystemExit) as exit_:
        shim.probe(str(tmp_path / "absent.sock"))
    assert exit_.value.code == 1
    live = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    live.bind(str(tmp_path / "live.sock"))
    live.listen(1)

    def answer():
        conn, _ = live.accept()
        assert conn.recv(100) == wire.PROBE
        conn.sendall(wire.encode_reply({}))
        conn.close()

    worker = threading.Thread(target=answer)
    worker.start()
    with pytest.raises(SystemExit) as exit_:
        shim.probe(str(tmp_path / "live.sock"))
    worker.join(5)
    live.close()
    assert exit_.value.code == 0


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(), children, max_size=4),
    max_leaves=20,
)


@given(doc=JSON)
def test_the_shims_codec_is_json(doc):
    """The wire's codec (json's C scanner and encoder, without the json module) reads and writes what json does."""
    text = json.dumps(doc)
    assert wire.loads(text) == json.loads(text)
    assert json.loads(wire.dumps(doc)) == doc
    assert wire.loads(wire.dumps(doc).encode()) == doc


@pytest.mark.parametrize("bad", ["", "  ", "{", "[1,]", '{"a": 1} x', "nul", '"\x01"'])
def test_the_shims_codec_refuses_what_json_refuses(bad):
    with pytest.raises(ValueError):
        json.loads(bad)
    with pytest.raises(ValueError):
        wire.loads(bad)


def test_the_plugin_starts_without_the_costly_modules(plugin):
    """json, re and socket cost more to import than the rest of a run: the plugin loads none of them."""
    proc = subprocess.run(
        [sys.executable, "-I", "-S", "-X", "importtime", plugin[0]],
        input='{"cniVersion": "1.1.0"}',
        env={"CNI_COMMAND": "VERSION"},
        capture_output=True,
        text=True,
        check=True,
    )
    loaded = {line.split("|")[-1].strip() for line in proc.stderr.splitlines() if "|" in line}
    assert not loaded & {"json", "re", "socket", "enum"}, sorted(loaded)
    assert json.loads(proc.stdout)["supportedVersions"] == list(wire.VERSIONS)


def test_importing_the_shim_loads_no_typing(plugin):
    """Its annotations are for the type checker only: imported as the launcher imports it, the shim (and the wire
    format it imports) loads neither typing nor dataclasses (typing alone takes milliseconds to import, on every
    run), nor anything of the agent's."""
    code = "import sys; sys.path.insert(0, sys.argv[1]); import capvco_sriov_shim; print(*sys.modules, sep='\\n')"
    proc = subprocess.run(
        [sys.executable, "-I", "-S", "-c", code, plugin[0] + ".d"],
        capture_output=True,
        text=True,
        check=True,
    )
    loaded = set(proc.stdout.split())
    assert {"capvco_sriov_shim", "capvco_sriov.wire"} <= loaded, sorted(loaded)
    assert not loaded & {"typing", "dataclasses", "json", "re", "socket", "ipaddress"}, sorted(loaded)
    assert not {m for m in loaded if m.startswith("capvco_sriov.")} - {"capvco_sriov.wire"}, sorted(loaded)


def test_the_metrics_are_served_on_the_loopback_unless_told_otherwise(monkeypatch):
    from capvco_sriov.agent import parse_args

    required = ["--api-url", "u", "--customer-id", "c", "--location", "l", "--cloudspace-id", "cs", "--vm-id", "1"]
    monkeypatch.delenv("CAPVCO_SRIOV_METRICS_ADDRESS", raising=False)
    assert parse_args(required).metrics_address == "127.0.0.1:9738"
    monkeypatch.setenv("CAPVCO_SRIOV_METRICS_ADDRESS", "127.0.0.1:0")
    assert parse_args(required).metrics_address == "127.0.0.1:0"
    assert parse_args([*required, "--metrics-address", "off"]).metrics_address == "off"
