"""The controller without a server: the status core, the CRDs' schemas, the samples, the image, the first boot."""

from __future__ import annotations

import os
import re

import kubernetes_validate
import pytest
import tomllib
import yaml

from ansible_collections.whitesky.capvco.plugins.module_utils.faces import conditions, kube
from ansible_collections.whitesky.capvco.plugins.module_utils.firstboot import render as firstboot
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.errors import InputError
from capvco_lab import crdschema

from helpers import ROOT, read_text

CRDS = os.path.join(ROOT, "roles", "capvco_controller", "files", "crds.yaml")
SAMPLE = os.path.join(ROOT, "docs", "samples", "capi-gpu-cluster.yaml")
BAD = os.path.join(ROOT, "tests", "unit", "data", "bad-crs.yaml")
T0, T1 = "2026-01-01T00:00:00Z", "2026-01-02T00:00:00Z"


@pytest.mark.parametrize(
    "target,patch,result",
    [  # RFC 7386's examples
        ({"a": "b"}, {"a": "c"}, {"a": "c"}),
        ({"a": "b"}, {"b": "c"}, {"a": "b", "b": "c"}),
        ({"a": "b"}, {"a": None}, {}),
        ({"a": "b", "b": "c"}, {"a": None}, {"b": "c"}),
        ({"a": ["b"]}, {"a": "c"}, {"a": "c"}),
        ({"a": "c"}, {"a": ["b"]}, {"a": ["b"]}),
        ({"a": {"b": "c"}}, {"a": {"b": "d", "c": None}}, {"a": {"b": "d"}}),
        ({"a": [{"b": "c"}]}, {"a": [1]}, {"a": [1]}),
        ({"e": None}, {"a": 1}, {"e": None, "a": 1}),
        ([1, 2], {"a": "b", "c": None}, {"a": "b"}),
        ({}, {"a": {"bb": {"ccc": None}}}, {"a": {"bb": {}}}),
    ],
)
def test_merge_patch_follows_rfc_7386(target, patch, result):
    assert kube.merge_patch(target, patch) == result


def test_a_condition_moves_its_transition_time_only_when_its_status_changes():
    existing = [
        {"type": "A", "status": "True", "reason": "X", "message": "", "lastTransitionTime": T0},
        {"type": "B", "status": "False", "reason": "Y", "message": "", "lastTransitionTime": T0},
    ]
    same = conditions.merge(existing, [conditions.true("A", "Again", "said")], T1, 4)
    assert same[0] == {
        "type": "A",
        "status": "True",
        "reason": "Again",
        "message": "said",
        "observedGeneration": 4,
        "lastTransitionTime": T0,
    }
    flipped = conditions.merge(
        existing, [conditions.true("B", "Up"), conditions.unknown("C", "Waiting", "not yet")], T1, 4
    )
    assert [(c["type"], c["lastTransitionTime"]) for c in flipped] == [("A", T0), ("B", T1), ("C", T1)]
    with pytest.raises(InputError, match="'A' needs status True, False or Unknown, got 'yes'"):
        conditions.given({"type": "A", "status": "yes", "reason": "R"})


def test_a_condition_is_a_metav1_condition_and_its_v1beta1_shape_is_kept_beside():
    """metav1.Condition's fields only (no severity), a reason of the form Kubernetes requires; the v1beta1 shape,
    with the severity, goes to status.deprecated.v1beta1.conditions of the contract's kinds."""
    obj = {"metadata": {"name": "m", "namespace": "d", "generation": 3}, "status": {}}
    down = conditions.false("VMProvisioned", "WaitingForBootstrapData", "no data yet", "Info")
    _set, patch, _after = kube.plan_write(obj, "VCOMachine", T1, conditions=[down])
    (new,) = patch["conditions"]
    assert set(new) == {"type", "status", "reason", "message", "lastTransitionTime", "observedGeneration"}
    assert new["observedGeneration"] == 3 and conditions.REASON.match(new["reason"])
    (old,) = patch["deprecated"]["v1beta1"]["conditions"]
    assert old == {
        "type": "VMProvisioned",
        "status": "False",
        "severity": "Info",
        "reason": "WaitingForBootstrapData",
        "message": "no data yet",
        "lastTransitionTime": T1,
    }
    # a template is no contract kind; without v1beta1 (a Cluster API that serves it no more) nothing is kept
    assert "deprecated" not in kube.plan_write(obj, "VCOMachineTemplate", T1, conditions=[down])[1]
    assert "deprecated" not in kube.plan_write(obj, "VCOMachine", T1, conditions=[down], v1beta1=False)[1]
    for bad in ("Waiting for data", "1Waiting", "Waiting-For", ""):
        with pytest.raises(InputError, match="a reason of the form Kubernetes requires"):
            conditions.false("VMProvisioned", bad, "x")


