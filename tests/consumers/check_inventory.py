"""The inventory plugin whitesky.capvco.vms with hostile VM names, from the platform and from its cache, and the
platform's strings in the modules' results, through the real ``ansible-playbook``.

VMs made by hand in the emulator's default cloudspace carry names that a tenant may choose: Jinja that would run a
command on the controller (``{{ lookup('pipe', ...) }}``, ``{% set ... %}``), Ansible's reserved group names (``all``,
``ungrouped``), the plugin's own ``unowned``, ``localhost`` (the controller's name), a plain one, and one named like
the plain one's keyed group.  A play over ``all`` with ``keyed_groups`` and
``compose`` built from the VM's name references ``inventory_hostname``, ``inventory_hostname_short``,
``hostvars[inventory_hostname]`` and ``group_names`` for every host.  The check fails when a command ran, when the
source did not parse (``ANSIBLE_INVENTORY_UNPARSED_FAILED``), when the plain VM or the Jinja-named VMs are not hosts
(as data), or when a VM named like a group is not left out with a warning naming it.

The cache (issue 34, point 1): a source with ``cache: true`` (``ansible.builtin.jsonfile``) is read once, the
emulator is stopped, and the cache entry is rewritten as whoever can write the cache folder could: hosts named with
Jinja, every string variable of one of them Jinja (cloudspace, cluster, pool, status, addresses, its vGPU's name,
type and owner), a host named ``all`` and one named ``unowned``, a plain one, and a Jinja warning.  A play over
``all`` that references every host's name, short name, groups and every variable (``hostvars[inventory_hostname]``,
``compose`` and ``keyed_groups`` built from the Jinja values), and ``ansible-inventory --list``, run from the cache
alone: the check fails when a command ran, when the source did not parse, when a Jinja-named cached host is not a
host shown as it is, or when the group-named ones are not left out with a warning.

The modules' results (issue 34, point 1): a cloudspace named with Jinja and a reservation named with Jinja attached
to the Jinja-named VM; a play registers ``machine_info``, ``cloudspace_info`` and ``vgpu_info``, keeps their names
with ``set_fact``, shows them with ``debug`` (``msg:`` and ``msg=``), decides with ``when`` on them, names a task
with one, and passes each VM's name to a later ``machine_info``'s arguments.  The check fails when a command ran,
when the play failed, or when a name is not shown as the platform has it.

Only the standard library and PyYAML: it runs in a user's venv (``--ansible-bin``), the emulator from
``--tools-bin``.

    python tests/consumers/check_inventory.py --ansible-bin VENV/bin [--tools-bin EMULATOR_VENV/bin]
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import urllib.parse
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from check_diff import ROOT, arguments, consumer_env, start  # noqa: E402

TOKEN, CUSTOMER, CLOUDSPACE, LOCATION = "capvco-demo-token", "capvco-demo", "cs-demo", "be-gen-1"
#: Where ansible-core 2.19 and later keep a cache entry (JSON text) in the cache plugin's document.
PAYLOAD = "__payload__"
PLAY = """\
- name: Reference every host's name and variables
  hosts: all
  gather_facts: false
  connection: local
  tasks:
    - name: Show what Ansible holds of each host
      ansible.builtin.debug:
        msg: "{{ inventory_hostname }} | {{ inventory_hostname_short }} | {{ group_names }} | {{ shown }}"
      vars:
        shown: "{{ hostvars[inventory_hostname]['whitesky_name'] }} {{ hostvars[inventory_hostname]['named'] }}"
"""
#: The play over the hosts of a cache entry: every name and every variable, composed ones included.
CACHED_PLAY = """\
- name: Reference every cached host's name and variables
  hosts: all
  gather_facts: false
  connection: local
  tasks:
    - name: Show what Ansible holds of each host
      ansible.builtin.debug:
        msg: "{{ inventory_hostname }} | {{ inventory_hostname_short }} | {{ group_names }} | {{ shown }}"
      vars:
        shown: >-
          {{ hostvars[inventory_hostname]['whitesky_name'] }} {{ hostvars[inventory_hostname]['named'] }}
          {{ where }} {{ whitesky_cloudspace }} {{ whitesky_cluster }} {{ whitesky_pool }} {{ whitesky_status }}
          {{ whitesky_private_ips }} {{ whitesky_vgpus }} {{ whitesky_currency }}

    - name: Show every variable of each host
      ansible.builtin.debug:
        var: hostvars[inventory_hostname]

    - name: Decide on the host's name and variables
      ansible.builtin.set_fact:
        kept: "{{ inventory_hostname }} {{ whitesky_cloudspace }}"
      when: inventory_hostname is string and whitesky_cloudspace | length > 0

    - name: Show what was kept
      ansible.builtin.debug: msg="{{ kept }}"
