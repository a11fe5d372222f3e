"""Cluster API's CRDs vendored for the tests (``lab/capvco_lab/data/cluster-api/<tag>/``, hack/vendor_capi_crds.py):
one folder, each file saying where it comes from, and what it says true.

Without the clone: each file's header names its tag (its folder's), the commit, the path in Cluster API's repository
(of the file's kind: its name, its group) and the conversion patch; every tag holds exactly the CRDs the script's
table gives; only served versions, no description texts. With a clone of kubernetes-sigs/cluster-api
(``CLUSTER_API_GIT_DIR``, a bare one will do; skipped without): the tag is that commit, and vendoring again from
the clone writes every file byte for byte as it is here (so the schemas are Cluster API's, trimmed as the script
says, and nothing was edited by hand)."""

from __future__ import annotations

import importlib.util
import os
import subprocess

import pytest
import yaml

from capvco_lab import kubecapi

from helpers import ROOT

_spec = importlib.util.spec_from_file_location("vendor_capi_crds", os.path.join(ROOT, "hack", "vendor_capi_crds.py"))
vendor = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(vendor)

CLONE = os.environ.get("CLUSTER_API_GIT_DIR")
FILES = [(tag, plural) for tag, plurals in vendor.RELEASES.items() for plural in plurals]


def text_of(tag, plural):
    with open(os.path.join(kubecapi.DATA, tag, plural + ".yaml"), encoding="utf-8") as fh:
        return fh.read()


def descriptions(node, at=""):
    """Where a description text is left."""
    if isinstance(node, dict):
        return [
            p
            for k, v in node.items()
            for p in ([at + "/" + k] if k == "description" and isinstance(v, str) else descriptions(v, at + "/" + k))
        ]
    if isinstance(node, list):
        return [p for i, v in enumerate(node) for p in descriptions(v, "%s/%d" % (at, i))]
    return []


def test_one_folder_holds_every_release_and_kind_the_script_vendors():
    assert vendor.OUT == kubecapi.DATA
    assert set(vendor.RELEASES) == set(kubecapi.RELEASES) == set(os.listdir(kubecapi.DATA))
    for tag, plurals in vendor.RELEASES.items():
        assert sorted(os.listdir(os.path.join(kubecapi.DATA, tag))) == sorted(p + ".yaml" for p in plurals)
    # the fake API server's kinds at each release, and the kinds the clusterctl templates and samples make
    assert all(set(kubecapi.OWNERS) <= set(plurals) for plurals in vendor.RELEASES.values())
    make = {"clusters", "machinedeployments", "machinehealthchecks", "kubeadmcontrolplanes", "kubeadmconfigtemplates"}
    assert make | {"metadata"} <= set(vendor.RELEASES[kubecapi.LATEST])
    assert not os.path.exists(os.path.join(ROOT, "tests", "data", "cluster-api"))


@pytest.mark.parametrize(("tag", "plural"), FILES, ids=["%s/%s" % f for f in FILES])
def test_each_file_names_its_tag_commit_and_path_and_is_that_kind(tag, plural):
    text = text_of(tag, plural)
    head = vendor.HEADER_RE.match(text)
    assert head, text[:600]
    assert head["tag"] == tag
    folders, group = vendor.CRDS[plural]
    assert head["path"] in ["%s/bases/%s_%s.yaml" % (f, group, plural) for f in folders]
    folder = head["path"].split("/bases/")[0]
    assert head["patch"] in (None, "%s/patches/webhook_in_%s.yaml" % (folder, plural))
    crd = yaml.safe_load(text)
    assert crd["kind"] == "CustomResourceDefinition"
    assert head["name"] == crd["metadata"]["name"] == "%s.%s" % (plural, group)
    assert (crd["spec"]["group"], crd["spec"]["names"]["plural"]) == (group, plural)
    assert crd["spec"]["versions"] and all(v["served"] for v in crd["spec"]["versions"])
    assert ("conversion" in crd["spec"]) == (head["patch"] is not None)
    assert descriptions(crd) == []


def test_a_property_named_description_is_kept():
    """A bootstrap token's ``description`` is a field of KubeadmControlPlane's, not a text about it."""
    crd = yaml.safe_load(text_of(kubecapi.LATEST, "kubeadmcontrolplanes"))
    v1beta2 = next(v for v in crd["spec"]["versions"] if v["name"] == "v1beta2")
    init = v1beta2["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["kubeadmConfigSpec"]
    token = init["properties"]["initConfiguration"]["properties"]["bootstrapTokens"]["items"]
    assert token["properties"]["description"]["type"] == "string"


needs_clone = pytest.mark.skipif(not CLONE, reason="CLUSTER_API_GIT_DIR names no clone of kubernetes-sigs/cluster-api")


@needs_clone
@pytest.mark.parametrize(("tag", "plural"), FILES, ids=["%s/%s" % f for f in FILES])
def test_the_clone_at_the_tag_vendors_each_file_as_it_is(tag, plural):
    head = vendor.HEADER_RE.match(text_of(tag, plural))
    commit = subprocess.run(
        ["git", "-C", CLONE, "rev-parse", "%s^{commit}" % tag], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert head["commit"] == commit
    assert vendor.show(CLONE, tag, head["path"]) is not None
    assert vendor.render(CLONE, tag, plural) == text_of(tag, plural)
