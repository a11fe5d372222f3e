"""The demo pod's external NIC, through the real node agent and CNI plugin (``make demo`` runs this from site.yml).

It makes a small netns lab (TEST-NET addresses only) whose node is one of the
demo cluster's VMs on the running emulator, starts the node agent for that VM,
and runs the CNI plugin's ADD for a pod: the pod gets net1 with the platform's
address and pings the external host over it. Then DEL returns the NIC, and
the lab (the agent's credential file included) is removed. Without root,
iproute2, ping or network namespaces it says what is missing and does nothing.

    python -m capvco_lab.demo_pod_nic --vm-name demo-gpu-0 --cloudspace-id cs-xxxx --location be-gen-1

The platform is named by the ``WHITESKY_API_URL`` and ``WHITESKY_API_TOKEN`` variables.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import shutil
import sys
import tempfile

from capvco_lab.emulator import Emulator
from capvco_lab.netlab import Lab, missing


def main(argv=None):
    ap = argparse.ArgumentParser(prog="capvco_lab.demo_pod_nic", description=__doc__.split("\n")[0])
    ap.add_argument("--vm-name", required=True)
    ap.add_argument("--cloudspace-id", required=True)
    ap.add_argument("--location", required=True)
    args = ap.parse_args(argv)
    lacking = missing()
    if lacking:
        print(json.dumps({"skipped": "the pod NIC step needs %s on this machine" % ", ".join(lacking)}))
        return 0
    emu = Emulator.running(os.environ["WHITESKY_API_URL"], token=os.environ["WHITESKY_API_TOKEN"])
    work = pathlib.Path(tempfile.mkdtemp(prefix="capvco-demo-"))
    try:
        lab = Lab(work, emu=emu, vm_name=args.vm_name, cloudspace_id=args.cloudspace_id, location=args.location)
        try:
            lab.up(grace=30, interval=5)
            pod = lab.add_pod(1)
            rc, res = lab.cni("ADD", pod, container="demo-pod", uid="demo-pod-uid")
            if rc != 0:
                print(json.dumps({"failed": res}))
                return 1
            attached = len(lab.platform_nics())
            ping = lab.ping(pod)
            rc_del, _ = lab.cni("DEL", pod, container="demo-pod")
            left = len(lab.platform_nics())
            print(
                json.dumps(
                    {
                        "pod": "demo-pod",
                        "vm": args.vm_name,
                        "net1": res["ips"][0]["address"],
                        "mac": res["interfaces"][0]["mac"],
                        "attached_nics": attached,
                        "ping_external_host": ping == 0,
                        "del_rc": rc_del,
                        "nics_left": left,
                    }
                )
            )
            return 0 if (ping == 0 and rc_del == 0 and left == 0) else 1
        finally:
            lab.down()
    finally:
        shutil.rmtree(work, ignore_errors=True)  # the agent's credential file is in there


if __name__ == "__main__":
    sys.exit(main())
