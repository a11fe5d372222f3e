"""A fake AWX API: the boundary of the AWX registration test.

The real ``awx.awx`` modules of ``awx/register.yml`` talk to it over real HTTP, as they would to AWX: it keeps
the objects they create (``/api/v2/<kind>/``), answers their lookups by name (``name=``, ``or__name=``,
``or__id=``) and records every request, so a test reads back exactly what AWX would have stored (the credential
type's injectors above all).  Only what the registration uses is served; anything else is a 404 that fails the
module loudly.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

TOKEN = "awxfake-token"
KINDS = (
    "organizations",
    "credential_types",
    "credentials",
    "execution_environments",
    "projects",
    "inventories",
    "hosts",
    "job_templates",
)


class AwxFake:
    """The fake's objects and requests; :meth:`start` serves them on a free loopback port."""

    def __init__(self) -> None:
        self.objects: dict[str, list[dict[str, Any]]] = {kind: [] for kind in KINDS}
        self.requests: list[tuple[str, str, Any]] = []
        self.lock = threading.Lock()
        self.next_id = 1
        self.add("organizations", {"name": "Default"})
        self.server: ThreadingHTTPServer | None = None

    def add(self, kind: str, body: dict[str, Any]) -> dict[str, Any]:
        url = "/api/v2/%s/%d/" % (kind, self.next_id)
        obj = dict(body, id=self.next_id, url=url, type=kind.rstrip("s"), related={}, summary_fields={})
        self.next_id += 1
        self.objects[kind].append(obj)
        return obj

    def find(self, kind: str, query: dict[str, str]) -> list[dict[str, Any]]:
        ors = {k[4:]: v for k, v in query.items() if k.startswith("or__")}
        ands = {k: v for k, v in query.items() if not k.startswith("or__") and k not in ("page_size", "page")}

        def matches(obj: dict[str, Any]) -> bool:
            if any(str(obj.get(k)) != v for k, v in ands.items()):
                return False
            return not ors or any(str(obj.get(k)) == v for k, v in ors.items())

        return [o for o in self.objects[kind] if matches(o)]

    @property
    def url(self) -> str:
        assert self.server is not None
        return "http://127.0.0.1:%d" % self.server.server_address[1]

    def answer(self, method: str, path: str, query: str, body: Any) -> tuple[int, Any]:
        """The status and body of a request to the API (``Authorization`` checked by the handler)."""
        segs = [s for s in path.split("/") if s]
        if len(segs) < 3 or segs[:2] != ["api", "v2"] or segs[2] not in KINDS:
            return 404, {"detail": "Not found."}
        kind = segs[2]
        with self.lock:
            if len(segs) == 3:
                if method == "GET":
                    found = self.find(kind, {k: v[0] for k, v in parse_qs(query).items()})
                    return 200, {"count": len(found), "next": None, "results": found}
                if method == "POST":
                    return 201, self.add(kind, body or {})
                return 405, {"detail": "Method not allowed."}
            obj = next((o for o in self.objects[kind] if segs[3].isdigit() and o["id"] == int(segs[3])), None)
            if obj is None:
                return 404, {"detail": "Not found."}
            return self.answer_object(method, obj, segs[4:], body)

    @staticmethod
    def answer_object(method: str, obj: dict[str, Any], rest: list[str], body: Any) -> tuple[int, Any]:
        """A request to one object (``rest`` empty) or to one of its related lists (nothing is kept there)."""
        if not rest and method == "GET":
            return 200, obj
        if not rest and method in ("PATCH", "PUT"):
            obj.update(body or {})
            return 200, obj
        if rest and method == "GET":
            return 200, {"count": 0, "next": None, "results": []}
        if rest and method == "POST":
            return 204, {}
        return 405, {"detail": "Method not allowed."}

    def start(self) -> AwxFake:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def handle_any(self, method: str) -> None:
                parts = urlsplit(self.path)
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length)) if length else None
                with fake.lock:
                    fake.requests.append((method, parts.path, body))
                if self.headers.get("Authorization") != "Bearer " + TOKEN:
                    code, answer = 401, {"detail": "Authentication credentials were not provided."}
                else:
                    code, answer = fake.answer(method, parts.path, parts.query, body)
                data = json.dumps(answer).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.send_header("X-API-Product-Name", "AWX")
                self.send_header("X-API-Product-Version", "24.6.1")
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:  # noqa: N802 (http.server's names)
                self.handle_any("GET")

            def do_POST(self) -> None:  # noqa: N802
                self.handle_any("POST")

            def do_PATCH(self) -> None:  # noqa: N802
                self.handle_any("PATCH")

            def do_PUT(self) -> None:  # noqa: N802
                self.handle_any("PUT")

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()


def render_injectors(credential_type: dict[str, Any], inputs: dict[str, Any]) -> dict[str, str]:
    """The environment AWX gives a job for a credential of ``credential_type`` with ``inputs``, by AWX's rules.

    AWX first checks the type's injector templates (when the type is saved): each must render in a sandbox where
    only the type's input fields exist (an undefined name is an error).  At job time it renders each ``env``
    template with ``jinja2.sandbox.ImmutableSandboxedEnvironment`` over a namespace of the credential's non-empty
    inputs (plus ``tower``), once per variable, and puts the result in the job's environment as is.
    """
    from jinja2 import StrictUndefined
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    fields = [str(f["id"]) for f in credential_type.get("inputs", {}).get("fields", [])]
    strict = ImmutableSandboxedEnvironment(undefined=StrictUndefined)
    templates = credential_type.get("injectors", {}).get("env", {})
    for tmpl in templates.values():
        strict.from_string(tmpl).render(**dict.fromkeys(fields, "EXAMPLE"), tower={})
    namespace: dict[str, Any] = {"tower": {}}
    namespace.update({k: v for k, v in inputs.items() if k in fields and v})
    sandbox = ImmutableSandboxedEnvironment()
    return {var: sandbox.from_string(tmpl).render(**namespace) for var, tmpl in templates.items()}
