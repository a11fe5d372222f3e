"""The emulator's build: setuptools (pyproject.toml) plus one step.

The emulator serves the operations of the collection's one table of the platform's API
(plugins/module_utils/platform/api.py).  An editable install reads that file from the checkout; a built wheel (a
``pip install ./emulator``) carries a copy of it, made here at build time as ``whitesky_emulator/_api.py``, so
the installed emulator serves exactly the table of the checkout it was built from.
"""

import os

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
API = os.path.join(os.path.dirname(HERE), "plugins", "module_utils", "platform", "api.py")


class BuildWithApiTable(build_py):
    def run(self):
        super().run()
        if getattr(self, "editable_mode", False):  # an editable install reads the checkout's file
            return
        if not os.path.isfile(API):
            raise SystemExit("building the emulator needs the collection's %s (build from the repository)" % API)
        target = os.path.join(self.build_lib, "whitesky_emulator")
        self.mkpath(target)
        self.copy_file(API, os.path.join(target, "_api.py"))


setup(cmdclass={"build_py": BuildWithApiTable})