def test_ready_summarises_in_cluster_apis_conventions():
    up, waiting = conditions.true("A", "Fine"), conditions.false("B", "WaitingForX", "waits for x", "Info")
    assert conditions.summary({"A": up}, ("A",)) == conditions.true("Ready", "Ready")
    got = conditions.summary({"A": up, "B": waiting}, ("A", "B"))
    assert (got.status, got.reason, got.message, got.severity) == ("False", "NotReady", "* B: waits for x", "Info")
    got = conditions.summary({"A": up}, ("A", "B"))
    assert (got.status, got.reason) == ("Unknown", "ReadyUnknown") and "* B: not reported yet" in got.message
    lost = conditions.false("B", "VMDeleted", "the VM is gone", "Error")
    got = conditions.summary({"A": up, "B": lost}, ("A", "B"), terminal={"VMDeleted"})
    assert (got.status, got.reason, got.message) == ("False", "VMDeleted", "the VM is gone"), "a terminal error"
    got = conditions.summary({"A": up}, ("A",), deleting="deleting VM x")
    assert (got.status, got.reason, got.message) == ("False", "Deleting", "deleting VM x")


def test_a_status_that_would_not_change_is_not_written():
    obj = {
        "status": {
            "ready": True,
            "conditions": [{"type": "A", "status": "True", "reason": "R", "message": "", "lastTransitionTime": T0}],
        }
    }
    patch, after = kube.plan_status(obj, {"ready": True}, [{"type": "A", "status": "True", "reason": "R"}], T1)
    assert patch is None and after == obj["status"]
    patch, after = kube.plan_status(obj, {"failureReason": None, "vmID": 3}, [], T1)
    assert patch == {"failureReason": None, "vmID": 3} and after["vmID"] == 3


def test_reservations_and_orphans_as_status():
    items = [
        {"vgpu_name": "capvco.c.m.01.x", "vgpu_id": "v2", "gpu_id": "a100-20c", "status": "RESERVED"},
        {"vgpu_name": "capvco.c.m.00.x", "vgpu_id": "v1", "gpu_id": "a100-20c", "status": "ATTACHED"},
    ]
    assert kube.reservation_status(items) == [
        {"name": "capvco.c.m.00.x", "vgpuID": "v1", "profile": "a100-20c", "attached": True},
        {"name": "capvco.c.m.01.x", "vgpuID": "v2", "profile": "a100-20c", "attached": False},
    ]
    assert kube.orphan_status(items, 1.5, "EUR") == {
        "orphans": 2,
        "orphanNames": ["capvco.c.m.00.x", "capvco.c.m.01.x"],
        "costPerHour": "1.5 EUR",
    }
    assert kube.orphan_status([]) == {"orphans": 0, "orphanNames": []}
    # the orphan check's fields sit beside what the status given says of status.gpu (the unaccounted VMs)
    obj = {"metadata": {"name": "c", "namespace": "d"}, "status": {}}
    vms = [{"name": "c-x", "vmID": 7, "cloudspaceID": "cs-1", "vgpus": 2}]
    _set, patch, _after = kube.plan_write(
        obj, "VCOCluster", T1, status={"gpu": {"unaccountedVMs": vms}}, gpu_orphans={"reservations": items[:1]}
    )
    assert patch["gpu"] == {"unaccountedVMs": vms, "orphans": 1, "orphanNames": ["capvco.c.m.01.x"]}


