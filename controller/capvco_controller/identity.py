"""A VCOCluster's own platform identity (``spec.identityRef``), as CAPO's ``identityRef`` and CAPA's cluster
identities: a Secret with the keys ``api_url``, ``customer_id`` and ``api_token``; every platform call for the
cluster and its machines uses it.  A cluster without one uses the controller's own credential.

Which namespaces may use a Secret is stated on it: its own namespace always, and those its annotation
:data:`ALLOWED` lists (comma separated; ``*``: every namespace), as CAPA's ``allowedNamespaces``.  A tenant who can
write Secrets in their own namespace can so lend their own credential, never use another namespace's: only who may
write the Secret where it lives can name another namespace on it.

The Secret is read by its name (one GET) on every reconcile that needs it, and its connection is kept per
``(namespace, name, resourceVersion)``: a changed Secret gives a new connection from then on (a rotation).  Its
token is never shown: :meth:`Identities.tokens` feeds the one scrubber.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from ansible_collections.whitesky.capvco.plugins.module_utils.platform.connection import Connection
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.errors import WhiteskyError
from capvco_controller.credentials import FILES

#: The annotation on an identity Secret listing the other namespaces whose VCOClusters may use it.
ALLOWED = "infrastructure.cluster.x-k8s.io/vco-allowed-namespaces"
CONDITION = "IdentityReady"
NOT_ALLOWED = "IdentityNotAllowed"
NOT_FOUND = "IdentityNotFound"
INVALID = "IdentityInvalid"


class SecretReader(Protocol):
    def secret_object(self, namespace: str, name: str) -> tuple[dict[str, str], dict[str, str], str] | None: ...


@dataclass(frozen=True)
class Ref:
    """``spec.identityRef``: the Secret ``name`` in ``namespace`` (the VCOCluster's own when not given)."""

    namespace: str
    name: str

    @classmethod
    def of(cls, spec: Mapping[str, Any], namespace: str) -> Ref | None:
        ref = spec.get("identityRef")
        if not isinstance(ref, Mapping) or not ref.get("name"):
            return None
        return cls(str(ref.get("namespace") or namespace), str(ref["name"]))

    def __str__(self) -> str:
        return "Secret %s/%s" % (self.namespace, self.name)


class IdentityError(Exception):
    """A VCOCluster names an identity it may not use: ``reason`` is the condition's."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


def allowed_namespaces(annotations: Mapping[str, str]) -> frozenset[str]:
    """The namespaces the annotation :data:`ALLOWED` lists (empty when absent)."""
    return frozenset(n.strip() for n in str(annotations.get(ALLOWED) or "").split(",") if n.strip())


def allowed(secret_namespace: str, annotations: Mapping[str, str], namespace: str) -> bool:
    """Whether a VCOCluster in ``namespace`` may use the identity Secret of ``secret_namespace`` carrying
    ``annotations`` (pure): its own namespace, or one its annotation lists, or ``*`` there."""
    if namespace == secret_namespace:
        return True
    listed = allowed_namespaces(annotations)
    return namespace in listed or "*" in listed


def recorded(ref: Ref | None) -> str:
    """What ``status.identity`` records of ``ref``: ``namespace/name``, or '' for the controller's own."""
    return "" if ref is None else "%s/%s" % (ref.namespace, ref.name)


def unchanged(status: Mapping[str, Any], ref: Ref | None) -> None:
    """:class:`IdentityError` when a placed cluster (``status.cloudspaceID``) names another identity than the one
    it was placed with (``status.identity``; absent: the controller's own, as before identities were): its machines
    are in that customer's account, and a machine never moves.  The CRD refuses a changed ``identityRef``; this
    refuses one added or removed."""
    if not status.get("cloudspaceID"):
        return
    placed = str(status.get("identity") or "")
    if placed != recorded(ref):
        raise IdentityError(
            INVALID,
            "the cluster was placed with %s and its machines live in that account: spec.identityRef cannot be added, "
            "removed or changed once the cluster is placed (put it back as it was)"
            % ("the identity Secret " + placed if placed else "the controller's own credential"),
        )


class Identities:
    """The connections of the identities in use, per ``(namespace, name, resourceVersion)`` of their Secret."""

    def __init__(self, environ: Mapping[str, str]) -> None:
        self.environ = dict(environ)
        self._lock = threading.Lock()
        self._made: dict[tuple[str, str, str], Connection] = {}
        self._tokens: list[str] = []

    def tokens(self) -> tuple[str, ...]:
        """Every identity token the process has held (for the scrubber)."""
        with self._lock:
            return tuple(self._tokens)

    def resolve(self, kube: SecretReader, ref: Ref, namespace: str) -> tuple[Connection, tuple[str, str, str]]:
        """The connection of ``ref`` for a VCOCluster in ``namespace``, and its key (a new key: a changed Secret);
        :class:`IdentityError` when it may not be used (nothing is done on the platform then)."""
        got = kube.secret_object(ref.namespace, ref.name)
        if got is None:
            raise IdentityError(NOT_FOUND, "the identity %s does not exist" % ref)
        data, annotations, version = got
        if not allowed(ref.namespace, annotations, namespace):
            raise IdentityError(
                NOT_ALLOWED,
                "the identity %s may not be used from namespace %s: its annotation %s does not list it"
                % (ref, namespace, ALLOWED),
            )
        key = (ref.namespace, ref.name, version)
        with self._lock:
            known = self._made.get(key)
        if known is not None:
            return known, key
        missing = [k for k in FILES if not (data.get(k) or "").strip()]
        if missing:
            raise IdentityError(INVALID, "the identity %s has no %s" % (ref, ", ".join(missing)))
        try:
            connection = Connection.from_options(
                {k: data[k].strip() for k in FILES}, self.environ, where=" in the identity %s" % ref
            )
        except WhiteskyError as exc:
            raise IdentityError(INVALID, "the identity %s is not valid: %s" % (ref, exc)) from None
        with self._lock:
            for old in [k for k in self._made if k[:2] == key[:2]]:
                del self._made[old]  # an older version of the Secret: never used again
            self._made[key] = connection
            self._tokens.append(connection.api_token)
        return connection, key
