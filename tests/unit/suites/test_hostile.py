"""Everything read from outside is parsed as hostile (issue 25): the one scrubber and where it is used, the first
boot's status as a typed record, a machine that does not exist, the platform's answers checked where they arrive,
and the tests that pin rules a one-character change would break (each fails on its mutant)."""

from __future__ import annotations

import datetime
import email.utils
import hashlib
import json
import os
import subprocess
import time

import httpx
import pytest

from ansible_collections.whitesky.capvco.plugins.module_utils.faces import conditions, diff, kube
from ansible_collections.whitesky.capvco.plugins.module_utils.faces import module as module_base
from ansible_collections.whitesky.capvco.plugins.module_utils.firstboot import render
from ansible_collections.whitesky.capvco.plugins.module_utils.firstboot import status as firstboot_status
from ansible_collections.whitesky.capvco.plugins.module_utils.firstboot.errors import InvalidStatus, MachineNotFound
from ansible_collections.whitesky.capvco.plugins.module_utils.firstboot.status import FirstBootStatus
from ansible_collections.whitesky.capvco.plugins.module_utils.gpu.ops import Ops
from ansible_collections.whitesky.capvco.plugins.module_utils.ownership import markers, naming
from ansible_collections.whitesky.capvco.plugins.module_utils.platform import answers, documents, headers
from ansible_collections.whitesky.capvco.plugins.module_utils.platform import client as core
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.errors import (
    ApiError,
    BadAnswer,
    InputError,
    WhiteskyError,
)
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.scrub import scrub, scrub_tree
from ansible_collections.whitesky.capvco.plugins.module_utils.reclaim import orphans
from ansible_collections.whitesky.capvco.plugins.module_utils.world.changes import names_diff

from fakes.clients import mock_client

SECRET = "Zq8wPLANTEDk3Vx"
JWT = "eyJhbGciOiJFUzM4NCJ9.eyJleHAiOjE5MDAwMDAwMDB9." + SECRET


# -- the one scrubber -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text,shown",
    [
        ("Authorization: Bearer %s" % SECRET, "Authorization: ***"),
        ("headers: bearer %s; next" % SECRET, "headers: bearer ***; next"),
        ("token %s done" % JWT, "token *** done"),
        ("cut %s" % JWT.rsplit(".", 1)[0], "cut ***"),  # a JWT whose signature was cut off
        ("GET https://admin:%s@portal.example/api/1 failed" % SECRET, "GET https://***@portal.example/api/1 failed"),
        ('{"api_token": "%s", "name": "x"}' % SECRET, '{"api_token": ***, "name": "x"}'),
        ("{'password': '%s', 'x': 1}" % SECRET, "{'password': ***, 'x': 1}"),
        ("password=%s&user=bob" % SECRET, "password=***&user=bob"),
        ('client_secret="%s with spaces"' % SECRET, "client_secret=***"),
        ("passwd: %s" % SECRET, "passwd: ***"),
        ("X-Api-Key: %s, Accept: json" % SECRET, "X-Api-Key: ***, Accept: json"),
        ("WHITESKY_API_TOKEN=%s ansible-playbook" % SECRET, "WHITESKY_API_TOKEN=*** ansible-playbook"),
        ("Authorization: Basic %s" % SECRET, "Authorization: ***"),
        ("credentials=%s" % SECRET, "credentials=***"),
        ('apikey="%s' % SECRET, "apikey=***"),  # its closing quote cut off
    ],
)
def test_every_form_of_secret_is_removed(text, shown):
    assert scrub(text) == shown
    assert SECRET not in scrub(text, multiline=True)


@pytest.mark.parametrize(
    "prose",
    [
        "sriov.credential: must be a string, got an integer (hidden)",
        "sriov.credentialSecretRef.name: is required",
        "the API token (JWT) expired at 2026-01-01 00:00:00 UTC; get a new one",
        "api_token is required (or set WHITESKY_API_TOKEN)",
        "capvco/v1 cluster=web pool=gpu",
    ],
)
def test_a_message_about_a_secret_field_is_not_a_secret(prose):
    assert scrub(prose) == prose


def test_control_characters_are_escaped_and_lines_kept_only_when_multi_line():
    text = "esc \x1b[31mred\x07 nul\x00 del\x7f csi\x9b rtl\u202e cr\r lone\ud800 a\nb\tc"
    one = scrub(text)
    assert one == ("esc \\x1b[31mred\\x07 nul\\x00 del\\x7f csi\\x9b rtl\\u202e cr\\r lone\\ud800 a\\nb\\tc"), one
    many = scrub(text, multiline=True)
    assert "a\nb\tc" in many and "\\r" in many and "\x1b" not in many and "\r" not in many
    assert not any(ord(ch) < 0x20 and ch not in "\n\t" for ch in many)


