#!/usr/bin/env bash
# Start the emulator on a free loopback port with a fresh state dir, export the
# WHITESKY_* variables for it, run the given command, then stop the emulator.
# CAPVCO_EMULATOR: the emulator's command (default: the development venv's).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
state=$(mktemp -d)
out="$state/emulator.out"
"${CAPVCO_EMULATOR:-$here/.venv/bin/whitesky-emulator}" --port 0 --state-dir "$state" >"$out" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null || true; wait $pid 2>/dev/null || true; rm -rf "$state"' EXIT
for _ in $(seq 1 100); do
  url=$(head -n1 "$out" 2>/dev/null || true)
  case "$url" in http*) break ;; esac
  kill -0 $pid 2>/dev/null || { cat "$out" >&2; exit 1; }
  sleep 0.1
done
case "$url" in http*) ;; *) echo "emulator did not start" >&2; cat "$out" >&2; exit 1 ;; esac
echo "emulator: $url (state in $state)" >&2
export WHITESKY_API_URL="$url"
export WHITESKY_API_TOKEN="${WHITESKY_API_TOKEN:-capvco-demo-token}"
export WHITESKY_CUSTOMER_ID="${WHITESKY_CUSTOMER_ID:-capvco-demo}"
export WHITESKY_EMULATOR_ADMIN="${url%/api/1}/_emulator"
"$@"
