"""A local apt repository of stub NVIDIA driver packages, served over HTTP on loopback.

The packages are named like the real ones (nvidia-headless-<branch>-server,
nvidia-utils-<branch>-server, linux-headers-<running kernel>). The stub
``nvidia-smi`` prints what the real one prints for
``--query-gpu=driver_version,name --format=csv,noheader``, for the GPU count,
version and name in ``/etc/nvidia-stub.conf`` (a test may edit it). The server
can be told to fail the next K requests, or every request.
"""

from __future__ import annotations

import gzip
import hashlib
import http.server
import os
import platform
import subprocess
import threading

NVIDIA_SMI = r"""#!/bin/sh
# stub nvidia-smi (whitesky.capvco tests)
. /etc/nvidia-stub.conf
if [ "${FAIL:-0}" != 0 ]; then
  echo "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "\
"Make sure that the latest NVIDIA driver is installed and running."
  exit 9
fi
case "$*" in
  *--query-gpu=driver_version,name*)
    i=0
    while [ "$i" -lt "$COUNT" ]; do echo "$VERSION, $NAME"; i=$((i + 1)); done ;;
  *)
    echo "NVIDIA-SMI $VERSION   Driver Version: $VERSION   GPUs: $COUNT" ;;
esac
"""


def _deb(workdir, name, version, files=None, conffiles=()):
    root = os.path.join(workdir, "%s_%s" % (name, version))
    os.makedirs(os.path.join(root, "DEBIAN"), exist_ok=True)
    with open(os.path.join(root, "DEBIAN", "control"), "w", encoding="utf-8") as fh:
        fh.write(
            "Package: %s\nVersion: %s\nArchitecture: all\nMaintainer: capvco tests <t@example.invalid>\n"
            "Description: stub of %s for whitesky.capvco tests\n" % (name, version, name)
        )
    if conffiles:
        with open(os.path.join(root, "DEBIAN", "conffiles"), "w", encoding="utf-8") as fh:
            fh.write("".join(c + "\n" for c in conffiles))
    for path, (content, mode) in (files or {}).items():
        full = os.path.join(root, path.lstrip("/"))
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "w", encoding="utf-8") as fh:
            fh.write(content)
        os.chmod(full, mode)
    out = os.path.join(workdir, "repo", "%s_%s_all.deb" % (name, version))
    subprocess.run(["dpkg-deb", "--root-owner-group", "-Zgzip", "--build", root, out], check=True, capture_output=True)


def build_repo(workdir, branches=(("550", "550.127.05"),), count=2, name="NVIDIA A100-SXM4-40GB"):
    """Build the repository under ``workdir/repo``; return its path."""
    repo = os.path.join(workdir, "repo")
    os.makedirs(repo, exist_ok=True)
    for branch, version in branches:
        conf = 'VERSION=%s\nCOUNT=%d\nNAME="%s"\nFAIL=0\n' % (version, count, name)
        _deb(
            workdir,
            "nvidia-headless-%s-server" % branch,
            version,
            {"/usr/bin/nvidia-smi": (NVIDIA_SMI, 0o755), "/etc/nvidia-stub.conf": (conf, 0o644)},
            conffiles=["/etc/nvidia-stub.conf"],
        )
        _deb(
            workdir,
            "nvidia-utils-%s-server" % branch,
            version,
            {"/usr/share/doc/nvidia-utils-%s-server/README" % branch: ("stub\n", 0o644)},
        )
    _deb(
        workdir,
        "linux-headers-%s" % platform.release(),
        "1.0",
        {"/usr/src/linux-headers-%s/README" % platform.release(): ("stub\n", 0o644)},
    )
    packages = subprocess.run(
        ["dpkg-scanpackages", "--multiversion", "."], cwd=repo, check=True, capture_output=True
    ).stdout
    with open(os.path.join(repo, "Packages"), "wb") as fh:
        fh.write(packages)
    with gzip.open(os.path.join(repo, "Packages.gz"), "wb") as fh:
        fh.write(packages)
    lines = [
        "Origin: capvco-tests",
        "Label: capvco-tests",
        "Suite: stable",
        "Codename: stable",
        "Architectures: all amd64 arm64",
        "SHA256:",
    ]
    for fname in ("Packages", "Packages.gz"):
        with open(os.path.join(repo, fname), "rb") as fh:
            data = fh.read()
        lines.append(" %s %d %s" % (hashlib.sha256(data).hexdigest(), len(data), fname))
    with open(os.path.join(repo, "Release"), "w", encoding="utf-8") as fh:
        fh.write("\n".join(lines) + "\n")
    return repo


class FlakyRepo:
    """Serve the repository on 127.0.0.1; ``fail_next(k)`` or ``fail_always()`` make it answer 503."""

    def __init__(self, directory):
        self.directory = directory
        self.failures_left = 0
        self.always = False
        self.requests = 0
        self.failed = 0
        repo = self

        class Handler(http.server.SimpleHTTPRequestHandler):
            def __init__(self, *args, **kw):
                super().__init__(*args, directory=repo.directory, **kw)

            def log_message(self, *args):
                pass

            def _maybe_fail(self):
                repo.requests += 1
                if repo.always or repo.failures_left > 0:
                    repo.failures_left = max(0, repo.failures_left - 1)
                    repo.failed += 1
                    self.send_error(503, "repository unavailable (injected)")
                    return True
                return False

            def do_GET(self):
                if not self._maybe_fail():
                    super().do_GET()

            def do_HEAD(self):
                if not self._maybe_fail():
                    super().do_HEAD()

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self):
        return "http://127.0.0.1:%d" % self.port

    def fail_next(self, k):
        self.failures_left = k

    def fail_always(self, on=True):
        self.always = on

    def stop(self):
        self.server.shutdown()


def main():
    """``python aptrepo.py DIR PORTFILE``: build the repository in DIR, serve it, write the port to PORTFILE."""
    import sys
    import time

    served = FlakyRepo(build_repo(sys.argv[1]))
    with open(sys.argv[2], "w", encoding="utf-8") as fh:
        fh.write(str(served.port))
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    main()
