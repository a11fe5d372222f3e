"""The inventory plugin whitesky.capvco.vms against the emulator, through the real ``ansible-inventory``.

A cluster made by ``playbooks/cluster_create.yml`` (a GPU pool), a neighbour whose name the first one's is a prefix
of (``web`` and ``web-gpu``, in the same cloudspace), VMs made by hand (one named like a cluster's machine without
its marker, one with a cluster's marker and a name that is not its cluster's) and a VM in another location: the
groups, the host variables, ``hostnames``, the constructed options, the cache, the filters, the token that is never
printed, and the calls, counted by the emulator against the bound (the pages, the notes and the markers of the VMs
whose names may be a noted cluster's; never one per VM of others).  ``benchmarks/inventory_bench.py`` measures the
same over 1,000 VMs with latency.
"""

from __future__ import annotations

import json
import os
import subprocess

import pytest
import yaml

from ansible_collections.whitesky.capvco.plugins.module_utils.cluster import run as cluster
from ansible_collections.whitesky.capvco.plugins.module_utils.faces import (
    inventory_cache,
    inventory_hosts,
    inventory_records,
    vm_inventory,
)
from ansible_collections.whitesky.capvco.plugins.module_utils.ownership import markers as ownership_markers
from ansible_collections.whitesky.capvco.plugins.module_utils.ownership import notes
from capvco_lab.inventory import (
    BIN,
    calls,
    create_vms,
    expected_calls,
    inventory_env,
    live_vms,
    noted_clusters,
    selected,
)

from helpers import ROOT, TOKEN, Emulator, run_consumer_check, run_playbook

SAMPLE = os.path.join(ROOT, "awx", "demo.whitesky.yml")
LOC, AMS = "be-gen-1", "nl-ams-1"
WEB = {
    "cluster": {"name": "web", "location": LOC, "cloudspace": "shop"},
    "control_plane": {"replicas": 1, "vcpus": 2, "memory": 2048, "image": 12},
    "pools": [
        {
            "name": "gpu",
            "replicas": 1,
            "vcpus": 4,
            "memory": 8192,
            "image": 12,
            "gpu": {"type": "NVIDIA A100", "count": 1, "driverVersion": "550"},
        }
    ],
}
#: the neighbour in the same cloudspace: its machines' names start with "web-" too
WEB_GPU = {
    "cluster": {"name": "web-gpu", "location": LOC, "cloudspace": "shop"},
    "control_plane": {"replicas": 1, "vcpus": 2, "memory": 2048, "image": 12},
}
#: made by hand in the cluster's cloudspace: (name, description)
HAND_MADE = [
    ("handmade-0", "made by hand"),
    ("web-db", "made by hand, named like web's machines"),
    ("db-0", ownership_markers.machine_marker("web", "gpu")),  # web's marker on a name that is not web's
]


# --- helpers (those benchmarks/inventory_bench.py uses too are the lab's: capvco_lab.inventory) ---------------------


def inventory(emu, source, *args, env=None, timeout=300):
    """``ansible-inventory -i source ARGS`` against ``emu``: the completed process."""
    return subprocess.run(
        [os.path.join(BIN, "ansible-inventory"), "-i", str(source), *args],
        capture_output=True,
        text=True,
        env=inventory_env(emu, env),
        timeout=timeout,
        cwd=ROOT,
    )


def listed(emu, source, *args, env=None):
    """``ansible-inventory --list``: (its JSON, its stderr)."""
    proc = inventory(emu, source, "--list", *args, env=env)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    return json.loads(proc.stdout, object_hook=_plain), proc.stderr


def members(data, group):
    return sorted(data.get(group, {}).get("hosts", []))


def _plain(obj):
    """A value of ``--list``'s JSON as it was set: Ansible's legacy inventory profile writes a string that is data,
    never a template, as ``{"__ansible_unsafe": value}`` (the plugin's host variables all are)."""
    return obj["__ansible_unsafe"] if set(obj) == {"__ansible_unsafe"} else obj


