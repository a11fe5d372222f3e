"""clusterctl's provider files (``hack/clusterctl.py``, which ``make build`` runs), read as clusterctl reads them.

No clusterctl binary can be had here, so its rules are applied from its source (kubernetes-sigs/cluster-api,
``cmd/clusterctl`` at v1.14.0, the release whose CRDs lab/capvco_lab/data/cluster-api/ holds): the variable
substitution (drone/envsubst, ``tests/envsubst.py``, first checked against both projects' own test cases),
``validateMetadata`` and the release series lookup of ``clusterctl init``, the local repository's layout
(``newLocalRepository``), the components' target namespace (``fixTargetNamespace``) and the templates' naming. What
the files make is then validated: the custom resources against Cluster API's v1beta2 CRDs
(lab/capvco_lab/data/cluster-api/v1.14.0/) and this provider's (roles/capvco_controller/files/crds.yaml) with
``lab/capvco_lab/crdschema.py``; the Kubernetes objects with kubernetes-validate and checkov in
``test_manifests_policy.py``, which renders them with the same values.

Every variable is documented: docs/controller.md's tables ("Installing with clusterctl") give each with its default,
and a test fails on a variable a file uses and the tables miss, one the tables give and no file uses, and a default
that differs. The docs' samples of a MachineHealthCheck and of the cluster autoscaler are validated here too, and the
snippets docs/controller.md quotes are checked to be theirs.
"""

from __future__ import annotations

import copy
import os
import re
import subprocess
import sys

import pytest
import yaml

from capvco_controller import vcomachinetemplate as tpl
from capvco_lab import crdschema

import autoscaler
import envsubst
from helpers import ROOT, read_text
from providerfiles import (
    CLUSTERCTL_SETS,
    COMPONENT_VALUES,
    TEMPLATE_VALUES,
    crd_schemas,
    docs_of,
    gen,
    read,
    rendered,
)

DOC = os.path.join(ROOT, "docs", "controller.md")
SAMPLES = os.path.join(ROOT, "docs", "samples")

#: clusterctl's kinds that are not namespaced (cmd/clusterctl/internal/util/objs.go, ``IsResourceNamespaced``).
CLUSTER_SCOPED = {
    "Namespace",
    "Node",
    "PersistentVolume",
    "PodSecurityPolicy",
    "CertificateSigningRequest",
    "ClusterRoleBinding",
    "ClusterRole",
    "VolumeAttachment",
    "StorageClass",
    "CSIDriver",
    "CSINode",
    "ValidatingWebhookConfiguration",
    "MutatingWebhookConfiguration",
    "CustomResourceDefinition",
    "PriorityClass",
    "RuntimeClass",
}


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """The provider repository's folder, as ``make build`` writes it."""
    return gen.write(str(tmp_path_factory.mktemp("clusterctl")))


# --- the variable substitution, ported: first against drone/envsubst's and clusterctl's own test cases -------------

#: drone/envsubst's eval_test.go (commit 179042472c46, the one clusterctl's go.mod pins): (params, input, output).
#: The glob trims (``#``, ``##``, ``%``, ``%%`` with a pattern) are not ported: they must be refused.
DRONE_CASES = [
    ({}, "abcdEFGH28ij", "abcdEFGH28ij"),
    ({"var01": "abcdEFGH28ij"}, "${#var01}", "12"),
    ({"var01": "abcdEFGH28ij"}, "${var01^}", "AbcdEFGH28ij"),
    ({"var01": "abcdEFGH28ij"}, "${var01^^}", "ABCDEFGH28IJ"),
    ({"var01": "ABCDEFGH28IJ"}, "${var01,}", "aBCDEFGH28IJ"),
    ({"var01": "ABCDEFGH28IJ"}, "${var01,,}", "abcdefgh28ij"),
    ({"path_name": "/home/bozo/ideas/thoughts.for.today"}, "${path_name:11}", "ideas/thoughts.for.today"),
    ({"path_name": "/home/bozo/ideas/thoughts.for.today"}, "${path_name:11:5}", "ideas"),
    ({"var": "abc"}, "${var=xyz}", "abc"),
    ({}, "${var=xyz}", "xyz"),
    ({"default_var": "foo"}, "something ${var=${default_var}}", "something foo"),
    ({"default_var": "foo1"}, "foo: ${var=${default_var}-suffix}", "foo: foo1-suffix"),
    ({"default_var": "foo1"}, "foo: ${var=prefix${default_var}-suffix}", "foo: prefixfoo1-suffix"),
    ({}, "${var:=xyz}", "xyz"),
    ({"stringZ": "abcABC123ABCabc"}, "${stringZ/%abc/XYZ}", "abcABC123ABCXYZ"),
    ({"stringZ": "abcABC123ABCabc"}, "${stringZ/#abc/XYZ}", "XYZABC123ABCabc"),
    ({"stringZ": "abcABC123ABCabc"}, "${stringZ//abc/xyz}", "xyzABC123ABCxyz"),
    ({"stringZ": "abcABC123ABCabc"}, "${stringZ/abc/xyz}", "xyzABC123ABCabc"),
    ({"var01": "abcdEFGH28ij"}, "${var=${var01^^}}", "ABCDEFGH28IJ"),
    ({"var01": "abcdEFGH28ij"}, "$${var01}", "${var01}"),
    (
        {"var01": "abcdEFGH28ij"},
        "some text ${var01}$${var$${var01}$var01${var01}",
        "some text abcdEFGH28ij${var${var01}$var01abcdEFGH28ij",
    ),
    ({"default_var": "foo"}, "something $${var=${default_var}}", "something ${var=foo}"),
    ({"stringZ": "foo/bar"}, "${stringZ/\\//-}", "foo-bar"),
    ({"stringZ": "foo/bar/baz"}, "${stringZ//\\//-}", "foo-bar-baz"),
    ({"default_var": "foo"}, "\\\\something ${var=${default_var}}", "\\\\something foo"),
    ({"stringZ": "foo.bar"}, "${stringZ/./}", "foobar"),
]
DRONE_TRIMS = ["${filename#*.}", "${filename##*.}", "${filename%.*}", "${filename%%.*}"]