@pytest.mark.parametrize("limit", [40, 100, 1024])
def test_the_length_is_bounded_and_says_how_much_was_cut(limit):
    text = "é" * 5000
    out = scrub(text, limit)
    assert len(out) <= limit
    kept = out[: out.index("...")]
    assert out == kept + "... (%d bytes cut)" % (len((text[len(kept) :]).encode()))
    assert scrub("short", limit) == "short"


def test_the_scrubber_is_cheap_on_hostile_text():
    started = time.monotonic()
    for text in ("a" * 10**6, "token" * 200_000, '"' * 10**6, 'password="' * 100_000, "\x1b" * 10**6):
        assert len(scrub(text)) <= 1024
    assert time.monotonic() - started < 2.0


def test_scrub_takes_anything():
    assert scrub(None) == "" and scrub(b"by\xfftes\x1b") == "by\ufffdtes\\x1b" and scrub(42) == "42"

    class Hostile:
        def __str__(self):
            raise RuntimeError("no")

    assert scrub(Hostile()) == "<Hostile object>"
    tree = scrub_tree({"a": ["token=%s" % SECRET, 5, None, {"b": "\x1b"}], "n": 1.5}, 100)
    assert tree == {"a": ["token=***", 5, None, {"b": "\\x1b"}], "n": 1.5}


def test_the_clients_redaction_is_the_scrubber_plus_its_own_token():
    c = core.WhiteskyClient("http://127.0.0.1:9", "plain-" + SECRET, "cust")
    text = c.transport.redact("Traceback:\n  sent plain-%s\n  Bearer other%s \x1b" % (SECRET, SECRET))
    assert SECRET not in text and text.startswith("Traceback:\n  sent ***\n") and "\\x1b" in text


class FakeAnsibleModule:
    """What ``WhiteskyModule.run`` uses of an AnsibleModule: its failures and warnings are recorded."""

    def __init__(self):
        self.params, self.check_mode, self._diff, self.warnings = {}, False, False, []

    def warn(self, text):
        self.warnings.append(text)

    def fail_json(self, **result):
        self.result = dict(result, failed=True)
        raise SystemExit(1)

    def exit_json(self, **result):
        self.result = result
        raise SystemExit(0)


def run_module(func):
    base = module_base.WhiteskyModule.__new__(module_base.WhiteskyModule)
    base.module, base.connection = FakeAnsibleModule(), False
    with pytest.raises(SystemExit):
        base.run(func)
    return base.module


def test_what_a_module_says_toward_ansible_is_scrubbed():
    def fails(check_mode):
        raise WhiteskyError(
            "platform said: Bearer %s \x1b]0;title\x07" % SECRET,
            {"log_tail": "line one\npassword=%s\n\x1b[2J" % SECRET, "nested": [{"why": JWT}], "status": 500},
        )

    got = run_module(fails).result
    assert SECRET not in json.dumps(got)
    assert got["msg"] == "platform said: Bearer *** \\x1b]0;title\\x07"
    assert got["log_tail"] == "line one\npassword=***\n\\x1b[2J" and got["status"] == 500

    def warns(check_mode):
        return {"warnings": ["token=%s\nforged line" % SECRET]}

    module = run_module(warns)
    assert module.warnings == ["token=***\\nforged line"]


def test_a_results_diff_is_data_in_the_core_and_text_scrubbed_where_the_module_base_renders_it():
    """Issue 47: a result's diff was written as text by ``world/diff.py``, below the faces that show results.  The
    core says what changed as data (``world/changes.py``: ``(kind, name)`` lines, a name as the platform gave it);
    the module base renders each side that is lines as text (``faces/diff.py``), a line per thing, scrubbed, and
    leaves a side of another shape (the vgpu module's per machine) to the scrubbing of every string."""
    hostile = "web-1\x1b]0;token=%s\x07" % SECRET
    said = names_diff("machine", ["web-0"], ["web-0", hostile])
    assert said == {"before": [("machine", "web-0")], "after": [("machine", "web-0"), ("machine", hostile)]}

    def changes(check_mode):
        return {"changed": True, "diff": said}

    base = module_base.WhiteskyModule.__new__(module_base.WhiteskyModule)
    base.module, base.connection = FakeAnsibleModule(), False
    base.module._diff = True
    with pytest.raises(SystemExit):
        base.run(changes)
    assert base.module.result["diff"] == {
        "before": "machine web-0\n",
        "after": "machine web-0\nmachine web-1\\x1b]0;token=***\n",
    }
    per_machine = {"before": {"w0": []}, "after": {"w0": ["00 p\x1b"]}}
    assert diff.render(per_machine) == per_machine


