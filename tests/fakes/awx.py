"""A fake AWX API: the boundary of the AWX registration test.

The real ``awx.awx`` modules of ``awx/register.yml`` talk to it over real HTTP, as they would to AWX: it keeps
the objects they create (``/api/v2/<kind>/``), answers their lookups by name (``name=``, ``or__name=``,
``or__id=``), keeps each job template's survey and associations (``survey_spec/``, ``credentials/``,
``notification_templates_error/``...) and records every request, so a test reads back exactly what AWX would have
stored.  Only what the registration uses is served; anything else is a 404 that fails the module loudly.

It refuses what AWX refuses, by AWX's own rules (awx 24, quoted where they live): a survey spec
(``JobTemplateSurveySpec._validate_spec_data``), a credential type's inputs and injectors (``CredentialTypeInputField``,
``CredentialTypeInjectorField``), a credential's inputs against its type, a notification template's configuration
(``NotificationTemplateSerializer.validate``, each backend's ``init_parameters``) and a schedule (its ``rrule``,
``SchedulePreviewSerializer.validate_rrule``, and its ``extra_data`` against the template's survey).  A 400 carries
AWX's message.

And it launches a job template as AWX does (:meth:`AwxFake.launch`): the answers checked against the survey
(``SurveyJobTemplateMixin._accept_or_ignore_variables``), the extra vars merged in AWX's order (the template's, the
survey's defaults, the answers: ``_update_unified_job_kwargs``) with AWX's own ``awx_*``/``tower_*`` variables, the
template's inventory, ``--check`` for a check job and ``--diff`` for diff mode, and the environment its credentials'
injectors give (:func:`render_injectors`).  :func:`run_job` runs it with a given ``ansible-playbook``.
"""

from __future__ import annotations

import copy
import json
import os
import re
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import yaml

TOKEN = "awxfake-token"
KINDS = (
    "organizations",
    "credential_types",
    "credentials",
    "execution_environments",
    "projects",
    "inventories",
    "hosts",
    "inventory_sources",
    "job_templates",
    "notification_templates",
    "schedules",
)
#: AWX's union of every kind a schedule can run (the awx.awx schedule module looks the template up here)
UNIFIED = ("job_templates", "projects", "inventory_sources")
#: A job template's related lists that keep what is associated with it
ASSOCIATIONS = (
    "credentials",
    "labels",
    "instance_groups",
    "notification_templates_started",
    "notification_templates_success",
    "notification_templates_error",
)
#: awx.main.constants.SURVEY_TYPE_MAPPING
SURVEY_TYPES: dict[str, Any] = {
    "text": str,
    "textarea": str,
    "password": str,
    "multiplechoice": str,
    "multiselect": str,
    "integer": int,
    "float": (float, int),
}
#: Each notification backend's init_parameters (awx/main/notifications/*_backend.py) for the types a registration
#: may use: (type of AWX's type_map, default or ``REQUIRED``)
REQUIRED = object()
NOTIFICATION_PARAMETERS: dict[str, dict[str, tuple[str, Any]]] = {
    "webhook": {
        "url": ("string", REQUIRED),
        "http_method": ("string", "POST"),
        "disable_ssl_verification": ("bool", False),
        "username": ("string", ""),
        "password": ("password", ""),
        "headers": ("object", REQUIRED),
    },
    "email": {
        "host": ("string", REQUIRED),
        "port": ("int", REQUIRED),
        "username": ("string", REQUIRED),
        "password": ("password", REQUIRED),
        "use_tls": ("bool", REQUIRED),
        "use_ssl": ("bool", REQUIRED),
        "sender": ("string", REQUIRED),
        "recipients": ("list", REQUIRED),
        "timeout": ("int", 30),
    },
    "slack": {"token": ("password", REQUIRED), "channels": ("list", REQUIRED)},
}
_TYPE_MAP = {"string": (str,), "int": (int,), "bool": (bool,), "list": (list,), "password": (str,), "object": (dict,)}
#: What AWX adds to every job's extra vars (``awx_meta_vars``), under both prefixes
META_PREFIXES = ("awx", "tower")


class Refused(Exception):
    """What AWX answers 400 with."""

    def __init__(self, body: dict[str, Any]) -> None:
        super().__init__(json.dumps(body))
        self.body = body


