"""Cluster API in the fake API server: its core's CustomResourceDefinitions of ``Cluster`` and ``Machine``, as a
release publishes them (``data/cluster-api/<release>/``, vendored by ``hack/vendor_capi_crds.py``), and a stand-in for
its core controllers' side of the infrastructure provider's contract, as the contract pages say it
(https://cluster-api.sigs.k8s.io/developer/providers/contracts/infra-cluster and .../infra-machine):

* the core reads an infrastructure CRD's contract label (``cluster.x-k8s.io/<contract>: <versions>``, the versions
  underscore-separated, each one the CRD serves) to know which contract the provider speaks; a provider whose CRD
  names no contract this release speaks, or not the object's version, is not read at all;
* it reads "provisioned" where that contract keeps it: ``status.initialization.provisioned`` (v1beta2) or
  ``status.ready`` (v1beta1), and surfaces it once, never taking it back: a v1beta2 Cluster's or Machine's
  ``status.initialization.infrastructureProvisioned``, a v1beta1 one's ``status.infrastructureReady``;
* with it, an InfraCluster's ``spec.controlPlaneEndpoint`` (when the Cluster has none) and an InfraMachine's
  ``spec.providerID`` and ``status.addresses``; an InfraMachine's ``status.failureReason`` and ``failureMessage`` go
  to a v1beta2 Machine's ``status.deprecated.v1beta1`` (a v1beta1 one's ``status``);
* the infrastructure object's ``Ready`` condition is mirrored as the owner's ``InfrastructureReady`` (a v1beta2
  owner's ``metav1.Condition``; a v1beta1 owner's condition of the v1beta1 shape, with a severity).

It writes as the core does, through the store (validated against Cluster API's own schema), with no request of
its own; the watches see each change.  What else the core does (Machine phases, remediation, the bootstrap
provider's Secret, MachineSets) it does not: a test writes that itself, as those controllers would.
"""

from __future__ import annotations

import copy
import os

import yaml

from capvco_lab.kubestore import now_iso

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "cluster-api")
GROUP = "cluster.x-k8s.io"
#: The releases whose CRDs are here, and the newest contract each speaks (v1.11 introduced v1beta2).
RELEASES = {"v1.14.0": "v1beta2", "v1.10.0": "v1beta1"}
LATEST = "v1.14.0"
#: What each contract's core reads "provisioned" from, on an infrastructure object.
PROVISIONED = {"v1beta2": ("status", "initialization", "provisioned"), "v1beta1": ("status", "ready")}
OWNERS = ("clusters", "machines")


def crds(release):
    """Cluster API's CRDs of ``release``: Cluster's and Machine's."""
    out = []
    for plural in OWNERS:
        with open(os.path.join(DATA, release, plural + ".yaml"), encoding="utf-8") as fh:
            out.append(yaml.safe_load(fh))
    return out


def served(release):
    """The versions of ``cluster.x-k8s.io`` the release serves, as its CRDs say."""
    return sorted({v["name"] for crd in crds(release) for v in crd["spec"]["versions"] if v.get("served")})


def install(store, release):
    """Serve ``release``'s CRDs in ``store`` (as ``clusterctl init`` installs them) and run its core's stand-in."""
    for crd in crds(release):
        store.create("apiextensions.k8s.io", "v1", "customresourcedefinitions", None, crd)
    store.hooks.append(Core(release))
    store.cluster_api = release


def _get(doc, path):
    for part in path:
        doc = doc.get(part) if isinstance(doc, dict) else None
    return doc


def _put(doc, path, value):
    for part in path[:-1]:
        doc = doc.setdefault(part, {})
    doc[path[-1]] = value


def crd_of(store, group, kind):
    """The CustomResourceDefinition that serves ``kind`` of ``group`` in ``store``, or None."""
    for (g, _v, _plural), t in store.types.items():
        if g == group and t["kind"] == kind and t["crd"]:
            return store.objects.get(("apiextensions.k8s.io", "v1", "customresourcedefinitions", "", t["crd"]))
    return None


def group_of(ref):
    """The API group a reference names: a v1beta2 reference's ``apiGroup``, a v1beta1 one's ``apiVersion``'s."""
    return str(ref.get("apiGroup") or str(ref.get("apiVersion") or "").split("/")[0])