def test_what_the_controller_writes_to_kubernetes_is_scrubbed():
    # a condition made by the controller, and one given as a mapping (vco_status): each message scrubbed
    made = conditions.false("A", "Failed", "x" * 9000 + "\x1b token=" + SECRET)
    cond = conditions.merge([], [made], "now", 1)[0]
    assert len(cond["message"]) <= conditions.MESSAGE_LIMIT and "\x1b" not in cond["message"]
    given = conditions.given({"type": "A", "status": "False", "reason": "R", "message": "api_key=%s\x07" % SECRET})
    cond, old = conditions.merge([], [given], "now", 1)[0], conditions.merge_v1beta1([], [given], "now")[0]
    assert cond["message"] == old["message"] == "api_key=***\\x07"
    obj = {"metadata": {"name": "m", "namespace": "default"}, "kind": "VCOMachine"}
    event = kube.event_body(obj, "Warning", "R", "Bearer %s\n" % SECRET + "y" * 3000, "now")
    assert event["message"].startswith("Bearer ***\\nyyy") and len(event["message"]) <= 1024
    status = kube._status_input({"failureMessage": "token: %s" % SECRET, "ready": False}, None, None, None)
    assert status == {"failureMessage": "token: ***", "ready": False}


# -- the first boot's status: bounded, typed, scrubbed ------------------------------------------------------------

STUB_SMI = """#!/bin/sh
cat %s
exit %d
"""


def run_fragment(tmp_path, smi_output, pin, count=1, rc=0):
    """Run the driver fragment's verification against an nvidia-smi that prints ``smi_output``; the status text."""
    out = tmp_path / "smi.out"
    out.write_text(smi_output)
    smi = tmp_path / "nvidia-smi"
    smi.write_text(STUB_SMI % (out, rc))
    smi.chmod(0o755)
    state = tmp_path / "state"
    script = render.render_gpu_driver(pin, count, install=False, wait=0, nvidia_smi=str(smi), state_dir=str(state))
    subprocess.run(["/bin/sh", "-s"], input=script, text=True, capture_output=True, check=False)
    return (state / "gpu-driver.status").read_text()


def test_what_the_script_writes_parses_into_the_typed_record(tmp_path):
    status = firstboot_status.parse(run_fragment(tmp_path, "550.127.05, NVIDIA A100\n" * 2, "550", 2))
    assert isinstance(status, FirstBootStatus)
    assert (status.state, status.step, status.gpu_driver_version, status.changed) == (
        "ready",
        "done",
        "550.127.05",
        False,
    )
    assert status.nvidia_smi == "550.127.05, NVIDIA A100\n550.127.05, NVIDIA A100"
    assert set(status.as_dict()) == {
        "state",
        "step",
        "reason",
        "gpu_driver_version",
        "nvidia_smi",
        "changed",
        "log_tail",
    }


@pytest.mark.parametrize(
    "text,says",
    [
        ('{"state": "ready", "reason": 5}', "reason is an integer, not a string"),
        ('{"state": "ready", "nvidia_smi": ["a"]}', "nvidia_smi is a list, not a string"),
        ('{"state": "ready", "changed": "yes"}', "changed is a string, not a boolean"),
        ('{"state": "ready", "step": true}', "step is a boolean, not a string"),
        ("7", "the document is an integer, not an object"),
        ("null", "the document is null, not an object"),
        ('{"step": "x"}', "it has no state"),
        ('{"state": "done"}', "state 'done' is none of running, ready, failed"),
        ('{"state": "ready", "extra": 1}', "unknown field(s) 'extra'"),
        ('{"state": "ready", "gpu_driver_version": "550; reboot"}', "is not a driver version"),
        ('{"state": "ready", "step": "a b"}', "is not a step's name"),
        ("[" * 60000, "nests deeper than 32 levels"),
        ('{"state": "ready", "reason": ' + "[" * 40 + "]" * 40 + "}", "nests deeper than 32 levels"),
        ('{"state": "ready", "log_tail": "%s"}' % ("x" * 70000), "larger than 65536 bytes"),
        ("not json", "not JSON"),
        ('{"state": "ready", "reason": "\\ud800"}', ""),  # a lone surrogate: parsed, and escaped
    ],
)
def test_a_document_that_is_not_a_status_is_refused_saying_why(text, says):
    if not says:
        assert firstboot_status.parse(text).reason == "\\ud800"
        return
    with pytest.raises(InvalidStatus) as err:
        firstboot_status.parse(text)
    assert says in str(err.value) and len(str(err.value)) <= firstboot_status.MESSAGE_LIMIT


