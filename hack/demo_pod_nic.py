#!/usr/bin/env python3
"""The demo pod's external NIC, through the real node agent and CNI plugin (site.yml runs this in `make demo`).

It makes a small netns lab (TEST-NET addresses only) whose node is one of the
demo cluster's VMs on the running emulator, starts the node agent for that VM,
and runs the CNI plugin's ADD for a pod: the pod gets net1 with the platform's
address and pings the external host over it. Then DEL returns the NIC. Needs
root; without it, it says so and does nothing.

    hack/demo_pod_nic.py --vm-name demo-gpu-0 --cloudspace-id cs-xxxx --location be-gen-1
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [os.path.join(ROOT, "tests", "e2e"), os.path.join(ROOT, "tests")]

from helpers import Emulator, ensure_collection_link  # noqa: E402
from lab import Lab, missing  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--vm-name", required=True)
    ap.add_argument("--cloudspace-id", required=True)
    ap.add_argument("--location", required=True)
    args = ap.parse_args()
    lacking = missing()
    if lacking:
        print(json.dumps({"skipped": "the pod NIC step needs %s on this machine" % ", ".join(lacking)}))
        return 0
    ensure_collection_link()
    emu = Emulator(tempfile.mkdtemp(), token=os.environ["WHITESKY_API_TOKEN"])
    emu.url = os.environ["WHITESKY_API_URL"]
    emu.admin_url = emu.url[: -len("/api/1")] + "/_emulator"
    lab = Lab(pathlib.Path(tempfile.mkdtemp()), emu=emu, vm_name=args.vm_name, cloudspace_id=args.cloudspace_id,
              location=args.location).up(grace=30, interval=5)
    try:
        pod = lab.add_pod(1)
        rc, res = lab.cni("ADD", pod, container="demo-pod", uid="demo-pod-uid")
        if rc != 0:
            print(json.dumps({"failed": res}))
            return 1
        attached = len(lab.platform_nics())
        ping = lab.ping(pod)
        rc_del, _ = lab.cni("DEL", pod, container="demo-pod")
        left = len(lab.platform_nics())
        print(json.dumps({"pod": "demo-pod", "vm": args.vm_name, "net1": res["ips"][0]["address"],
                          "mac": res["interfaces"][0]["mac"], "attached_nics": attached,
                          "ping_external_host": ping == 0, "del_rc": rc_del, "nics_left": left}))
        return 0 if (ping == 0 and rc_del == 0 and left == 0) else 1
    finally:
        lab.down()


if __name__ == "__main__":
    sys.exit(main())