"""
#: The play over the modules' results: names the platform holds, registered, kept, shown, decided on and passed on.
RESULTS_PLAY = """\
- name: Use what the modules returned
  hosts: localhost
  gather_facts: false
  connection: local
  tasks:
    - name: The VMs of the cloudspace
      whitesky.capvco.machine_info:
        cloudspace_id: %(cloudspace)s
      register: found

    - name: The cloudspaces
      whitesky.capvco.cloudspace_info:
        location: %(location)s
      register: spaces

    - name: The reservations
      whitesky.capvco.vgpu_info:
        location: %(location)s
      register: gpus

    - name: Keep the names
      ansible.builtin.set_fact:
        names: >-
          {{ found.machines | map(attribute='name') | list
             + spaces.cloudspaces | map(attribute='name') | list
             + gpus.reservations | map(attribute='vgpu_name') | list
             + gpus.reservations | map(attribute='vm_name') | select('string') | list }}
        jinja_vm: "{{ found.machines | map(attribute='name') | select('search', 'lookup') | first }}"
        jinja_space: "{{ spaces.cloudspaces | map(attribute='name') | select('search', 'lookup') | first }}"
        joined: "{{ found.machines | map(attribute='name') | join(' ') }}"

    - name: Show each name
      ansible.builtin.debug:
        msg: "{{ item }}"
      loop: "{{ names }}"
      when: item is string and (item is search('lookup') or item | length > 0)

    - name: Show the names as k=v ({{ jinja_vm }})
      ansible.builtin.debug: msg="{{ jinja_vm }} | {{ jinja_space }} | {{ joined }}"

    - name: Decide on a name
      ansible.builtin.set_fact:
        decided: "{{ jinja_vm ~ ' ' ~ jinja_space }}"
      when: jinja_vm in names and jinja_space != ''

    - name: Show what was decided
      ansible.builtin.debug:
        msg: "{{ decided }}"

    - name: Pass each VM's name to a module
      whitesky.capvco.machine_info:
        cloudspace_id: %(cloudspace)s
        name: "{{ item }}"
      loop: "{{ found.machines | map(attribute='name') | list }}"
      register: again

    - name: Each name came back as it was passed
      ansible.builtin.assert:
        that:
          - item.machines | length == 1
          - item.machines[0].name == item.item
        quiet: true
      loop: "{{ again.results }}"
      loop_control:
        label: "{{ item.item }}"
"""


def hostile(marker_dir: Path) -> dict[str, str]:
    """The names, by what each tries."""
    return {
        "pipe": "{{ lookup('pipe', 'touch %s') }}" % (marker_dir / "pipe"),
        "set": "{%% set x = lookup('pipe', 'touch %s') %%}s" % (marker_dir / "set"),
        "all": "all",
        "ungrouped": "ungrouped",
        "unowned": "unowned",
        "localhost": "localhost",
        "plain": "plain-0",
        "shadow": "named_plain_0",  # the keyed group of plain-0 (prefix named): that group is left out
    }


def pipe(marker_dir: Path, what: str) -> str:
    return "{{ lookup('pipe', 'touch %s') }}" % (marker_dir / what)


def set_x(marker_dir: Path, what: str) -> str:
    return "{%% set x = lookup('pipe', 'touch %s') %%}s" % (marker_dir / what)


def results_names(marker_dir: Path) -> dict[str, str]:
    """What the modules' part adds on the platform: a cloudspace and a reservation named with Jinja."""
    return {"cloudspace": pipe(marker_dir, "results-cloudspace"), "vgpu": set_x(marker_dir, "results-vgpu")}


