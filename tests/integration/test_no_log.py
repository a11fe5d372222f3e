"""no_log only on secret values (issue 39): the cluster spec built from a vars file or survey answers is shown with
its secrets masked, never as "(censored due to no_log)" per item (the role's failures: test_sriov_role.py)."""

from __future__ import annotations

from test_person_sees import default_callback

from capvco_lab.specs import IMAGE

CREDENTIAL = "agent-token-0123456789"


def test_the_spec_from_survey_answers_shows_without_its_secret(emulator, tmp_path):
    """AWX's flat answers and an SR-IOV section with the agent's credential: at default verbosity each part of the
    spec is named (not censored); at -v the spec shows with the credential masked; nowhere the credential."""
    answers = {
        "cluster_name": "sv",
        "cluster_location": "be-gen-1",
        "cp_replicas": 1,
        "image_id": IMAGE,
        "gpu_replicas": 1,
        "gpu_type": "NVIDIA A100",
        "gpu_count": 1,
        "gpu_driver_version": "550",
        "sriov": {"enabled": True, "networks": [{"name": "ext", "network": "sriov-ext"}], "credential": CREDENTIAL},
        "capvco_render_dir": str(tmp_path / "manifests"),
    }
    before = emulator.snapshot()
    for flags in ((), ("-v",)):
        rc, out = default_callback(emulator, "whitesky.capvco.cluster_create", answers, "--check", *flags)
        assert rc == 0, out[-3000:]
        assert "censored" not in out, out[-3000:]
        assert CREDENTIAL not in out
        task = out.split("TASK [The cluster spec, as the cluster module takes it, its secrets masked]")[1]
        task = task.split("TASK [")[0]
        for part in ("cluster", "control_plane", "pools", "sriov"):
            assert "(item=%s)" % part in task, task
        if flags:
            assert '"credential": "********"' in task and '"name": "sv"' in task, task
    assert emulator.snapshot() == before, "check mode bought nothing"


def test_the_module_gets_the_secret_the_fact_masks(emulator, tmp_path):
    """The spec's fact has the credential masked; the cluster module and the role get it from the variable: the
    rendered add-on holds the real credential (a run, then the manifests read back)."""
    import base64

    import yaml

    from capvco_lab.specs import cluster_spec

    spec = cluster_spec("sm", "sm-cs", gpu_replicas=0, count=1)
    spec["sriov"] = {"enabled": True, "networks": [{"name": "ext", "network": "sriov-ext"}], "credential": CREDENTIAL}
    out_dir = tmp_path / "manifests"
    rc, out = default_callback(
        emulator, "whitesky.capvco.cluster_create", dict(spec, capvco_render_dir=str(out_dir)), "-v"
    )
    assert rc == 0, out[-3000:]
    assert CREDENTIAL not in out and "censored" not in out
    docs = list(yaml.safe_load_all((out_dir / "sriov-agent.yaml").read_text()))
    (secret,) = [d for d in docs if d and d["kind"] == "Secret"]
    assert base64.b64decode(secret["data"]["token"]).decode() == CREDENTIAL
    rc, out = default_callback(emulator, "whitesky.capvco.cluster_delete", dict(spec, confirm_cluster_name="sm"))
    assert rc == 0, out[-3000:]