@pytest.mark.parametrize(("params", "text", "out"), DRONE_CASES)
def test_the_envsubst_port_expands_as_drone_envsubst_does(params, text, out):
    assert envsubst._eval(envsubst.parse(text), params) == out


@pytest.mark.parametrize("text", DRONE_TRIMS)
def test_the_envsubst_port_refuses_what_it_does_not_port(text):
    with pytest.raises(NotImplementedError):
        envsubst._eval(envsubst.parse(text), {"filename": "bash.string.txt"})


def test_the_envsubst_port_reads_variables_as_clusterctl_does():
    """cmd/clusterctl/client/yamlprocessor/simple_processor_test.go: GetVariables, GetVariableMap and Process."""
    assert sorted(envsubst.variables("yaml with ${A} ${ B} ${ C} ${ D }")) == ["A", "B", "C", "D"]
    assert sorted(envsubst.variables("yaml with ${A } ${A} ${A}")) == ["A"]
    assert sorted(envsubst.variables("yaml with ${C}\n${B}\n${A}")) == ["A", "B", "C"]
    with pytest.raises(envsubst.EnvsubstError):
        envsubst.variables("yaml with ${BA$R}\n${FOO}")
    assert envsubst.variables('yaml with ${C:=default}\\n${B}\\n${A=foobar}\\n${E=""}\\n${D:=${A}}') == {
        "C": "default",
        "B": "",
        "A": "foobar",
        "E": '""',
        "D": "${A}",
    }
    assert envsubst.process("foo ${ BAR }, ${BAR }, ${ BAR}", {"BAR": "bar"}) == "foo bar, bar, bar"
    assert envsubst.process("\\\\ foo ${ BAR }, ${BAR }, ${ BAR}", {"BAR": "bar"}) == "\\\\ foo bar, bar, bar"
    assert envsubst.process("foo ${BAR}", {"BAR": "ba$r"}) == "foo ba$r"
    assert (
        envsubst.process(
            "foo ${BAR=default_bar} ${BAZ:=default_baz} ${CAR=default_car} ${CAZ:-default_caz} ${DAR=default_dar}",
            {"BAR": "ba$r", "CAZ": "", "DAR": ""},
        )
        == "foo ba$r default_baz default_car default_caz default_dar"
    )
    assert (
        envsubst.process(
            "foo ${BAR=default_bar} ${BAZ:=prefix${DEF}-suffix} ${CAZ=${DEF}}", {"BAR": "ba$r", "DEF": "football"}
        )
        == "foo ba$r prefixfootball-suffix football"
    )
    with pytest.raises(envsubst.MissingVariables) as missing:
        envsubst.process("foo ${ BAR} ${BAZ} ${CAR}", {"CAR": "car"})
    assert missing.value.missing == ["BAR", "BAZ"]
    assert "value for variables [BAR, BAZ] is not set" in str(missing.value)
    with pytest.raises(envsubst.EnvsubstError):
        envsubst.process("foo ${BA$R} ${BA_R}", {"BA$R": "bar", "BA_R": "ba_r"})