def test_brackets_inside_strings_do_not_count_as_nesting():
    status = firstboot_status.parse(json.dumps({"state": "failed", "reason": "[" * 5000 + "{" * 5000}))
    assert status.reason.startswith("[[[[") and len(status.reason) <= 4096


def test_the_records_texts_are_scrubbed():
    doc = {
        "state": "failed",
        "step": "bootstrap",
        "reason": "curl https://u:%s@h/ failed \x1b[31m" % SECRET,
        "log_tail": "a\nAuthorization: Bearer %s\nb" % SECRET,
    }
    status = firstboot_status.parse(json.dumps(doc))
    assert SECRET not in repr(status) and "\x1b" not in status.reason and status.log_tail.count("\n") == 2
    running = firstboot_status.parse(json.dumps({"state": "running", "step": JWT}))  # a JWT is a step's name too
    assert running.step == "***" and SECRET not in str(firstboot_status.gpu_driver_condition(running))


def test_deep_nesting_is_refused_before_it_is_parsed(monkeypatch):
    def never(*_a, **_k):
        raise AssertionError("json.loads reached")

    monkeypatch.setattr(documents.json, "loads", never)  # the one parser of outside JSON (platform/documents.py)
    with pytest.raises(InvalidStatus, match="nests deeper"):
        firstboot_status.parse("[" * 33 + "]" * 33)


def cond(**fields):
    return firstboot_status.gpu_driver_condition(FirstBootStatus(**fields))


def test_ready_without_a_driver_step_is_driver_not_verified():
    """Kills ``if not seen`` -> ``if seen is None``: an empty version is no verified driver."""
    for c in (cond(state="ready", step="done"), cond(state="ready", gpu_driver_version="", nvidia_smi="x, y")):
        assert (c["status"], c["reason"], c["severity"]) == ("False", "DriverNotVerified", "Warning"), c
        assert "without a gpu-driver step" in c["message"]
    c = cond(state="ready", gpu_driver_version="550.127.05", nvidia_smi="550.127.05, A\n\n550.127.05, B\n")
    assert (c["status"], c["reason"], c["message"]) == ("True", "DriverVerified", "NVIDIA driver 550.127.05, 2 GPU(s)")


def test_a_running_first_boot_has_no_verdict_whatever_else_it_says():
    c = cond(state="running", step="apt-install", gpu_driver_version="550.1", reason="started")
    assert c == {
        "type": "GPUDriverReady",
        "status": "Unknown",
        "reason": "FirstBootRunning",
        "message": "the first boot is at step apt-install",
    }
    c = cond(state="failed", step="gpu-driver", reason="  nvidia-smi exited 6\n")
    assert (c["status"], c["severity"], c["reason"]) == ("False", "Error", "FirstBootFailed")
    assert c["message"] == "the first boot failed at gpu-driver: nvidia-smi exited 6"
    waiting = firstboot_status.gpu_driver_condition(None, "no file yet")
    assert (waiting["status"], waiting["reason"], waiting["message"]) == (
        "Unknown",
        "WaitingForFirstBoot",
        "no file yet",
    )


# a client on a mock transport: ``routes`` maps (method, path suffix) to a response or a callable

CS, VM_ID = "cs-1", 7


def platform(file=None, file_status=200, vm=True, cloudspace=True, seen=None):
    """A platform whose readFile answers ``file`` (or ``file_status``), with the VM and cloudspace there or not."""

    def handler(request):
        path = request.url.path
        if seen is not None:
            seen.append((request.method, path))
        if path.endswith("/file"):
            if file_status != 200:
                return httpx.Response(file_status, json={"message": "file: injected %d" % file_status})
            return httpx.Response(200, json={"result": file})
        if "/vms/" in path:
            return httpx.Response(200, json={"vm_id": VM_ID}) if vm else httpx.Response(404, json={"message": "no vm"})
        if path.endswith("/cloudspaces/" + CS):
            return httpx.Response(200, json={"cloudspace_id": CS}) if cloudspace else httpx.Response(404, json={})
        return httpx.Response(500, json={"message": "unexpected %s" % path})

    return handler


