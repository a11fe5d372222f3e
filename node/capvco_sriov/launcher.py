#!/usr/bin/python3 -IS
"""capvco-sriov, as installed in the CNI bin directory: the plugin's body is ``capvco-sriov.d/capvco_sriov_shim.py``
beside it (and the wire format it imports, ``capvco-sriov.d/capvco_sriov/wire.py``), imported from there, so that
Python keeps them compiled (``__pycache__``) instead of compiling the body on every run: a script given by path is
compiled each time it starts, a module is not (about 6 ms of each run).

Installed by ``node/install-cni-plugin.sh``.
"""

import sys

sys.path.insert(0, __file__ + ".d")
from capvco_sriov_shim import main  # noqa: E402  (the path first)

main()
