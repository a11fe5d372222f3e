"""The manifests both roles render, read by their real consumers: the Kubernetes schemas and a policy scanner.

The roles render with real ansible-playbook runs (``sriov_agent_render_dir``, ``capvco_controller_render_dir``;
the controller once watching every namespace and once watching two). Beside them, clusterctl's provider files
(``hack/clusterctl.py``, as ``make build`` writes them) as clusterctl turns them into objects with the documented
defaults and sample values (tests/providerfiles.py): the components ``clusterctl init`` applies and the cluster
templates ``clusterctl generate cluster`` prints; and the docs' samples of the cluster autoscaler and of a
MachineHealthCheck. Then:

- ``kubernetes-validate --strict`` for a current Kubernetes version checks every document: the core kinds and the
  controller's CustomResourceDefinitions (as apiextensions.k8s.io/v1 objects) against the Kubernetes schemas; the
  custom kinds against their CRDs' schemas: Multus's NetworkAttachmentDefinition (whose CRD is not ours) against the
  schema of Multus's CRD here, Cluster API's kinds against its v1beta2 CRDs (lab/capvco_lab/data/cluster-api/) and
  this provider's against roles/capvco_controller/files/crds.yaml (lab/capvco_lab/crdschema.py).
- checkov's Kubernetes checks scan them. Each finding is fixed in the templates or waived beside its object with a
  ``checkov.io/skipN: CKV_K8S_xx=reason`` annotation. The test fails on a finding with no waiver, on a waiver with no
  reason, on a waiver for something checkov no longer finds (a scan of the manifests with the waivers taken out
  must find exactly what is waived), and on a waiver that is not in WAIVED below (a new waiver is a decision that
  shows in review).

checkov runs from its own virtual environment (.build/policy-venv, from policy-requirements.txt beside this file),
built here once when missing; a lock keeps two xdist workers from building it at once.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap

import jsonschema
import kubernetes_validate.utils
import pytest
import yaml

from capvco_lab import crdschema

import providerfiles
from helpers import ROOT, SRIOV_VARS, run_playbook

#: A current Kubernetes release that kubernetes-validate knows (the newest it ships, here).
K8S_VERSION = "1.37.0"
REQUIREMENTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "policy-requirements.txt")
VENV = os.path.join(ROOT, ".build", "policy-venv")
CHECKOV = os.path.join(VENV, "bin", "checkov")
STAMP = os.path.join(VENV, ".policy-requirements.sha256")
SKIP_KEY = re.compile(r"^(checkov|bridgecrew)\.io/skip\d*$")
WAIVER = re.compile(r"^(CKV2?_K8S_\d+)=([^=]+)$")

#: What is waived, by object (kind, name; "Pod" is checkov's view of a workload's pod template, and its waiver sits
#: on the workload), in every rendering. The reasons are in the templates, beside each object.
WAIVED = {
    ("DaemonSet", "capvco-sriov-agent"): {
        "CKV_K8S_15",  # imagePullPolicy is a setting
        "CKV_K8S_19",  # hostNetwork
        "CKV_K8S_23",  # root
        "CKV_K8S_25",  # NET_ADMIN, SYS_ADMIN added (after drop ALL)
        "CKV_K8S_39",  # SYS_ADMIN (setns into a pod's netns)
        "CKV_K8S_40",  # root, so no high uid
        "CKV_K8S_43",  # the image is a setting (takes a digest)
    },
    ("Pod", "capvco-sriov-agent"): {"CKV2_K8S_6"},  # hostNetwork: NetworkPolicy does not apply
    ("Deployment", "capvco-controller"): {
        "CKV_K8S_15",  # imagePullPolicy is a setting
        "CKV_K8S_38",  # the controller is an API client
        "CKV_K8S_43",  # the image is a setting (takes a digest)
    },
    ("Pod", "capvco-controller"): {"CKV2_K8S_6"},  # serves nothing to other pods; egress has no fixed address
    ("ClusterRoleBinding", "capvco-controller-secret-reader"): {"CKV2_K8S_5"},  # Secrets: get alone, by name
    ("RoleBinding", "capvco-controller-secret-reader"): {"CKV2_K8S_5"},  # the same, in each watched namespace
    # docs/samples/capi-autoscaler.yaml: the sample cluster's namespace is default; an API client; a release by tag
    ("Deployment", "demo-cluster-autoscaler"): {"CKV_K8S_21", "CKV_K8S_38", "CKV_K8S_43"},
    ("Pod", "demo-cluster-autoscaler"): {"CKV2_K8S_6"},  # serves nothing to other pods; egress has no fixed address
    ("ServiceAccount", "demo-cluster-autoscaler"): {"CKV_K8S_21"},
    ("Role", "demo-cluster-autoscaler"): {"CKV_K8S_21"},
    ("RoleBinding", "demo-cluster-autoscaler"): {"CKV_K8S_21"},
}

#: Custom kinds the Kubernetes schemas do not know, with the schema of their CRD. NetworkAttachmentDefinition:
#: Multus's CRD (k8s.cni.cncf.io/v1; spec.config is the CNI configuration, a JSON string).
DNS_LABEL = "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
DNS_SUBDOMAIN = "^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
CUSTOM = {
    ("k8s.cni.cncf.io/v1", "NetworkAttachmentDefinition"): {
        "type": "object",
        "required": ["apiVersion", "kind", "metadata", "spec"],
        "additionalProperties": False,
        "properties": {
            "apiVersion": {"const": "k8s.cni.cncf.io/v1"},
            "kind": {"const": "NetworkAttachmentDefinition"},
            "metadata": {
                "type": "object",
                "required": ["name", "namespace"],
                "additionalProperties": False,
                "properties": {
                    "name": {"type": "string", "maxLength": 253, "pattern": DNS_SUBDOMAIN},
                    "namespace": {"type": "string", "maxLength": 63, "pattern": DNS_LABEL},
                },
            },
            "spec": {
                "type": "object",
                "additionalProperties": False,
                "properties": {"config": {"type": "string"}},
            },
        },
    },
}

PLAY = textwrap.dedent("""\
    - name: The SR-IOV add-on's manifests
      hosts: localhost
      gather_facts: false
      roles:
        - role: whitesky.capvco.sriov_agent
          vars:
            sriov_agent_render_dir: "{{ policy_dir }}/sriov"
    - name: The controller's manifests, watching every namespace
      hosts: localhost
      gather_facts: false
      roles:
        - role: whitesky.capvco.capvco_controller
          vars:
            capvco_controller_render_dir: "{{ policy_dir }}/controller"
    - name: The controller's manifests, watching two namespaces
      hosts: localhost
      gather_facts: false
      roles:
        - role: whitesky.capvco.capvco_controller
          vars:
            capvco_controller_render_dir: "{{ policy_dir }}/controller-watch-namespaces"
            capvco_controller_watch_namespaces: [team-a, team-b]
    """)
RENDERED = {
    "sriov-agent.yaml": "sriov/sriov-agent.yaml",
    "controller.yaml": "controller/capvco-controller.yaml",
    "controller-watch-namespaces.yaml": "controller-watch-namespaces/capvco-controller.yaml",
}
#: clusterctl's provider files, as objects: (the scanned file's name, the file of the provider repository)
CLUSTERCTL = {
    "clusterctl-components.yaml": "infrastructure-components.yaml",
    **{"clusterctl-%s.yaml" % (f or "default"): providerfiles.gen.template_name(f) for f in providerfiles.gen.FLAVORS},
}
#: The docs' samples scanned as they are.
SAMPLES = ("capi-autoscaler.yaml", "capi-machinehealthcheck.yaml")


def _requirements_digest():
    with open(REQUIREMENTS, "rb") as fh:
        return hashlib.sha256(fh.read() + sys.version.encode()).hexdigest()


def _build_venv():
    """.build/policy-venv from policy-requirements.txt, unless it is there for this file already (under a lock)."""
    os.makedirs(os.path.dirname(VENV), exist_ok=True)
    digest = _requirements_digest()
    with open(VENV + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # the other workers wait here, then find it built
        try:
            with open(STAMP, encoding="utf-8") as fh:
                if fh.read().strip() == digest and os.access(CHECKOV, os.X_OK):
                    return
        except OSError:
            pass
        shutil.rmtree(VENV, ignore_errors=True)
        steps = (
            [sys.executable, "-m", "venv", VENV],
            [os.path.join(VENV, "bin", "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
            + ["-r", REQUIREMENTS],
        )
        for step in steps:
            proc = subprocess.run(step, capture_output=True, text=True, timeout=900, check=False)
            if proc.returncode:
                shutil.rmtree(VENV, ignore_errors=True)
                pytest.fail(
                    "could not build the policy scanner's venv (%s): %s\n%s"
                    % (VENV, " ".join(step), (proc.stdout + proc.stderr)[-3000:])
                )
        with open(STAMP, "w", encoding="utf-8") as fh:
            fh.write(digest + "\n")


@pytest.fixture(scope="session")
def checkov():
    _build_venv()
    return CHECKOV


@pytest.fixture(scope="module")
def manifests(tmp_path_factory):
    """{name: path} of the manifests, rendered by the roles (one ansible-playbook run, three plays)."""
    top = tmp_path_factory.mktemp("policy")
    play = top / "play.yml"
    play.write_text(PLAY)
    variables = dict(
        SRIOV_VARS,
        sriov_agent_networks=[
            {"name": "sriov-ext", "network": "sriov-ext", "mtu": 1400, "routes": [{"dst": "203.0.113.0/24"}]},
            {"name": "ams", "network": 201, "namespace": "team-a"},
        ],
        capvco_controller_api_url="https://portal.example/api/1",
        capvco_controller_customer_id="capvco-demo",
        capvco_controller_api_token="controller-token-0123456789",
        capvco_controller_image="registry.example/capvco-controller:0.1.0",
        policy_dir=str(top / "rendered"),
    )
    rc, out, _ = run_playbook(str(play), extra_vars=variables)
    assert rc == 0, out[-3000:]
    scan = top / "scan"
    scan.mkdir()
    for name, rendered in RENDERED.items():
        shutil.copy(top / "rendered" / rendered, scan / name)
    folder = providerfiles.gen.write(str(top / "clusterctl"))
    for name, source in CLUSTERCTL.items():
        objs = (
            providerfiles.components(folder)
            if source == "infrastructure-components.yaml"
            else providerfiles.rendered(folder, source)
        )
        (scan / name).write_text(yaml.safe_dump_all(objs, sort_keys=False), encoding="utf-8")
    for name in SAMPLES:  # a sample that is a List is scanned as its objects, as `kubectl apply` applies them
        objs = list(crdschema.objects(os.path.join(ROOT, "docs", "samples", name)))
        (scan / name).write_text(yaml.safe_dump_all(objs, sort_keys=False), encoding="utf-8")
    return {name: scan / name for name in (*RENDERED, *CLUSTERCTL, *SAMPLES)}


def _docs(path):
    with open(path, encoding="utf-8") as fh:
        return [d for d in yaml.safe_load_all(fh) if d]


def test_kubernetes_validate_strict_knows_every_document(manifests):
    assert K8S_VERSION in kubernetes_validate.utils.all_versions()
    bindir = os.path.dirname(sys.executable)
    paths = [str(p) for p in manifests.values()]
    proc = subprocess.run(
        [os.path.join(bindir, "kubernetes-validate"), "--strict", "-k", K8S_VERSION, *paths],
        capture_output=True,
        text=True,
        check=False,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    crds = providerfiles.crd_schemas()
    passed, unknown = set(), set()
    for line in out.splitlines():
        m = re.match(r"^INFO (\S+) passed for resource (\S+)/(\S+) against version ", line)
        if m:
            passed.add((m.group(1), m.group(2), m.group(3)))
            continue
        m = re.match(r"^WARN (\S+) Couldn't find schema for kind (\S+) with api version (\S+) ", line)
        assert m and ((m.group(3), m.group(2)) in CUSTOM or (m.group(3), m.group(2)) in crds), line
        unknown.add((m.group(1), m.group(3), m.group(2)))
    core, custom = set(), set()
    for path in paths:
        for doc in _docs(path):
            key = (doc["apiVersion"], doc["kind"])
            if key in CUSTOM:
                custom.add((path, *key))
                jsonschema.validate(doc, CUSTOM[key])
                config = json.loads(doc["spec"]["config"])
                assert config["cniVersion"] == "1.0.0" and config["type"] == "capvco-sriov"
                assert config["name"] == doc["metadata"]["name"]
            elif key in crds:
                custom.add((path, *key))
                assert crdschema.check(crds, doc) == [], (path, doc["kind"], doc["metadata"]["name"])
            else:
                core.add((path, doc["kind"].lower(), doc["metadata"]["name"]))
    assert passed == core and unknown == custom
    kinds = {k for _path, k, _name in core}
    assert {"customresourcedefinition", "daemonset", "deployment", "rolebinding"} <= kinds  # CRDs as CRDs
    assert {k for _path, _v, k in custom} >= {"NetworkAttachmentDefinition", "Cluster", "MachineHealthCheck"}


def _scan(checkov, paths):
    proc = subprocess.run(
        [checkov, "--framework", "kubernetes", "-o", "json", "--skip-download"]
        + [arg for p in paths for arg in ("-f", str(p))],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        env=dict(os.environ, LOG_LEVEL="WARNING"),
    )
    assert proc.returncode in (0, 1), proc.stdout[-2000:] + proc.stderr[-3000:]  # 1: something failed
    report = json.loads(proc.stdout)
    reports = report if isinstance(report, list) else [report]
    assert [r["check_type"] for r in reports] == ["kubernetes"]
    assert reports[0]["summary"]["parsing_errors"] == 0
    return reports[0]["results"]


def _object(resource):
    """checkov's resource id (Kind.namespace.name, a Pod's with its labels after the name) -> (kind, name)."""
    kind, _namespace, rest = resource.split(".", 2)
    return kind, rest.split(".")[0] if kind == "Pod" else rest


def _finding(check):
    return os.path.basename(check["file_path"]), *_object(check["resource"]), check["check_id"]


def _show(findings, names):
    return "\n".join("  %s: %s/%s %s (%s)" % (*f, names.get(f[3], "")) for f in sorted(findings))


def test_checkov_finds_nothing_that_is_not_fixed_or_waived_with_its_reason(manifests, checkov, tmp_path):
    """checkov, a policy checker written elsewhere, over every manifest the collection renders or ships (the
    controller, the SR-IOV add-on, clusterctl's files, the samples): each finding is fixed or waived on its object
    with a reason, and no waiver is left that no finding needs."""
    # every waiver the templates carry, read from the manifests: one id, one reason
    waivers = set()
    for name, path in manifests.items():
        for doc in _docs(path):
            for key, value in ((doc["metadata"].get("annotations")) or {}).items():
                if not SKIP_KEY.match(key):
                    continue
                m = WAIVER.match(value)
                assert m, "%s %s/%s: %s=%r is not CHECK_ID=reason (one '=')" % (
                    name,
                    doc["kind"],
                    doc["metadata"]["name"],
                    key,
                    value,
                )
                assert len(m.group(2).split()) >= 5, "%s: the reason %r says nothing" % (key, m.group(2))
                kind = "Pod" if m.group(1) == "CKV2_K8S_6" else doc["kind"]  # the workload's pods
                waivers.add((name, kind, doc["metadata"]["name"], m.group(1)))

    results = _scan(checkov, manifests.values())
    names = {c["check_id"]: c["check_name"] for c in results["failed_checks"] + results["skipped_checks"]}
    failed = {_finding(c) for c in results["failed_checks"]}
    assert not failed, "checkov findings neither fixed nor waived:\n" + _show(failed, names)
    skipped = {_finding(c) for c in results["skipped_checks"]}
    for check in results["skipped_checks"]:
        comment = check["check_result"].get("suppress_comment") or ""
        assert comment.strip() and comment != "No comment provided", _finding(check)
    assert skipped == waivers, "waivers checkov did not apply:\n" + _show(waivers - skipped, names)

    # the same manifests without the waivers: exactly what is waived is found (no waiver outlives its finding)
    raw = tmp_path / "raw"
    raw.mkdir()
    for name, path in manifests.items():
        docs = _docs(path)
        for doc in docs:
            annotations = doc["metadata"].get("annotations") or {}
            for key in [k for k in annotations if SKIP_KEY.match(k)]:
                del annotations[key]
        (raw / name).write_text(yaml.safe_dump_all(docs, sort_keys=False), encoding="utf-8")
    found = {_finding(c) for c in _scan(checkov, [raw / n for n in manifests])["failed_checks"]}
    assert found == waivers, "waived but not found:\n%s\nfound but not waived:\n%s" % (
        _show(waivers - found, names),
        _show(found - waivers, names),
    )

    by_object = {}
    for _name, kind, obj, check in waivers:
        by_object.setdefault((kind, obj), set()).add(check)
    assert by_object == WAIVED, "the waivers changed: update WAIVED with the reason"