def cache_hosts(template: dict, marker_dir: Path) -> list[dict]:
    """A cache entry's hosts as whoever can write the cache folder could make them, from a host the plugin cached
    (``template``: the entry's records must keep their keys)."""
    owner = {"cluster": pipe(marker_dir, "cache-owner"), "machine": set_x(marker_dir, "cache-machine"), "slot": 0}
    vgpu = {
        "vgpu_id": pipe(marker_dir, "cache-vgpu-id"),
        "name": set_x(marker_dir, "cache-vgpu"),
        "owner": dict(owner, created=0),
        "profile": pipe(marker_dir, "cache-profile"),
        "type": pipe(marker_dir, "cache-gpu-type"),
        "status": pipe(marker_dir, "cache-vgpu-status"),
        "cost_per_hour": None,
    }
    every = dict(
        template,
        vm_id=90001,
        name=pipe(marker_dir, "cache-pipe"),
        cloudspace_id=pipe(marker_dir, "cache-cloudspace-id"),
        cloudspace=set_x(marker_dir, "cache-cloudspace"),
        location=pipe(marker_dir, "cache-location"),
        status=pipe(marker_dir, "cache-status"),
        private_ips=[pipe(marker_dir, "cache-ip")],
        external_ips=[],
        cluster=set_x(marker_dir, "cache-cluster"),
        pool=pipe(marker_dir, "cache-pool"),
        vgpus=[vgpu],
        currency=pipe(marker_dir, "cache-currency"),
    )
    return [
        every,
        dict(template, vm_id=90002, name=set_x(marker_dir, "cache-set")),
        dict(template, vm_id=90003, name="all"),
        dict(template, vm_id=90004, name="unowned"),
        dict(template, vm_id=90005, name="plain-cache"),
    ]


def api(url: str, method: str, path: str, query: dict | None = None, body: object = None) -> dict:
    """A call of the emulator's API (``path`` under the customer) or, for a path that starts with ``/_emulator``,
    of its admin API."""
    if path.startswith("/_emulator"):
        target = url[: -len("/api/1")] + path
    else:
        target = "%s/customers/%s%s" % (url, CUSTOMER, path)
    if query:
        target += "?" + urllib.parse.urlencode(query)
    req = urllib.request.Request(
        target,
        data=json.dumps(body if body is not None else {}).encode(),
        headers={"Authorization": "Bearer " + TOKEN, "Content-Type": "application/json"},
        method=method,
    )
    with urllib.request.urlopen(req, timeout=30) as resp:
        return json.loads(resp.read() or b"{}")


def create_vm(url: str, name: str) -> int:
    query = {"name": name, "description": "made by hand", "vcpus": 1, "memory": 512}
    return api(url, "POST", "/cloudspaces/%s/vms" % CLOUDSPACE, query)["vm_id"]


def judge(
    names: dict[str, str],
    ran: list[str],
    proc: subprocess.CompletedProcess,
    listing: subprocess.CompletedProcess,
    output: str,
) -> list[str]:
    """What went wrong: a command that ran, a source that did not parse, a name not held as data, a group-named
    VM kept or not warned of."""
    problems: list[str] = []
    if ran:
        problems.append("a VM's name ran a command on the controller: %s" % ", ".join(ran))
    if proc.returncode != 0:
        problems.append("ansible-playbook exited %d" % proc.returncode)
    if listing.returncode != 0:
        problems.append("ansible-inventory --list exited %d: %s" % (listing.returncode, listing.stderr[-2000:]))
        hosts: set[str] = set()
    else:
        hosts = set(json.loads(listing.stdout, object_hook=_plain).get("_meta", {}).get("hostvars", {}))
    for what in ("pipe", "set", "plain", "shadow"):
        if names[what] not in hosts:
            problems.append("the VM named %r is not a host" % names[what])
        if names[what] not in output:
            problems.append("the play did not show the VM named %r as it is" % names[what])
    said = " ".join(output.split())
    for what in ("all", "ungrouped", "unowned", "localhost"):
        if what in hosts:
            problems.append("the VM named %r is a host" % what)
        why = "the controller's name" if what == "localhost" else "the name of a group"
        if "%r is %s" % (what, why) not in said:
            problems.append("no warning says that the VM named %r is left out" % what)
    if "group 'named_plain_0' of host 'plain-0' is left out: a host has that name" not in said:
        problems.append("no warning says that the keyed group named like host named_plain_0 is left out")
    if listing.returncode == 0 and "named_plain_0" in json.loads(listing.stdout, object_hook=_plain):
        problems.append("a group named like host named_plain_0 is in the inventory")
    return problems


