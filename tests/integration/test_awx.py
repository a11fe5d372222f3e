"""AWX: the execution environment builds its context, the registration playbook is sound, and every survey
asks only for variables its playbook reads."""

from __future__ import annotations

import glob
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig

import yaml

from helpers import COLLECTIONS, CUSTOMER, ROOT, build_collection, read_text

BIN = os.path.dirname(sys.executable)
ENV = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=COLLECTIONS, ANSIBLE_NOCOLOR="1")


def test_ansible_builder_create(tmp_path):
    awx = tmp_path / "awx"
    shutil.copytree(os.path.join(ROOT, "awx"), awx)
    build_collection(awx)
    ctx = tmp_path / "context"
    # the file name is fixed here: by default it depends on whether podman is installed
    proc = subprocess.run(
        [
            os.path.join(BIN, "ansible-builder"),
            "create",
            "-f",
            str(awx / "execution-environment.yml"),
            "-c",
            str(ctx),
            "--output-filename",
            "Containerfile",
        ],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    containerfile = (ctx / "Containerfile").read_text()
    assert "ansible-galaxy" in containerfile and "COPY _build/collections/ /build/collections/" in containerfile
    assert glob.glob(str(ctx / "_build" / "collections" / "whitesky-capvco-*.tar.gz"))
    reqs = yaml.safe_load((ctx / "_build" / "requirements.yml").read_text())
    assert (
        reqs["collections"][0]["name"]
        == "/build/collections/whitesky-capvco-%s.tar.gz"
        % yaml.safe_load(read_text(os.path.join(ROOT, "galaxy.yml")))["version"]
    )


def test_the_execution_environment_takes_the_requirements_from_the_collection(tmp_path):
    """The EE repeats none of the collection's requirements: ansible-builder's introspection of the installed
    artifact finds them in its requirements.txt and bindep.txt, the one place each is written."""
    ee = yaml.safe_load(read_text(os.path.join(ROOT, "awx", "execution-environment.yml")))
    assert set(ee["dependencies"]) == {"galaxy", "ansible_core", "ansible_runner"}, ee["dependencies"]
    dist = tmp_path / "dist"
    build_collection(dist)
    (tarball,) = glob.glob(str(dist / "whitesky-capvco-*.tar.gz"))
    coll = tmp_path / "collections"
    galaxy = [os.path.join(BIN, "ansible-galaxy"), "collection", "install", "--force", "--no-deps", "-p", str(coll)]
    subprocess.run([*galaxy, tarball], check=True, capture_output=True, env=ENV)
    proc = subprocess.run(
        [os.path.join(BIN, "ansible-builder"), "introspect", "--sanitize", str(coll)],
        capture_output=True,
        text=True,
        check=True,
    )
    found = yaml.safe_load(proc.stdout)
    wanted = [
        line for line in read_text(os.path.join(ROOT, "requirements.txt")).splitlines() if line and line[0] != "#"
    ]
    assert sorted(r.split("#")[0].strip() for r in found["python"]) == sorted(wanted), found
    assert [r.split("#")[0].strip() for r in found["system"]] == ["python3 [platform:dpkg platform:rpm]"], found


def test_awx_stores_the_credential_type_and_its_injectors_give_a_job_the_connection():
    """tests/consumers/check_awx.py with this venv's ansible-core (``make consumers`` runs it on the oldest and the
    newest): awx/register.yml into a fake AWX, the injectors rendered by AWX's rules, a job against the emulator."""
    purelib = sysconfig.get_paths()["purelib"]
    proc = subprocess.run(
        [sys.executable, os.path.join(ROOT, "tests", "consumers", "check_awx.py"), "--ansible-bin", BIN]
        + ["--collections", purelib],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert '"WHITESKY_API_URL": "{{ api_url }}"' in proc.stdout


def test_register_playbook_syntax():
    proc = subprocess.run(
        [os.path.join(BIN, "ansible-playbook"), "--syntax-check", os.path.join(ROOT, "awx", "register.yml")],
        env=ENV,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def referenced(paths):
    text = "".join(read_text(p) for p in paths)
    return set(re.findall(r"\b([a-z_][a-z0-9_]*)\b", text))


def test_surveys_ask_only_what_the_playbooks_read():
    with open(os.path.join(ROOT, "awx", "job_templates.yml"), encoding="utf-8") as fh:
        templates = yaml.safe_load(fh)["awx_job_templates"]
    assert {t["name"] for t in templates} == {
        "capvco - create cluster",
        "capvco - delete machine",
        "capvco - delete cluster",
        "capvco - orphans check",
        "capvco - reclaim orphans",
    }
    spec_tasks = os.path.join(ROOT, "playbooks", "tasks", "spec_from_survey.yml")
    for tmpl in templates:
        playbook = os.path.join(ROOT, tmpl["playbook"])
        assert os.path.exists(playbook), tmpl["playbook"]
        text = read_text(playbook)
        files = [playbook] + ([spec_tasks] if "spec_from_survey.yml" in text else [])
        names = referenced(files)
        for question in tmpl["survey"]:
            assert question["variable"] in names, "%s: %s is not read by %s" % (
                tmpl["name"],
                question["variable"],
                tmpl["playbook"],
            )
            assert question["type"] in ("text", "integer", "multiplechoice", "password", "textarea")
        for var in tmpl.get("extra_vars", {}):
            assert var in names


def test_credential_type_injects_what_the_modules_read():
    with open(os.path.join(ROOT, "awx", "credential_type.yml"), encoding="utf-8") as fh:
        ctype = yaml.safe_load(fh)
    assert set(ctype["injectors"]["env"]) == {"WHITESKY_API_URL", "WHITESKY_API_TOKEN", "WHITESKY_CUSTOMER_ID"}
    fragment = read_text(os.path.join(ROOT, "plugins", "doc_fragments", "connection.py"))
    for env in ctype["injectors"]["env"]:
        assert env in fragment
    secret = [f for f in ctype["inputs"]["fields"] if f.get("secret")]
    assert [f["id"] for f in secret] == ["api_token"]


def test_templates_that_change_a_cluster_run_one_job_at_a_time():
    """AWX runs a template's jobs one at a time only with ``allow_simultaneous: false``; every template whose playbook
    changes something says so (the cluster's lease orders two different templates, docs/awx.md)."""
    templates = yaml.safe_load(read_text(os.path.join(ROOT, "awx", "job_templates.yml")))["awx_job_templates"]
    for t in templates:
        changes = t["playbook"] != "playbooks/gpu_orphans.yml" or (t.get("extra_vars") or {}).get("reclaim")
        assert t["allow_simultaneous"] is (not changes), t["name"]
    register = yaml.safe_load(read_text(os.path.join(ROOT, "awx", "register.yml")))
    task = [t for t in register[0]["tasks"] if "awx.awx.job_template" in t][0]
    assert task["awx.awx.job_template"]["allow_simultaneous"] == "{{ item.allow_simultaneous }}"


def test_the_vm_inventory_source_is_registered_and_its_update_lists_the_vms_with_the_credential(emulator, monkeypatch):
    """awx/register.yml's inventory of the VMs and its source (awx/inventory_source.yml) into the fake AWX, with the
    credential they name; then the update AWX runs for that source: ``ansible-inventory`` of the source's file in
    the project, with the environment AWX's injectors give the credential, and nothing else of whitesky."""
    import awxfake

    monkeypatch.setattr(awxfake, "KINDS", (*awxfake.KINDS, "inventory_sources"))  # what the registration adds
    awx = awxfake.AwxFake()
    project = awx.add("projects", {"name": "whitesky.capvco", "organization": 1})
    ee = awx.add("execution_environments", {"name": "whitesky.capvco"})
    with emulator.client() as client:
        client.create_vm("cs-demo", name="awx-vm-0", description="made by hand", vcpus=1, memory=512)
    base = {k: v for k, v in os.environ.items() if not k.startswith(("ANSIBLE_", "WHITESKY_", "CONTROLLER_"))}
    base.update(ANSIBLE_COLLECTIONS_PATH=COLLECTIONS, ANSIBLE_NOCOLOR="1")
    awx.start()
    try:
        register = subprocess.run(
            [
                os.path.join(BIN, "ansible-playbook"),
                "-i",
                "localhost,",
                "-c",
                "local",
                os.path.join(ROOT, "awx", "register.yml"),
            ]
            + ["--tags", "credential_type,credential,inventory_source"]
            + ["-e", "ansible_python_interpreter=%s" % sys.executable]
            + [
                "-e",
                json.dumps({"awx_api_url": emulator.url, "awx_customer_id": CUSTOMER, "awx_api_token": emulator.token}),
            ],
            capture_output=True,
            text=True,
            env=dict(base, CONTROLLER_HOST=awx.url, CONTROLLER_OAUTH_TOKEN=awxfake.TOKEN),
            timeout=600,
        )
        assert register.returncode == 0, register.stdout[-4000:] + register.stderr[-2000:]
    finally:
        awx.stop()
    wanted = yaml.safe_load(read_text(os.path.join(ROOT, "awx", "inventory_source.yml")))
    (ctype,) = awx.objects["credential_types"]
    (cred,) = awx.objects["credentials"]
    (inventory,) = [i for i in awx.objects["inventories"] if i["name"] == wanted["awx_vm_inventory"]["name"]]
    (source,) = awx.objects["inventory_sources"]
    assert {k: source[k] for k in ("inventory", "credential", "source_project", "execution_environment")} == {
        "inventory": inventory["id"],
        "credential": cred["id"],
        "source_project": project["id"],
        "execution_environment": ee["id"],
    }
    for key, value in wanted["awx_vm_inventory_source"].items():
        assert source[key] == value, key
    path = os.path.join(ROOT, source["source_path"])
    assert yaml.safe_load(read_text(path))["plugin"] == "whitesky.capvco.vms"

    # the update: the project's file, the credential's environment
    env = awxfake.render_injectors(ctype, cred.get("inputs") or {})
    update = subprocess.run(
        [os.path.join(BIN, "ansible-inventory"), "-i", path, "--list"],
        capture_output=True,
        text=True,
        env=dict(base, ANSIBLE_INVENTORY_UNPARSED_FAILED="1", **env),
        timeout=300,
    )
    assert update.returncode == 0, update.stderr[-4000:]
    listed = json.loads(update.stdout)
    assert "awx-vm-0" in listed["unowned"]["hosts"]
    enabled = listed["_meta"]["hostvars"]["awx-vm-0"][source["enabled_var"]]
    assert enabled in (source["enabled_value"], {"__ansible_unsafe": source["enabled_value"]}), (
        "a running VM is enabled"
    )
    assert emulator.token not in update.stdout + update.stderr
