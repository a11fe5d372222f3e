"""The ``vco_status`` module (the collection's one seam for a CAPVCO object's status, providerID and Events): check,
apply and again against the fake API server, and the input it refuses."""

from __future__ import annotations

from capvco_lab.capi import IV, make_cluster

from helpers import run_playbook
from test_gpu import three_ways


def test_vco_status_three_ways_and_bad_input(kube, tmp_path):
    vc = make_cluster(kube)
    args = (
        "{kind: VCOCluster, name: gpu1, namespace: default, status: {ready: true, cloudspaceID: cs-1}, "
        "conditions: [{type: CloudspaceReady, status: 'True', reason: Ready}]}"
    )
    check, apply, again = three_ways(None, tmp_path, "vco_status", args, env=kube.env())
    assert check["changed"] and apply["changed"] and not again["changed"]
    assert check["diff"]["before"]["status"] == {} and check["diff"]["after"]["status"]["ready"] is True
    assert apply["status"] == again["status"] and kube.get(vc)["status"]["cloudspaceID"] == "cs-1"
    patches = [r for r in kube.requests() if r["method"] == "PATCH"]
    assert len(patches) == 1 and patches[0]["path"].endswith("/vcoclusters/gpu1/status")
    for bad, message in [
        ("conditions: [{type: A, status: maybe}]", "needs status True, False or Unknown"),
        ("conditions: [{type: A, status: 'True', colour: red}]", "a condition has the keys"),
        ("event: {reason: X}", "event needs reason and message"),
        ("provider_id: whitesky://x/y/z", "provider_id is a VCOMachine's"),
    ]:
        play = tmp_path / "bad.yml"
        play.write_text(
            "- hosts: localhost\n  gather_facts: false\n  tasks:\n    - whitesky.capvco.vco_status: "
            "{kind: VCOCluster, name: gpu1, namespace: default, %s}\n" % bad
        )
        rc, out, _ = run_playbook(str(play), env=kube.env())
        assert rc != 0 and message in out, out[-2000:]
    # providerID is set once: a different one later is refused
    kube.create(
        {
            "apiVersion": IV,
            "kind": "VCOMachine",
            "metadata": {"name": "m", "namespace": "default"},
            "spec": {"vcpus": 1, "memory": 1024, "providerID": "whitesky://a/b/c"},
        }
    )
    play.write_text(
        "- hosts: localhost\n  gather_facts: false\n  tasks:\n    - whitesky.capvco.vco_status: "
        "{kind: VCOMachine, name: m, namespace: default, provider_id: 'whitesky://a/b/d'}\n"
    )
    rc, out, _ = run_playbook(str(play), env=kube.env())
    assert rc != 0 and "already has providerID 'whitesky://a/b/c'" in out
