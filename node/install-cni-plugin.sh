#!/bin/sh
# Install the capvco-sriov CNI plugin into a CNI bin directory (the DaemonSet's init container, and the labs):
#   install-cni-plugin.sh LAUNCHER BODY DEST
# DEST/capvco-sriov is the launcher; its body is DEST/capvco-sriov.d/capvco_sriov_shim.py, where Python keeps it
# compiled. The body goes first, then the launcher, each replaced atomically (a copy, then a rename), so that a
# runtime calling the plugin meanwhile runs a whole file, and an upgrade's new body is recompiled (its mtime).
set -eu
launcher=$1
body=$2
dest=$3
mkdir -p "$dest/capvco-sriov.d"
cp "$body" "$dest/capvco-sriov.d/.capvco_sriov_shim.py.tmp"
mv -f "$dest/capvco-sriov.d/.capvco_sriov_shim.py.tmp" "$dest/capvco-sriov.d/capvco_sriov_shim.py"
cp "$launcher" "$dest/.capvco-sriov.tmp"
chmod 755 "$dest/.capvco-sriov.tmp"
mv -f "$dest/.capvco-sriov.tmp" "$dest/capvco-sriov"