def source_file(path, **options):
    """An inventory file of the plugin with ``options``."""
    path.write_text(yaml.safe_dump(dict({"plugin": "whitesky.capvco.vms"}, **options)))
    return path


def expected_owners(snapshot):
    """``{vm name: cluster or None}`` by the rule: a VM is a cluster's when its name may be a machine of a cluster
    that its cloudspace's notes name, and its marker names a cluster whose name and ``-`` its name starts with."""
    out = {}
    for cs in selected(snapshot):
        noted = noted_clusters(snapshot, cs["cloudspace_id"])
        for vm in live_vms(snapshot, cs["cloudspace_id"]):
            marker = ownership_markers.parse_marker(vm["description"])
            read = vm_inventory.may_be_owned(noted, vm["name"])
            mine = read and marker is not None and ownership_markers.may_own(marker.cluster, vm["name"])
            out[vm["name"]] = marker.cluster if mine else None
    return out


# --- the world: two clusters, VMs by hand, another location --------------------------------------------------------


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("inventory")
    emu = Emulator(tmp / "emulator-state").start()
    try:
        rc, out, _data = run_playbook(os.path.join(ROOT, "playbooks", "cluster_create.yml"), emu, extra_vars=WEB)
        assert rc == 0, out[-3000:]
        with emu.client(timeout=60) as client:
            cluster.run(client, spec=WEB_GPU)
            (shop,) = [cs["cloudspace_id"] for cs in client.cloudspaces() if cs["name"] == "shop"]
            create_vms(client, [(shop, name, description) for name, description in HAND_MADE])
            create_vms(client, [("cs-ams", "ams-0", "made by hand")])
            gpu0 = next(vm for vm in client.vms(shop) if vm["name"] == "web-gpu-0")
            client.attach_nic(shop, gpu0["vm_id"], 101)  # sriov-ext, of be-gen-1
            (ip,) = [n["ip_address"] for n in client.nics(shop, gpu0["vm_id"])]
        yield {"emu": emu, "tmp": tmp, "shop": shop, "ip": ip}
    finally:
        emu.stop()


SHOP = ["db-0", "handmade-0", "web-cp-0", "web-db", "web-gpu-0", "web-gpu-cp-0"]