def first_boot(handler):
    c, _clock = mock_client(handler)
    return firstboot_status.info(c, cloudspace_id=CS, vm_id=VM_ID, gpu=True)


@pytest.mark.parametrize(
    "text", ['{"state": "ready", "reason": 5}', '{"state": "ready", "nvidia_smi": ["a"]}', "7", "[" * 5000]
)
def test_an_invalid_report_is_reported_never_a_crash(text):
    got = first_boot(platform(file=text))
    assert got["reported"] is True and got["invalid"] is True and got["status"] == {}
    c = got["gpu_driver_ready"]
    assert (c["status"], c["reason"]) == ("False", "InvalidStatus") and c["message"] == got["message"]
    assert got["message"].startswith("/var/lib/capvco/first-boot.status on VM 7 is not a first-boot status: ")


def test_an_invalid_reports_message_is_bounded_and_scrubbed():
    text = json.dumps({"state": "ready", ("token=%s\x1b" % SECRET) * 300: 1})
    got = first_boot(platform(file=text))
    assert got["invalid"] and SECRET not in got["message"] and "\x1b" not in got["message"]
    assert len(got["message"]) <= firstboot_status.MESSAGE_LIMIT


def test_no_file_yet_is_not_yet():
    seen = []
    got = first_boot(platform(file_status=404, seen=seen))
    assert got["reported"] is False and got["invalid"] is False
    assert got["gpu_driver_ready"]["reason"] == "WaitingForFirstBoot"
    assert ("GET", "/api/1/customers/cust/cloudspaces/cs-1/vms/7") in seen, "a 404 is checked against the VM"
    assert first_boot(platform(file=""))["gpu_driver_ready"]["reason"] == "WaitingForFirstBoot"


@pytest.mark.parametrize("status", [400, 409, 500, 503])
def test_other_errors_stay_not_yet(status):
    got = first_boot(platform(file_status=status))
    assert got["reported"] is False and got["gpu_driver_ready"]["reason"] == "WaitingForFirstBoot"


@pytest.mark.parametrize("status", [401, 403])
def test_no_access_is_an_error(status):
    with pytest.raises(ApiError) as err:
        first_boot(platform(file_status=status))
    assert err.value.status == status


def test_a_vm_that_does_not_exist_is_an_error_naming_it():
    with pytest.raises(MachineNotFound) as err:
        first_boot(platform(file_status=404, vm=False))
    assert "VM 7 does not exist in cloudspace 'cs-1'" in str(err.value)
    assert err.value.details == {"machine_not_found": True, "cloudspace_id": CS, "vm_id": VM_ID}
    with pytest.raises(MachineNotFound, match="cloudspace 'cs-1' does not exist"):
        first_boot(platform(file_status=404, vm=False, cloudspace=False))


# -- the platform's answers, checked where they arrive ------------------------------------------------------------


def answering(body, status=200):
    return lambda request: httpx.Response(status, json=body)


