"""The collection's one table of the platform's operations (``plugins/module_utils/platform/api.py``), as the
emulator finds it: operationId -> method, path template, query and body names; and the rule that classes a
request as a read or a mutation."""

from __future__ import annotations

import importlib
import importlib.util
import os
from collections.abc import Callable
from types import ModuleType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ansible_collections.whitesky.capvco.plugins.module_utils.platform.api import Operation

#: This checkout's root (the emulator is a development package of the repository, installed editable).
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
#: The collection's table of the platform's operations, as a file of this checkout.
API_FILE = os.path.join(ROOT, "plugins", "module_utils", "platform", "api.py")


def load_api() -> ModuleType:
    """The project's one table of operations (``module_utils/platform/api.py``: operationId -> method, path, ...).

    Imported from the collection when it is on the path (``make link``); else the copy a built emulator carries
    (``pip install ./emulator``: emulator/setup.py packs it as ``_api``); else (an editable install without the
    link) read from this checkout's file, which imports nothing of the collection.
    """
    try:
        return importlib.import_module("ansible_collections.whitesky.capvco.plugins.module_utils.platform.api")
    except ImportError:
        pass
    try:
        return importlib.import_module("whitesky_emulator._api")  # only in a built emulator
    except ImportError:
        pass
    spec = importlib.util.spec_from_file_location("whitesky_emulator._capvco_api", API_FILE)
    if spec is None or spec.loader is None:
        raise ImportError("the table of the API's operations is missing: %s" % API_FILE)
    table = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(table)
    return table


API = load_api()
#: operationId -> Operation(method, path template, query names, body names) of every operation the project knows
OPERATIONS: dict[str, Operation] = API.OPERATIONS
#: a request's rate-limit class (read or mutating), by the collection's one rule
request_class: Callable[[str], str] = API.request_class
