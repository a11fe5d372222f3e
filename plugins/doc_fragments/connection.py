# -*- coding: utf-8 -*-
# Copyright: (c) 2026, whitesky.capvco contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations


class ModuleDocFragment:
    """The connection options shared by every module of the collection."""

    DOCUMENTATION = r"""
options:
  api_url:
    description:
      - Base URL of the whitesky.cloud portal API, for example C(https://portal.example.com/api/1).
      - C(/api/1) is appended when missing.
      - Required, from this option or else the E(WHITESKY_API_URL) environment variable; a run without either fails
        before any call, naming both.
    type: str
  api_token:
    description:
      - The bearer token (a JWT) used in the C(Authorization) header.
      - An expired JWT fails before any call is made. A token that is not a JWT is passed on as it is.
      - It is never logged nor returned.
      - Required, from this option or else the E(WHITESKY_API_TOKEN) environment variable; a run without either fails
        before any call, naming both.
    type: str
  customer_id:
    description:
      - The customer (account) that owns the resources.
      - Required, from this option or else the E(WHITESKY_CUSTOMER_ID) environment variable; a run without either fails
        before any call, naming both.
    type: str
  validate_certs:
    description:
      - Whether to verify the portal's TLS certificate.
      - If not set, the value of the E(WHITESKY_VALIDATE_CERTS) environment variable is used (C(true) or C(false)),
        else true.
      - A plain C(http://) O(api_url) to a host that is not loopback works, with a warning, as the token travels
        unencrypted.
    type: bool
    default: true
  timeout:
    description:
      - Timeout in seconds of each HTTP request.
      - If not set, the value of the E(WHITESKY_TIMEOUT) environment variable is used, else 30.
      - Each platform call, with its retries, ends at the latest O(timeout) plus a retry budget of 30 seconds
        after it started, with an error that says how many attempts were made and why; at most 6 attempts.
      - Retried, with jittered exponential backoff, are requests that were never sent, HTTP 429 (honouring
        C(Retry-After) when it fits in the call's deadline, else the call ends at once), and, for idempotent
        requests, 502, 503, 504 and a lost answer. A mutating call whose outcome is unknown is first looked
        up (for example a reservation by its name, once the VM it was sent to is no longer locked) and sent again
        only if it did not happen. A call refused because another operation holds the VM's lock is waited out.
        TLS failures are never retried.
    type: float
    default: 30.0
requirements:
  - httpx >= 0.24
"""

    ACTIONGROUPS = r"""
options: {}
attributes:
  action_group:
    description: Use C(group/whitesky.capvco.all) in C(module_defaults) to set the connection options once.
    support: full
    membership:
      - whitesky.capvco.all
"""

    INFO_MODULE = r"""
options: {}
attributes:
  check_mode:
    description: Can run in check mode and return the same result.
    support: full
  diff_mode:
    description: Nothing changes, so there is no diff.
    support: none
"""
