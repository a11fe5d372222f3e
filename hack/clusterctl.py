#!/usr/bin/env python3
"""clusterctl's provider files for CAPVCO, written from the sources the role renders (``make build`` runs it).

clusterctl (Cluster API's command line; its provider contract, docs/book/src/developer/providers/contracts/
clusterctl.md) installs an infrastructure provider from a provider repository: a folder per version holding

- ``metadata.yaml``: clusterctl's ``Metadata`` (``clusterctl.cluster.x-k8s.io/v1alpha3``), the provider's release
  series, each with the Cluster API contract it implements (clusterctl refuses a version no series covers);
- ``infrastructure-components.yaml``: everything ``clusterctl init --infrastructure vco`` applies: the CRDs, the
  Namespace, the RBAC and the Deployment, with ``${VARIABLES}`` for what the user sets;
- ``cluster-template.yaml`` and ``cluster-template-<flavor>.yaml``: what ``clusterctl generate cluster`` prints.

The components are the role ``capvco_controller`` rendered (``capvco_controller_render_dir``: its CRDs from
files/crds.yaml and its templates/manifests.yml.j2) by one ``ansible-playbook`` run, with clusterctl's variables as
the values of the role's settings they stand for (``SETTINGS``), so the Deployment and the RBAC are the role's,
never a second copy; each object gets the provider's label. The credentials Secret is not among them: the role
makes none when ``capvco_controller_credentials_secret`` names one, and the user makes it (docs/controller.md,
"clusterctl"). The contract the release series claim is the newest ``cluster.x-k8s.io/<contract>`` label the CRDs
carry (the one place it is written). The cluster templates are hack/clusterctl-templates/'s files, a flavour being
the default template followed by its own objects (``FLAVORS``).

The folders are clusterctl's local repository layout, ``OUT/infrastructure-vco/vVERSION/``, so that a
``providers:`` entry of clusterctl's configuration can name ``OUT/infrastructure-vco/vVERSION/
infrastructure-components.yaml`` as it is.

    .venv/bin/python hack/clusterctl.py [OUT]        # OUT: .build/dist/clusterctl
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROLE = os.path.join(ROOT, "roles", "capvco_controller")
CRDS = os.path.join(ROLE, "files", "crds.yaml")
TEMPLATES = os.path.join(ROOT, "hack", "clusterctl-templates")
DEFAULT_OUT = os.path.join(ROOT, ".build", "dist", "clusterctl")

#: The provider's name for clusterctl (``clusterctl init --infrastructure vco``) and its label: the value of
#: ``cluster.x-k8s.io/provider`` on every component and the folder of the local repository.
PROVIDER = "vco"
LABEL = "infrastructure-" + PROVIDER
PROVIDER_LABEL = "cluster.x-k8s.io/provider"
#: The prefix of the CRDs' contract labels (``cluster.x-k8s.io/v1beta2: v1beta1``: the contract, and the CRD's
#: versions that implement it).
CONTRACT_PREFIX = "cluster.x-k8s.io/"
METADATA_API_VERSION = "clusterctl.cluster.x-k8s.io/v1alpha3"
#: The release series of earlier minor versions, oldest first, each ``(major, minor, contract)``: a release keeps
#: them (``clusterctl upgrade`` reads the series of the installed version from the newest metadata.yaml). The current
#: series is added from galaxy.yml's version and the CRDs' contract.
PAST_SERIES: tuple[tuple[int, int, str], ...] = ()

#: The role's settings that clusterctl's variables stand for: the value the role renders with (the default, when
#: there is one, is the role's own: the Secret the role would make is ``capvco-controller-credentials``).
SETTINGS = {
    "capvco_controller_image": "${CAPVCO_CONTROLLER_IMAGE}",
    "capvco_controller_credentials_secret": "${CAPVCO_CREDENTIALS_SECRET:=capvco-controller-credentials}",
}

#: The cluster templates: the file clusterctl reads for a flavour ("" is the default) and the sources it is made of.
FLAVORS = {
    "": ("cluster-template.yaml",),
    "gpu": ("cluster-template.yaml", "gpu-pool.yaml"),
}

PLAY = """\
- name: The controller's manifests, for clusterctl
  hosts: localhost
  gather_facts: false
  roles:
    - role: %s
"""


def template_name(flavor):
    """clusterctl's name for a flavour's template (``SimpleProcessor.GetTemplateName``)."""
    return "cluster-template%s.yaml" % ("-" + flavor if flavor else "")


def _kube_version(version):
    """A sort key for Kubernetes API versions: GA above beta above alpha, then by number (v1 > v1beta2 > v1beta1)."""
    m = re.fullmatch(r"v(\d+)(?:(alpha|beta)(\d+))?", version)
    if not m:
        raise ValueError("not a Kubernetes API version: %r" % version)
    stage = {"alpha": 0, "beta": 1, None: 2}[m.group(2)]
    return stage, int(m.group(1)), int(m.group(3) or 0)


def load_yaml_docs(path):
    with open(path, encoding="utf-8") as fh:
        return [d for d in yaml.safe_load_all(fh) if d]


def crds(path=CRDS):
    """The CRDs of files/crds.yaml (a List)."""
    out = []
    for doc in load_yaml_docs(path):
        out += doc["items"] if doc.get("kind") == "List" else [doc]
    return [d for d in out if d.get("kind") == "CustomResourceDefinition"]


def contract_labels(crd):
    """``{contract: versions}`` of one CRD's contract labels (a label with an empty value counts for none)."""
    labels = crd["metadata"].get("labels") or {}
    return {
        key[len(CONTRACT_PREFIX) :]: value
        for key, value in labels.items()
        if key.startswith(CONTRACT_PREFIX)
        and re.fullmatch(r"v\d+((alpha|beta)\d+)?", key[len(CONTRACT_PREFIX) :])
        and value
    }