def test_the_sample_groups_the_clusters_machines_by_their_markers_with_bounded_calls(world):
    emu = world["emu"]
    emu.reset_stats()
    proc = inventory(emu, SAMPLE, "--graph")
    assert proc.returncode == 0, proc.stderr[-4000:]
    for group in ("@cluster_web:", "@cluster_web_gpu:", "@pool_gpu:", "@pool_cp:", "@gpu_nvidia_a100:", "@unowned:"):
        assert group in proc.stdout, proc.stdout
    snapshot = emu.snapshot()
    assert calls(emu) == expected_calls(snapshot)
    # web's candidates: web-cp-0, web-gpu-0, web-gpu-cp-0 (web-gpu's), web-db (none's); nothing else is read
    assert calls(emu)["getVirtualMachineInfo"] == 4

    data, _ = listed(emu, SAMPLE)
    assert members(data, "cluster_web") == ["web-cp-0", "web-gpu-0"]
    assert members(data, "cluster_web_gpu") == ["web-gpu-cp-0"], "the neighbour whose name web's is a prefix of"
    assert members(data, "pool_gpu") == ["web-gpu-0"]
    assert members(data, "pool_cp") == ["web-cp-0", "web-gpu-cp-0"]
    assert members(data, "gpu_nvidia_a100") == ["web-gpu-0"]
    # by hand; named like web's without its marker; web's marker on a name not web's; another location
    assert members(data, "unowned") == ["ams-0", "db-0", "handmade-0", "web-db"]
    assert expected_owners(snapshot) == {
        "web-cp-0": "web",
        "web-gpu-0": "web",
        "web-gpu-cp-0": "web-gpu",
        "handmade-0": None,
        "web-db": None,
        "db-0": None,
        "ams-0": None,
    }
    # the sample's keyed groups and compose
    assert members(data, "location_be_gen_1") == SHOP and members(data, "location_nl_ams_1") == ["ams-0"]
    assert members(data, "cloudspace_shop") == SHOP

    hv = data["_meta"]["hostvars"]
    gpu0 = hv["web-gpu-0"]
    assert gpu0["ansible_host"] == world["ip"] and hv["web-cp-0"]["ansible_host"] == "web-cp-0"
    assert {
        k: gpu0["whitesky_" + k] for k in ("name", "cloudspace", "cloudspace_id", "location", "cluster", "pool")
    } == {
        "name": "web-gpu-0",
        "cloudspace": "shop",
        "cloudspace_id": world["shop"],
        "location": LOC,
        "cluster": "web",
        "pool": "gpu",
    }
    assert gpu0["whitesky_external_ips"] == [world["ip"]] and gpu0["whitesky_private_ips"] == []
    assert gpu0["whitesky_status"] == "RUNNING" and isinstance(gpu0["whitesky_vm_id"], int)
    (vgpu,) = gpu0["whitesky_vgpus"]
    assert vgpu["owner"]["cluster"] == "web" and vgpu["owner"]["machine"] == "web-gpu-0" and vgpu["owner"]["slot"] == 0
    assert vgpu["name"].startswith("capvco.web.web-gpu-0.00.") and vgpu["status"] == "ATTACHED"
    assert vgpu["type"] == "NVIDIA A100" and vgpu["profile"].startswith("nvidia-a100")
    assert vgpu["cost_per_hour"] == 1.0, "730 EUR a month in be-gen-1: 1 EUR per vGPU-hour"
    # the VM whole: its vCPUs, memory and boot disk at be-gen-1's prices, and its vGPU
    size = (gpu0["whitesky_vcpus"] * 12.0 + gpu0["whitesky_memory"] / 1024 * 3.5 + gpu0["whitesky_storage"] * 0.1) / 730
    assert gpu0["whitesky_cost_per_hour"] == round(1.0 + size, 6) and gpu0["whitesky_currency"] == "EUR"
    assert gpu0["whitesky_cost_by_unit"]["vgu"] == 1.0 and set(gpu0["whitesky_cost_by_unit"]) <= {
        "vcu",
        "mu",
        "su",
        "vgu",
    }
    assert hv["handmade-0"]["whitesky_cluster"] is None and hv["handmade-0"]["whitesky_vgpus"] == []
    assert hv["web-gpu-cp-0"]["whitesky_cluster"] == "web-gpu" and hv["web-gpu-cp-0"]["whitesky_pool"] == "cp"


def test_hostnames_in_order_then_compose_groups_and_keyed_groups(world, tmp_path):
    emu, ip = world["emu"], world["ip"]
    source = source_file(
        tmp_path / "named.whitesky.yml",
        hostnames=["external_ip", "name"],
        compose={"vgpu_count": "whitesky_vgpus | length", "machine": "whitesky_name"},
        groups={"billed": "whitesky_cost_per_hour > 1", "gpu_billed": "whitesky_cost_by_unit.vgu | default(0) > 0"},
        keyed_groups=[{"key": "whitesky_pool", "prefix": "in", "default_value": "no_pool"}],
    )
    data, _ = listed(emu, source)
    hv = data["_meta"]["hostvars"]
    assert sorted(hv) == sorted(["ams-0", ip, *[n for n in SHOP if n != "web-gpu-0"]]), "the external address first"
    assert hv[ip]["whitesky_name"] == "web-gpu-0" and hv[ip]["machine"] == "web-gpu-0"
    assert hv[ip]["vgpu_count"] == 1
    assert members(data, "billed") == [ip] and members(data, "gpu_billed") == [ip]  # a vGPU is 1 EUR an hour
    assert members(data, "in_gpu") == [ip] and members(data, "in_cp") == ["web-cp-0", "web-gpu-cp-0"]
    assert members(data, "in_no_pool") == ["ams-0", "db-0", "handmade-0", "web-db"]
    assert members(data, "cluster_web") == [ip, "web-cp-0"]

    # no VM of the emulator has a private address: with private_ip and external_ip only, one host is left
    source = source_file(tmp_path / "addresses.whitesky.yml", hostnames=["private_ip", "external_ip"])
    data, err = listed(emu, source)
    assert sorted(data["_meta"]["hostvars"]) == [ip]
    assert "'handmade-0'" in err and "is left out" in err

    proc = inventory(emu, source_file(tmp_path / "bad.whitesky.yml", hostnames=["dns"]), "--list")
    assert proc.returncode != 0 and "hostnames" in proc.stderr and "dns" in proc.stderr


