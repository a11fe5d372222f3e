"""The AWX credential type, as AWX would store and inject it, runs a playbook against the emulator.

1. ``awx/register.yml`` (its credential type and credential tasks) runs with a given Ansible and the real
   ``awx.awx`` modules against the fake AWX API of tests/awxfake.py, which keeps what they send.
2. The credential type and credential AWX received are rendered by AWX's injector rules
   (``awxfake.render_injectors``: sandboxed Jinja over the credential's inputs) into a job's environment.
3. A playbook runs with that environment alone (nothing else of WHITESKY_*) against the emulator, and must read
   the emulator's cloudspace.

Fails when AWX would receive template text instead of templates AWX renders itself (the injectors then give a job
``{{ api_url }}`` as its URL), or when the rendered environment does not reach the platform.

    python tests/consumers/check_awx.py --ansible-bin VENV/bin --collections DIR [--tools-bin EMULATOR_VENV/bin]

(DIR: a collections path that holds awx.awx)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from awxfake import TOKEN, AwxFake, render_injectors  # noqa: E402
from check_diff import arguments, start  # noqa: E402

CUSTOMER = "capvco-demo"
API_TOKEN = "capvco-demo-token"
PLAY = """
- name: What an AWX job of the collection sees
  hosts: localhost
  gather_facts: false
  tasks:
    - name: The cloudspaces of the location
      whitesky.capvco.cloudspace_info:
        location: be-gen-1
      register: found

    - name: The emulator's cloudspace is there
      ansible.builtin.assert:
        that: found.cloudspaces | selectattr('name', 'equalto', 'capvco-demo') | list | length == 1
"""


def main(argv: list[str] | None = None) -> int:
    args, bindir, tools = arguments(__doc__, argv, ("--collections", "a collections path that holds awx.awx"))
    playbook = str(bindir / "ansible-playbook")
    problems: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        link = work / "collections" / "ansible_collections" / "whitesky" / "capvco"
        link.parent.mkdir(parents=True)
        link.symlink_to(ROOT)
        base = {k: v for k, v in os.environ.items() if not k.startswith(("ANSIBLE_", "WHITESKY_", "CONTROLLER_"))}
        base.update(
            ANSIBLE_COLLECTIONS_PATH=os.pathsep.join([str(work / "collections"), args.collections]),
            ANSIBLE_NOCOLOR="1",
            ANSIBLE_LOCAL_TEMP=str(work / "tmp"),
        )
        common = ["-i", "localhost,", "-c", "local", "-e", "ansible_python_interpreter=%s" % (bindir / "python")]
        emu, url = start(
            [str(tools / "whitesky-emulator"), "--port", "0", "--state-dir", str(work / "emu")],
            work / "emulator.out",
        )
        awx = AwxFake().start()
        try:
            register = subprocess.run(
                [playbook, *common, str(ROOT / "awx" / "register.yml"), "--tags", "credential_type,credential"]
                + ["-e", json.dumps({"awx_api_url": url, "awx_customer_id": CUSTOMER, "awx_api_token": API_TOKEN})],
                capture_output=True,
                text=True,
                env=dict(base, CONTROLLER_HOST=awx.url, CONTROLLER_OAUTH_TOKEN=TOKEN),
                timeout=600,
            )
            print(register.stdout + register.stderr)
            if register.returncode != 0:
                problems.append("awx/register.yml exited %d" % register.returncode)
            types = awx.objects["credential_types"]
            creds = awx.objects["credentials"]
            if len(types) != 1 or len(creds) != 1:
                problems.append("AWX got %d credential type(s) and %d credential(s)" % (len(types), len(creds)))
            else:
                print("AWX stored the injectors %s" % json.dumps(types[0].get("injectors")))
                env = render_injectors(types[0], creds[0].get("inputs") or {})
                shown = {k: ("<%d characters>" % len(v) if "TOKEN" in k else v) for k, v in env.items()}
                print("a job's environment: %s" % json.dumps(shown))
                if env.get("WHITESKY_API_URL") != url or env.get("WHITESKY_CUSTOMER_ID") != CUSTOMER:
                    problems.append("the injected environment is not the credential's: %s" % json.dumps(shown))
                (work / "job.yml").write_text(PLAY)
                job = subprocess.run(
                    [playbook, *common, str(work / "job.yml")],
                    capture_output=True,
                    text=True,
                    env=dict(base, **env),
                    timeout=600,
                )
                print(job.stdout + job.stderr)
                if job.returncode != 0:
                    problems.append("the job with the injected environment exited %d" % job.returncode)
        finally:
            awx.stop()
            emu.terminate()
            emu.wait(timeout=30)
    version = subprocess.run([playbook, "--version"], capture_output=True, text=True).stdout.split("\n", 1)[0]
    print("check_awx: %s: %s" % (version, "; ".join(problems) if problems else "AWX injects what the modules read"))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
