"""Which pods are on this node, from the Kubernetes API (the reclaimer's first signal)."""

from __future__ import annotations

from typing import Any


class KubePods:
    """``pods()`` -> the set of pod UIDs scheduled on ``node_name``, or None when the API cannot say."""

    def __init__(self, node_name: str, api: Any = None) -> None:
        self.node_name = node_name
        self._api = api

    def api(self) -> Any:
        """The Kubernetes client's ``CoreV1Api`` (untyped), in-cluster, made on first use."""
        if self._api is None:
            from kubernetes import client, config  # only where the reclaimer asks the API

            config.load_incluster_config()
            self._api = client.CoreV1Api()
        return self._api

    def __call__(self) -> set[str] | None:
        try:
            pods = self.api().list_pod_for_all_namespaces(
                field_selector="spec.nodeName=%s" % self.node_name, watch=False
            )
        except Exception:  # unknown is not gone: the other signals still work
            return None
        return {p.metadata.uid for p in pods.items}
