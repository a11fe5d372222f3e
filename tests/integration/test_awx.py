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

import pytest
import yaml

from ansible_collections.whitesky.capvco.plugins.module_utils.platform.connection import OPTIONS
from ansible_collections.whitesky.capvco.plugins.module_utils.spec import clusterspec, schema

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


def templates():
    return {
        t["name"]: t
        for t in yaml.safe_load(read_text(os.path.join(ROOT, "awx", "job_templates.yml")))["awx_job_templates"]
    }


def test_surveys_ask_only_what_the_playbooks_read():
    with open(os.path.join(ROOT, "awx", "job_templates.yml"), encoding="utf-8") as fh:
        templates = yaml.safe_load(fh)["awx_job_templates"]
    assert {t["name"] for t in templates} == {
        "capvco - create cluster",
        "capvco - plan cluster",
        "capvco - scale pool",
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
            assert question["type"] in ("text", "integer", "float", "multiplechoice", "password", "textarea")
        for var in tmpl.get("extra_vars", {}):
            assert var in names


def credential_type():
    return yaml.safe_load(read_text(os.path.join(ROOT, "awx", "credential_type.yml")))


def test_credential_type_injects_what_the_modules_read():
    """Each field of the credential type is the connection option of its name, injected as the environment variable
    that option falls back to (the connection table, ``connection.OPTIONS``); an unset optional field renders the
    option's own default; only the token is secret."""
    from fakes import awx as awxfake

    ctype = credential_type()
    fields = {f["id"]: f for f in ctype["inputs"]["fields"]}
    table = {option.name: option for option in OPTIONS}
    assert set(fields) == set(table), "every connection option, and only those, is a field"
    env = ctype["injectors"]["env"]
    for name, option in table.items():
        if option.env is not None:
            assert env[option.env] == "{{ %s }}" % name or env[option.env].startswith("{{ %s |" % name), name
    assert set(env) == {o.env for o in OPTIONS if o.env}
    assert [f for f in fields if fields[f].get("secret")] == ["api_token"]
    assert set(ctype["inputs"]["required"]) == {o.name for o in OPTIONS if o.default is None}
    given = {"api_url": "https://p.example/api/1", "api_token": "t0ken", "customer_id": "acme"}
    rendered = awxfake.render_injectors(ctype, given)
    assert rendered["WHITESKY_VALIDATE_CERTS"] == str(table["validate_certs"].default).lower()
    assert float(rendered["WHITESKY_TIMEOUT"]) == table["timeout"].default
    rendered = awxfake.render_injectors(ctype, dict(given, validate_certs="false", timeout="5"))
    assert (rendered["WHITESKY_VALIDATE_CERTS"], rendered["WHITESKY_TIMEOUT"]) == ("false", "5")


def test_validate_certs_is_no_awx_boolean_because_awx_gives_an_unset_one_false():
    """AWX gives a job False for a boolean field a credential leaves unset (``inject_credential``): as a boolean,
    validate_certs would turn certificate checks off for every credential made without it.  As a string with the
    choices true and false, unset renders the connection's default."""
    from fakes import awx as awxfake

    boolean = {
        "inputs": {"fields": [{"id": "validate_certs", "label": "v", "type": "boolean", "default": True}]},
        "injectors": {"env": {"WHITESKY_VALIDATE_CERTS": "{{ validate_certs }}"}},
    }
    assert awxfake.render_injectors(boolean, {}) == {"WHITESKY_VALIDATE_CERTS": "False"}
    field = {f["id"]: f for f in credential_type()["inputs"]["fields"]}["validate_certs"]
    assert field["type"] == "string" and field["choices"] == ["true", "false"] and field["default"] == "true"
    given = {"api_url": "https://p.example/api/1", "api_token": "t0ken", "customer_id": "acme"}
    assert (
        awxfake.check_credential_inputs(credential_type(), dict(given, validate_certs=""))["validate_certs"] == "true"
    )
    with pytest.raises(awxfake.Refused):
        awxfake.check_credential_inputs(credential_type(), dict(given, validate_certs="maybe"))


def test_the_modules_read_the_validate_certs_the_credential_injects():
    table = {option.name: option for option in OPTIONS}
    assert table["validate_certs"].env == "WHITESKY_VALIDATE_CERTS"
    assert "WHITESKY_VALIDATE_CERTS" in credential_type()["injectors"]["env"]


def test_templates_that_change_a_cluster_run_one_job_at_a_time():
    """AWX runs a template's jobs one at a time only with ``allow_simultaneous: false``; every template whose playbook
    changes something says so (the cluster's lease orders two different templates, docs/awx.md)."""
    for t in templates().values():
        changes = t["playbook"] != "playbooks/gpu_orphans.yml" or (t.get("extra_vars") or {}).get("reclaim")
        changes = changes and t.get("job_type", "run") != "check"
        assert t["allow_simultaneous"] is (not changes), t["name"]
    register = yaml.safe_load(read_text(os.path.join(ROOT, "awx", "register.yml")))
    task = [t for t in register[0]["tasks"] if "awx.awx.job_template" in t][0]
    assert task["awx.awx.job_template"]["allow_simultaneous"] == "{{ item.allow_simultaneous }}"


def test_the_vm_inventory_source_is_registered_and_its_update_lists_the_vms_with_the_credential(emulator):
    """awx/register.yml's inventory of the VMs and its source (awx/inventory_source.yml) into the fake AWX, with the
    credential they name; then the update AWX runs for that source: ``ansible-inventory`` of the source's file in
    the project, with the environment AWX's injectors give the credential, and nothing else of whitesky."""
    from fakes import awx as awxfake

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


def installed(collection):
    """The version of a collection of the ansible package the tests run with."""
    namespace, name = collection.split(".")
    path = os.path.join(sysconfig.get_paths()["purelib"], "ansible_collections", namespace, name, "MANIFEST.json")
    return json.loads(read_text(path))["collection_info"]["version"]


def test_the_execution_environment_is_pinned_to_what_the_tests_run():
    """Two builds of one commit give one image: the base image by a release tag (never ``latest``: AWX's own EE of
    the awx.awx release the fake AWX speaks), ansible-core and ansible-runner to a release line, and each collection
    to the one version the tests run (kubernetes.core also within galaxy.yml's range)."""
    from ansible.module_utils.compat.version import LooseVersion
    from ansible.utils.version import SemanticVersion

    ee = yaml.safe_load(read_text(os.path.join(ROOT, "awx", "execution-environment.yml")))
    image = ee["images"]["base_image"]["name"]
    repo, _, tag = image.rpartition(":")
    assert repo == "quay.io/ansible/awx-ee" and tag == installed("awx.awx"), image
    core = ee["dependencies"]["ansible_core"]["package_pip"]
    low, high = re.fullmatch(r"ansible-core>=([0-9.]+),<([0-9.]+)", core).groups()
    import ansible.release

    assert LooseVersion(low) <= LooseVersion(ansible.release.__version__) < LooseVersion(high), core
    assert re.fullmatch(r"ansible-runner==[0-9]+\.[0-9]+\.[0-9]+", ee["dependencies"]["ansible_runner"]["package_pip"])
    wanted = yaml.safe_load(read_text(os.path.join(ROOT, "awx", "requirements.yml")))["collections"]
    pinned = {c["name"]: c.get("version") for c in wanted if c.get("type") != "file"}
    assert pinned == {"kubernetes.core": installed("kubernetes.core"), "awx.awx": installed("awx.awx")}, pinned
    floor = yaml.safe_load(read_text(os.path.join(ROOT, "galaxy.yml")))["dependencies"]["kubernetes.core"]
    assert SemanticVersion(pinned["kubernetes.core"]) >= SemanticVersion(floor.lstrip(">=")), floor


#: Each survey variable that becomes a field of the cluster spec (playbooks/tasks/spec_from_survey.yml), by path.
SPEC_FIELDS = {
    "cluster_name": "cluster.name",
    "confirm_cluster_name": "cluster.name",
    "cluster_location": "cluster.location",
    "cluster_cloudspace": "cluster.cloudspace",
    "image_id": "control_plane.image",
    "cp_replicas": "control_plane.replicas",
    "cp_vcpus": "control_plane.vcpus",
    "cp_memory": "control_plane.memory",
    "cp_disk": "control_plane.diskSize",
    "gpu_replicas": "pools.replicas",
    "gpu_vcpus": "pools.vcpus",
    "gpu_memory": "pools.memory",
    "gpu_disk": "pools.diskSize",
    "gpu_type": "pools.gpu.type",
    "gpu_count": "pools.gpu.count",
    "gpu_driver_version": "pools.gpu.driverVersion",
    # the scale template's (issue 46): the pool by name, its count
    "pool_name": "pools.name",
    "replicas": "pools.replicas",
}


def spec_field(path):
    field = clusterspec.SPEC
    for part in path.split("."):
        field = field.fields[part]
        field = field.items if field.kind == "list" else field
    return field


def test_every_survey_question_of_the_spec_has_its_fields_type_bounds_and_default():
    """The create (and plan) survey asks for the image, each pool's and the control plane's size and disk, and the
    budget; each question that becomes a spec field has the field's type and bounds (or a higher minimum), and a
    default the field takes (the control plane's and the GPU count's are the spec's own); the budget is a number of
    at least 0, optional (no budget)."""
    found = {}
    for template in templates().values():
        for q in template["survey"]:
            if q["variable"] in SPEC_FIELDS:
                found.setdefault(q["variable"], []).append(q)
    create = {q["variable"]: q for q in templates()["capvco - create cluster"]["survey"]}
    scale_only = {"confirm_cluster_name", "pool_name", "replicas"}
    assert set(SPEC_FIELDS) - scale_only <= set(create), set(SPEC_FIELDS) - set(create)
    assert set(found) == set(SPEC_FIELDS)
    for var, questions in found.items():
        field = spec_field(SPEC_FIELDS[var])
        for q in questions:
            if field.kind == "int":  # within the field's bounds (a survey may ask for more: no image 0)
                assert q["type"] == "integer", q
                assert q["min"] >= field.minimum and q.get("max") == field.maximum, q
            else:
                assert q["type"] == "text", q
                assert q.get("max") == field.max_length and q.get("min", 0) == (field.min_length or 0), q
            if "default" in q:
                schema.parse(q["default"], field, var, errors := schema.Errors())
                assert errors == [], errors
                if SPEC_FIELDS[var].startswith("control_plane.") or var == "gpu_count":  # the spec's own defaults
                    assert q["default"] == field.default, (var, q["default"], field.default)
            assert q["required"] or not field.required, "a field the spec requires is a required question: %s" % q
    assert create["image_id"]["required"] is True, "a machine needs an image"
    budget = create["max_hourly_cost"]
    assert (budget["type"], budget["required"], budget["min"], "default" in budget) == ("float", False, 0, False)


def test_the_plan_template_runs_the_create_playbook_in_check_mode_with_diff():
    """ "capvco - plan cluster": the create playbook with the create survey, as a check job in diff mode (AWX runs it
    with --check --diff: the plan and its price, nothing created), and register.yml passes both through."""
    plan, create = templates()["capvco - plan cluster"], templates()["capvco - create cluster"]
    assert (plan["playbook"], plan["job_type"], plan["diff_mode"]) == (create["playbook"], "check", True)
    assert plan["survey"] == create["survey"] and plan["allow_simultaneous"] is True
    assert create.get("job_type", "run") == "run" and not create.get("diff_mode", False)
    register = yaml.safe_load(read_text(os.path.join(ROOT, "awx", "register.yml")))
    (task,) = [t for t in register[0]["tasks"] if "awx.awx.job_template" in t]
    args = task["awx.awx.job_template"]
    assert args["job_type"] == "{{ item.job_type | default('run') }}"
    assert args["diff_mode"] == "{{ item.diff_mode | default(false) }}"


def test_delete_cluster_asks_for_the_name_again_and_the_playbook_checks_it_before_deleting():
    """The delete template asks for the cluster's name again (required) and sets capvco_confirm_delete; the playbook
    checks the answer against the spec's name before its first task that deletes (the cluster module's)."""
    delete = templates()["capvco - delete cluster"]
    (question,) = [q for q in delete["survey"] if q["variable"] == "confirm_cluster_name"]
    assert question["required"] is True and question["type"] == "text"
    assert delete["extra_vars"] == {"capvco_confirm_delete": True}
    (play,) = yaml.safe_load(read_text(os.path.join(ROOT, "playbooks", "cluster_delete.yml")))
    names = [t["name"] for t in play["tasks"]]
    confirm = names.index("Refuse to delete unless the confirmation is the cluster's name")
    module = [i for i, t in enumerate(play["tasks"]) if "whitesky.capvco.cluster" in t][0]
    assert confirm < module
    check = play["tasks"][confirm]
    assert check["when"] == "capvco_confirm_delete | default(false) | bool or confirm_cluster_name is defined"
    assert "capvco_spec.cluster.name" in " ".join(check["ansible.builtin.assert"]["that"])


def test_the_fake_awx_refuses_what_awx_refuses():
    """The fake applies AWX's rules (awx 24), so a registration it takes AWX takes: each case here is one AWX
    answers 400."""
    from fakes import awx as awxfake

    def refused(call, *args):
        with pytest.raises(awxfake.Refused) as err:
            call(*args)
        return json.dumps(err.value.body)

    q = {"variable": "x", "question_name": "X", "required": True}
    spec = {"name": "n", "description": "d"}
    for question, said in (
        (dict(q, type="multiplechoice", choices=["a", "b"], default="c"), "Default choice must be answered"),
        (dict(q, type="float", min=0.5), "min limit in survey question 0 expected to be integer"),
        (dict(q, type="integer", default="2"), "expected to be integer"),
        (dict(q, type="number"), "is not one of"),
        (dict(q, type="multiplechoice"), "must specify choices"),
    ):
        assert said in refused(awxfake.check_survey_spec, dict(spec, spec=[question])), question
    assert "duplicated" in refused(awxfake.check_survey_spec, dict(spec, spec=[dict(q, type="text")] * 2))
    boolean_choices = {"inputs": {"fields": [{"id": "v", "label": "V", "type": "boolean", "choices": ["a"]}]}}
    assert "choices not allowed for boolean" in refused(awxfake.check_credential_type, boolean_choices)
    undefined = {"inputs": {"fields": [{"id": "v", "label": "V"}]}, "injectors": {"env": {"X": "{{ w }}"}}}
    assert "undefined" in refused(awxfake.check_credential_type, undefined)
    ansible_env = {"inputs": {"fields": []}, "injectors": {"env": {"ANSIBLE_X": "1"}}}
    assert "may affect Ansible configuration" in refused(awxfake.check_credential_type, ansible_env)
    assert "'url'" in refused(
        awxfake.check_notification, {"notification_type": "webhook", "notification_configuration": {"headers": {}}}
    )
    bad_method = {
        "notification_type": "webhook",
        "notification_configuration": {"url": "u", "headers": {}, "http_method": "GET"},
    }
    assert "POST" in refused(awxfake.check_notification, bad_method)
    assert "INTERVAL required" in refused(awxfake.check_rrule, "DTSTART:20260101T000000Z RRULE:FREQ=HOURLY")
    assert "naive" in refused(awxfake.check_rrule, "DTSTART:20260101T000000 RRULE:FREQ=HOURLY;INTERVAL=1")
    awxfake.check_rrule(
        yaml.safe_load(read_text(os.path.join(ROOT, "awx", "register.yml")))[0]["vars"]["awx_orphan_check_rrule"]
    )


def test_a_launch_takes_awx_extra_vars_in_awx_order_and_refuses_what_awx_refuses():
    """AWX's launch: the template's extra vars, then each survey default that passes its question, then the
    answers; an answer outside a choice, a missing required one or a variable the survey does not ask is refused."""
    from fakes import awx as awxfake

    template = {
        "extra_vars": json.dumps({"reclaim": True, "keep": 1}),
        "survey_enabled": True,
        "survey_spec": {
            "spec": [
                {"variable": "location", "type": "multiplechoice", "choices": ["a", "b"], "required": True},
                {"variable": "grace_period", "type": "integer", "required": False, "default": 900, "min": 0},
                {"variable": "force", "type": "multiplechoice", "choices": ["false", "true"], "required": True},
                {"variable": "cluster", "type": "text", "required": False, "min": 1, "default": ""},
            ]
        },
    }
    accepted, _, errors = awxfake.accept_or_ignore(template, {"location": "a", "keep": 1, "force": "true"})
    assert errors == {} and awxfake.job_extra_vars(template, accepted) == {
        "reclaim": True,
        "keep": 1,
        "grace_period": 900,
        "location": "a",
        "force": "true",
    }, "the default of a text question that fails its own minimum is not given"
    for answers, said in (
        ({"location": "c", "force": "true"}, "expected to be one of ['a', 'b']"),
        ({"location": "a"}, "'force' value missing"),
        ({"location": "a", "force": "true", "grace_period": "900"}, "expected to be an integer"),
        ({"location": "a", "force": "true", "other": 1}, "Variables other are not allowed on launch"),
    ):
        _, _, errors = awxfake.accept_or_ignore(template, answers)
        assert said in json.dumps(errors), (answers, errors)


def test_registering_without_locations_or_a_notification_stops_before_anything_is_registered():
    from fakes import awx as awxfake

    awx = awxfake.AwxFake().start()
    base = {k: v for k, v in os.environ.items() if not k.startswith(("ANSIBLE_", "WHITESKY_", "CONTROLLER_"))}
    try:
        proc = subprocess.run(
            [os.path.join(BIN, "ansible-playbook"), "-i", "localhost,", "-c", "local"]
            + [os.path.join(ROOT, "awx", "register.yml"), "-e", "ansible_python_interpreter=%s" % sys.executable],
            capture_output=True,
            text=True,
            env=dict(base, ANSIBLE_COLLECTIONS_PATH=COLLECTIONS, ANSIBLE_NOCOLOR="1", CONTROLLER_HOST=awx.url)
            | {"CONTROLLER_OAUTH_TOKEN": awxfake.TOKEN},
            timeout=300,
        )
    finally:
        awx.stop()
    assert proc.returncode != 0, proc.stdout[-3000:]
    assert "Nothing was registered. Give awx_locations" in proc.stdout and "awx_notification_url" in proc.stdout
    assert [r for r in awx.requests if r[0] != "GET"] == [], "nothing was sent to AWX"
