# -*- coding: utf-8 -*-
# Copyright: (c) 2026, whitesky.capvco contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The whitesky.cloud API client.

Pure Python on httpx, with no Ansible import, so that the modules, the node
agent and the tests all share it.  Every operation it calls is declared once in
``OPERATIONS`` (method, path template, query names, body names) exactly as the
platform's Swagger spec has them; ``tests/unit/test_contract.py`` checks that
table against the spec.
"""

from __future__ import annotations

import base64
import email.utils
import json
import random
import time
import traceback
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

from ansible_collections.whitesky.capvco.plugins.module_utils.errors import ApiError, InputError, WhiteskyError

try:
    import httpx
except ImportError:  # pragma: no cover - reported by the module base
    httpx = None
    HTTPX_IMPORT_ERROR = traceback.format_exc()
else:
    HTTPX_IMPORT_ERROR = None

#: Statuses that mean "not processed, try later" for an idempotent request.
RETRY_STATUSES = frozenset((429, 502, 503, 504))
#: Methods retried on those statuses.  A POST never is: a POST that reserves
#: is made idempotent by its caller (look the name up, then decide).
IDEMPOTENT_METHODS = frozenset(("GET", "HEAD", "PUT", "DELETE"))
#: The largest page the client asks for; the emulator serves up to this.
PAGE_LIMIT = 500

C = "/customers/{customer_id}"
CS = C + "/cloudspaces/{cloudspace_id}"
VM = CS + "/vms/{vm_id}"
LOC = C + "/locations/{location}"

#: operationId -> (method, path template, query parameter names, body field names)
OPERATIONS = {
    "listCustomerLocations": ("GET", C + "/locations", (), ()),
    "listAvailableGPUProfiles": ("GET", LOC + "/gpus", (), ()),
    "reserveVGPU": ("POST", LOC + "/gpus/{gpu_id}", (), ("vgpu_name",)),
    "listCustomerVGPUS": ("GET", LOC + "/vgpus", ("limit", "start_after", "only_deleted", "include_deleted"), ()),
    "restoreVGPU": ("POST", LOC + "/vgpus/{vgpu_id}", (), ()),
    "deleteVGPU": ("DELETE", LOC + "/vgpus/{vgpu_id}", ("detach", "permanently"), ()),
    "reserveAndAttachVGPUToVM": ("POST", VM + "/gpus/{gpu_id}", (), ("vgpu_name",)),
    "attachVGPUToVM": ("POST", VM + "/vgpus/{vgpu_id}", (), ()),
    "detachVGPUFromVM": ("DELETE", VM + "/vgpus/{vgpu_id}", (), ()),
    "listCloudspaces": ("GET", C + "/cloudspaces", ("include_deleted",), ()),
    "createCloudspace": ("POST", C + "/cloudspaces", (), ("name", "location", "private_network", "firewall")),
    "getCloudspaceInfo": ("GET", CS, (), ()),
    "deleteCloudspace": ("DELETE", CS, ("permanently",), ()),
    "listCloudspaceVirtualMachines": ("GET", CS + "/vms", ("include_deleted",), ()),
    "createVirtualMachine": (
        "POST",
        CS + "/vms",
        ("name", "description", "vcpus", "memory", "image_id", "disk_size", "user_data", "start_vm"),
        ("gpu_id", "vgpu_name"),
    ),
    "getVirtualMachineInfo": ("GET", VM, (), ()),
    "deleteVirtualMachine": ("DELETE", VM, ("permanently", "detach_gpu"), ()),
    "listExternalNetworks": ("GET", LOC + "/external-networks", (), ()),
    "getExternalNetwork": ("GET", LOC + "/external-networks/{external_network_id}", (), ()),
    "listExternalNetworksVirtualMachine": ("GET", VM + "/external-nics", (), ()),
    "attachExternalNetworksVirtualMachine": (
        "POST",
        VM + "/external-nics",
        ("external_network_id", "external_network_ip", "model", "external_network_type"),
        (),
    ),
    "detachExternalNetworksVirtualMachine": (
        "DELETE",
        VM + "/external-nics/{external_ip_address}",
        ("external_network_id", "external_network_type"),
        (),
    ),
    "getCustomerConsumption": ("GET", LOC + "/consumption", ("start", "end"), ()),
    "getCustomerLocationPricing": ("GET", LOC + "/prices", (), ()),
}


def jwt_expiry(token):
    """Return the JWT's ``exp`` (epoch seconds), or None for a token that is not a JWT."""
    parts = token.split(".")
    if len(parts) != 3:
        return None
    try:
        payload = parts[1] + "=" * (-len(parts[1]) % 4)
        claims = json.loads(base64.urlsafe_b64decode(payload.encode("ascii")))
    except (ValueError, UnicodeError):
        return None
    exp = claims.get("exp") if isinstance(claims, dict) else None
    return exp if isinstance(exp, (int, float)) else None