def test_the_first_boot_hands_the_provider_id_to_the_kubelet_before_the_bootstrap():
    script = firstboot.render(["kubelet"], "#!/bin/sh\nkubeadm join\n", provider_id="whitesky://be-gen-1/cs-1/c-md-0")
    assert "KUBELET_EXTRA_ARGS=--provider-id=whitesky://be-gen-1/cs-1/c-md-0" in script
    assert script.index("STEP=kubelet-args") < script.index("STEP=bootstrap")
    with pytest.raises(InputError, match="invalid provider_id 'x; rm -rf /'"):
        firstboot.render([], None, provider_id="x; rm -rf /")


def _walk(schema, path="$"):
    yield path, schema
    for name, sub in (schema.get("properties") or {}).items():
        yield from _walk(sub, path + "." + name)
    if isinstance(schema.get("items"), dict):
        yield from _walk(schema["items"], path + "[]")
    if isinstance(schema.get("additionalProperties"), dict):
        yield from _walk(schema["additionalProperties"], path + "{}")


def test_the_crds_are_structural():
    crds = yaml.safe_load(read_text(CRDS))["items"]
    assert [c["spec"]["names"]["kind"] for c in crds] == ["VCOCluster", "VCOMachine", "VCOMachineTemplate"]
    for crd in crds:
        # the contract labels Cluster API reads: each contract's value lists the CRD's own served versions,
        # underscore-separated ("All resources: APIVersion field value")
        served = {v["name"] for v in crd["spec"]["versions"] if v["served"]}
        for contract in ("v1beta1", "v1beta2"):
            assert set(crd["metadata"]["labels"]["cluster.x-k8s.io/" + contract].split("_")) <= served, crd
        for version in crd["spec"]["versions"]:
            for path, node in _walk(version["schema"]["openAPIV3Schema"]):
                assert node.get("type") in ("object", "array", "string", "integer", "boolean", "number"), path
                assert not ("properties" in node and "additionalProperties" in node), path
                assert all(isinstance(v, (str, int, bool, dict, list)) for v in node.values()), path
                if "description" in node:
                    assert isinstance(node["description"], str), path


def test_the_samples_validate_and_the_bad_ones_are_rejected():
    crds = crdschema.load_crds(CRDS)
    ours = [d for d in crdschema.objects(SAMPLE) if d["apiVersion"].startswith("infra")]
    assert len(ours) == 3
    for doc in ours:
        assert crdschema.check(crds, doc) == [], doc["metadata"]["name"]
    expected = {
        "unknown-gpu-field": "colour",
        "negative-count": "minimum of 1",
        "no-gpu-type": "'type' is a required",
        "no-vcpus": "'vcpus' is a required",
        "driver-as-number": "not of type 'string'",
        "no-location": "'location' is a required",
        "sriov-without-credential": "'credentialSecretRef'",
        "identity-not-a-secret": "'Secret'",
        "identity-without-name": "'name' is a required",
    }
    for doc in yaml.safe_load_all(read_text(BAD)):
        errors = crdschema.check(crds, doc)
        assert any(expected[doc["metadata"]["name"]] in e for e in errors), (doc["metadata"]["name"], errors)
    assert crdschema.main([CRDS, SAMPLE]) == 0 and crdschema.main(["--expect-invalid", CRDS, BAD]) == 0
    assert crdschema.main([CRDS, BAD]) == 1