class AwxFake:
    """The fake's objects and requests; :meth:`start` serves them on a free loopback port."""

    def __init__(self) -> None:
        self.objects: dict[str, list[dict[str, Any]]] = {kind: [] for kind in KINDS}
        self.requests: list[tuple[str, str, Any]] = []
        self.lock = threading.RLock()
        self.next_id = 1
        self.add("organizations", {"name": "Default"})
        self.server: ThreadingHTTPServer | None = None

    def add(self, kind: str, body: dict[str, Any]) -> dict[str, Any]:
        url = "/api/v2/%s/%d/" % (kind, self.next_id)
        related = {}
        if kind == "job_templates":
            related = {name: url + name + "/" for name in (*ASSOCIATIONS, "survey_spec", "schedules", "launch")}
        obj = dict(body, id=self.next_id, url=url, type=kind.rstrip("s"), related=related, summary_fields={})
        if kind == "projects":  # synced already: the awx.awx project module then waits for no update
            obj.setdefault("scm_revision", "0" * 40)
        if kind == "job_templates":
            obj.setdefault("job_type", "run")
            obj.setdefault("diff_mode", False)
            obj.setdefault("extra_vars", "")
            obj.setdefault("survey_enabled", False)
            obj.setdefault("ask_variables_on_launch", False)
            obj["survey_spec"] = {}
            obj["associated"] = {name: [] for name in ASSOCIATIONS}
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

        kinds = UNIFIED if kind == "unified_job_templates" else (kind,)
        return [o for k in kinds for o in self.objects[k] if matches(o)]

    def named(self, kind: str, name: str) -> dict[str, Any]:
        (obj,) = [o for o in self.objects[kind] if o.get("name") == name]
        return obj

    def by_id(self, kind: str, ident: Any) -> dict[str, Any] | None:
        return next((o for o in self.objects[kind] if o["id"] == ident), None)

    @property
    def url(self) -> str:
        assert self.server is not None
        return "http://127.0.0.1:%d" % self.server.server_address[1]

    def answer(self, method: str, path: str, query: str, body: Any) -> tuple[int, Any]:
        """The status and body of a request to the API (``Authorization`` checked by the handler)."""
        segs = [s for s in path.split("/") if s]
        if len(segs) < 3 or segs[:2] != ["api", "v2"] or (segs[2] not in KINDS and segs[2] != "unified_job_templates"):
            return 404, {"detail": "Not found."}
        kind = segs[2]
        with self.lock:
            try:
                if len(segs) == 3:
                    if method == "GET":
                        found = self.find(kind, {k: v[0] for k, v in parse_qs(query).items()})
                        return 200, {"count": len(found), "next": None, "results": found}
                    if method == "POST" and kind != "unified_job_templates":
                        return 201, self.add(kind, self.checked(kind, dict(body or {}), None))
                    return 405, {"detail": "Method not allowed."}
                obj = next(
                    (o for o in self.objects.get(kind, []) if segs[3].isdigit() and o["id"] == int(segs[3])), None
                )
                if obj is None:
                    return 404, {"detail": "Not found."}
                return self.answer_object(kind, method, obj, segs[4:], body)
            except Refused as exc:
                return 400, exc.body

    def answer_object(self, kind: str, method: str, obj: dict[str, Any], rest: list[str], body: Any) -> tuple[int, Any]:
        """A request to one object (``rest`` empty), to a job template's survey, or to one of its related lists."""
        if not rest and method == "GET":
            return 200, obj
        if not rest and method in ("PATCH", "PUT"):
            obj.update(self.checked(kind, dict(body or {}), obj))
            return 200, obj
        if rest == ["survey_spec"] and "survey_spec" in obj:
            return self.survey(method, obj, body)
        if len(rest) == 1 and rest[0] in obj.get("associated", {}):
            return self.association(rest[0], method, obj, body)
        if rest and method == "GET":
            return 200, {"count": 0, "next": None, "results": []}
        if rest and method == "POST":
            return 204, {}
        return 405, {"detail": "Method not allowed."}

    @staticmethod
    def survey(method: str, obj: dict[str, Any], body: Any) -> tuple[int, Any]:
        """A job template's ``survey_spec/``: read, replaced (checked by AWX's rules) or deleted."""
        if method == "GET":
            return 200, obj["survey_spec"]
        if method == "POST":
            spec = copy.deepcopy(body or {})
            check_survey_spec(spec)
            obj["survey_spec"] = spec
            return 200, {}
        if method == "DELETE":
            obj["survey_spec"] = {}
            return 200, {}
        return 405, {"detail": "Method not allowed."}

    def association(self, name: str, method: str, obj: dict[str, Any], body: Any) -> tuple[int, Any]:
        """A job template's related list (``credentials/``, ``notification_templates_error/``...): listed,
        associated (``{"id": N}``) or disassociated (``{"id": N, "disassociate": true}``)."""
        ids = obj["associated"][name]
        if method == "GET":
            kind_of = "credentials" if name == "credentials" else "notification_templates"
            found = [o for o in (self.by_id(kind_of, i) for i in ids) if o is not None]
            return 200, {"count": len(found), "next": None, "results": found}
        if method == "POST":
            ident = int((body or {})["id"])
            if (body or {}).get("disassociate"):
                ids.remove(ident)
            elif ident not in ids:
                ids.append(ident)
            return 204, {}
        return 405, {"detail": "Method not allowed."}

    def checked(self, kind: str, body: dict[str, Any], old: dict[str, Any] | None) -> dict[str, Any]:
        """``body`` as AWX would store it, or :class:`Refused` with AWX's message."""
        merged = dict(old or {}, **body)
        if kind == "credential_types":
            check_credential_type(merged)
        elif kind == "credentials":
            ctype = self.by_id("credential_types", merged.get("credential_type"))
            if ctype is None:
                raise Refused({"credential_type": ["Invalid pk - object does not exist."]})
            body["inputs"] = check_credential_inputs(ctype, merged.get("inputs") or {})
        elif kind == "notification_templates":
            body["notification_configuration"] = check_notification(merged)
        elif kind == "schedules":
            template = next(
                (o for k in UNIFIED for o in self.objects[k] if o["id"] == merged.get("unified_job_template")), None
            )
            if template is None:
                raise Refused({"unified_job_template": ["Invalid pk - object does not exist."]})
            check_rrule(merged.get("rrule") or "")
            extra = parse_vars(merged.get("extra_data"))
            if template["type"] == "job_template" and extra:
                _, _, errors = accept_or_ignore(template, extra)
                if errors:
                    raise Refused(
                        {"extra_data": errors.get("extra_vars", []) + errors.get("variables_needed_to_start", [])}
                    )
        elif kind == "job_templates" and merged.get("job_type", "run") not in ("run", "check"):
            raise Refused({"job_type": ['"%s" is not a valid choice.' % merged.get("job_type")]})
        return body

    # -- launching -------------------------------------------------------------------------------------------------

    def launch(self, name: str, answers: dict[str, Any] | None = None, schedule: str | None = None) -> Job:
        """A job of the template ``name`` as AWX starts it, with the survey ``answers`` (or a schedule's
        ``extra_data``); :class:`Refused` with AWX's errors when AWX would not start it."""
        with self.lock:
            template = self.named("job_templates", name)
            sched = None
            if schedule is not None:
                sched = self.named("schedules", schedule)
                if sched["unified_job_template"] != template["id"]:
                    raise Refused({"detail": "schedule %r is not of %r" % (schedule, name)})
                answers = parse_vars(sched.get("extra_data"))
            accepted, _, errors = accept_or_ignore(template, dict(answers or {}))
            if errors:
                raise Refused(errors)
            extra = job_extra_vars(template, accepted)
            ident = self.next_id
            self.next_id += 1
            extra.update(self.meta_vars(template, ident, sched))
            inventory = self.by_id("inventories", template.get("inventory"))
            hosts = {
                h["name"]: parse_vars(h.get("variables"))
                for h in self.objects["hosts"]
                if inventory is not None and h.get("inventory") == inventory["id"]
            }
            env: dict[str, str] = {}
            for cred_id in template["associated"]["credentials"]:
                cred = self.by_id("credentials", cred_id)
                assert cred is not None
                ctype = self.by_id("credential_types", cred["credential_type"])
                assert ctype is not None
                env.update(render_injectors(ctype, cred.get("inputs") or {}))
            notify = {
                event: [self.by_id("notification_templates", i)["name"] for i in template["associated"][key]]  # type: ignore[index]
                for event, key in (
                    ("success", "notification_templates_success"),
                    ("error", "notification_templates_error"),
                )
            }
            return Job(
                ident=ident,
                template=name,
                playbook=template["playbook"],
                extra_vars=extra,
                check=template.get("job_type") == "check",
                diff=bool(template.get("diff_mode")),
                hosts=hosts,
                env=env,
                notify=notify,
            )

    def meta_vars(self, template: dict[str, Any], ident: int, schedule: dict[str, Any] | None) -> dict[str, Any]:
        """``Job.awx_meta_vars``: the job's own variables AWX adds to its extra vars."""
        inventory = self.by_id("inventories", template.get("inventory")) or {}
        out: dict[str, Any] = {}
        for prefix in META_PREFIXES:
            out.update(
                {
                    prefix + "_job_id": ident,
                    prefix + "_job_launch_type": "scheduled" if schedule else "manual",
                    prefix + "_job_template_id": template["id"],
                    prefix + "_job_template_name": template["name"],
                    prefix + "_project_revision": "0" * 40,
                    prefix + "_project_scm_branch": "main",
                    prefix + "_inventory_id": inventory.get("id"),
                    prefix + "_inventory_name": inventory.get("name"),
                    prefix + "_execution_node": "awx-ee",
                }
            )
            if schedule:
                out.update({prefix + "_schedule_id": schedule["id"], prefix + "_schedule_name": schedule["name"]})
            else:
                out.update({prefix + "_user_id": 1, prefix + "_user_name": "admin", prefix + "_user_email": ""})
        return out

    # -- serving ---------------------------------------------------------------------------------------------------

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

            def do_DELETE(self) -> None:  # noqa: N802
                self.handle_any("DELETE")

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()


