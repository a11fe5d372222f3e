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
import ipaddress
import json
import random
import re
import ssl
import sys
import time
import traceback
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import quote, urlsplit

from ansible_collections.whitesky.capvco.plugins.module_utils.errors import ApiError, InputError, WhiteskyError

# httpx imports its command line client (click, pygments, rich: some 70 ms, paid by every module run) whenever
# those are installed; nothing here runs it, and httpx falls back to a stub when it cannot be imported.
if "httpx" not in sys.modules:
    sys.modules.setdefault("httpx._main", None)
try:
    import httpx
except ImportError:  # pragma: no cover - reported by the module base
    httpx = None
    HTTPX_IMPORT_ERROR = traceback.format_exc()
else:
    HTTPX_IMPORT_ERROR = None

#: Statuses retried: 429 (not processed) for every method; 502, 503 and 504 for idempotent ones.
RETRY_STATUSES = frozenset((429, 502, 503, 504))
#: Methods retried on those statuses and on a lost answer.  A POST is not: a POST that
#: reserves is made idempotent by its caller (look the name up, then decide).
IDEMPOTENT_METHODS = frozenset(("GET", "HEAD", "PUT", "DELETE"))
_BEARER = re.compile(r"(?i)\b(bearer\s+)[A-Za-z0-9._~+/=-]+")
#: Seconds one call may spend on retries beyond its own ``timeout``: its deadline is
#: ``timeout + RETRY_BUDGET`` after it started (a module's ``timeout`` option sets the first part).
RETRY_BUDGET = 30.0
_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
#: The largest page the client asks for; the emulator serves up to this.
PAGE_LIMIT = 500

C = "/customers/{customer_id}"
CS = C + "/cloudspaces/{cloudspace_id}"
VM = CS + "/vms/{vm_id}"
LOC = C + "/locations/{location}"

