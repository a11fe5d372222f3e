#!/usr/bin/env bash
# Run the test layers in order (`make LAYER` each), stop at the first failure,
# and end with a table of each layer's wall time, so the trend shows in every CI log.  Each layer's output is
# also kept in .build/logs/LAYER.log; when one fails, the lines that say why are repeated after the table, so a
# CI log that keeps only its tail still names the failing test.
#
#   hack/layers.sh unit integration molecule sanity lint fresh
set -uo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
declare -a names=() results=() times=()
status=0
failed=""
logs="$here/.build/logs"
mkdir -p "$logs"
rm -f "$logs"/*.xml  # each pytest layer writes its JUnit XML here: the slowest tests are this run's
started=$(date +%s)
for layer in "$@"; do
  names+=("$layer")
  if [ "$status" -ne 0 ]; then
    results+=("not run"); times+=("-")
    continue
  fi
  echo "=== make $layer ==="
  t0=$(date +%s)
  make -C "$here" --no-print-directory "$layer" 2>&1 | tee "$logs/$layer.log"
  rc=${PIPESTATUS[0]}
  t1=$(date +%s)
  times+=("$((t1 - t0))")
  if [ "$rc" -eq 0 ]; then results+=("passed"); else results+=("FAILED (rc $rc)"); status=$rc; failed=$layer; fi
done
total=$(( $(date +%s) - started ))
echo
echo "=== make test: time per layer ==="
printf '%-12s %-16s %8s %8s\n' layer result seconds "m:ss"
for i in "${!names[@]}"; do
  s=${times[$i]}
  if [ "$s" = "-" ]; then mmss="-"; else mmss=$(printf '%d:%02d' $((s / 60)) $((s % 60))); fi
  printf '%-12s %-16s %8s %8s\n' "${names[$i]}" "${results[$i]}" "$s" "$mmss"
done
printf '%-12s %-16s %8s %8s\n' total "" "$total" "$(printf '%d:%02d' $((total / 60)) $((total % 60)))"
echo
"$here/.venv/bin/python" "$here/hack/slowest.py" 20 || true
if [ -n "$failed" ]; then
  echo
  echo "=== why $failed failed (lines from .build/logs/$failed.log) ==="
  grep -E 'FAILED|ERROR|Error|error:|fatal:|\*\*\*|failed=[1-9]|Assertion|assert ' "$logs/$failed.log" \
    | grep -vE 'WARNING|^INFO' | cut -c1-400 | tail -n 25
fi
exit "$status"
