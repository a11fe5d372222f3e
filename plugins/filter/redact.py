# -*- coding: utf-8 -*-
# Copyright: (c) 2026, whitesky.capvco contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ``redact`` filter: a structure that holds a secret (a cluster spec with the SR-IOV agent's credential), fit
to show: the values of the keys that the collection's one scrubber (``platform.scrub``) takes for secret-ish are
masked, and in every other string a secret given to it, wherever it stands, and the forms of a secret the scrubber
knows (a bearer token, a URL's credentials), so that a task that holds the structure needs no ``no_log`` and its
failure reads with its reason."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from ansible_collections.whitesky.capvco.plugins.module_utils.platform.scrub import _STEMS, mask_secrets

#: What stands for a masked value (what Ansible shows for a no_log option's value, too).
MASK = "********"
#: A key whose value is a secret: a name with one of the scrubber's stems in it (token, password, credential...).
_SECRET_KEY = re.compile(r"(?i)(?:%s)" % _STEMS)


def _secrets(secrets: object) -> list[str]:
    if secrets is None:
        return []
    if isinstance(secrets, (str, bytes)) or not isinstance(secrets, Iterable):
        secrets = [secrets]
    return [str(s) for s in secrets if s is not None and str(s).strip()]


def redact(value: object, secrets: object = None, mask: str = MASK) -> object:
    """``value`` (a dict, a list, a scalar) with the value of every secret-ish key (a name with ``token``,
    ``password``, ``credential``, ``secret``... in it) that is no mapping or list replaced by ``mask``; in every other
    string, each of ``secrets`` wherever it occurs and each form of a secret the scrubber knows (a bearer token, a
    URL's credentials, a JWT, a secret-ish key's value in the text) replaced by ``mask`` too; what else it holds is
    kept as it is (keys, numbers, booleans)."""
    hidden = sorted(set(_secrets(secrets)), key=len, reverse=True)  # the longest first: one that holds another

    def walk(item: object, secret_key: bool, depth: int) -> object:
        if depth > 32:
            return mask
        if isinstance(item, Mapping):
            return {k: walk(v, bool(_SECRET_KEY.search(str(k))), depth + 1) for k, v in item.items()}
        if isinstance(item, (list, tuple)):
            return [walk(v, secret_key, depth + 1) for v in item]
        if item is None or isinstance(item, bool):
            return item
        if secret_key:
            return mask
        if isinstance(item, str):
            return mask_secrets(item, hidden, mask)
        return item

    return walk(value, False, 0)


class FilterModule:
    def filters(self) -> dict[str, object]:
        return {"redact": redact}
