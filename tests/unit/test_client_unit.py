"""Client behaviour that needs no server: JWT expiry, secrets, declared operations."""

from __future__ import annotations

import base64
import json
import time

import pytest

from ansible_collections.whitesky.capvco.plugins.module_utils import client as core
from ansible_collections.whitesky.capvco.plugins.module_utils import errors, transport


def jwt(claims):
    def enc(obj):
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).rstrip(b"=").decode()

    return "%s.%s.%s" % (enc({"alg": "ES384", "typ": "JWT"}), enc(claims), "c2lnbmF0dXJl")


def test_jwt_expiry_decoded():
    assert transport.jwt_expiry(jwt({"exp": 1234567890, "iss": "itsyouonline"})) == 1234567890


def test_non_jwt_passes_through():
    assert transport.jwt_expiry("plain-api-token") is None
    assert transport.jwt_expiry("a.b.c") is None  # three parts, but not base64 JSON
    c = core.WhiteskyClient("http://127.0.0.1:9", "plain-api-token", "cust")
    assert c.base_url == "http://127.0.0.1:9/api/1"


def test_expired_jwt_fails_early_without_the_token():
    token = jwt({"exp": int(time.time()) - 60})
    with pytest.raises(errors.ApiError) as err:
        core.WhiteskyClient("http://127.0.0.1:9/api/1", token, "cust")
    assert "expired" in str(err.value)
    assert token not in str(err.value) and token not in repr(err.value)


def test_valid_jwt_accepted_and_never_in_repr():
    token = jwt({"exp": int(time.time()) + 3600})
    c = core.WhiteskyClient("http://127.0.0.1:9/api/1/", token, "cust")
    assert token not in repr(c) and token not in str(vars(c).get("base_url"))


@pytest.mark.parametrize("field,value", [("api_url", ""), ("token", ""), ("customer_id", "")])
def test_missing_connection_option_names_it(field, value):
    args = {"api_url": "http://x", "token": "t", "customer_id": "c", field: value}
    with pytest.raises(errors.InputError) as err:
        core.WhiteskyClient(**args)
    assert {"api_url": "api_url", "token": "api_token", "customer_id": "customer_id"}[field] in str(err.value)


def test_undeclared_parameter_is_refused_before_sending():
    c = core.WhiteskyClient("http://127.0.0.1:9", "t", "cust")
    with pytest.raises(errors.WhiteskyError, match="takes no parameter"):
        c.call("listAvailableGPUProfiles", query={"bogus": 1}, location="x")


def test_backoff_honours_retry_after_and_grows():
    c = core.WhiteskyClient("http://127.0.0.1:9", "t", "cust", backoff=1.0, max_backoff=8.0)
    assert 2.0 <= c._delay(1, retry_after=2.0) <= 2.1
    assert all(0 <= c._delay(4) <= 8.0 for _ in range(100))
    assert max(c._delay(4) for _ in range(200)) > 1.0  # grows past the first step