# --- metadata.yaml -------------------------------------------------------------------------------------------------


def _semantic(version):
    """k8s.io/apimachinery's ``version.ParseSemantic`` (a leading ``v`` allowed): (major, minor, patch) or None."""
    m = re.fullmatch(r"v?(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?", version)
    return tuple(int(x) for x in m.groups()[:3]) if m else None


def compatible_contracts(current):
    """internal/contract/version.go ``GetCompatibleVersions``: v1beta2 still takes v1beta1 providers."""
    return {current, "v1beta1"} if current == "v1beta2" else {current}


def release_series_for(metadata, version):
    """``Metadata.GetReleaseSeriesForVersion``: the series whose major and minor are the version's."""
    major, minor, _patch = _semantic(version)
    return next(
        (s for s in metadata["releaseSeries"] if (s.get("major", 0), s.get("minor", 0)) == (major, minor)), None
    )


def test_metadata_is_clusterctls_and_covers_this_release(folder):
    metadata = yaml.safe_load(read(folder, "metadata.yaml"))
    # validateMetadata (cmd/clusterctl/client/repository/metadata_client.go)
    assert metadata["apiVersion"] == "clusterctl.cluster.x-k8s.io/v1alpha3"
    assert metadata["kind"] == "Metadata"
    assert metadata["releaseSeries"]
    # clusterctl's own CRD of the kind (cmd/clusterctl/config/crd/bases)
    assert crdschema.check(crd_schemas(), metadata) == []
    # clusterctl init: the version being installed (the folder's) has a series, and its contract is one clusterctl
    # (whose current contract is v1beta2) installs
    version = os.path.basename(folder)
    series = release_series_for(metadata, version)
    assert series is not None, "no release series covers %s" % version
    assert version == "v" + gen.galaxy_version()
    assert series["contract"] in compatible_contracts("v1beta2")
    # the contract is the CRDs': every CRD carries its label, and it is the newest they carry
    labels = [gen.contract_labels(crd) for crd in gen.crds()]
    assert labels and all(series["contract"] in found for found in labels)
    newest = max((c for found in labels for c in found), key=gen._kube_version)
    assert series["contract"] == newest
    if any("v1beta2" in found for found in labels):  # the CRDs moved to the v1beta2 contract: so does the series
        assert series["contract"] == "v1beta2"


def test_the_release_series_contract_follows_the_crds_labels(tmp_path):
    """The contract is written once, as the CRDs' labels: adding one moves metadata.yaml; a label on some CRDs only,
    or none at all, is refused rather than guessed."""
    listing = yaml.safe_load(read_text(gen.CRDS))

    def with_labels(change):
        doc = copy.deepcopy(listing)
        for i, crd in enumerate(doc["items"]):
            crd["metadata"]["labels"] = change(i, dict(crd["metadata"]["labels"]))
        path = tmp_path / ("crds-%d.yaml" % len(os.listdir(tmp_path)))
        path.write_text(yaml.safe_dump(doc))
        return str(path)

    def without(labels):
        return {k: v for k, v in labels.items() if not k.startswith("cluster.x-k8s.io/")}

    old = {"cluster.x-k8s.io/v1beta1": "v1beta1"}
    both = dict(old, **{"cluster.x-k8s.io/v1beta2": "v1beta1"})
    assert gen.contract(with_labels(lambda i, lb: dict(without(lb), **old))) == "v1beta1"
    assert gen.contract(with_labels(lambda i, lb: dict(without(lb), **both))) == "v1beta2"
    assert gen.metadata("0.1.0", gen.contract())["releaseSeries"][-1]["contract"] == gen.contract()
    with pytest.raises(ValueError, match="different contract labels"):
        gen.contract(with_labels(lambda i, lb: dict(without(lb), **(both if i else old))))
    with pytest.raises(ValueError, match="no CRD carries"):
        gen.contract(with_labels(lambda i, lb: without(lb)))
    assert gen.metadata("0.1.0", "v1beta2")["releaseSeries"] == [{"major": 0, "minor": 1, "contract": "v1beta2"}]


# --- the local repository and clusterctl's configuration -----------------------------------------------------------


def local_repository(url):
    """cmd/clusterctl/client/repository/repository_local.go ``newLocalRepository``: (basepath, provider label,
    version, components file) of a ``file://`` URL, or the error clusterctl gives."""
    path = url[len("file://") :] if url.startswith("file://") else url
    if not os.path.isabs(path):
        raise ValueError("invalid path: path %r must be an absolute path" % url)
    parts = path.split(os.sep)
    if len(parts) < 3:
        raise ValueError(
            "invalid path: path should be in the form {basepath}/{provider-name}/{version}/{components.yaml}"
        )
    components, version, label = parts[-1], parts[-2], parts[-3]
    if version != "latest" and _semantic(version) is None:
        raise ValueError("invalid version: %r" % version)
    return os.sep.join(parts[:-3]), label, version, components