def test_the_samples_refer_to_each_other():
    docs = {(d["kind"], d["metadata"]["name"]): d for d in crdschema.objects(SAMPLE)}
    refs = [
        docs[("Cluster", "demo")]["spec"]["infrastructureRef"],
        docs[("Cluster", "demo")]["spec"]["controlPlaneRef"],
        docs[("KubeadmControlPlane", "demo-control-plane")]["spec"]["machineTemplate"]["spec"]["infrastructureRef"],
        docs[("MachineDeployment", "demo-gpu")]["spec"]["template"]["spec"]["infrastructureRef"],
        docs[("MachineDeployment", "demo-gpu")]["spec"]["template"]["spec"]["bootstrap"]["configRef"],
    ]
    for ref in refs:
        assert (ref["kind"], ref["name"]) in docs
    vco = docs[("VCOCluster", "demo")]
    assert vco["metadata"]["labels"]["addons.capvco.whitesky.cloud/sriov"] == "enabled"
    assert ("Secret", vco["spec"]["sriov"]["credentialSecretRef"]["name"]) in docs


def test_the_image_runs_the_controller_with_the_collection_installed():
    """controller/Containerfile: the controller package's entry point, the collection built and installed as
    ansible-galaxy does (with kubernetes.core, which the SR-IOV add-on's role uses), every dependency the package
    declares (it is installed without them), a non-root uid above 10,000.
    (tests/e2e/test_controller_image.py builds it and runs it.)"""
    containerfile = read_text(os.path.join(ROOT, "controller", "Containerfile"))
    assert 'ENTRYPOINT ["/opt/venv/bin/capvco-controller"]' in containerfile
    assert "ansible-galaxy collection install --offline --no-deps -p /usr/share/ansible/collections" in containerfile
    assert (
        "ansible_collections/kubernetes/core/" in containerfile
        and "ansible_collections/ansible/posix/" in containerfile
    )
    # every dependency of the package (installed with --no-deps): from the collection's requirements.txt, or its own
    with open(os.path.join(ROOT, "controller", "pyproject.toml"), "rb") as fh:
        wanted = tomllib.load(fh)["project"]["dependencies"]
    requirements = read_text(os.path.join(ROOT, "requirements.txt"))
    for dependency in wanted:
        name = re.match(r"[A-Za-z0-9_.-]+", dependency).group(0)
        assert re.search(r"^%s\b" % re.escape(name), requirements, re.M) or '"%s"' % dependency in containerfile, name
    (user,) = re.findall(r"^USER (\d+):(\d+)$", containerfile, re.M)
    assert int(user[0]) >= 10000 and int(user[1]) >= 10000
    assert "operator" not in containerfile.lower()


AUTOSCALE = os.path.join(ROOT, "docs", "samples", "capi-gpu-autoscale.yaml")


def test_the_autoscale_sample_is_what_the_template_promises():
    """docs/samples/capi-gpu-autoscale.yaml: the template validates; the MachineDeployment's annotations say min 0 and
    give the autoscaler the labels the template's nodes get at their first boot; the workload selects them and asks
    for no more GPUs than one machine brings."""
    from capvco_controller import vcomachinetemplate as tpl

    crds = crdschema.load_crds(CRDS)
    docs = {(d["kind"], d["metadata"]["name"]): d for d in crdschema.objects(AUTOSCALE)}
    template = docs[("VCOMachineTemplate", "demo-gpu-burst")]
    assert crdschema.check(crds, template) == []
    spec = template["spec"]["template"]["spec"]
    annotations = docs[("MachineDeployment", "demo-gpu-burst")]["metadata"]["annotations"]
    assert annotations["cluster.x-k8s.io/cluster-api-autoscaler-node-group-min-size"] == "0"
    assert int(annotations["cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size"]) > 0
    promised = dict(
        item.split("=", 1) for item in annotations["capacity.cluster-autoscaler.kubernetes.io/labels"].split(",")
    )
    assert promised == tpl.node_labels(spec)
    pod = docs[("Deployment", "train")]["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == promised
    asked = int(pod["containers"][0]["resources"]["limits"]["nvidia.com/gpu"])
    assert 0 < asked <= int(tpl.capacity(spec)["nvidia.com/gpu"])
    kubernetes_validate.validate(docs[("Deployment", "train")], "1.37.0", strict=True)