#: operationId -> (method, path template, query parameter names, body field names)
OPERATIONS = {
    "listAvailableGPUProfiles": ("GET", LOC + "/gpus", (), ()),
    "listCustomerVGPUS": ("GET", LOC + "/vgpus", ("limit", "start_after", "include_deleted"), ()),
    "restoreVGPU": ("POST", LOC + "/vgpus/{vgpu_id}", (), ()),
    "deleteVGPU": ("DELETE", LOC + "/vgpus/{vgpu_id}", ("detach", "permanently"), ()),
    "reserveAndAttachVGPUToVM": ("POST", VM + "/gpus/{gpu_id}", (), ("vgpu_name",)),
    "attachVGPUToVM": ("POST", VM + "/vgpus/{vgpu_id}", (), ()),
    "detachVGPUFromVM": ("DELETE", VM + "/vgpus/{vgpu_id}", (), ()),
    "listCloudspaces": ("GET", C + "/cloudspaces", ("include_deleted",), ()),
    "createCloudspace": ("POST", C + "/cloudspaces", (), ("name", "location", "private_network", "firewall")),
    "getCloudspaceInfo": ("GET", CS, (), ()),
    "deleteCloudspace": ("DELETE", CS, ("permanently",), ()),
    "getCloudspaceNotes": ("GET", CS + "/notes", (), ()),
    "createCloudspaceNote": ("POST", CS + "/notes", (), ("title", "content")),
    "updateCloudspaceNote": ("PUT", CS + "/notes/{note_id}", (), ("title", "content")),
    "deleteCloudspaceNote": ("DELETE", CS + "/notes/{note_id}", (), ()),
    "listCloudspaceVirtualMachines": ("GET", CS + "/vms", ("include_deleted",), ()),
    "createVirtualMachine": (
        "POST",
        CS + "/vms",
        ("name", "description", "vcpus", "memory", "image_id", "disk_size", "user_data"),
        (),
    ),
    "getVirtualMachineInfo": ("GET", VM, (), ()),
    "readFile": ("GET", VM + "/file", ("filepath", "size", "seek"), ()),
    "deleteVirtualMachine": ("DELETE", VM, ("permanently", "detach_gpu"), ()),
    "listExternalNetworks": ("GET", LOC + "/external-networks", (), ()),
    "getExternalNetworkAddresses": ("GET", LOC + "/external-networks/{external_network_id}/ip-addresses", (), ()),
    "listExternalNetworksVirtualMachine": ("GET", VM + "/external-nics", (), ()),
    "getExternalNetworksVirtualMachine": ("GET", VM + "/external-nics/{external_ip_address}", (), ()),
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


def check_id(kind, value):
    """A customer or location id as it enters: letters, digits, ``.``, ``_`` and ``-``, at most 128."""
    if not isinstance(value, str) or not _ID.fullmatch(value):
        raise InputError(
            "invalid %s %r: use 1 to 128 letters, digits, '.', '_' or '-', starting with a letter or digit"
            % (kind, value)
        )
    return value


def _loopback(host):
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _tls_failure(exc):
    """The TLS reason when a transport error is a failed handshake or verification (final), else None."""
    seen = exc
    while seen is not None:
        if isinstance(seen, ssl.SSLError):
            return "%s" % (getattr(seen, "verify_message", None) or getattr(seen, "reason", None) or seen)
        seen = seen.__cause__ or seen.__context__
    text = str(exc)
    if "CERTIFICATE_VERIFY_FAILED" in text or "SSL" in text and "VERSION" in text:
        return text
    return None


def _gave_up(last, attempts, spent, why):
    return ApiError(
        last.method,
        last.path,
        last.status,
        "gave up after %d attempt(s) in %.1fs (%s); last: %s" % (attempts, spent, why, last.message),
    )


def _decode(method, path, resp):
    if not resp.content:
        return None
    try:
        return resp.json()
    except ValueError:
        raise ApiError(method, path, resp.status_code, "response is not JSON: %r" % resp.text[:200]) from None


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


def vm_locked(client, cloudspace_id, vm_id):
    """A ``retry_if`` hook for the client: a 409 while the VM is ``locked`` was refused before anything changed.

    One VM takes one mutating operation at a time; a call that meets another
    one's lock is sent again, within the client's deadline.  :meth:`WhiteskyClient.call`
    adds it to every mutating call on a VM's path that brings no hook of its own.
    """

    def hook(exc):
        if exc.status != 409 or vm_id is None:
            return False
        if "locked" in (exc.message or ""):
            return True
        try:
            return bool(client.get_vm(cloudspace_id, vm_id).get("locked"))
        except ApiError:
            return False

    return hook


class WhiteskyClient:
    """A client for ``https://<portal>/api/1``: the one place that retries.

    :param api_url: the base URL, with or without ``/api/1``; plain ``http://`` is accepted for
        loopback only without a warning (``warnings`` lists what the caller should show).
    :param token: the JWT; checked for expiry now, never printed.
    :param timeout: seconds for one request; one call (with its retries) ends by ``timeout +
        retry_budget`` seconds after it started, with an error that says how many attempts it made.
    :param max_attempts: the most requests one call makes.
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
        retry_budget=RETRY_BUDGET,
        sleep=time.sleep,
        clock=time.monotonic,
    ):
        if httpx is None:
            raise WhiteskyError("the Python library httpx is required")
        if not api_url:
            raise InputError("api_url is required (or set WHITESKY_API_URL), e.g. https://portal.example/api/1")
        if not token:
            raise InputError("api_token is required (or set WHITESKY_API_TOKEN)")
        if not customer_id:
            raise InputError("customer_id is required (or set WHITESKY_CUSTOMER_ID)")
        check_id("customer_id", customer_id)
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
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise InputError("api_url %r is not an http(s) URL, e.g. https://portal.example/api/1" % api_url)
        self.warnings = []
        if parts.scheme == "http" and not _loopback(parts.hostname):
            self.warnings.append(
                "api_url %s uses plain http:// to a host that is not loopback: the API token travels unencrypted"
                % parts.netloc
            )
        self.base_url = url
        self.customer_id = str(customer_id)
        self.timeout = float(timeout)
        self.max_attempts = max(1, int(max_attempts))
        self.backoff = float(backoff)
        self.max_backoff = float(max_backoff)
        self.retry_budget = max(0.0, float(retry_budget))
        self._sleep = sleep
        self._clock = clock
        self._token = token
        self.retries = 0
        self._http = httpx.Client(
            verify=validate_certs,
            timeout=self.timeout,
            headers={"Authorization": "Bearer " + token, "Accept": "application/json"},
        )

    def __repr__(self):
        return "WhiteskyClient(%r, customer_id=%r)" % (self.base_url, self.customer_id)

    def redact(self, text):
        """``text`` without this client's token, nor any bearer token (a platform error may echo the headers)."""
        text = str(text)
        if self._token:
            text = text.replace(self._token, "***")
        return _BEARER.sub(r"\1***", text)

    def close(self):
        self._http.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- transport ---------------------------------------------------------
    def wait_until(self, condition, what, interval=0.25):
        """Poll ``condition()`` until it is true, within one call's deadline (``timeout + retry_budget``).

        For an outcome the platform has not settled yet (a VM still locked by a request whose answer was
        lost); raises :class:`WhiteskyError` naming ``what`` when the deadline passes first.
        """
        deadline = self._clock() + self.timeout + self.retry_budget
        while not condition():
            if self._clock() + interval >= deadline:
                budget = self.timeout + self.retry_budget
                raise WhiteskyError("gave up waiting for %s after %.0fs (the call's deadline)" % (what, budget))
            self._sleep(interval)

    def _delay(self, attempt, retry_after=None):
        """Full-jitter exponential backoff; a ``Retry-After`` is waited out, plus a little jitter."""
        jitter = random.uniform(0, min(self.max_backoff, self.backoff * (2 ** (attempt - 1))))
        if retry_after is not None:
            return retry_after + jitter * 0.1
        return jitter

    def request(self, method, path, params=None, body=None, retry=None, retry_if=None, resolve=None):
        """One platform call, retried here and nowhere else; returns the decoded JSON body (or None).

        Retried, while attempts and the call's deadline last: a request that was never sent (no
        connection), 429 (not processed), and for idempotent methods (or ``retry=True``) 502, 503,
        504 and a lost answer.  A TLS failure is final.  The caller adds what is its own:

        - ``retry_if(ApiError) -> bool``: more errors that mean "refused, nothing changed" (a 409
          while the VM is locked); those are waited out until the deadline, and do not count
          against ``max_attempts``;
        - ``resolve(ApiError)``: for a request that is not idempotent and whose outcome is unknown
          (a lost answer, 502, 503, 504), whether it happened after all: what to return if it did,
          None if it did not (then it is sent again).
        """
        retry = method in IDEMPOTENT_METHODS if retry is None else retry
        query = {k: _query_value(v) for k, v in (params or {}).items() if v is not None}
        started = self._clock()
        deadline = started + self.timeout + self.retry_budget
        attempt = waits = 0
        while True:
            attempt += 1
            left = deadline - self._clock()
            wait_hint = None
            try:
                resp = self._http.request(
                    method,
                    self.base_url + path,
                    params=query,
                    json=body,
                    timeout=max(0.05, min(self.timeout, left)),
                )
            except httpx.TransportError as exc:
                why = "%s: %s" % (type(exc).__name__, exc or "connection lost")
                tls = _tls_failure(exc)
                if tls:
                    raise ApiError(method, path, None, "TLS failed (not retried): %s" % tls) from None
                last = ApiError(method, path, None, why)
                unsent = isinstance(exc, (httpx.ConnectError, httpx.ConnectTimeout))
                if not (retry or unsent):
                    if resolve is None:
                        raise last from None
                    found = resolve(last)
                    if found is not None:
                        return found
            else:
                if resp.status_code < 400:
                    return _decode(method, path, resp)
                last = ApiError(method, path, resp.status_code, _message(resp))
                if resp.status_code in (429, 503):
                    wait_hint = _retry_after(resp.headers.get("Retry-After"))
                if resp.status_code == 429 or (resp.status_code in RETRY_STATUSES and retry):
                    pass  # not processed, or safe to repeat
                elif resp.status_code in RETRY_STATUSES and resolve is not None:
                    found = resolve(last)  # processed or not? the caller can tell
                    if found is not None:
                        return found
                elif retry_if is not None and retry_if(last):
                    waits += 1  # refused, nothing changed: wait it out until the deadline
                else:
                    raise last
            delay = self._delay(min(attempt, 4) if waits else attempt, wait_hint)  # a lock is polled at <= 4 s
            spent = self._clock() - started
            if attempt - waits >= self.max_attempts:
                raise _gave_up(last, attempt, spent, "no attempts left")
            if self._clock() + delay >= deadline:
                why = "the platform asked to wait %.0fs" % wait_hint if wait_hint is not None else "no time left"
                raise _gave_up(
                    last,
                    attempt,
                    spent,
                    "%s within the call's deadline of %.0fs" % (why, self.timeout + self.retry_budget),
                )
            self.retries += 1
            self._sleep(delay)

    def call(self, operation, query=None, body=None, retry=None, retry_if=None, resolve=None, **path_params):
        """Call a declared operation by its operationId; path parameters are percent-encoded."""
        method, template, query_names, body_names = OPERATIONS[operation]
        unknown = set(query or ()) - set(query_names)
        unknown_body = set(body or ()) - set(body_names)
        if unknown or unknown_body:
            raise WhiteskyError("%s takes no parameter(s) %s" % (operation, sorted(unknown | unknown_body)))
        if "location" in path_params:
            check_id("location", path_params["location"])
        if retry_if is None and method not in ("GET", "HEAD") and "vm_id" in path_params:
            retry_if = vm_locked(self, path_params.get("cloudspace_id"), path_params["vm_id"])
        values = dict(path_params, customer_id=self.customer_id)
        path = template.format(**{k: quote(str(v), safe="") for k, v in values.items()})
        return self.request(method, path, params=query, body=body, retry=retry, retry_if=retry_if, resolve=resolve)

    def paginate(self, operation, query=None, limit=PAGE_LIMIT, parallel=32, **path_params):
        """Yield every item of a paginated list (``limit`` / ``start_after``), in order.

        Paging goes on until the platform says it is done: ``pagination.count`` items seen, or an
        empty page; never because a page was shorter than asked (a platform may page smaller).
        Once the first page shows the platform's page size and the count, the pages planned from
        them are fetched up to ``parallel`` at a time; a page that comes back short is filled in.
        """

        def page(start):
            got = self.call(operation, query=dict(query or {}, limit=limit, start_after=start), **path_params) or {}
            return got.get("data") or [], (got.get("pagination") or {}).get("count")

        data, count = page(0)
        pos, size = len(data), len(data)
        if not data:
            return

        def walk(stop):
            """Fetch page by page from ``pos`` until ``stop`` (or the count, or an empty page)."""
            nonlocal pos, count
            while (stop is None or pos < stop) and (count is None or pos < count):
                items, seen = page(pos)
                if seen is not None:
                    count = seen
                if not items:
                    return False
                if stop is not None:
                    items = items[: stop - pos]
                pos += len(items)
                yield from items
            return True

        planned = list(range(size, count, size)) if count is not None else []
        if not planned:
            yield from data
        else:
            # at most ``parallel`` pages in flight or waiting: memory stays bounded by the window, not the listing;
            # they are asked for before the first page is handed on, so they are on their way while it is read
            with ThreadPoolExecutor(max_workers=max(1, min(parallel, len(planned)))) as pool:
                window = deque(pool.submit(page, start) for start in planned[:parallel])
                yield from data
                for i, start in enumerate(planned):
                    items, _seen = window.popleft().result()
                    if i + parallel < len(planned):
                        window.append(pool.submit(page, planned[i + parallel]))
                    if pos < start:  # a page before this one came back short: fill the gap
                        yield from walk(start)
                    skip = max(0, pos - start)  # what an earlier fill already gave
                    yield from items[skip:]
                    pos = max(pos, start + len(items))
        yield from walk(None)

    def result(self, operation, query=None, **path_params):
        """Call a list operation and unwrap its ``{"result": [...]}`` envelope."""
        return (self.call(operation, query=query, **path_params) or {}).get("result") or []

    # -- locations, GPUs ---------------------------------------------------
    def gpu_profiles(self, location):
        return self.result("listAvailableGPUProfiles", location=location)

    def vgpus(self, location, include_deleted=False):
        return self.paginate("listCustomerVGPUS", query={"include_deleted": include_deleted}, location=location)

    # The mutating calls take the caller's hooks (``retry_if``, ``resolve``: see ``request``).
    def reserve_attach_vgpu(self, cloudspace_id, vm_id, gpu_id, vgpu_name, **hooks):
        return self.call(
            "reserveAndAttachVGPUToVM",
            body={"vgpu_name": vgpu_name},
            cloudspace_id=cloudspace_id,
            vm_id=vm_id,
            gpu_id=gpu_id,
            **hooks,
        )["vgpu_id"]

    def attach_vgpu(self, cloudspace_id, vm_id, vgpu_id, **hooks):
        return self.call("attachVGPUToVM", cloudspace_id=cloudspace_id, vm_id=vm_id, vgpu_id=vgpu_id, **hooks)

    def detach_vgpu(self, cloudspace_id, vm_id, vgpu_id, **hooks):
        return self.call("detachVGPUFromVM", cloudspace_id=cloudspace_id, vm_id=vm_id, vgpu_id=vgpu_id, **hooks)

    def restore_vgpu(self, location, vgpu_id, **hooks):
        return self.call("restoreVGPU", location=location, vgpu_id=vgpu_id, **hooks)

    def delete_vgpu(self, location, vgpu_id, detach=True, permanently=True, **hooks):
        return self.call(
            "deleteVGPU",
            query={"detach": detach, "permanently": permanently},
            location=location,
            vgpu_id=vgpu_id,
            **hooks,
        )

    def consumption(self, location, start, end):
        return self.call("getCustomerConsumption", query={"start": int(start), "end": int(end)}, location=location)

    def prices(self, location):
        return self.call("getCustomerLocationPricing", location=location)

    # -- cloudspaces, VMs --------------------------------------------------
    def cloudspaces(self):
        return self.result("listCloudspaces")

    def create_cloudspace(self, name, location, private_network=None, **hooks):
        body = {"name": name, "location": location, "firewall": {"private": False}}
        if private_network:
            body["private_network"] = private_network
        return self.call("createCloudspace", body=body, **hooks)["cloudspace_id"]

    def get_cloudspace(self, cloudspace_id):
        return self.call("getCloudspaceInfo", cloudspace_id=cloudspace_id)

    def delete_cloudspace(self, cloudspace_id, permanently=True):
        return self.call("deleteCloudspace", query={"permanently": permanently}, cloudspace_id=cloudspace_id)

    def cloudspace_notes(self, cloudspace_id):
        """The cloudspace's notes (``id``, ``title``, ``content``, ``creation_time``, ...), oldest first."""
        return self.result("getCloudspaceNotes", cloudspace_id=cloudspace_id)

    def create_cloudspace_note(self, cloudspace_id, title, content, **hooks):
        """Add a note; the platform answers ``{"success": true}`` without the note's id (list to find it)."""
        return self.call(
            "createCloudspaceNote", body={"title": title, "content": content}, cloudspace_id=cloudspace_id, **hooks
        )

    def update_cloudspace_note(self, cloudspace_id, note_id, title, content, **hooks):
        return self.call(
            "updateCloudspaceNote",
            body={"title": title, "content": content},
            cloudspace_id=cloudspace_id,
            note_id=note_id,
            **hooks,
        )

    def delete_cloudspace_note(self, cloudspace_id, note_id, **hooks):
        return self.call("deleteCloudspaceNote", cloudspace_id=cloudspace_id, note_id=note_id, **hooks)

    def vms(self, cloudspace_id):
        return self.result("listCloudspaceVirtualMachines", cloudspace_id=cloudspace_id)

    def get_vm(self, cloudspace_id, vm_id):
        return self.call("getVirtualMachineInfo", cloudspace_id=cloudspace_id, vm_id=vm_id)

    def read_file(self, cloudspace_id, vm_id, filepath, size=65536):
        """A file of the VM's guest, through its agent (``readFile``): its text, at most ``size`` bytes."""
        got = self.call(
            "readFile", query={"filepath": filepath, "size": size}, cloudspace_id=cloudspace_id, vm_id=vm_id
        )
        return (got or {}).get("result") or ""

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
        **hooks,
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
        return self.call("createVirtualMachine", query=query, cloudspace_id=cloudspace_id, **hooks)["vm_id"]

    def delete_vm(self, cloudspace_id, vm_id, permanently=True, detach_gpu=False, **hooks):
        return self.call(
            "deleteVirtualMachine",
            query={"permanently": permanently, "detach_gpu": detach_gpu},
            cloudspace_id=cloudspace_id,
            vm_id=vm_id,
            **hooks,
        )

    # -- external networks and NICs ---------------------------------------
    def external_networks(self, location):
        return self.result("listExternalNetworks", location=location)

    def free_addresses(self, location, external_network_id):
        """The addresses of an external network that the platform would give out now."""
        answer = self.call("getExternalNetworkAddresses", location=location, external_network_id=external_network_id)
        return list((answer or {}).get("ip_addresses") or [])

    def nics(self, cloudspace_id, vm_id):
        return self.result("listExternalNetworksVirtualMachine", cloudspace_id=cloudspace_id, vm_id=vm_id)

    def nic(self, cloudspace_id, vm_id, ip_address):
        """The VM's NIC at an address (a 404 when it has none there)."""
        return self.call(
            "getExternalNetworksVirtualMachine",
            cloudspace_id=cloudspace_id,
            vm_id=vm_id,
            external_ip_address=ip_address,
        )

    def attach_nic(self, cloudspace_id, vm_id, external_network_id, model=None, ip_address=None, **hooks):
        query = {
            "external_network_id": external_network_id,
            "model": model,
            "external_network_ip": ip_address,
            "external_network_type": "external",
        }
        return self.call(
            "attachExternalNetworksVirtualMachine", query=query, cloudspace_id=cloudspace_id, vm_id=vm_id, **hooks
        )

    def detach_nic(self, cloudspace_id, vm_id, ip_address, external_network_id, **hooks):
        return self.call(
            "detachExternalNetworksVirtualMachine",
            query={"external_network_id": external_network_id, "external_network_type": "external"},
            cloudspace_id=cloudspace_id,
            vm_id=vm_id,
            external_ip_address=ip_address,
            **hooks,
        )