def doc_section(title):
    text = read_text(DOC)
    return text.split("\n## %s\n" % title, 1)[1].split("\n## ", 1)[0]


def yaml_blocks(text):
    return [m.group(1) for m in re.finditer(r"^```yaml\n(.*?)^```$", text, re.M | re.S)]


def test_the_files_are_a_local_repository_that_the_documented_configuration_names(folder):
    names = sorted(os.listdir(folder))
    assert names == sorted(
        ["metadata.yaml", "infrastructure-components.yaml"] + [gen.template_name(f) for f in gen.FLAVORS]
    )
    assert gen.template_name("") == "cluster-template.yaml" and gen.template_name("gpu") == "cluster-template-gpu.yaml"
    base, label, version, components = local_repository(
        "file://" + os.path.join(folder, "infrastructure-components.yaml")
    )
    assert (label, components) == ("infrastructure-" + gen.PROVIDER, "infrastructure-components.yaml")
    assert os.path.join(base, label, version) == folder
    assert version == "v" + gen.galaxy_version()

    (entry,) = [
        yaml.safe_load(b)["providers"]
        for b in yaml_blocks(doc_section("Installing with clusterctl"))
        if "providers:" in b
    ]
    assert [(p["name"], p["type"]) for p in entry] == [(gen.PROVIDER, "InfrastructureProvider")]
    _base, doc_label, doc_version, doc_components = local_repository(entry[0]["url"])
    assert (doc_label, doc_version, doc_components) == (label, version, components)
    assert entry[0]["url"].endswith("/.build/dist/clusterctl/%s/%s/%s" % (label, version, components))
    with pytest.raises(ValueError, match="absolute"):
        local_repository("file://relative/infrastructure-vco/v0.1.0/infrastructure-components.yaml")
    with pytest.raises(ValueError, match="invalid version"):
        local_repository("file:///repo/infrastructure-vco/0.1/infrastructure-components.yaml")