class Job:
    """A launched job: what AWX hands ansible-runner (the playbook, extra vars, inventory, flags, environment) and
    the notification templates that would fire on its success or error."""

    def __init__(self, **fields: Any) -> None:
        self.ident: int = fields["ident"]
        self.template: str = fields["template"]
        self.playbook: str = fields["playbook"]
        self.extra_vars: dict[str, Any] = fields["extra_vars"]
        self.check: bool = fields["check"]
        self.diff: bool = fields["diff"]
        self.hosts: dict[str, dict[str, Any]] = fields["hosts"]
        self.env: dict[str, str] = fields["env"]
        self.notify: dict[str, list[str]] = fields["notify"]


def run_job(
    job: Job, ansible_bin: str, project: str, workdir: str, base_env: dict[str, str], timeout: int = 600
) -> tuple[int, str, list[str]]:
    """Run ``job`` as ansible-runner would in AWX's execution environment: ``ansible-playbook`` in the project's
    folder with the job's inventory and extra vars in files, ``--check``/``--diff`` as the template says, and the
    credentials' environment.  The exit status, the output, and the notification templates that fire."""
    os.makedirs(workdir, exist_ok=True)
    inventory = os.path.join(workdir, "job-%d-inventory.json" % job.ident)
    extravars = os.path.join(workdir, "job-%d-extravars.json" % job.ident)
    with open(inventory, "w", encoding="utf-8") as fh:
        json.dump({"all": {"hosts": job.hosts}}, fh)
    with open(extravars, "w", encoding="utf-8") as fh:
        json.dump(job.extra_vars, fh)
    argv = [os.path.join(ansible_bin, "ansible-playbook"), "-i", inventory, "-e", "@" + extravars]
    argv += ["--check"] if job.check else []
    argv += ["--diff"] if job.diff else []
    proc = subprocess.run(
        [*argv, job.playbook],
        cwd=project,
        env=dict(base_env, **job.env),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    fired = job.notify["success" if proc.returncode == 0 else "error"]
    return proc.returncode, proc.stdout + proc.stderr, fired


# -- AWX's rules ---------------------------------------------------------------------------------------------------


def parse_vars(value: Any) -> dict[str, Any]:
    """AWX's ``parse_yaml_or_json`` of a variables field (a mapping, or its JSON or YAML text)."""
    if isinstance(value, dict):
        return dict(value)
    if not value:
        return {}
    parsed = yaml.safe_load(value)
    return dict(parsed) if isinstance(parsed, dict) else {}


def check_survey_spec(spec: dict[str, Any]) -> None:
    """``JobTemplateSurveySpec._validate_spec_data``: :class:`Refused` with AWX's error, and AWX's normalisation of
    a multiple choice question's text choices and default."""
    for field, kind in (("name", str), ("description", str), ("spec", list)):
        if field not in spec:
            raise Refused({"error": "Field '%s' is missing from survey spec." % field})
        if not isinstance(spec[field], kind):
            raise Refused(
                {
                    "error": "Expected %s for field '%s', received %s type."
                    % (kind.__name__, field, type(spec[field]).__name__)
                }
            )
    if not spec["spec"]:
        raise Refused({"error": "'spec' doesn't contain any items."})
    seen: set[str] = set()
    for idx, item in enumerate(spec["spec"]):
        _check_question(idx, item, seen)
        if item["type"] in ("multiselect", "multiplechoice"):
            _check_choices(idx, item)


def _check_question(idx: int, item: Any, seen: set[str]) -> None:
    """One question's general and type-specific rules (``_validate_spec_data``'s loop)."""
    if not isinstance(item, dict):
        raise Refused({"error": "Survey question %d is not a json object." % idx})
    for field in ("type", "question_name", "variable", "required"):
        if field not in item:
            raise Refused({"error": "'%s' missing from survey question %d" % (field, idx)})
        if not isinstance(item[field], bool if field == "required" else str):
            what = "boolean" if field == "required" else "string"
            raise Refused({"error": "'%s' in survey question %d expected to be %s." % (field, idx, what)})
    if item["variable"] in seen:
        raise Refused({"error": "'variable' '%s' duplicated in survey question %d." % (item["variable"], idx)})
    seen.add(item["variable"])
    qtype = item["type"]
    if qtype not in SURVEY_TYPES:
        raise Refused(
            {
                "error": "'%s' in survey question %d is not one of '%s' allowed question types."
                % (qtype, idx, ", ".join(SURVEY_TYPES))
            }
        )
    if "default" in item and item["default"] != "" and not isinstance(item["default"], SURVEY_TYPES[qtype]):
        what = qtype if qtype in ("integer", "float") else "string"
        raise Refused(
            {"error": "Default value %s in survey question %d expected to be %s." % (item["default"], idx, what)}
        )
    for key in ("min", "max"):
        if key in item and item[key] is not None and not isinstance(item[key], int):
            raise Refused({"error": "The %s limit in survey question %d expected to be integer." % (key, idx)})


def _check_choices(idx: int, item: dict[str, Any]) -> None:
    """A multiple choice question's choices and default (normalised as AWX stores them)."""
    if "choices" not in item:
        raise Refused({"error": "Survey question %d of type %s must specify choices." % (idx, item["type"])})
    if isinstance(item["choices"], str):
        item["choices"] = "\n".join(c for c in item["choices"].splitlines() if c.strip() != "")
    if "default" not in item:
        return
    if isinstance(item["default"], str):
        item["default"] = "\n".join(c for c in item["default"].splitlines() if c.strip() != "")
        defaults = item["default"].splitlines()
    else:
        defaults = item["default"]
    if item["type"] == "multiplechoice" and len(defaults) > 1:
        raise Refused({"error": "Multiple Choice (Single Select) can only have one default value."})
    if any(d not in item["choices"] for d in defaults):
        raise Refused({"error": "Default choice must be answered from the choices listed."})


def _choices(item: dict[str, Any]) -> list[str]:
    choices = item["choices"]
    return [c for c in (choices.splitlines() if isinstance(choices, str) else choices) if c.strip() != ""]


def element_errors(item: dict[str, Any], data: dict[str, Any], validate_required: bool = True) -> list[str]:
    """``SurveyJobTemplateMixin._survey_element_validation`` (the password placeholder aside)."""
    var, qtype = item["variable"], item["type"]
    if var not in data:
        return ["'%s' value missing" % var] if item["required"] and validate_required else []
    value = data[var]
    if qtype in ("textarea", "text", "password"):
        return _text_errors(item, value)
    if qtype in ("integer", "float"):
        return _number_errors(item, value)
    if qtype == "multiselect":
        if type(value) is not list:
            return ["'%s' value is expected to be a list." % var]
        offered = _choices(item)
        return ["Value %s for '%s' expected to be one of %s." % (v, var, offered) for v in value if v not in offered]
    if qtype == "multiplechoice" and value not in _choices(item):
        return ["Value %s for '%s' expected to be one of %s." % (value, var, _choices(item))]
    return []


def _limits(item: dict[str, Any]) -> tuple[Any, Any]:
    return tuple(None if item.get(k) in ("", None) else item[k] for k in ("min", "max"))  # type: ignore[return-value]


def _text_errors(item: dict[str, Any], value: Any) -> list[str]:
    var = item["variable"]
    if not isinstance(value, str):
        return ["Value %s for '%s' expected to be a string." % (value, var)]
    low, high = _limits(item)
    errors = []
    if low is not None and len(value) < int(low):
        errors.append("'%s' value %s is too small (length is %s must be at least %s)." % (var, value, len(value), low))
    if high is not None and len(value) > int(high):
        errors.append("'%s' value %s is too large (must be no more than %s)." % (var, value, high))
    return errors


def _number_errors(item: dict[str, Any], value: Any) -> list[str]:
    var, integer = item["variable"], item["type"] == "integer"
    if (type(value) is not int) if integer else (type(value) not in (float, int)):
        return ["Value %s for '%s' expected to be %s." % (value, var, "an integer" if integer else "a numeric type")]
    low, high = _limits(item)
    bound = int if integer else float
    errors = []
    if low is not None and value < bound(low):
        errors.append("'%s' value %s is too small (must be at least %s)." % (var, value, low))
    if high is not None and value > bound(high):
        errors.append("'%s' value %s is too large (must be no more than %s)." % (var, value, high))
    return errors


def accept_or_ignore(
    template: dict[str, Any], data: dict[str, Any]
) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """``SurveyJobTemplateMixin._accept_or_ignore_variables``: (accepted, rejected, errors)."""
    extra = dict(data)
    accepted: dict[str, Any] = {}
    rejected: dict[str, Any] = {}
    errors: dict[str, Any] = {}
    spec = template.get("survey_spec") or {}
    if template.get("survey_enabled") and spec:
        problems: list[str] = []
        for item in spec.get("spec", []):
            key = item.get("variable")
            found = element_errors(item, data)
            if found:
                problems += found
                if key in extra:
                    rejected[key] = extra.pop(key)
            elif key in extra:
                accepted[key] = extra.pop(key)
        if problems:
            errors["variables_needed_to_start"] = problems
    if template.get("ask_variables_on_launch"):
        accepted.update(extra)
        extra = {}
    for key in set(parse_vars(template.get("extra_vars"))) & set(extra):
        if parse_vars(template.get("extra_vars"))[key] == extra[key]:
            extra.pop(key)
    if extra:
        rejected.update(extra)
        errors["extra_vars"] = [
            "Variables %s are not allowed on launch. Check the Prompt on Launch setting on the Job Template to "
            "include Extra Variables." % ", ".join(map(str, extra))
        ]
    return accepted, rejected, errors


def job_extra_vars(template: dict[str, Any], runtime: dict[str, Any]) -> dict[str, Any]:
    """``SurveyJobTemplateMixin._update_unified_job_kwargs``: the template's extra vars, then each survey default
    that passes its own question's validation, then the answers."""
    extra = parse_vars(template.get("extra_vars"))
    spec = template.get("survey_spec") or {}
    if template.get("survey_enabled") and "spec" in spec:
        for item in spec["spec"]:
            default = item.get("default")
            if default is not None and not element_errors(item, {item["variable"]: default}):
                extra[item["variable"]] = default
    extra.update(runtime)
    return extra


_FIELD_KEYS = {
    "type",
    "format",
    "choices",
    "id",
    "label",
    "help_text",
    "multiline",
    "secret",
    "ask_at_runtime",
    "default",
}


def check_credential_type(ctype: dict[str, Any]) -> None:
    """``CredentialTypeInputField`` and ``CredentialTypeInjectorField``: the inputs' schema, unique ids, defaults of
    the field's type, string-only keys; injectors only in ``env``/``extra_vars``/``file``, no ``ANSIBLE_*``
    variable, and each template rendering with only the type's fields defined."""
    inputs = ctype.get("inputs") or {}
    if set(inputs) - {"fields", "required"}:
        raise Refused(
            {"inputs": ["Additional properties are not allowed (%s)" % sorted(set(inputs) - {"fields", "required"})]}
        )
    ids: list[str] = []
    for field in inputs.get("fields", []):
        _check_input_field(field, ids)
    if set(inputs.get("required", [])) - set(ids):
        raise Refused(
            {"inputs": ["required names fields that do not exist: %s" % sorted(set(inputs["required"]) - set(ids))]}
        )
    injectors = ctype.get("injectors") or {}
    if set(injectors) - {"env", "extra_vars", "file"}:
        raise Refused({"injectors": ["Additional properties are not allowed"]})
    for var in injectors.get("env", {}):
        if var.startswith("ANSIBLE_"):
            raise Refused({"injectors": ["Environment variable %s may affect Ansible configuration" % var]})
    try:
        render_injectors(ctype, {}, strict_only=True)
    except Exception as exc:  # noqa: BLE001 (AWX's message is the exception's)
        raise Refused({"injectors": ["%s uses an undefined field (%s)" % (type(exc).__name__, exc)]}) from None


def _check_input_field(field: dict[str, Any], ids: list[str]) -> None:
    extra = set(field) - _FIELD_KEYS
    if extra or "id" not in field or "label" not in field:
        raise Refused(
            {"inputs": ["invalid field %s: keys %s, id and label required" % (field.get("id"), sorted(extra))]}
        )
    if not re.fullmatch(r"[a-zA-Z_]+[a-zA-Z0-9_]*", field["id"]) or field["id"] == "tower" or field["id"] in ids:
        raise Refused({"inputs": ["%s is an invalid, reserved or repeated field id" % field["id"]]})
    ids.append(field["id"])
    kind = field.setdefault("type", "string")
    if kind not in ("string", "boolean"):
        raise Refused({"inputs": ["%r is not one of ['string', 'boolean']" % kind]})
    if "default" in field and type(field["default"]) is not {"string": str, "boolean": bool}[kind]:
        raise Refused({"inputs": ["%s is not a %s" % (field["default"], kind)]})
    for key in ("choices", "multiline", "format", "secret"):
        if key in field and kind != "string":
            raise Refused({"inputs": ["%s not allowed for %s type (%s)" % (key, kind, field["id"])]})


def check_credential_inputs(ctype: dict[str, Any], inputs: dict[str, Any]) -> dict[str, Any]:
    """``CredentialInputField``: only the type's fields, each of its type and among its choices, every required one
    given; a field given empty takes its type's default (``default_for_field``)."""
    fields = {f["id"]: f for f in ctype["inputs"].get("fields", [])}
    out = dict(inputs)
    for key, value in inputs.items():
        field = fields.get(key)
        if field is None:
            raise Refused({"inputs": {key: ["Additional properties are not allowed"]}})
        if not value and value is not False:
            out[key] = (
                field["choices"][0]
                if "choices" in field
                else {"string": "", "boolean": False}[field.get("type", "string")]
            )
            continue
        kind = bool if field.get("type") == "boolean" else str
        if type(value) is not kind:
            raise Refused({"inputs": {key: ["%r is not of type %r" % (value, field.get("type", "string"))]}})
        if "choices" in field and value not in field["choices"]:
            raise Refused({"inputs": {key: ["%r is not one of %r" % (value, field["choices"])]}})
    for key in ctype["inputs"].get("required", []):
        if not out.get(key) and out.get(key) is not False:
            raise Refused({"inputs": {key: ["required for %s" % ctype.get("name")]}})
    return out


def check_notification(template: dict[str, Any]) -> dict[str, Any]:
    """``NotificationTemplateSerializer.validate``: the configuration has every parameter of its type's backend
    (a missing one with a default takes it), each of its type; a webhook's method is POST or PUT."""
    kind = template.get("notification_type")
    if not kind:
        raise Refused(
            {"non_field_errors": ["Missing required fields for Notification Configuration: notification_type"]}
        )
    if kind not in NOTIFICATION_PARAMETERS:
        raise Refused({"notification_type": ["the fake AWX knows %s only" % sorted(NOTIFICATION_PARAMETERS)]})
    config = dict(template.get("notification_configuration") or {})
    missing, errors = [], []
    for field, (ftype, default) in NOTIFICATION_PARAMETERS[kind].items():
        if field not in config:
            if default is REQUIRED:
                missing.append(field)
                continue
            config[field] = default
        value = config[field]
        if type(value) not in _TYPE_MAP[ftype]:
            errors.append("Configuration field '%s' incorrect type, expected %s." % (field, ftype))
        elif ftype == "list" and not value:
            errors.append("No values specified for field '%s'" % field)
        elif field == "http_method" and value.lower() not in ("put", "post"):
            errors.append("HTTP method must be either 'POST' or 'PUT'.")
    if missing:
        errors.append("Missing required fields for Notification Configuration: %s." % missing)
    if errors:
        raise Refused({"non_field_errors": errors})
    return config


def check_rrule(rrule: str) -> None:
    """``SchedulePreviewSerializer.validate_rrule`` (its checks before dateutil's parse)."""
    errors = []
    starts = re.findall(r".*?(DTSTART(;[^:]+)?\:[0-9]+T[0-9]+Z?)", rrule)
    if not starts:
        errors.append("Valid DTSTART required in rrule. Value should start with: DTSTART:YYYYMMDDTHHMMSSZ")
    if re.findall(r".*?(DTSTART:[0-9]+T[0-9]+) ", rrule):
        errors.append("DTSTART cannot be a naive datetime.  Specify ;TZINFO= or YYYYMMDDTHHMMSSZZ.")
    if len(starts) > 1:
        errors.append("Multiple DTSTART is not supported.")
    if "rrule:" not in rrule.lower():
        errors.append("One or more rule required in rrule.")
    errors += ["%s not allowed in rrule." % w[:-1].upper() for w in ("exdate:", "rdate:") if w in rrule.lower()]
    for rule in re.findall(r".*?(RULE\:[^\s]*)", rrule):
        errors += _rule_errors(rule)
    if errors:
        raise Refused({"rrule": errors})


def _rule_errors(rule: str) -> list[str]:
    errors = []
    if "interval" not in rule.lower():
        errors.append("INTERVAL required in rrule: %s" % rule)
    elif "secondly" in rule.lower():
        errors.append("SECONDLY is not supported: %s" % rule)
    if re.match(r".*?BYDAY[\:\=][0-9]+[a-zA-Z]{2}", rule):
        errors.append("BYDAY with numeric prefix not supported: %s" % rule)
    if "COUNT" in rule and "UNTIL" in rule:
        errors.append("RRULE may not contain both COUNT and UNTIL: %s" % rule)
    return errors


def render_injectors(
    credential_type: dict[str, Any], inputs: dict[str, Any], strict_only: bool = False
) -> dict[str, str]:
    """The environment AWX gives a job for a credential of ``credential_type`` with ``inputs``, by AWX's rules.

    AWX first checks the type's injector templates (when the type is saved): each must render in a sandbox where
    only the type's input fields exist (an undefined name is an error).  At job time (``inject_credential``) it
    renders each ``env`` template with ``jinja2.sandbox.ImmutableSandboxedEnvironment`` over a namespace of the
    credential's inputs (a string only when not empty; a boolean always, and a boolean field the credential does not
    set is False), plus ``tower``, once per variable, and puts the result in the job's environment as is.
    """
    from jinja2 import StrictUndefined
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    fields = credential_type.get("inputs", {}).get("fields", [])
    ids = [str(f["id"]) for f in fields]
    strict = ImmutableSandboxedEnvironment(undefined=StrictUndefined)
    templates = credential_type.get("injectors", {}).get("env", {})
    for tmpl in templates.values():
        strict.from_string(tmpl).render(**dict.fromkeys(ids, "EXAMPLE"), tower={})
    if strict_only:
        return {}
    namespace: dict[str, Any] = {"tower": {}}
    for key, value in inputs.items():
        if key in ids and (type(value) is bool or len(value)):
            namespace[key] = value
    for field in fields:
        if field.get("type") == "boolean" and field["id"] not in inputs:
            namespace[field["id"]] = False
    sandbox = ImmutableSandboxedEnvironment()
    return {var: sandbox.from_string(tmpl).render(**namespace) for var, tmpl in templates.items()}