def test_a_warm_cache_makes_no_call(world, tmp_path):
    emu = world["emu"]
    cache = {"cache": True, "cache_plugin": "ansible.builtin.jsonfile", "cache_connection": str(tmp_path / "cache")}
    source = source_file(tmp_path / "cached.whitesky.yml", **cache)
    emu.reset_stats()
    cold, _ = listed(emu, source)
    assert calls(emu) == expected_calls(emu.snapshot())
    emu.reset_stats()
    warm, _ = listed(emu, source)
    assert calls(emu) == {}, "a warm cache reads nothing"
    assert warm == cold
    # the cache keeps what was read: hostnames and the constructed options apply to it on each run
    source_file(source, hostnames=["external_ip", "name"], groups={"gpus": "whitesky_vgpus | length > 0"}, **cache)
    named, _ = listed(emu, source)
    assert calls(emu) == {} and members(named, "gpus") == [world["ip"]]
    emu.reset_stats()
    listed(emu, source, "--flush-cache")
    assert calls(emu) == expected_calls(emu.snapshot()), "--flush-cache reads again"
    # another filter is another read, whatever the cache holds
    source_file(source, locations=[AMS], **cache)
    emu.reset_stats()
    ams, _ = listed(emu, source)
    assert sorted(ams["_meta"]["hostvars"]) == ["ams-0"]
    assert calls(emu) == expected_calls(emu.snapshot(), locations=[AMS])


def test_filters_by_location_and_cloudspace(world, tmp_path):
    emu = world["emu"]
    emu.reset_stats()
    data, _ = listed(emu, source_file(tmp_path / "ams.whitesky.yml", locations=[AMS]))
    assert sorted(data["_meta"]["hostvars"]) == ["ams-0"]
    assert calls(emu) == expected_calls(emu.snapshot(), locations=[AMS]), "nothing of be-gen-1 is read"
    assert "listCustomerVGPUS" in calls(emu)

    emu.reset_stats()
    data, err = listed(emu, source_file(tmp_path / "shop.whitesky.yml", cloudspaces=["shop", "nope"]))
    assert sorted(data["_meta"]["hostvars"]) == SHOP
    assert calls(emu) == expected_calls(emu.snapshot(), cloudspaces=["shop"])
    assert "cloudspace 'nope' not found" in err and "shop" in err

    data, err = listed(emu, source_file(tmp_path / "none.whitesky.yml", locations=["xx-nowhere-1"]))
    assert data["_meta"]["hostvars"] == {} and "xx-nowhere-1" in err