@pytest.mark.parametrize(
    "call,body,says",
    [
        (lambda c: c.vms(CS), {"result": [{"vm_id": 1}]}, "result[0].name is missing"),
        (lambda c: c.vms(CS), {"result": [{"vm_id": True, "name": "a"}]}, "result[0].vm_id is a boolean"),
        (lambda c: c.vms(CS), {"result": {"vm_id": 1}}, "result is an object, not a list"),
        (lambda c: c.vms(CS), ["x"], "the answer is a list, not an object"),
        (lambda c: c.vms(CS), {"result": [{"vm_id": 1, "name": "a", "devices": [5]}]}, "devices[0] is an integer"),
        (lambda c: c.get_vm(CS, 1), {"description": 5}, "the answer.description is an integer"),
        (lambda c: c.gpu_profiles("loc"), {"result": [{"vendor": "x"}]}, "result[0].id is missing"),
        (lambda c: c.cloudspace_notes(CS), {"result": [{"id": None}]}, "result[0].id is null"),
        (lambda c: c.cloudspaces(), {"result": [{"cloudspace_id": "c"}]}, "result[0].name is missing"),
        (lambda c: c.read_file(CS, 1, "/x"), {"result": 5}, "result is an integer, not a string"),
        (lambda c: list(c.vgpus("loc")), {"data": "nope"}, "data is not a list"),
        (lambda c: list(c.vgpus("loc")), {"data": [{"vgpu_id": "v"}]}, "data[0].vgpu_name is missing"),
        (
            lambda c: list(c.vgpus("loc")),
            {"data": [{"vgpu_id": "v", "vgpu_name": "n", "gpu_id": "g", "status": "ATTACHED", "virtual_machine": {}}]},
            "data[0].virtual_machine.id is missing",
        ),
        (lambda c: c.create_vm(CS, "n", "d", 1, 128), {"vm_id": "7"}, "vm_id is a string, not an integer"),
        (lambda c: c.images("loc"), {"result": [{"name": "u"}]}, "result[0].image_id is missing"),
        (lambda c: c.images("loc"), {"result": [{"image_id": "12", "name": "u"}]}, "result[0].image_id is a string"),
        (lambda c: c.images("loc"), {"result": [{"image_id": 12, "name": "u", "public": 1}]}, "public is an integer"),
        (lambda c: c.images("loc"), {"result": [{"image_id": 12, "name": "u" * 257}]}, "longer than 256 characters"),
        (
            lambda c: c.images("loc"),
            {"result": [{"image_id": i, "name": "u"} for i in range(10001)]},
            "result has 10001 items, more than the 10000",
        ),
        (lambda c: c.locations(), {"locations": [{"resources": {}}]}, "locations[0].location is missing"),
        (lambda c: c.locations(), {"locations": [{"location": 5}]}, "locations[0].location is an integer"),
        (lambda c: c.locations(), {"locations": {"location": "x"}}, "locations is an object, not a list"),
        (lambda c: c.location_names(), {"locations": [{"location": "x" * 129}]}, "longer than 128 characters"),
    ],
)
def test_an_answer_without_what_the_core_reads_is_a_bad_answer(call, body, says):
    c, _clock = mock_client(answering(body))
    with pytest.raises(BadAnswer) as err:
        call(c)
    assert says in str(err.value) and not isinstance(err.value, ApiError), "never taken for a lost answer"


def test_an_answer_that_fits_is_handed_on_as_it_is():
    vm = {"vm_id": 1, "name": "a", "devices": [{"type": "VGPU", "reference_id": "v"}], "extra": {"any": [1]}}
    c, _clock = mock_client(answering({"result": [vm]}))
    assert c.vms(CS) == [vm]
    assert answers.listed(None, "op") == [] and answers.listed({"result": None}, "op", "VM") == []


def test_a_locations_listing_and_its_currency_are_read_within_bounds():
    body = {"currency": "EUR", "locations": [{"location": "b", "resources": {"vgu": 730}}, {"location": "a"}]}
    c, _clock = mock_client(answering(body))
    assert c.locations() == (body["locations"], "EUR") and c.location_names() == ["a", "b"]
    c, _clock = mock_client(answering({"currency": "E" * 17, "locations": []}))
    assert c.locations() == ([], None), "a currency no platform sends is none"


def test_a_listing_whose_count_lies_ends_at_its_first_empty_page():
    asked = []

    def handler(request):
        start = int(request.url.params["start_after"])
        asked.append(start)
        data = [] if start else [{"vgpu_id": "v", "vgpu_name": "n", "gpu_id": "g", "status": "RESERVED"}]
        return httpx.Response(200, json={"data": data, "pagination": {"count": 10**15}})

    c, _clock = mock_client(handler)
    assert len(list(c.vgpus("loc"))) == 1
    assert len(asked) <= 34, "a count of 10**15 planned no more than a window of pages"


# -- Retry-After ----------------------------------------------------------------------------------------------------


def http_date(offset):
    return email.utils.format_datetime(
        datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=offset)
    )


@pytest.mark.parametrize(
    "value,expected",
    [
        ("3", 3.0),
        (" 2.5 ", 2.5),
        ("0", 0.0),
        ("99999999999", headers.RETRY_AFTER_MAX),
        ("soon", None),
        ("-1", None),
        ("nan", None),
        ("inf", None),
        ("1e3", None),
        ("", None),
        (None, None),
        ("\x00\xff", None),
        ("Wed, 21 Oct 2015 07:28:00 GMT", 0.0),
        ("Fri, 31 Dec 9999 23:59:59 GMT", headers.RETRY_AFTER_MAX),
        ("Mon, 32 Foo 2015 99:99:99 GMT", None),
    ],
)
def test_retry_after_is_a_bounded_number_or_none(value, expected):
    assert headers.retry_after(value) == expected


def test_retry_after_as_an_http_date_in_the_future():
    assert 50 <= headers.retry_after(http_date(60)) <= 60
    assert headers.retry_after(http_date(-60)) == 0.0


# -- mutants: each test fails on the one-character change its docstring names -----------------------------------


