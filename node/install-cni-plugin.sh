#!/bin/sh
# Install the capvco-sriov CNI plugin into a CNI bin directory (the DaemonSet's init container, and the labs):
#   install-cni-plugin.sh LAUNCHER BODY DEST
# DEST/capvco-sriov is the launcher; its body is DEST/capvco-sriov.d/capvco_sriov_shim.py, and the wire format it
# imports is DEST/capvco-sriov.d/capvco_sriov/wire.py (with the package's __init__.py), where Python keeps them
# compiled. The wire format is taken from beside BODY: BODY's own directory when BODY is the package's shim.py
# (this tree: node/capvco_sriov), else BODY's capvco_sriov/ (an installed plugin: the image's /opt/capvco/cni).
# The wire format goes first, then the body, then the launcher, each replaced atomically (a copy, then a rename),
# so that a runtime calling the plugin meanwhile runs whole files, and an upgrade's new files are recompiled
# (their mtime).
set -eu
launcher=$1
body=$2
dest=$3
package=$(dirname "$body")
[ -f "$package/wire.py" ] || package="$package/capvco_sriov"
mkdir -p "$dest/capvco-sriov.d/capvco_sriov"
for name in __init__.py wire.py; do
  cp "$package/$name" "$dest/capvco-sriov.d/capvco_sriov/.$name.tmp"
  mv -f "$dest/capvco-sriov.d/capvco_sriov/.$name.tmp" "$dest/capvco-sriov.d/capvco_sriov/$name"
done
cp "$body" "$dest/capvco-sriov.d/.capvco_sriov_shim.py.tmp"
mv -f "$dest/capvco-sriov.d/.capvco_sriov_shim.py.tmp" "$dest/capvco-sriov.d/capvco_sriov_shim.py"
cp "$launcher" "$dest/.capvco-sriov.tmp"
chmod 755 "$dest/.capvco-sriov.tmp"
mv -f "$dest/.capvco-sriov.tmp" "$dest/capvco-sriov"