def test_the_token_is_never_printed(world, tmp_path):
    emu = world["emu"]
    for args in (("--list", "-vvv"), ("--graph", "-vvv"), ("--host", "web-gpu-0", "-vvv")):
        proc = inventory(emu, SAMPLE, *args)
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert TOKEN not in proc.stdout + proc.stderr

    # the token in the file, not in the environment
    source = source_file(tmp_path / "token.whitesky.yml", api_token=TOKEN)
    proc = inventory(emu, source, "--list", "-vvv", env={"WHITESKY_API_TOKEN": ""})
    assert proc.returncode == 0 and "web-gpu-0" in proc.stdout, proc.stderr[-3000:]
    assert TOKEN not in proc.stdout + proc.stderr

    # an option templated with the extra vars (ansible-inventory --list shows extra vars as every host's, so a
    # token given so would be shown by Ansible itself: the URL here)
    source = source_file(tmp_path / "vars.whitesky.yml", api_url="{{ portal }}")
    proc = inventory(emu, source, "--list", "-e", json.dumps({"portal": emu.url}), env={"WHITESKY_API_URL": ""})
    assert proc.returncode == 0 and "web-gpu-0" in proc.stdout, proc.stderr[-3000:]

    # a token the platform refuses: the run fails, saying why, without it
    secret = "s3cret-not-the-platforms-token"
    proc = inventory(emu, SAMPLE, "--list", "-vvv", env={"WHITESKY_API_TOKEN": secret})
    assert proc.returncode != 0 and "401" in proc.stderr, proc.stderr[-3000:]
    assert secret not in proc.stdout + proc.stderr

    proc = inventory(emu, SAMPLE, "--list", env={"WHITESKY_CUSTOMER_ID": ""})
    assert proc.returncode != 0 and "customer_id" in proc.stderr and "WHITESKY_CUSTOMER_ID" in proc.stderr


def test_two_hundred_vms_cost_the_pages_the_notes_and_the_markers_of_cluster_named_vms_only(emulator, tmp_path):
    """4 cloudspaces, each noted as a cluster's; of their 50 VMs each, 10 are the cluster's machines, 5 are named
    like them without the marker (read, unowned), 5 carry the marker on a name that does not start with the
    cluster's name and "-" (not read, unowned: the name rule), 30 are made by hand (not read)."""
    vms = []
    with emulator.client(timeout=60) as client:
        for i in range(4):
            cs = client.create_cloudspace("space-%d" % i, LOC)
            client.create_cloudspace_note(cs, *notes.creator_note("c%d" % i))
            marker = ownership_markers.machine_marker("c%d" % i, "workers")
            vms += [(cs, "c%d-w-%d" % (i, j), marker) for j in range(10)]
            vms += [(cs, "c%d-x-%d" % (i, j), "made by hand") for j in range(5)]
            vms += [(cs, "c%dx-%d" % (i, j), marker) for j in range(5)]
            vms += [(cs, "vm-%d-%d" % (i, j), "made by hand") for j in range(30)]
        create_vms(client, vms + [("cs-demo", "vm-0-0", "made by hand")])  # a name that another cloudspace has too
    emulator.reset_stats()
    data, err = listed(emulator, SAMPLE)
    got = calls(emulator)
    want = expected_calls(emulator.snapshot())
    assert got == want
    # the default world's two cloudspaces (two locations) and these four
    assert got["getVirtualMachineInfo"] == 4 * 15 and got["listCloudspaceVirtualMachines"] == 6
    assert sum(got.values()) == 1 + 2 * 6 + 4 * 15 + 3 * 2  # the cloudspaces; 6 x (VMs, notes); markers; locations
    for i in range(4):
        assert members(data, "cluster_c%d" % i) == sorted("c%d-w-%d" % (i, j) for j in range(10))
    assert len(members(data, "unowned")) == 200 - 40, "one of the two VMs named vm-0-0 is left out"
    assert data["_meta"]["hostvars"]["vm-0-0"]["whitesky_cloudspace"] == "capvco-demo", "the first by cloudspace name"
    assert "VM 'vm-0-0'" in err and "of cloudspace 'space-0' is left out: vm-0-0 already names" in err
    assert members(data, "pool_workers") == sorted(n for _cs, n, d in vms if "-w-" in n)