def test_make_build_writes_the_provider_files_beside_the_artifact():
    proc = subprocess.run(["make", "-n", "build"], cwd=ROOT, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    build = next(i for i, line in enumerate(lines) if "ansible-galaxy collection build" in line)
    (write,) = [i for i, line in enumerate(lines) if "hack/clusterctl.py" in line]
    assert write > build and lines[write].split()[-1] == os.path.relpath(gen.DEFAULT_OUT, ROOT)


# --- infrastructure-components.yaml --------------------------------------------------------------------------------


def fix_target_namespace(objs, target):
    """cmd/clusterctl/client/repository/components.go ``fixTargetNamespace`` (the parts that apply here): the
    Namespace renamed, every namespaced object moved, the bindings' subjects pointed at it."""
    for obj in objs:
        if obj["kind"] == "Namespace":
            obj["metadata"]["name"] = target
        if obj["kind"] not in CLUSTER_SCOPED:
            obj["metadata"]["namespace"] = target
        if obj["kind"] in ("ClusterRoleBinding", "RoleBinding"):
            for subject in obj.get("subjects") or []:
                if subject.get("namespace"):
                    subject["namespace"] = target
    return objs


def strings(node, path=()):
    """Every string value of ``node`` with its path."""
    if isinstance(node, dict):
        for key, value in node.items():
            yield from strings(value, (*path, key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from strings(value, (*path, i))
    elif isinstance(node, str):
        yield path, node


def test_the_components_are_the_roles_manifests(folder, tmp_path):
    """What clusterctl applies, with the variables given, is what the role renders with the same settings, object
    for object, the provider's label added: the same CRDs, RBAC and Deployment, and no Secret."""
    text = read(folder, "infrastructure-components.yaml")
    assert envsubst.variables(text) == {
        "CAPVCO_CONTROLLER_IMAGE": "",
        "CAPVCO_CREDENTIALS_SECRET": "capvco-controller-credentials",
    }
    with pytest.raises(envsubst.MissingVariables, match=r"\[CAPVCO_CONTROLLER_IMAGE\]"):
        envsubst.process(text, {})
    values = {
        "CAPVCO_CONTROLLER_IMAGE": "registry.example/capvco-controller@sha256:" + "0" * 64,
        "CAPVCO_CREDENTIALS_SECRET": "acme-whitesky",
    }
    applied = docs_of(envsubst.process(text, values))
    role = gen.render_role(
        {
            "capvco_controller_image": values["CAPVCO_CONTROLLER_IMAGE"],
            "capvco_controller_credentials_secret": "acme-whitesky",
        },
        str(tmp_path),
    )
    for obj in applied:
        assert obj["metadata"]["labels"].pop(gen.PROVIDER_LABEL) == "infrastructure-vco", obj["metadata"]["name"]
        if not obj["metadata"]["labels"]:
            del obj["metadata"]["labels"]
    assert applied == role
    kinds = [o["kind"] for o in applied]
    assert kinds.count("CustomResourceDefinition") == 3 and "Secret" not in kinds and "Deployment" in kinds

    # the default Secret name is the one the role makes when it is given the credential itself
    own = gen.render_role(
        {
            "capvco_controller_image": "x",
            "capvco_controller_api_url": "https://portal.example/api/1",
            "capvco_controller_customer_id": "acme",
            "capvco_controller_api_token": "t0ken-not-shown",
        },
        str(tmp_path / "own"),
    )
    (secret,) = [o for o in own if o["kind"] == "Secret"]
    assert secret["metadata"]["name"] == envsubst.variables(text)["CAPVCO_CREDENTIALS_SECRET"]
    assert "t0ken" not in text

    # the contract's rules for a components YAML: one Namespace, everything namespaced in it, a Deployment whose
    # controller container is `manager` and that watches every namespace (the controller takes --namespace too)
    (namespace,) = [o["metadata"]["name"] for o in applied if o["kind"] == "Namespace"]
    for obj in applied:
        if obj["kind"] not in CLUSTER_SCOPED:
            assert obj["metadata"]["namespace"] == namespace, obj["metadata"]["name"]
    (deployment,) = [o for o in applied if o["kind"] == "Deployment"]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert container["name"] == "manager" and container["image"] == values["CAPVCO_CONTROLLER_IMAGE"]
    assert {"name": "WATCH_NAMESPACE", "value": ""} in container["env"]
    assert not any(o["kind"] == "RoleBinding" and "secret-reader" in o["metadata"]["name"] for o in applied)
    proc = subprocess.run(
        [os.path.join(os.path.dirname(sys.executable), "capvco-controller"), "--help"], capture_output=True, text=True
    )
    assert proc.returncode == 0 and "--namespace" in proc.stdout


def test_the_components_go_where_clusterctl_init_target_namespace_puts_them(folder):
    """clusterctl moves the namespaced objects to --target-namespace, renames the Namespace and points the bindings'
    subjects at it: the namespace appears nowhere else (the leader election's Lease namespace is the pod's own)."""
    objs = docs_of(envsubst.process(read(folder, "infrastructure-components.yaml"), COMPONENT_VALUES))
    (namespace,) = [o["metadata"]["name"] for o in objs if o["kind"] == "Namespace"]
    moved = fix_target_namespace(copy.deepcopy(objs), "team-capvco")
    left = [(o["kind"], o["metadata"]["name"], p) for o in moved for p, v in strings(o) if namespace in v]
    assert left == [], "the namespace is written where clusterctl does not rewrite it"
    (binding,) = [
        o for o in moved if o["kind"] == "ClusterRoleBinding" and o["metadata"]["name"] == "capvco-controller"
    ]
    assert binding["subjects"][0]["namespace"] == "team-capvco"


# --- the cluster templates -----------------------------------------------------------------------------------------


def documented():
    """docs/controller.md's two tables: ({variable: default or None (required)} of the components, of the templates)."""
    section = doc_section("Installing with clusterctl")
    tables = []
    for block in re.split(r"\n\n", section):
        rows = re.findall(r"^\| `([A-Z0-9_]+)` \| ([^|]+) \|", block, re.M)
        if rows:
            tables.append(
                {
                    name: None if cell.startswith("required") else re.match(r"`([^`]*)`", cell).group(1)
                    for name, cell in rows
                }
            )
    assert len(tables) == 2, "the section has the components' table and the templates' table"
    return tables


def defaults_of(texts):
    """{variable: default} of every use in the files, checked: each variable's first use is plain or a default, and
    every default it is given agrees (a later ``${VAR// /-}`` uses the value, it gives no default)."""
    out = {}
    for text in texts:
        for name, function, default in envsubst.occurrences(text):
            if name not in out:
                assert function in envsubst.DEFAULT_FUNCS, "%s is first used as ${%s%s...}" % (name, name, function)
                out[name] = default
            elif function in envsubst.DEFAULT_FUNCS and default:
                assert default == out[name], "%s has two defaults: %r and %r" % (name, out[name], default)
    return out


def test_every_variable_is_documented_with_its_default(folder):
    components, templates = documented()
    assert defaults_of([read(folder, "infrastructure-components.yaml")]) == {
        name: default or "" for name, default in components.items()
    }
    used = defaults_of([read(folder, gen.template_name(f)) for f in gen.FLAVORS])
    assert sorted(used) == sorted(templates), "used but not in the table: %s; in the table, used nowhere: %s" % (
        sorted(set(used) - set(templates)),
        sorted(set(templates) - set(used)),
    )
    for name, default in used.items():
        if name in CLUSTERCTL_SETS:  # clusterctl sets it: the table gives clusterctl's flag default
            assert default == "" and templates[name] == CLUSTERCTL_SETS[name], name
        else:
            assert (templates[name] or "") == default, "%s: the file's default is %r, the table's %r" % (
                name,
                default,
                templates[name],
            )
    # clusterctl's own listing agrees (the first use decides): the required ones are those the table says
    for flavor in gen.FLAVORS:
        text = read(folder, gen.template_name(flavor))
        assert envsubst.required(text) == sorted(
            n for n in envsubst.variables(text) if templates[n] is None or n in CLUSTERCTL_SETS
        )


def test_every_template_renders_to_cluster_api_v1beta2_objects_that_refer_to_each_other(folder):
    schemas = crd_schemas()
    for flavor in gen.FLAVORS:
        name = gen.template_name(flavor)
        missing = {k: v for k, v in TEMPLATE_VALUES.items() if k != "VCO_LOCATION"}
        with pytest.raises(envsubst.MissingVariables, match=r"\[VCO_LOCATION\]"):
            envsubst.process(read(folder, name), missing)
        objs = rendered(folder, name, TEMPLATE_VALUES)
        by_ref = {}
        for obj in objs:
            assert (obj["apiVersion"], obj["kind"]) in schemas, "%s: %s has no CRD here" % (name, obj["kind"])
            assert crdschema.check(schemas, obj) == [], (name, obj["kind"], obj["metadata"]["name"])
            by_ref[(obj["apiVersion"].split("/")[0], obj["kind"], obj["metadata"]["name"])] = obj
        refs = []
        for obj in objs:
            spec = obj["spec"]
            if obj["kind"] == "Cluster":
                refs += [spec["infrastructureRef"], spec["controlPlaneRef"]]
            elif obj["kind"] == "KubeadmControlPlane":
                refs.append(spec["machineTemplate"]["spec"]["infrastructureRef"])
                assert spec["replicas"] == 1 and spec["version"] == "v1.34.0"
            elif obj["kind"] == "MachineDeployment":
                refs += [
                    spec["template"]["spec"]["infrastructureRef"],
                    spec["template"]["spec"]["bootstrap"]["configRef"],
                ]
                assert spec["clusterName"] == spec["template"]["spec"]["clusterName"] == "demo"
            elif obj["kind"] == "VCOMachineTemplate":
                assert obj["metadata"]["labels"]["cluster.x-k8s.io/cluster-name"] == "demo"
        for ref in refs:
            assert (ref["apiGroup"], ref["kind"], ref["name"]) in by_ref, (name, ref)
        vco = by_ref[("infrastructure.cluster.x-k8s.io", "VCOCluster", "demo")]["spec"]
        assert vco == {
            "location": "be-gen-1",
            "cloudspace": "demo",
            "controlPlaneEndpoint": {"host": "192.0.2.10", "port": 6443},
        }
        check_machine_health_check(by_ref[("cluster.x-k8s.io", "MachineHealthCheck", "demo-workers")])


def check_machine_health_check(mhc):
    """The MachineHealthCheck: Cluster API's CEL rule on a machine condition's type (read from its CRD, which
    crdschema does not evaluate), and the workers selected."""
    _crd, schema = crd_schemas()[(mhc["apiVersion"], "MachineHealthCheck")]
    rule = schema["properties"]["spec"]["properties"]["checks"]["properties"]["unhealthyMachineConditions"]["items"][
        "properties"
    ]["type"]["x-kubernetes-validations"][0]["rule"]
    forbidden = re.fullmatch(r"!\(self in \[(.*)\]\)", rule).group(1).replace("'", "").split(",")
    assert "Ready" in forbidden
    types = [c["type"] for c in mhc["spec"]["checks"]["unhealthyMachineConditions"]]
    assert types == ["InfrastructureReady"] and not set(types) & set(forbidden)
    assert mhc["spec"]["selector"] == {
        "matchExpressions": [{"key": "cluster.x-k8s.io/deployment-name", "operator": "Exists"}]
    }
    nodes = {(c["type"], c["status"]) for c in mhc["spec"]["checks"]["unhealthyNodeConditions"]}
    assert nodes == {("Ready", "Unknown"), ("Ready", "False")}
    assert mhc["spec"]["checks"]["nodeStartupTimeoutSeconds"] > 0


def md_replicas_at_creation(md):
    """Cluster API's MachineDeployment webhook on create (core/webhooks/admission/machinedeployment.go,
    ``calculateMachineDeploymentReplicas`` with no old object): replicas as given, else the min-size annotation when
    both size annotations are there, else 1."""
    if md["spec"].get("replicas") is not None:
        return md["spec"]["replicas"]
    annotations = md["metadata"].get("annotations") or {}
    sizes = (
        "cluster.x-k8s.io/cluster-api-autoscaler-node-group-min-size",
        "cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size",
    )
    if all(k in annotations for k in sizes):
        return int(annotations[sizes[0]])
    return 1


def test_the_gpu_flavour_is_a_pool_at_zero_that_the_autoscaler_can_scale_from_zero(folder):
    plain = rendered(folder, "cluster-template.yaml", TEMPLATE_VALUES)
    assert not any("annotations" in o["metadata"] for o in plain if o["kind"] == "MachineDeployment")
    for gpu_type in ("NVIDIA A100", "NVIDIA H100 80GB HBM3"):
        objs = rendered(folder, "cluster-template-gpu.yaml", dict(TEMPLATE_VALUES, VCO_GPU_TYPE=gpu_type))
        assert [(o["kind"], o["metadata"]["name"]) for o in objs[: len(plain)]] == [
            (o["kind"], o["metadata"]["name"]) for o in plain
        ]
        md = next(o for o in objs if o["kind"] == "MachineDeployment" and o["metadata"]["name"] == "demo-gpu")
        template = next(o for o in objs if o["kind"] == "VCOMachineTemplate" and o["metadata"]["name"] == "demo-gpu")
        annotations = md["metadata"]["annotations"]
        assert "replicas" not in md["spec"] and md_replicas_at_creation(md) == 0
        low = int(annotations["cluster.x-k8s.io/cluster-api-autoscaler-node-group-min-size"])
        high = int(annotations["cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size"])
        assert low == 0 and high == 4  # the autoscaler skips a group whose max-size is 0
        spec = template["spec"]["template"]["spec"]
        assert spec["gpu"] == {"type": gpu_type, "count": 1}
        # the controller publishes what a machine brings; the autoscaler reads it with the MachineDeployment's labels
        published = dict(
            template,
            status={"capacity": tpl.capacity(spec), "nodeInfo": {"architecture": "amd64", "operatingSystem": "linux"}},
        )
        capacity, labels, from_zero = autoscaler.template_node(published, annotations)
        assert from_zero and capacity["nvidia.com/gpu"] == 1 and capacity["cpu"] == 16
        promised = dict(
            kv.split("=", 1) for kv in annotations["capacity.cluster-autoscaler.kubernetes.io/labels"].split(",")
        )
        assert (
            promised == tpl.node_labels(spec)
            and labels["cluster-api/accelerator"] == promised["cluster-api/accelerator"]
        )


# --- the docs' samples: a MachineHealthCheck, the autoscaler, and the snippets quoted -------------------------------


def sample(name):
    return list(crdschema.objects(os.path.join(SAMPLES, name)))


def test_the_samples_validate_against_cluster_api_v1beta2(folder):
    schemas = crd_schemas()
    checked = 0
    for name in (
        "capi-gpu-cluster.yaml",
        "capi-gpu-autoscale.yaml",
        "capi-machinehealthcheck.yaml",
        "capi-autoscaler.yaml",
    ):
        for obj in sample(name):
            group = obj["apiVersion"].split("/")[0]
            if group.endswith("cluster.x-k8s.io"):
                assert crdschema.check(schemas, obj) == [], (name, obj["kind"], obj["metadata"]["name"])
                checked += 1
    assert checked == 11
    (mhc,) = sample("capi-machinehealthcheck.yaml")
    check_machine_health_check(mhc)
    # the templates carry the same MachineHealthCheck
    (templated,) = [
        o for o in rendered(folder, "cluster-template.yaml", TEMPLATE_VALUES) if o["kind"] == "MachineHealthCheck"
    ]
    assert templated == mhc

    # the validation bites: the v1beta1 MachineHealthCheck these docs showed before, and a v1beta1 reference
    old = {
        "apiVersion": "cluster.x-k8s.io/v1beta2",
        "kind": "MachineHealthCheck",
        "metadata": {"name": "gpu1-md-0", "namespace": "default"},
        "spec": {
            "clusterName": "gpu1",
            "selector": {"matchLabels": {"cluster.x-k8s.io/deployment-name": "gpu1-md-0"}},
            "nodeStartupTimeout": "20m",
            "unhealthyConditions": [{"type": "Ready", "status": "Unknown", "timeout": "300s"}],
            "maxUnhealthy": "40%",
        },
    }
    assert any("nodeStartupTimeout" in e for e in crdschema.check(schemas, old))
    (cluster,) = [o for o in sample("capi-gpu-cluster.yaml") if o["kind"] == "Cluster"]
    cluster = copy.deepcopy(cluster)
    cluster["spec"]["infrastructureRef"] = {
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
        "kind": "VCOCluster",
        "name": "demo",
    }
    assert any("apiGroup" in e for e in crdschema.check(schemas, cluster))


def test_the_autoscaler_sample_scales_the_gpu_pool_of_the_demo_cluster():
    """capi-autoscaler.yaml: the clusterapi provider, in the cluster's namespace, with the RBAC its README asks for
    (the scalable resources, the scale subresource, and the VCOMachineTemplates for scale from zero), reading the
    workload cluster through Cluster API's kubeconfig Secret, and discovering the pools of capi-gpu-autoscale.yaml."""
    objs = {(o["kind"], o["metadata"]["name"]): o for o in sample("capi-autoscaler.yaml")}
    pool = next(o for o in sample("capi-gpu-autoscale.yaml") if o["kind"] == "MachineDeployment")
    namespace, cluster = pool["metadata"]["namespace"], pool["spec"]["clusterName"]
    name = "%s-cluster-autoscaler" % cluster
    deployment, role, binding = objs[("Deployment", name)], objs[("Role", name)], objs[("RoleBinding", name)]
    assert {o["metadata"]["namespace"] for o in objs.values()} == {namespace}
    rules = {(g, r): set(rule["verbs"]) for rule in role["rules"] for g in rule["apiGroups"] for r in rule["resources"]}
    for resource in ("machinedeployments", "machinesets", "machines", "machinepools"):
        assert {"get", "list", "watch", "update"} <= rules[("cluster.x-k8s.io", resource)]
    assert {"get", "patch", "update"} <= rules[("cluster.x-k8s.io", "machinedeployments/scale")]
    assert rules[("infrastructure.cluster.x-k8s.io", "vcomachinetemplates")] == {"get", "list", "watch"}
    assert binding["roleRef"]["name"] == name and binding["subjects"] == [
        {"kind": "ServiceAccount", "name": name, "namespace": namespace}
    ]
    pod = deployment["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == name
    (container,) = pod["containers"]
    args = container["args"]
    assert "--cloud-provider=clusterapi" in args and "--clusterapi-cloud-config-authoritative" in args
    assert "--node-group-auto-discovery=clusterapi:namespace=%s,clusterName=%s" % (namespace, cluster) in args
    (kubeconfig,) = [a.split("=", 1)[1] for a in args if a.startswith("--kubeconfig=")]
    (volume,) = pod["volumes"]
    (mount,) = container["volumeMounts"]
    assert volume["secret"]["secretName"] == "%s-kubeconfig" % cluster  # Cluster API's, key "value"
    assert mount["name"] == volume["name"] and kubeconfig == os.path.join(
        mount["mountPath"], volume["secret"]["items"][0]["path"]
    )
    assert volume["secret"]["items"][0]["key"] == "value"
    assert container["image"].startswith("registry.k8s.io/autoscaling/cluster-autoscaler:v")
    workload = next(o for o in sample("capi-gpu-cluster.yaml") if o["kind"] == "MachineDeployment")
    assert (
        container["image"].split(":v")[1].split(".")[:2]
        == workload["spec"]["template"]["spec"]["version"][1:].split(".")[:2]
    )


def test_the_snippets_the_docs_quote_are_the_samples():
    text = read_text(DOC)
    blocks = [yaml.safe_load(b) for b in yaml_blocks(text)]
    (mhc,) = sample("capi-machinehealthcheck.yaml")
    assert mhc in blocks, "docs/controller.md's MachineHealthCheck is docs/samples/capi-machinehealthcheck.yaml's"
    role = next(o for o in sample("capi-autoscaler.yaml") if o["kind"] == "Role")
    assert {k: v for k, v in role.items() if k != "metadata"} | {
        "metadata": {k: v for k, v in role["metadata"].items() if k != "annotations"}
    } in blocks
    pool = next(o for o in sample("capi-gpu-autoscale.yaml") if o["kind"] == "MachineDeployment")
    assert {"metadata": {"annotations": pool["metadata"]["annotations"]}} in blocks