def test_a_marker_with_an_unknown_token_is_no_marker():
    """Kills: parse_marker skipping unknown tokens (``continue`` for ``return None``)."""
    assert markers.parse_marker("capvco/v1 cluster=web note=x") is None
    assert not markers.machine_owned("capvco/v1 cluster=web note=x", "web")
    assert markers.parse_marker("capvco/v1 cluster=web pool=gpu") == markers.Marker("web", "gpu")


def test_a_name_is_decoded_whole_or_not_at_all():
    """Kills: decode with ``search`` for ``fullmatch``."""
    assert naming.decode("hand-capvco.c1.w0.00.0000001") is None
    assert naming.decode("capvco.c1.w0.00.0000001-copy") is None
    assert naming.decode("capvco.c1.w0.00.0000001") == naming.Owner("c1", "w0", 0, 1)


def test_a_cluster_part_is_cut_at_exactly_20_characters():
    """Kills: the cut moved by one (``<`` for ``<=``, a limit of 19 or 21, a prefix of ``limit - 8`` or ``- 10``)."""
    twenty, twenty_one = "a" * 20, "a" * 21
    assert naming.cluster_part(twenty) == twenty
    digest = hashlib.sha256(twenty_one.encode()).hexdigest()[:8]
    assert naming.cluster_part(twenty_one) == "a" * 11 + "_" + digest
    assert len(naming.cluster_part(twenty_one)) == 20
    dashed = "a" * 10 + "-" + "b" * 10  # the prefix ends in "-": stripped before the "_"
    assert naming.cluster_part(dashed) == "a" * 10 + "_" + hashlib.sha256(dashed.encode()).hexdigest()[:8]
    name = naming.encode(twenty_one, "m", 0, created=1)
    assert name == "capvco.%s.m.00.0000001" % naming.cluster_part(twenty_one)
    assert naming.owned_by(naming.decode(name), twenty_one, "m")


def detached(machine, cluster="web"):
    return {
        "vgpu_id": "vg-" + machine,
        "vgpu_name": naming.encode(cluster, machine, 0, created=1),
        "gpu_id": "a100",
        "status": "RESERVED",
        "virtual_machine": None,
        "owner": naming.decode(naming.encode(cluster, machine, 0, created=1)),
    }


def test_a_detached_reservation_of_a_machine_that_exists_is_no_orphan():
    """Kills: an orphan decided by the reservation being detached, not by its machine being gone."""
    orphan = orphans.OrphanCheck(["web-0", "other"])
    here, gone = detached("web-0"), detached("web-1")
    assert orphan(here["owner"]) is False and orphan(gone["owner"]) is True
    chosen, kept = orphans.select([here, gone], "orphans", orphan, grace_period=0, permanently=True, now=10**9)
    assert [i["vgpu_id"] for i in chosen] == ["vg-web-1"]
    assert [(k["vgpu_id"], k["reason"]) for k in kept] == [("vg-web-0", "machine 'web-0' exists")]


def attach_platform(conflict_message, attached):
    calls = []

    def handler(request):
        calls.append((request.method, request.url.path))
        if request.method == "POST":
            return httpx.Response(409, json={"message": conflict_message})
        devices = [{"type": "VGPU", "reference_id": "vg"}] if attached else []
        return httpx.Response(200, json={"vm_id": VM_ID, "locked": False, "devices": devices})

    return handler, calls


def test_a_409_already_attached_to_this_vm_is_success():
    """Kills: Ops.attach raising every 409 (the reservation is on the VM: the attach is done)."""
    handler, calls = attach_platform("vGPU vg is already attached to this virtual machine", attached=True)
    c, _clock = mock_client(handler)
    Ops(c, "loc", CS).attach({"vgpu_id": "vg", "virtual_machine": None, "status": "RESERVED"}, VM_ID)
    assert [m for m, _p in calls].count("POST") == 1
    handler, _calls = attach_platform("vGPU vg is attached to another virtual machine", attached=False)
    c, _clock = mock_client(handler)
    with pytest.raises(ApiError) as err:
        Ops(c, "loc", CS).attach({"vgpu_id": "vg", "virtual_machine": None, "status": "RESERVED"}, VM_ID)
    assert err.value.status == 409


def test_a_504_is_retried():
    """Kills: 504 left out of RETRY_STATUSES."""
    answers_ = [httpx.Response(504, json={"message": "gateway timeout"}), httpx.Response(200, json={"vm_id": 1})]
    c, _clock = mock_client(lambda request: answers_.pop(0))
    assert c.get_vm(CS, 1) == {"vm_id": 1} and answers_ == [] and c.transport.retry.retries == 1