def test_ansible_doc_renders_the_plugin():
    proc = subprocess.run(
        [os.path.join(BIN, "ansible-doc"), "-t", "inventory", "whitesky.capvco.vms"],
        capture_output=True,
        text=True,
        env=inventory_env(None),
    )
    assert proc.returncode == 0, proc.stderr
    for what in ("EXAMPLES", "api_token", "WHITESKY_API_TOKEN", "hostnames", "keyed_groups", "cache_plugin"):
        assert what in proc.stdout, what


# --- the core's contract, without a platform ------------------------------------------------------------------------


def host(**kw):
    base = {
        "vm_id": 1,
        "name": "web-gpu-0",
        "cloudspace_id": "cs-1",
        "cloudspace": "shop",
        "location": LOC,
        "status": "RUNNING",
        "vcpus": 4,
        "memory": 8192,
        "storage": 10,
        "private_ips": [],
        "external_ips": [],
        "cluster": None,
        "pool": None,
        "vgpus": [],
        "cost_per_hour": 0.0,
        "cost_by_unit": {},
        "currency": "EUR",
    }
    base.update(kw)
    return base


def test_hostname_takes_the_first_source_that_gives_a_value():
    h = host(private_ips=["192.168.103.5"], external_ips=["198.51.100.7", "198.51.100.8"])
    assert inventory_hosts.hostname(h, ["external_ip", "name"]) == "198.51.100.7"
    assert inventory_hosts.hostname(h, ["private_ip", "external_ip"]) == "192.168.103.5"
    assert inventory_hosts.hostname(host(), ["private_ip", "external_ip", "name"]) == "web-gpu-0"
    assert inventory_hosts.hostname(host(), ["private_ip", "external_ip"]) is None
    with pytest.raises(ValueError, match="unknown hostname source 'dns'"):
        inventory_hosts.hostname(h, ["dns"])


def test_addresses_split_external_nics_from_the_cloudspaces_network():
    vm = {
        "vm_id": 1,
        "name": "a",
        "network_interfaces": [
            {"ip_address": "192.168.103.5", "external_network_type": "cloudspace"},
            {"ip_address": "198.51.100.7", "external_network_type": "external"},
            {"ip_address": "10.0.0.2"},
            {"ip_address": "203.0.113.9", "nic_type": "EXTERNAL"},
            {"ip_address": ""},
            "not a NIC",
        ],
    }
    assert vm_inventory.addresses(vm) == (["192.168.103.5", "10.0.0.2"], ["198.51.100.7", "203.0.113.9"])


def test_groups_are_safe_names_and_a_gpu_type_is_its_vendor_and_model():
    vgpu = {"vgpu_id": "v", "name": "n", "owner": None, "profile": "p-1", "status": "ATTACHED", "cost_per_hour": 1.0}
    h = host(
        cluster="web-gpu",
        pool="big-pool",
        vgpus=[dict(vgpu, type="NVIDIA A100"), dict(vgpu, type="NVIDIA  A100 "), dict(vgpu, type=None)],
    )
    assert inventory_hosts.groups(h) == ["cluster_web_gpu", "pool_big_pool", "gpu_nvidia_a100", "gpu_p_1"]
    assert inventory_hosts.groups(host()) == ["unowned"]
    assert inventory_hosts.groups(host(cluster="web")) == ["cluster_web"]
    assert set(inventory_hosts.host_vars(h)) == {"whitesky_" + k for k in h}


def test_a_cache_entry_of_another_read_or_shape_is_not_used():
    key = inventory_cache.fingerprint("http://x/api/1", "acme", [LOC], [])
    entry = inventory_cache.to_cache(inventory_records.Read([host()], ["w"]), key)
    assert inventory_cache.from_cache(json.loads(json.dumps(entry)), key) == inventory_records.Read([host()], ["w"])
    assert key == inventory_cache.fingerprint("http://x/api/1/", "acme", [LOC, LOC], [])
    for other in (
        inventory_cache.fingerprint("http://x/api/1", "acme", [], []),
        inventory_cache.fingerprint("http://x/api/1", "other", [LOC], []),
        inventory_cache.fingerprint("http://y/api/1", "acme", [LOC], []),
        inventory_cache.fingerprint("http://x/api/1", "acme", [LOC], ["shop"]),
    ):
        assert inventory_cache.from_cache(entry, other) is None
    for bad in (None, [], dict(entry, format=0), dict(entry, hosts=[{"name": "x"}]), dict(entry, hosts={})):
        assert inventory_cache.from_cache(bad, key) is None


