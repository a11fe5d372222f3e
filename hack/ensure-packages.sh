#!/usr/bin/env bash
# Install the Debian packages a make target needs, when they are missing.
#
#   hack/ensure-packages.sh [--optional] COMMAND:PACKAGE ...
#
# COMMAND is a program looked up on PATH, or an absolute path that must exist.
# Missing packages are installed with apt-get when running as root.  Without
# root (or without apt-get) the missing ones are listed; with --optional that
# is a notice and exit 0 (the caller skips what needs them), otherwise exit 1.
set -euo pipefail
optional=0
if [ "${1:-}" = "--optional" ]; then optional=1; shift; fi
missing=()
for pair in "$@"; do
  cmd=${pair%%:*}
  pkg=${pair#*:}
  case "$cmd" in
    /*) [ -e "$cmd" ] && continue ;;
    *) command -v "$cmd" >/dev/null 2>&1 && continue ;;
  esac
  case " ${missing[*]-} " in *" $pkg "*) ;; *) missing+=("$pkg") ;; esac
done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "installing: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  # a fresh machine has no package lists yet; an old list may point at versions the mirror dropped
  # (make test runs some layers beside each other: each waits for the other's apt lock instead of failing on it)
  apt-get -o DPkg::Lock::Timeout=600 update -qq
  apt-get -o DPkg::Lock::Timeout=600 install -y -qq "${missing[@]}" >/dev/null
  exit 0
fi
why="not root"
[ "$(id -u)" -eq 0 ] && why="no apt-get"
if [ $optional -eq 1 ]; then
  echo "notice: missing ${missing[*]} ($why); the steps that need them are skipped"
  exit 0
fi
echo "error: missing ${missing[*]} ($why): install them, or run this as root" >&2
exit 1