def test_a_retrys_request_timeout_is_capped_by_the_time_left():
    """Kills: each attempt's timeout not capped by what is left of the deadline (4.0 s against 2.5 s)."""
    timeouts = []

    def handler(request):
        timeouts.append((clock.now, request.extensions["timeout"]["read"]))
        return httpx.Response(503, json={"message": "busy"})

    c, clock = mock_client(handler, timeout=4.0, backoff=0.5, max_backoff=0.5)
    with c.transport.deadlines.operation(2.5), pytest.raises(ApiError):
        c.get_vm(CS, 1)
    assert timeouts[0] == (0.0, 2.5), "the first attempt may use 2.5 s, not its own 4.0 s"
    assert len(timeouts) > 1 and all(t == pytest.approx(2.5 - at) for at, t in timeouts)


def test_the_pin_550_does_not_accept_5501(tmp_path):
    """Kills: the verification's pin match as a prefix (``"$V"*`` for ``"$V" | "$V".*``)."""
    status = json.loads(run_fragment(tmp_path, "5501.12, NVIDIA A100\n", "550"))
    assert status["state"] == "failed" and "driver version 5501.12 does not match the pin 550" in status["reason"]
    assert json.loads(run_fragment(tmp_path, "550.127.05, NVIDIA A100\n", "550"))["state"] == "ready"
    assert json.loads(run_fragment(tmp_path, "550, NVIDIA A100\n", "550"))["state"] == "ready"


FAKE_APT = """#!/bin/sh
printf '%%s\\n' "$*" >> %s
"""


def test_a_pin_is_never_expanded_as_a_glob(tmp_path):
    """Kills: ``set -f`` left out of the prelude (a file beside the script matching the pin's ``*``)."""
    bin_dir, work = tmp_path / "bin", tmp_path / "work"
    bin_dir.mkdir()
    work.mkdir()
    log = tmp_path / "apt.log"
    for tool in ("apt-get", "apt-mark"):
        (bin_dir / tool).write_text(FAKE_APT % log)
        (bin_dir / tool).chmod(0o755)
    (work / "nvidia-headless-550-server=550.127.05-0ubuntu1").write_text("")
    script = render.render_gpu_driver(
        "550.127.05", 1, install=True, verify=False, check=True, state_dir=str(tmp_path / "state")
    )
    env = dict(os.environ, PATH="%s:%s" % (bin_dir, os.environ["PATH"]))
    subprocess.run(["/bin/sh", "-s"], input=script, text=True, capture_output=True, cwd=work, env=env, check=False)
    said = log.read_text()
    assert "nvidia-headless-550-server=550.127.05* nvidia-utils-550-server=550.127.05*" in said, said
    assert "0ubuntu1" not in said


def test_a_reason_with_quotes_and_backslashes_stays_valid_json(tmp_path):
    """Kills: ``"`` (or ``\\``) not escaped in the status file."""
    text = run_fragment(tmp_path, 'No "devices" at C:\\gpu\n', "", rc=6)
    status = firstboot_status.parse(text)
    assert status.state == "failed" and 'No "devices" at C:\\gpu' in status.reason


def test_input_errors_are_not_scrubbed_away():
    """The scrubber leaves what the collection says about its own input readable."""
    with pytest.raises(InputError) as err:
        naming.encode("bad.name", "m", 0)
    assert scrub(err.value) == str(err.value)


def test_the_playbooks_filter_reads_the_guests_file_as_hostile():
    """``whitesky.capvco.first_boot_status`` (wait_first_boot.yml): a status, scrubbed; anything else ``invalid``."""
    from ansible_collections.whitesky.capvco.plugins.filter.first_boot_status import FilterModule

    parse = FilterModule().filters()["first_boot_status"]
    got = parse(json.dumps({"state": "failed", "step": "apt", "reason": "token Bearer eyJa.eyJb.c2ln \x1b]0;x\x07"}))
    assert got["state"] == "failed" and got["step"] == "apt" and "eyJb" not in got["reason"]
    assert "\x1b" not in got["reason"] and "\x07" not in got["reason"]
    for text in ("[" * 100000, "5", '{"state": "ready", "reason": ["a"]}', b"\xff\xfe", None, "x" * 70000):
        got = parse(text)
        assert got["state"] == "invalid" and got["reason"].startswith("not a first-boot status"), got
        assert len(got["reason"]) <= 1100
