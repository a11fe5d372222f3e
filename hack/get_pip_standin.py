"""Offline stand-in for ansible-test's get-pip bootstrap script.

ansible-test downloads get-pip.py from a host that is not reachable here; it
uses a cached copy at ~/.ansible/test/cache/get_pip_<version>.py when present.
This stand-in does what get-pip does with the packages it is given: bring pip
up with ensurepip, then install them from the package index.
"""

import subprocess
import sys

ARGS = [a for a in sys.argv[1:] if a not in ("--no-setuptools", "--no-wheel")]
subprocess.check_call([sys.executable, "-m", "ensurepip", "--upgrade"])
subprocess.check_call([sys.executable, "-m", "pip", "install"] + ARGS)
