"""AWX, as AWX would store and run what ``awx/register.yml`` registers, against the emulator.

1. ``awx/register.yml`` runs whole with a given Ansible and the real ``awx.awx`` modules against the fake AWX API of
   tests/fakes/awx.py, which keeps what they send and refuses what AWX refuses (a survey, a credential type, a
   notification template, a schedule by AWX's rules).  The GPU types of the survey come from the emulator
   (``gpu_profile_info``, run by the registration with the credential's connection).
2. What AWX stored: the credential type rendered by AWX's injector rules (``fakes.awx.render_injectors``: sandboxed
   Jinja over the credential's inputs) into a job's environment, the location and GPU type offered as choices, the
   orphan check's schedule and its notification on failure.
3. The templates launched by AWX's rules (``AwxFake.launch``: the survey's answers checked, the extra vars merged,
   the template's inventory, ``--check``/``--diff``, the credential's environment alone, nothing else of WHITESKY_*)
   against the emulator: a job reads the cloudspaces; "plan cluster" shows the plan and creates nothing; "create
   cluster" refuses a plan over its budget, then creates the cluster from the survey's sizes and image; "delete
   machine" with force leaves an orphan that the scheduled orphan check reports, failing, so its notification
   fires; "delete cluster" refuses a confirmation that is not the cluster's name and deletes nothing, then deletes
   it; the scheduled check passes again.

Fails when AWX would receive template text instead of templates AWX renders itself (the injectors then give a job
``{{ api_url }}`` as its URL), when AWX would refuse what the registration sends, or when a job does not do what
its template promises.

    python tests/consumers/check_awx.py --ansible-bin VENV/bin --collections DIR [--tools-bin EMULATOR_VENV/bin]

(DIR: a collections path that holds awx.awx)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from check_diff import arguments, start  # noqa: E402

from fakes.awx import TOKEN, AwxFake, Refused, render_injectors, run_job  # noqa: E402

CUSTOMER = "capvco-demo"
API_TOKEN = "capvco-demo-token"
LOCATION = "be-gen-1"
TYPES = ["NVIDIA A100", "NVIDIA L4"]  # the emulator's location offers these
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
#: The create and plan surveys' answers, as AWX's form sends them (integers as integers)
ANSWERS: dict[str, Any] = {
    "cluster_name": "awx",
    "cluster_location": LOCATION,
    "image_id": 12,
    "cp_replicas": 1,
    "cp_vcpus": 2,
    "cp_memory": 4096,
    "cp_disk": 20,
    "gpu_replicas": 2,
    "gpu_vcpus": 4,
    "gpu_memory": 8192,
    "gpu_disk": 40,
    "gpu_type": "NVIDIA A100",
    "gpu_count": 1,
    "gpu_driver_version": "550",
}
WHERE = {"cluster_name": "awx", "cluster_location": LOCATION}


class Platform:
    """The emulator read over its API, as a person's browser would: the cluster's VMs and the location's
    reservations."""

    def __init__(self, url: str) -> None:
        self.base = url.rstrip("/") + "/customers/" + CUSTOMER

    def get(self, path: str) -> Any:
        req = urllib.request.Request(self.base + path, headers={"Authorization": "Bearer " + API_TOKEN})
        with urllib.request.urlopen(req, timeout=30) as resp:  # noqa: S310 (the emulator on loopback)
            return json.load(resp)

    def machines(self, cloudspace: str) -> dict[str, tuple[int, int, int, int]]:
        """Each VM of the cloudspace: its vCPUs, memory, image and boot disk."""
        spaces = [
            c for c in self.get("/cloudspaces")["result"] if c["name"] == cloudspace and c["status"] == "DEPLOYED"
        ]
        return {
            v["name"]: (v["vcpus"], v["memory"], v["image_id"], v["storage"])
            for c in spaces
            for v in self.get("/cloudspaces/%s/vms" % c["cloudspace_id"])["result"]
        }

    def vms(self, cloudspace: str) -> list[str]:
        return sorted(self.machines(cloudspace))

    def reservations(self) -> list[str]:
        return sorted(v["vgpu_name"] for v in self.get("/locations/%s/vgpus?limit=500" % LOCATION)["data"])


class Check:
    """The problems found, and the jobs run."""

    def __init__(self, awx: AwxFake, bindir: Path, work: Path, base: dict[str, str]) -> None:
        self.awx, self.bindir, self.work, self.base = awx, bindir, work, base
        self.problems: list[str] = []

    def expect(self, ok: bool, what: str) -> None:
        print("check_awx %s: %s" % ("ok" if ok else "PROBLEM", what))
        if not ok:
            self.problems.append(what)

    def job(
        self, template: str, answers: dict[str, Any] | None = None, schedule: str | None = None
    ) -> tuple[int, str, list[str]]:
        job = self.awx.launch(template, answers, schedule=schedule)
        rc, out, fired = run_job(job, str(self.bindir), str(ROOT), str(self.work / "jobs"), self.base)
        print("--- job %d of %r (rc %d, notified %s)\n%s" % (job.ident, template, rc, fired, out[-6000:]))
        return rc, out, fired


def stored(check: Check, url: str) -> None:
    """What the registration left in AWX."""
    awx = check.awx
    (ctype,) = awx.objects["credential_types"]
    (cred,) = awx.objects["credentials"]
    print("AWX stored the injectors %s" % json.dumps(ctype.get("injectors")))
    env = render_injectors(ctype, cred.get("inputs") or {})
    shown = {k: ("<%d characters>" % len(v) if "TOKEN" in k else v) for k, v in env.items()}
    print("a job's environment: %s" % json.dumps(shown))
    check.expect(
        env.get("WHITESKY_API_URL") == url and env.get("WHITESKY_CUSTOMER_ID") == CUSTOMER,
        "the injected environment is the credential's: %s" % json.dumps(shown),
    )
    check.expect(
        (env.get("WHITESKY_VALIDATE_CERTS"), env.get("WHITESKY_TIMEOUT")) == ("true", "30"),
        "the credential's validate_certs and timeout reach a job",
    )
    surveys = {t["name"]: {q["variable"]: q for q in t["survey_spec"]["spec"]} for t in awx.objects["job_templates"]}
    for name, var, want in (
        ("capvco - create cluster", "cluster_location", [LOCATION]),
        ("capvco - create cluster", "gpu_type", TYPES),
        ("capvco - plan cluster", "gpu_type", TYPES),
        ("capvco - orphans check", "location", [LOCATION]),
    ):
        question = surveys.get(name, {}).get(var, {})
        check.expect(
            question.get("type") == "multiplechoice" and question.get("choices") == want,
            "%s offers %s as the choices %s (got %s)" % (name, var, want, question.get("choices")),
        )
    schedules = [s for s in awx.objects["schedules"] if s["extra_data"] == {"location": LOCATION}]
    notified = [
        t["associated"]["notification_templates_error"]
        for t in awx.objects["job_templates"]
        if t["name"] == "capvco - orphans check"
    ]
    check.expect(
        len(schedules) == 1 and notified and len(notified[0]) == 1,
        "the orphan check has its schedule and its notification",
    )


def jobs(check: Check, platform: Platform) -> None:
    """The templates, launched as AWX launches them, against the emulator."""
    rc, out, _ = check.job("capvco - plan cluster", ANSWERS)
    check.expect(
        rc == 0 and "+machine awx-gpu-1" in out and platform.vms("awx") == [],
        "the plan shows the machines and creates none",
    )
    rc, out, _ = check.job("capvco - create cluster", dict(ANSWERS, max_hourly_cost=0.5))
    check.expect(
        rc != 0 and "over max_hourly_cost 0.5" in out and platform.vms("awx") == [],
        "create refuses a plan over its budget",
    )
    try:
        check.awx.launch("capvco - create cluster", dict(ANSWERS, gpu_type="NVIDIA H100"))
        check.expect(False, "AWX refuses a GPU type that is not a choice")
    except Refused as exc:
        check.expect("expected to be one of" in str(exc), "AWX refuses a GPU type that is not a choice")
    rc, out, _ = check.job("capvco - create cluster", dict(ANSWERS, max_hourly_cost=5))
    made = platform.machines("awx")
    control, gpu = (2, 4096, 12, 20), (4, 8192, 12, 40)  # the answers' sizes, image and disks
    check.expect(
        rc == 0 and made == {"awx-cp-0": control, "awx-gpu-0": gpu, "awx-gpu-1": gpu},
        "create makes the cluster with the survey's image, sizes and disks (got %s)" % made,
    )
    rc, out, _ = check.job("capvco - delete machine", dict(WHERE, machine="awx-gpu-1", force="true"))
    check.expect(rc == 0 and platform.vms("awx") == ["awx-cp-0", "awx-gpu-0"], "a forced delete of a machine")
    schedule = "capvco - orphans check (%s)" % LOCATION
    rc, out, fired = check.job("capvco - orphans check", schedule=schedule)
    check.expect(
        rc != 0 and fired == ["capvco - vGPU orphans"], "the scheduled orphan check fails on the orphan and notifies"
    )
    rc, out, _ = check.job("capvco - delete cluster", dict(WHERE, confirm_cluster_name="awx-gpu"))
    check.expect(
        rc != 0 and "Nothing was deleted" in out and platform.vms("awx") == ["awx-cp-0", "awx-gpu-0"],
        "delete refuses a confirmation that is not the cluster's name",
    )
    rc, out, _ = check.job("capvco - delete cluster", dict(WHERE, confirm_cluster_name="awx"))
    check.expect(
        rc == 0 and platform.vms("awx") == [] and not [n for n in platform.reservations() if ".awx." in n],
        "delete takes the cluster and its vGPUs",
    )
    rc, out, fired = check.job("capvco - orphans check", schedule=schedule)
    check.expect(rc == 0 and fired == [], "the scheduled orphan check passes again, quietly")


def main(argv: list[str] | None = None) -> int:
    args, bindir, tools = arguments(__doc__, argv, ("--collections", "a collections path that holds awx.awx"))
    playbook = str(bindir / "ansible-playbook")
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
        emu, url = start(
            [str(tools / "whitesky-emulator"), "--port", "0", "--state-dir", str(work / "emu")],
            work / "emulator.out",
        )
        awx = AwxFake().start()
        check = Check(awx, bindir, work, base)
        try:
            # ansible-playbook on localhost, with the consumer venv's interpreter
            local = [
                playbook,
                "-i",
                "localhost,",
                "-c",
                "local",
                "-e",
                "ansible_python_interpreter=%s" % (bindir / "python"),
            ]
            register = subprocess.run(
                local
                + [str(ROOT / "awx" / "register.yml")]
                + [
                    "-e",
                    json.dumps(
                        {
                            "awx_api_url": url,
                            "awx_customer_id": CUSTOMER,
                            "awx_api_token": API_TOKEN,
                            "awx_scm_url": "https://git.example/capvco.git",
                            "awx_locations": LOCATION,
                            "awx_notification_url": "https://alerts.example/capvco",
                        }
                    ),
                ],
                capture_output=True,
                text=True,
                env=dict(base, CONTROLLER_HOST=awx.url, CONTROLLER_OAUTH_TOKEN=TOKEN),
                timeout=600,
            )
            print(register.stdout + register.stderr)
            check.expect(
                register.returncode == 0, "awx/register.yml registers everything (exit %d)" % register.returncode
            )
            if register.returncode == 0:
                stored(check, url)
                (work / "job.yml").write_text(PLAY)
                job = subprocess.run(
                    [*local, str(work / "job.yml")],
                    capture_output=True,
                    text=True,
                    env=dict(
                        base,
                        **render_injectors(awx.objects["credential_types"][0], awx.objects["credentials"][0]["inputs"]),
                    ),
                    timeout=600,
                )
                print(job.stdout + job.stderr)
                check.expect(job.returncode == 0, "a job with the injected environment reads the platform")
                jobs(check, Platform(url))
        finally:
            awx.stop()
            emu.terminate()
            emu.wait(timeout=30)
    version = subprocess.run([playbook, "--version"], capture_output=True, text=True).stdout.split("\n", 1)[0]
    problems = check.problems
    print(
        "check_awx: %s: %s"
        % (
            version,
            "; ".join(problems)
            if problems
            else "AWX injects what the modules read, and its templates do what they say",
        )
    )
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