class Core:
    """The stand-in for a release's core controllers (a hook of the store: called with each object written)."""

    def __init__(self, release):
        self.release = release
        newest = RELEASES[release]
        #: the contracts this core speaks, the newest first
        self.contracts = ["v1beta2", "v1beta1"] if newest == "v1beta2" else ["v1beta1"]

    def contract_of(self, crd, version):
        """The newest contract this core speaks that ``crd``'s labels say its ``version`` speaks, or None."""
        labels = (crd.get("metadata") or {}).get("labels") or {}
        for contract in self.contracts:
            if version in str(labels.get("%s/%s" % (GROUP, contract)) or "").split("_"):
                return contract
        return None

    def __call__(self, store, key, obj):
        g, _v, plural, ns, _name = key
        if g == GROUP and plural in OWNERS:
            self.reflect(store, key)
            return
        kind, group = obj.get("kind"), str(obj.get("apiVersion") or "").split("/")[0]
        name = obj["metadata"]["name"]
        for okey, owner in list(store.objects.items()):
            if okey[0] != GROUP or okey[2] not in OWNERS or okey[3] != ns:
                continue
            ref = (owner.get("spec") or {}).get("infrastructureRef") or {}
            if (group_of(ref), ref.get("kind"), ref.get("name")) == (group, kind, name):
                self.reflect(store, okey)

    def reflect(self, store, okey):
        """What the core writes of ``okey``'s infrastructure object on ``okey`` (a Cluster or a Machine)."""
        owner = store.objects.get(okey)
        ref = ((owner or {}).get("spec") or {}).get("infrastructureRef") or {}
        crd = crd_of(store, group_of(ref), ref.get("kind")) if ref else None
        if crd is None:
            return
        t = next(t for (g, _v, _p), t in store.types.items() if g == group_of(ref) and t["kind"] == ref.get("kind"))
        plural = crd["spec"]["names"]["plural"]
        infra = store.objects.get((group_of(ref), t["storage"], plural, okey[3], ref.get("name")))
        contract = self.contract_of(crd, t["storage"]) if infra is not None else None
        if contract is None:
            return
        new = copy.deepcopy(owner)
        provisioned = _get(infra, PROVISIONED[contract]) is True
        v1beta2 = owner["apiVersion"].endswith("/v1beta2")
        if provisioned:
            _put(new, ("status", "initialization", "infrastructureProvisioned") if v1beta2 else ("status",
                 "infrastructureReady"), True)  # fmt: skip
            if okey[2] == "clusters":
                endpoint = (infra.get("spec") or {}).get("controlPlaneEndpoint") or {}
                if endpoint.get("host") and not (new["spec"].get("controlPlaneEndpoint") or {}).get("host"):
                    new["spec"]["controlPlaneEndpoint"] = {"host": endpoint["host"], "port": endpoint.get("port")}
            else:
                self.machine(new, infra)
        if okey[2] == "machines":
            self.failure(new, infra, v1beta2)
        self.mirror(new, infra, v1beta2)
        if new != owner:
            store._put(okey, store.admit(store.types[okey[:3]], new))

    @staticmethod
    def machine(new, infra):
        """A provisioned InfraMachine's providerID and addresses, on its Machine."""
        spec, status = infra.get("spec") or {}, infra.get("status") or {}
        if spec.get("providerID") and not new["spec"].get("providerID"):
            new["spec"]["providerID"] = spec["providerID"]
        if status.get("addresses"):
            new.setdefault("status", {})["addresses"] = copy.deepcopy(status["addresses"])

    @staticmethod
    def failure(new, infra, v1beta2):
        """An InfraMachine's (v1beta1) ``failureReason`` and ``failureMessage``, provisioned or not, on its Machine:
        a v1beta2 one's ``status.deprecated.v1beta1``, a v1beta1 one's ``status`` (what its health checks read)."""
        status = infra.get("status") or {}
        where = ("status", "deprecated", "v1beta1") if v1beta2 else ("status",)
        for field in ("failureReason", "failureMessage"):
            if status.get(field):
                _put(new, where + (field,), status[field])

    @staticmethod
    def mirror(new, infra, v1beta2):
        """The infrastructure object's ``Ready`` as the owner's ``InfrastructureReady`` (its time moving only when
        its status does)."""
        ready = next((c for c in (infra.get("status") or {}).get("conditions") or [] if c.get("type") == "Ready"), None)
        if ready is None:
            return
        if v1beta2:
            cond = {
                "type": "InfrastructureReady",
                "status": ready["status"],
                "reason": ready.get("reason") or "NoReasonReported",
                "message": ready.get("message") or "",
                "observedGeneration": new["metadata"].get("generation", 1),
            }
        else:
            cond = {k: ready[k] for k in ("status", "severity", "reason", "message") if ready.get(k)}
            cond["type"] = "InfrastructureReady"
        conditions = new.setdefault("status", {}).setdefault("conditions", [])
        old = next((c for c in conditions if c.get("type") == "InfrastructureReady"), None)
        cond["lastTransitionTime"] = (
            old["lastTransitionTime"] if old and old.get("status") == cond["status"] else now_iso()
        )
        if old is None:
            conditions.append(cond)
        elif old != cond:
            conditions[conditions.index(old)] = cond