def _retry_after(value):
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        parsed = email.utils.parsedate_to_datetime(value)
        return max(0.0, parsed.timestamp() - time.time()) if parsed else None


def _message(resp):
    try:
        body = resp.json()
    except ValueError:
        return resp.text.strip()[:500] or resp.reason_phrase
    if isinstance(body, dict):
        return str(body.get("message") or body.get("error") or body)[:500]
    return str(body)[:500]


def _query_value(value):
    if isinstance(value, bool):
        return "true" if value else "false"
    return value


class WhiteskyClient:
    """A client for ``https://<portal>/api/1``.

    :param api_url: the base URL, with or without ``/api/1``.
    :param token: the JWT; checked for expiry now, never printed.
    """

    def __init__(
        self,
        api_url,
        token,
        customer_id,
        validate_certs=True,
        timeout=30.0,
        max_attempts=6,
        backoff=0.5,
        max_backoff=20.0,
        sleep=time.sleep,
    ):
        if httpx is None:
            raise WhiteskyError("the Python library httpx is required")
        if not api_url:
            raise InputError("api_url is required (or set WHITESKY_API_URL), e.g. https://portal.example/api/1")
        if not token:
            raise InputError("api_token is required (or set WHITESKY_API_TOKEN)")
        if not customer_id:
            raise InputError("customer_id is required (or set WHITESKY_CUSTOMER_ID)")
        exp = jwt_expiry(token)
        if exp is not None and exp <= time.time():
            raise ApiError(
                None,
                None,
                401,
                "the API token (JWT) expired at %s UTC; get a new one"
                % time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(exp)),
            )
        url = api_url.rstrip("/")
        if not url.endswith("/api/1"):
            url += "/api/1"
        self.base_url = url
        self.customer_id = str(customer_id)
        self.timeout = float(timeout)
        self.max_attempts = max(1, int(max_attempts))
        self.backoff = float(backoff)
        self.max_backoff = float(max_backoff)
        self._sleep = sleep
        self._token = token
        self.calls = Counter()
        self.retries = 0
        self._http = httpx.Client(
            verify=validate_certs,
            timeout=self.timeout,
            headers={"Authorization": "Bearer " + token, "Accept": "application/json"},
        )

    def __repr__(self):
        return "WhiteskyClient(%r, customer_id=%r)" % (self.base_url, self.customer_id)

    def close(self):
        self._http.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- transport ---------------------------------------------------------
    def _delay(self, attempt, retry_after=None):
        jitter = random.uniform(0, min(self.max_backoff, self.backoff * (2 ** (attempt - 1))))
        if retry_after is not None:
            return min(retry_after, 60.0) + jitter * 0.1
        return jitter

    def request(self, method, path, params=None, body=None, retry=None):
        """One platform call with retries; returns the decoded JSON body (or None).

        ``retry`` defaults to True for idempotent methods.  Connection errors
        before anything was sent are retried for every method.
        """
        retry = method in IDEMPOTENT_METHODS if retry is None else retry
        query = {k: _query_value(v) for k, v in (params or {}).items() if v is not None}
        attempt = 0
        while True:
            attempt += 1
            self.calls[method] += 1
            try:
                resp = self._http.request(
                    method, self.base_url + path, params=query, json=body if body is not None else None
                )
            except httpx.TransportError as exc:
                unsent = isinstance(exc, (httpx.ConnectError, httpx.ConnectTimeout))
                if (retry or unsent) and attempt < self.max_attempts:
                    self.retries += 1
                    self._sleep(self._delay(attempt))
                    continue
                raise ApiError(method, path, None, "%s: %s" % (type(exc).__name__, exc or "connection lost")) from None
            if resp.status_code in RETRY_STATUSES and retry and attempt < self.max_attempts:
                self.retries += 1
                self._sleep(self._delay(attempt, _retry_after(resp.headers.get("Retry-After"))))
                continue
            if resp.status_code >= 400:
                raise ApiError(method, path, resp.status_code, _message(resp))
            if not resp.content:
                return None
            try:
                return resp.json()
            except ValueError:
                raise ApiError(method, path, resp.status_code, "response is not JSON: %r" % resp.text[:200]) from None

    def call(self, operation, query=None, body=None, retry=None, **path_params):
        """Call a declared operation by its operationId."""
        method, template, query_names, body_names = OPERATIONS[operation]
        unknown = set(query or ()) - set(query_names)
        unknown_body = set(body or ()) - set(body_names)
        if unknown or unknown_body:
            raise WhiteskyError("%s takes no parameter(s) %s" % (operation, sorted(unknown | unknown_body)))
        path = template.format(customer_id=self.customer_id, **path_params)
        return self.request(method, path, params=query, body=body, retry=retry)

    def paginate(self, operation, query=None, limit=PAGE_LIMIT, parallel=8, **path_params):
        """Yield every item of a paginated list (``limit`` / ``start_after``), in order.

        The first page's ``pagination.count`` tells how many pages follow; they
        are fetched up to ``parallel`` at a time.
        """

        def page(start):
            body = self.call(operation, query=dict(query or {}, limit=limit, start_after=start), **path_params) or {}
            return body.get("data") or [], (body.get("pagination") or {}).get("count")

        data, count = page(0)
        yield from data
        if len(data) < limit:
            return
        if count is None:  # no count: walk page by page
            start = len(data)
            while data and len(data) == limit:
                data, _count = page(start)
                start += len(data)
                yield from data
            return
        starts = list(range(len(data), count, limit))
        with ThreadPoolExecutor(max_workers=max(1, min(parallel, len(starts) or 1))) as pool:
            for items, _count in pool.map(page, starts):
                yield from items

    def result(self, operation, query=None, **path_params):
        """Call a list operation and unwrap its ``{"result": [...]}`` envelope."""
        return (self.call(operation, query=query, **path_params) or {}).get("result") or []

    # -- locations, GPUs ---------------------------------------------------
    def gpu_profiles(self, location):
        return self.result("listAvailableGPUProfiles", location=location)

    def vgpus(self, location, include_deleted=False):
        return self.paginate("listCustomerVGPUS", query={"include_deleted": include_deleted}, location=location)

    def reserve_vgpu(self, location, gpu_id, vgpu_name):
        return self.call("reserveVGPU", body={"vgpu_name": vgpu_name}, location=location, gpu_id=gpu_id)["vgpu_id"]

    def reserve_attach_vgpu(self, cloudspace_id, vm_id, gpu_id, vgpu_name):
        return self.call(
            "reserveAndAttachVGPUToVM",
            body={"vgpu_name": vgpu_name},
            cloudspace_id=cloudspace_id,
            vm_id=vm_id,
            gpu_id=gpu_id,
        )["vgpu_id"]

    def attach_vgpu(self, cloudspace_id, vm_id, vgpu_id):
        return self.call("attachVGPUToVM", cloudspace_id=cloudspace_id, vm_id=vm_id, vgpu_id=vgpu_id)

    def detach_vgpu(self, cloudspace_id, vm_id, vgpu_id):
        return self.call("detachVGPUFromVM", cloudspace_id=cloudspace_id, vm_id=vm_id, vgpu_id=vgpu_id)

    def delete_vgpu(self, location, vgpu_id, detach=True, permanently=True):
        return self.call(
            "deleteVGPU", query={"detach": detach, "permanently": permanently}, location=location, vgpu_id=vgpu_id
        )

    def consumption(self, location, start, end):
        return self.call("getCustomerConsumption", query={"start": int(start), "end": int(end)}, location=location)

    def prices(self, location):
        return self.call("getCustomerLocationPricing", location=location)

    # -- cloudspaces, VMs --------------------------------------------------
    def cloudspaces(self):
        return self.result("listCloudspaces")

    def create_cloudspace(self, name, location, private_network=None):
        body = {"name": name, "location": location, "firewall": {"private": False}}
        if private_network:
            body["private_network"] = private_network
        return self.call("createCloudspace", body=body)["cloudspace_id"]

    def get_cloudspace(self, cloudspace_id):
        return self.call("getCloudspaceInfo", cloudspace_id=cloudspace_id)

    def delete_cloudspace(self, cloudspace_id, permanently=True):
        return self.call("deleteCloudspace", query={"permanently": permanently}, cloudspace_id=cloudspace_id)

    def vms(self, cloudspace_id):
        return self.result("listCloudspaceVirtualMachines", cloudspace_id=cloudspace_id)

    def get_vm(self, cloudspace_id, vm_id):
        return self.call("getVirtualMachineInfo", cloudspace_id=cloudspace_id, vm_id=vm_id)

    def create_vm(
        self,
        cloudspace_id,
        name,
        description,
        vcpus,
        memory,
        image_id=None,
        disk_size=None,
        user_data=None,
        gpu_id=None,
        vgpu_name=None,
    ):
        query = {
            "name": name,
            "description": description,
            "vcpus": vcpus,
            "memory": memory,
            "image_id": image_id,
            "disk_size": disk_size,
            "user_data": user_data,
        }
        body = {"gpu_id": gpu_id, "vgpu_name": vgpu_name} if gpu_id else None
        return self.call("createVirtualMachine", query=query, body=body, cloudspace_id=cloudspace_id)["vm_id"]

    def delete_vm(self, cloudspace_id, vm_id, permanently=True, detach_gpu=False):
        return self.call(
            "deleteVirtualMachine",
            query={"permanently": permanently, "detach_gpu": detach_gpu},
            cloudspace_id=cloudspace_id,
            vm_id=vm_id,
        )

    # -- external networks and NICs ---------------------------------------
    def external_networks(self, location):
        return self.result("listExternalNetworks", location=location)

    def nics(self, cloudspace_id, vm_id):
        return self.result("listExternalNetworksVirtualMachine", cloudspace_id=cloudspace_id, vm_id=vm_id)

    def attach_nic(self, cloudspace_id, vm_id, external_network_id, model=None, ip_address=None):
        query = {
            "external_network_id": external_network_id,
            "model": model,
            "external_network_ip": ip_address,
            "external_network_type": "external",
        }
        return self.call("attachExternalNetworksVirtualMachine", query=query, cloudspace_id=cloudspace_id, vm_id=vm_id)

    def detach_nic(self, cloudspace_id, vm_id, ip_address, external_network_id):
        return self.call(
            "detachExternalNetworksVirtualMachine",
            query={"external_network_id": external_network_id, "external_network_type": "external"},
            cloudspace_id=cloudspace_id,
            vm_id=vm_id,
            external_ip_address=ip_address,
        )