def judge_cache(
    hosts_written: list[dict],
    ran: list[str],
    proc: subprocess.CompletedProcess,
    listing: subprocess.CompletedProcess,
) -> list[str]:
    """What went wrong with the rewritten cache entry: a command that ran, a source that did not parse (the
    platform was down: only the cache could give it), a Jinja-named host that is not a host or not shown as it is,
    a variable not shown as it is, a group-named host kept or not warned of."""
    problems: list[str] = []
    if ran:
        problems.append("a cache entry ran a command on the controller: %s" % ", ".join(ran))
    if proc.returncode != 0:
        problems.append("ansible-playbook over the cache exited %d" % proc.returncode)
    if listing.returncode != 0:
        problems.append(
            "ansible-inventory --list over the cache exited %d: %s" % (listing.returncode, listing.stderr[-2000:])
        )
        hosts: set[str] = set()
    else:
        hosts = set(json.loads(listing.stdout, object_hook=_plain).get("_meta", {}).get("hostvars", {}))
    output = proc.stdout + proc.stderr
    every, set_named, _all, _unowned, plain = hosts_written
    for host in (every, set_named, plain):
        if host["name"] not in hosts:
            problems.append("the cached host named %r is not a host" % host["name"])
        if host["name"] not in output:
            problems.append("the play did not show the cached host named %r as it is" % host["name"])
    for value in (every["cloudspace"], every["cluster"], every["pool"], every["status"], every["vgpus"][0]["name"]):
        if value not in output:
            problems.append("the play did not show the cached value %r as it is" % value)
    said = " ".join((output + listing.stderr).split())
    for name in ("all", "unowned"):
        if name in hosts:
            problems.append("the cached host named %r is a host" % name)
        if "%r is the name of a group" % name not in said:
            problems.append("no warning says that the cached host named %r is left out" % name)
    return problems


def judge_results(
    added: dict[str, str], names: dict[str, str], ran: list[str], proc: subprocess.CompletedProcess
) -> list[str]:
    """What went wrong with the modules' results: a command that ran, a play that failed, a name not shown as the
    platform has it."""
    problems: list[str] = []
    if ran:
        problems.append("a name in a module's result ran a command on the controller: %s" % ", ".join(ran))
    if proc.returncode != 0:
        problems.append("ansible-playbook over the modules' results exited %d" % proc.returncode)
    output = proc.stdout + proc.stderr
    for value in (names["pipe"], names["set"], added["cloudspace"], added["vgpu"]):
        if value not in output:
            problems.append("the play did not show the name %r from a module's result as it is" % value)
    return problems


def run(cmd: list[str], env: dict[str, str], work: Path) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600, cwd=work)


def rewrite_cache(folder: Path, marker_dir: Path) -> list[dict]:
    """Rewrite the one cache entry in ``folder``: its hosts (:func:`cache_hosts`, from its host plain-0) and its
    warnings; the hosts written."""
    entries = [p for p in folder.iterdir() if p.is_file()]
    if len(entries) != 1:
        raise SystemExit("check_inventory: expected one cache entry in %s, found %s" % (folder, entries))
    stored = json.loads(entries[0].read_text())
    # ansible-core 2.19 and later keep the entry as JSON text under __payload__, in which a string may carry tags;
    # earlier ones keep it as it is
    payload = PAYLOAD in stored
    entry = json.loads(stored[PAYLOAD]) if payload else stored
    (template,) = [h for h in entry["hosts"] if h["name"] == "plain-0"]
    hosts = cache_hosts(template, marker_dir)
    entry.update(hosts=hosts, warnings=[pipe(marker_dir, "cache-warning")])
    if payload:
        stored[PAYLOAD] = json.dumps(trusted(entry))
    entries[0].write_text(json.dumps(stored if payload else entry))
    return hosts


def trusted(value: object) -> object:
    """``value`` with each string tagged as a trusted template, as ansible-core 2.19's cache persistence writes such a
    string (and reads it back as one): what the writer of a cache entry can ask for."""
    if isinstance(value, str):
        return {
            "value": value,
            "tags": [{"__ansible_type": "TrustedAsTemplate"}],
            "__ansible_type": "_AnsibleTaggedStr",
        }
    if isinstance(value, list):
        return [trusted(v) for v in value]
    if isinstance(value, dict):
        return {k: trusted(v) for k, v in value.items()}
    return value