def test_a_cache_entry_whose_strings_are_marked_as_trusted_templates_is_read_back_as_data():
    """Issue 34, point 1, the cache: ansible-core 2.19 and later read a cache entry back with the tags its JSON
    names, so whoever can write the cache folder can mark a VM's name, or any cached value, as a trusted template;
    every string from_cache gives back is plain data (tests/consumers/check_inventory.py runs the whole path)."""
    persistence = pytest.importorskip("ansible._internal._json._profiles._cache_persistence")
    from ansible.template import is_trusted_as_template, trust_as_template

    def tagged(value):
        if isinstance(value, str):
            return trust_as_template(value)
        if isinstance(value, list):
            return [tagged(v) for v in value]
        if isinstance(value, dict):
            return {k: tagged(v) for k, v in value.items()}
        return value

    def strings(value):
        if isinstance(value, str):
            yield value
        elif isinstance(value, list):
            for v in value:
                yield from strings(v)
        elif isinstance(value, dict):
            for k, v in value.items():
                yield from strings(k)
                yield from strings(v)

    key = inventory_cache.fingerprint("http://x/api/1", "acme", [LOC], [])
    vgpu = {"vgpu_id": "v", "name": "{{ n }}", "owner": None, "profile": "p", "type": "{{ t }}", "status": "ATTACHED"}
    hostile = host(
        name="{{ lookup('pipe', 'id') }}",
        cloudspace="{% set x = lookup('pipe', 'id') %}s",
        cluster="{{ c }}",
        private_ips=["{{ ip }}"],
        vgpus=[dict(vgpu, cost_per_hour=None)],
    )
    entry = inventory_cache.to_cache(inventory_records.Read([hostile], ["{{ w }}"]), key)
    stored = json.dumps(tagged(entry), cls=persistence.Encoder)
    back = json.loads(stored, cls=persistence.Decoder)  # what the cache plugin hands the inventory plugin
    assert is_trusted_as_template(back["hosts"][0]["name"]), "the cache keeps the tag: the test writes what it means"
    got = inventory_cache.from_cache(back, key)
    assert got == inventory_records.Read([hostile], ["{{ w }}"])
    held = list(strings(got.hosts)) + list(strings(got.warnings))
    assert "{{ lookup('pipe', 'id') }}" in held and "{{ w }}" in held
    assert [s for s in held if is_trusted_as_template(s) or type(s) is not str] == []


def test_select_warns_of_a_filter_that_selects_nothing():
    listed_ = [
        {"cloudspace_id": "a", "name": "shop", "location": LOC},
        {"cloudspace_id": "b", "name": "lab", "location": AMS},
    ]
    spaces, warnings = vm_inventory.select(listed_, [LOC, "xx-1"], ["shop", "lab"])
    assert [cs["cloudspace_id"] for cs in spaces] == ["a"]
    assert warnings == [
        "location 'xx-1' holds none of the customer's cloudspaces",
        "cloudspace 'lab' not found in be-gen-1, xx-1; the customer has: shop",
    ]
    assert vm_inventory.select(listed_) == (listed_, [])


def test_hostile_vm_names_are_data_and_a_group_named_vm_is_left_out():
    """tests/consumers/check_inventory.py with this venv's Ansible (``make consumers`` runs it on the oldest and the
    newest ansible-core): Jinja in a VM's name runs nothing, ``all``/``ungrouped``/``unowned`` are left out."""
    proc = run_consumer_check("check_inventory.py", timeout=600)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert "every hostile name held" in proc.stdout
