"""The inventory plugin whitesky.capvco.vms with hostile VM names, through the real ``ansible-playbook``.

VMs made by hand in the emulator's default cloudspace carry names that a tenant may choose: Jinja that would run a
command on the controller (``{{ lookup('pipe', ...) }}``, ``{% set ... %}``), Ansible's reserved group names (``all``,
``ungrouped``), the plugin's own ``unowned``, ``localhost`` (the controller's name), a plain one, and one named like
the plain one's keyed group.  A play over ``all`` with ``keyed_groups`` and
``compose`` built from the VM's name references ``inventory_hostname``, ``inventory_hostname_short``,
``hostvars[inventory_hostname]`` and ``group_names`` for every host.  The check fails when a command ran, when the
source did not parse (``ANSIBLE_INVENTORY_UNPARSED_FAILED``), when the plain VM or the Jinja-named VMs are not hosts
(as data), or when a VM named like a group is not left out with a warning naming it.  Only the standard library and
PyYAML: it runs in a user's venv (``--ansible-bin``), the emulator from ``--tools-bin``.

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

TOKEN, CUSTOMER, CLOUDSPACE = "capvco-demo-token", "capvco-demo", "cs-demo"
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


def create_vm(url: str, name: str) -> None:
    query = urllib.parse.urlencode({"name": name, "description": "made by hand", "vcpus": 1, "memory": 512})
    req = urllib.request.Request(
        "%s/customers/%s/cloudspaces/%s/vms?%s" % (url, CUSTOMER, CLOUDSPACE, query),
        data=b"{}",
        headers={"Authorization": "Bearer " + TOKEN, "Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(req, timeout=30) as resp:
        resp.read()


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
        try:
            names = hostile(markers)
            for name in names.values():
                create_vm(url, name)
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
            cmd = [
                str(bindir / "ansible-playbook"),
                "-i",
                str(source),
                "-e",
                "ansible_python_interpreter=%s" % (bindir / "python"),
                str(work / "play.yml"),
            ]
            proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600, cwd=work)
            listing = subprocess.run(
                [str(bindir / "ansible-inventory"), "-i", str(source), "--list"],
                capture_output=True,
                text=True,
                env=env,
                timeout=600,
                cwd=work,
            )
        finally:
            emu.terminate()
            emu.wait(timeout=30)
        ran = sorted(p.name for p in markers.iterdir())
    output = proc.stdout + proc.stderr
    print(output[-6000:])
    problems = judge(names, ran, proc, listing, output)
    print("check_inventory: %s: %s" % (version, "; ".join(problems) if problems else "every hostile name held"))
    return 1 if problems else 0


def _plain(obj: dict) -> object:
    return obj["__ansible_unsafe"] if set(obj) == {"__ansible_unsafe"} else obj


if __name__ == "__main__":
    sys.exit(main())
