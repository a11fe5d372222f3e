#!/usr/bin/env python3
"""shellcheck over every shell script the collection ships or runs: the files, and the scripts the first boot and
the gpu_driver role render from plugins/module_utils/firstboot/render.py (shell held in Python strings, since AnsiballZ
ships only Python files of module_utils), one per variant.  Exits non-zero on any finding."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile

from ansible_collections.whitesky.capvco.plugins.module_utils.firstboot import render as firstboot

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GPU = {"version": "550", "count": 2, "wait": 10}


def rendered():
    """Every variant of the rendered scripts: with and without packages, a bootstrap script or cloud-config, a
    provider id, the GPU driver step (pinned or not), and the driver script's install, verify and check."""
    yield "first-boot-bare", firstboot.render()
    yield (
        "first-boot-full",
        firstboot.render(
            ["containerd", "kubelet=1.30*"], "#!/bin/sh\necho hi\n", provider_id="whitesky://l/cs/vm", gpu_driver=GPU
        ),
    )
    yield "first-boot-driver-of-the-image", firstboot.render(gpu_driver=dict(GPU, version=""))
    yield "gpu-driver-install", firstboot.render_gpu_driver("550.127.05", 2)
    yield "gpu-driver-verify", firstboot.render_gpu_driver("550", 1, install=False)
    yield "gpu-driver-check", firstboot.render_gpu_driver("550", 1, check=True)


def main():
    files = subprocess.run(["git", "ls-files", "*.sh"], cwd=ROOT, capture_output=True, text=True, check=True)
    paths = [os.path.join(ROOT, p) for p in files.stdout.split()]
    with tempfile.TemporaryDirectory() as tmp:
        for name, text in rendered():
            path = os.path.join(tmp, name + ".sh")
            with open(path, "w", encoding="utf-8") as fh:
                fh.write(text)
            paths.append(path)
        proc = subprocess.run(["shellcheck", "-f", "gcc", *paths], capture_output=True, text=True)
    print(proc.stdout, end="")
    print("shellcheck: %d script(s), %s" % (len(paths), "no findings" if proc.returncode == 0 else "FINDINGS"))
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main())