def contract(path=CRDS):
    """The newest contract every CRD carries a label for: the one the current release series claims."""
    sets = [set(contract_labels(crd)) for crd in crds(path)]
    if not sets or not sets[0]:
        raise ValueError("%s: no CRD carries a %s<contract> label" % (path, CONTRACT_PREFIX))
    common = set.intersection(*sets)
    if common != set.union(*sets):
        raise ValueError("%s: the CRDs carry different contract labels: %s" % (path, sorted(set.union(*sets))))
    return max(common, key=_kube_version)


def galaxy_version():
    with open(os.path.join(ROOT, "galaxy.yml"), encoding="utf-8") as fh:
        return str(yaml.safe_load(fh)["version"])


def metadata(version, current_contract):
    """clusterctl's Metadata for the release ``version`` (``major.minor.patch``)."""
    major, minor = (int(x) for x in version.split(".")[:2])
    series = [{"major": a, "minor": b, "contract": c} for a, b, c in PAST_SERIES]
    series.append({"major": major, "minor": minor, "contract": current_contract})
    return {"apiVersion": METADATA_API_VERSION, "kind": "Metadata", "releaseSeries": series}


def render_role(settings, workdir):
    """The role's objects, rendered by ``ansible-playbook`` with ``settings`` as extra variables (its render mode)."""
    os.makedirs(workdir, exist_ok=True)
    play = os.path.join(workdir, "play.yml")
    with open(play, "w", encoding="utf-8") as fh:
        fh.write(PLAY % ROLE)
    render = os.path.join(workdir, "rendered")
    variables = dict(settings, capvco_controller_render_dir=render)
    bindir = os.path.dirname(sys.executable)
    proc = subprocess.run(
        [os.path.join(bindir, "ansible-playbook"), play, "-e", json.dumps(variables)],
        capture_output=True,
        text=True,
        timeout=600,
        env=dict(
            os.environ,
            ANSIBLE_NOCOLOR="1",
            ANSIBLE_LOCALHOST_WARNING="False",
            ANSIBLE_INVENTORY_UNPARSED_WARNING="False",
        ),
        check=False,
    )
    if proc.returncode:
        raise RuntimeError("rendering the role failed:\n" + (proc.stdout + proc.stderr)[-3000:])
    return load_yaml_docs(os.path.join(render, "capvco-controller.yaml"))


def components(objects):
    """The components YAML's text: the role's objects, each labelled with the provider's label."""
    out = []
    for obj in objects:
        if obj["kind"] == "Secret":
            raise ValueError(
                "the components would carry a Secret: the role was rendered without a credentials Secret name"
            )
        obj["metadata"].setdefault("labels", {})[PROVIDER_LABEL] = LABEL
        out.append(obj)
    header = (
        "# CAPVCO's components for clusterctl init --infrastructure %s: the role capvco_controller rendered by\n"
        "# hack/clusterctl.py (make build), with clusterctl's variables for the image and the credentials Secret.\n"
        % PROVIDER
    )
    return header + yaml.safe_dump_all(out, sort_keys=False, explicit_start=True, width=120)


def cluster_template(flavor):
    """A flavour's cluster template: its sources, one after the other, as YAML documents."""
    parts = []
    for name in FLAVORS[flavor]:
        with open(os.path.join(TEMPLATES, name), encoding="utf-8") as fh:
            text = fh.read()
        parts.append(text if text.endswith("\n") else text + "\n")
    return "".join(parts)


def write(out, version=None):
    """The provider repository's folder for this version under ``out``; its path."""
    version = version or galaxy_version()
    folder = os.path.join(out, LABEL, "v" + version)
    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(folder)
    with tempfile.TemporaryDirectory(prefix="capvco-clusterctl-") as work:
        text = components(render_role(SETTINGS, work))
    files = {
        "metadata.yaml": "# CAPVCO's release series for clusterctl (hack/clusterctl.py), the contract the CRDs'.\n"
        + yaml.safe_dump(metadata(version, contract()), sort_keys=False),
        "infrastructure-components.yaml": text,
    }
    for flavor in FLAVORS:
        files[template_name(flavor)] = cluster_template(flavor)
    for name, content in files.items():
        with open(os.path.join(folder, name), "w", encoding="utf-8") as fh:
            fh.write(content)
    return folder


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", nargs="?", default=DEFAULT_OUT)
    args = ap.parse_args(argv)
    folder = write(os.path.abspath(args.out))
    for name in sorted(os.listdir(folder)):
        print(os.path.join(folder, name))
    return 0


if __name__ == "__main__":
    sys.exit(main())