def main(argv: list[str] | None = None) -> int:
    _args, bindir, tools = arguments(__doc__, argv)
    version = subprocess.run(
        [str(bindir / "ansible-playbook"), "--version"], capture_output=True, text=True, check=True
    ).stdout.split("\n", 1)[0]
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        markers = work / "markers"
        markers.mkdir()
        link = work / "collections" / "ansible_collections" / "whitesky" / "capvco"
        link.parent.mkdir(parents=True)
        link.symlink_to(ROOT)
        emu, url = start(
            [str(tools / "whitesky-emulator"), "--port", "0", "--state-dir", str(work / "emu")], work / "emulator.out"
        )
        playbook = [str(bindir / "ansible-playbook"), "-e", "ansible_python_interpreter=%s" % (bindir / "python")]
        ran: dict[str, list[str]] = {}

        def new_markers() -> list[str]:
            seen = {m for got in ran.values() for m in got}
            return sorted(p.name for p in markers.iterdir() if p.name not in seen)

        try:
            names = hostile(markers)
            ids = {what: create_vm(url, name) for what, name in names.items()}
            added = results_names(markers)
            api(
                url,
                "POST",
                "/cloudspaces",
                body={"name": added["cloudspace"], "location": LOCATION, "firewall": {"private": False}},
            )
            api(
                url,
                "POST",
                "/_emulator/seed-vgpu",
                body={
                    "location": LOCATION,
                    "gpu_id": "nvidia-a100-40c",
                    "vgpu_name": added["vgpu"],
                    "vm_id": ids["pipe"],
                },
            )
            source = work / "hostile.whitesky.yml"
            source.write_text(
                json.dumps(
                    {
                        "plugin": "whitesky.capvco.vms",
                        "compose": {"named": "whitesky_name"},
                        "keyed_groups": [{"key": "whitesky_name", "prefix": "named"}],
                    }
                )
            )
            (work / "play.yml").write_text(PLAY)
            env = consumer_env(work, url, ANSIBLE_INVENTORY_UNPARSED_FAILED="1")
            proc = run(playbook + ["-i", str(source), str(work / "play.yml")], env, work)
            listing = run([str(bindir / "ansible-inventory"), "-i", str(source), "--list"], env, work)
            ran["inventory"] = new_markers()
            # the modules' results
            (work / "results.yml").write_text(RESULTS_PLAY % {"cloudspace": CLOUDSPACE, "location": LOCATION})
            results = run(playbook + ["-i", "localhost,", str(work / "results.yml")], env, work)
            ran["results"] = new_markers()
            # the cache: read once from the platform, then only from the entry
            cached = work / "cached.whitesky.yml"
            cached.write_text(
                json.dumps(
                    {
                        "plugin": "whitesky.capvco.vms",
                        "cache": True,
                        "cache_plugin": "ansible.builtin.jsonfile",
                        "cache_connection": str(work / "cache"),
                        "cache_timeout": 3600,
                        "compose": {"named": "whitesky_name", "where": "whitesky_cloudspace ~ '/' ~ whitesky_location"},
                        "keyed_groups": [
                            {"key": "whitesky_name", "prefix": "named"},
                            {"key": "whitesky_cloudspace", "prefix": "in"},
                        ],
                    }
                )
            )
            filled = run([str(bindir / "ansible-inventory"), "-i", str(cached), "--list"], env, work)
        finally:
            emu.terminate()
            emu.wait(timeout=30)
        if filled.returncode != 0:
            raise SystemExit("check_inventory: the cache was not filled:\n" + filled.stderr[-3000:])
        written = rewrite_cache(work / "cache", markers)
        (work / "cached.yml").write_text(CACHED_PLAY)
        cached_proc = run(playbook + ["-i", str(cached), str(work / "cached.yml")], env, work)
        cached_listing = run([str(bindir / "ansible-inventory"), "-i", str(cached), "--list"], env, work)
        ran["cache"] = new_markers()
    output = proc.stdout + proc.stderr
    print(output[-6000:])
    print((results.stdout + results.stderr)[-6000:])
    print((cached_proc.stdout + cached_proc.stderr)[-6000:])
    problems = judge(names, ran["inventory"], proc, listing, output)
    problems += judge_results(added, names, ran["results"], results)
    problems += judge_cache(written, ran["cache"], cached_proc, cached_listing)
    print("check_inventory: %s: %s" % (version, "; ".join(problems) if problems else "every hostile name held"))
    return 1 if problems else 0


def _plain(obj: dict) -> object:
    return obj["__ansible_unsafe"] if set(obj) == {"__ansible_unsafe"} else obj


if __name__ == "__main__":
    sys.exit(main())
