#!/usr/bin/env bash
# The emulator's NIC hook for the netns e2e: "hot-plug" a NIC into the node VM.
# A veth pair stands in for the VF: one end, with the platform's MAC, goes into
# the node's netns (named like the VM, or $NODE_NS); the other joins br0 in the external
# network's netns ($EXT_NS).
set -euo pipefail
tag=$(printf '%s' "${EMU_MAC}" | tr -d ':' | tail -c 6)
case "${EMU_EVENT}" in
  nic_attach)
    ip link add "cvv${tag}" address "${EMU_MAC}" type veth peer name "cvu${tag}"
    ip link set "cvv${tag}" netns "${NODE_NS:-${EMU_VM_NAME}}"
    ip link set "cvu${tag}" netns "${EXT_NS}"
    ip -n "${EXT_NS}" link set "cvu${tag}" master br0 up
    ;;
  nic_detach)
    ip -n "${EXT_NS}" link del "cvu${tag}" 2>/dev/null || true
    ;;
esac
