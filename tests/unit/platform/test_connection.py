# -*- coding: utf-8 -*-
# Copyright: (c) 2026, whitesky.capvco contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one platform connection (``platform/connection.py``): its table of options agrees with every place that
documents them (the modules' doc fragment, the inventory plugin's and the event source's ``DOCUMENTATION``, static
YAML all), the users take their options from it, and a connection never shows its token."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
import yaml

from ansible_collections.whitesky.capvco.plugins.module_utils.faces import events
from ansible_collections.whitesky.capvco.plugins.module_utils.faces import module as module_base
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.connection import (
    OPTIONS,
    REQUIRED,
    Connection,
    missing,
)
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.errors import InputError

ROOT = Path(__file__).resolve().parents[3]
#: Where the connection options are documented, and how each place documents an option's variable.
DOCUMENTED = {
    "plugins/doc_fragments/connection.py": "description",
    "plugins/inventory/vms.py": "env",
    "extensions/eda/plugins/event_source/vgpu_events.py": "description",
}
TOKEN = "tok-0123456789-not-a-jwt"  # noqa: S105 (a test's own credential)


def documentation(relative: str) -> dict:
    """The options of the file's ``DOCUMENTATION`` (a module's, or a class's: the doc fragment), read without
    importing it."""
    for node in ast.walk(ast.parse((ROOT / relative).read_text(encoding="utf-8"))):
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "DOCUMENTATION" for t in node.targets):
            return yaml.safe_load(ast.literal_eval(node.value))["options"]
    raise AssertionError("%s has no DOCUMENTATION" % relative)


def description(doc: dict) -> str:
    text = doc.get("description", "")
    return " ".join(text) if isinstance(text, list) else str(text)


@pytest.mark.parametrize("relative", sorted(DOCUMENTED))
def test_every_documentation_of_the_options_agrees_with_the_table(relative):
    options = documentation(relative)
    for option in OPTIONS:
        doc = options.get(option.name)
        assert doc is not None, (relative, option.name)
        assert doc.get("type") == option.type, (relative, option.name)
        assert doc.get("default") == option.default, (relative, option.name, "default")
        said = description(doc)
        variables = set(re.findall(r"\bWHITESKY_[A-Z_]+", said))
        if DOCUMENTED[relative] == "env" and option.env is not None:
            assert doc.get("env") == [{"name": option.env}], (relative, option.name)
        elif option.env is not None:
            assert "E(%s)" % option.env in said, (relative, option.name)
        assert variables <= {option.env}, (relative, option.name, "names another option's variable")
        assert bool(re.search(r"\bnever (logged|printed)", said, re.I)) == option.no_log, (relative, option.name)
    for name, doc in options.items():  # no other option falls back to a connection variable
        if name not in {o.name for o in OPTIONS}:
            assert not re.search(r"\bWHITESKY_", description(doc) + str(doc.get("env", ""))), (relative, name)


def test_the_users_take_their_options_from_the_table():
    assert list(module_base.CONNECTION_SPEC) == [o.name for o in OPTIONS]
    for option in OPTIONS:
        spec = module_base.CONNECTION_SPEC[option.name]
        assert spec["type"] == option.type and spec.get("default") == option.default
        assert spec.get("no_log", False) == option.no_log
        assert (spec["fallback"][1] if "fallback" in spec else [None]) == [option.env]
    assert {o.name for o in OPTIONS} <= events.ARGUMENTS


def test_a_connection_never_shows_its_token():
    conn = Connection("https://portal.example/api/1", TOKEN, "acme")
    assert TOKEN not in repr(conn) and TOKEN not in str(conn) and "acme" in repr(conn)
    said = conn.redact("sent %s\nand Bearer %s \x1b" % (TOKEN, TOKEN))
    assert TOKEN not in said and said.startswith("sent ***\\nand Bearer ***") and "\\x1b" in said
    assert conn.redact("a\n%s" % TOKEN, multiline=True) == "a\n***"


def test_a_connection_from_options_falls_back_to_the_environment_then_the_default():
    environ = {"WHITESKY_API_URL": "https://p.example", "WHITESKY_API_TOKEN": TOKEN, "WHITESKY_TIMEOUT": "5"}
    got = Connection.from_options({"customer_id": " acme ", "validate_certs": "no"}, environ)
    assert got == Connection("https://p.example", TOKEN, "acme", validate_certs=False, timeout=5.0)
    assert Connection.from_options({"api_url": "u", "api_token": "t", "customer_id": "c"}).timeout == 30.0
    assert Connection.from_options({"api_url": "u", "api_token": "t", "customer_id": "c"}, environ).api_url == "u"


def test_a_connection_without_a_required_option_names_it_and_its_variable():
    assert REQUIRED == ("api_url", "api_token", "customer_id")
    with pytest.raises(InputError) as err:
        Connection.from_options({"api_url": "u", "api_token": "  "}, {}, where=" in somewhere")
    assert str(err.value) == (
        "missing the platform connection: api_token, customer_id. Set the options in somewhere, or the environment "
        "variables WHITESKY_API_TOKEN, WHITESKY_CUSTOMER_ID."
    )
    assert missing(["api_url"]) == (
        "missing the platform connection: api_url. Set the option, or the environment variable WHITESKY_API_URL."
    )


@pytest.mark.parametrize(
    ("options", "says"),
    [
        ({"customer_id": "../other"}, "invalid customer_id"),
        ({"timeout": 0}, "timeout must be a number of more than 0.0"),
        ({"validate_certs": "maybe"}, "validate_certs must be true or false"),
        ({"api_url": 5}, "api_url must be a string, got a int"),
    ],
)
def test_a_connection_option_of_the_wrong_form_is_refused_naming_it(options, says):
    with pytest.raises(InputError, match=re.escape(says)):
        Connection.from_options(dict({"api_url": "u", "api_token": "t", "customer_id": "c"}, **options))


def test_validate_certs_comes_from_its_environment_variable_when_not_given():
    from ansible_collections.whitesky.capvco.plugins.module_utils.platform.connection import Connection

    env = {"WHITESKY_API_URL": "https://p.example/api/1", "WHITESKY_API_TOKEN": "t", "WHITESKY_CUSTOMER_ID": "acme"}
    assert Connection.from_options({}, env).validate_certs is True
    assert Connection.from_options({}, dict(env, WHITESKY_VALIDATE_CERTS="false")).validate_certs is False
    assert Connection.from_options({"validate_certs": True}, dict(env, WHITESKY_VALIDATE_CERTS="false")).validate_certs
