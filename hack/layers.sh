#!/usr/bin/env bash
# Run the test layers in order (`make LAYER` each), stop at the first failure,
# and end with a table of each layer's wall time, so the trend shows in every CI log.
#
#   hack/layers.sh unit integration molecule sanity lint fresh
set -uo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
declare -a names=() results=() times=()
status=0
started=$(date +%s)
for layer in "$@"; do
  names+=("$layer")
  if [ $status -ne 0 ]; then
    results+=("not run"); times+=("-")
    continue
  fi
  echo "=== make $layer ==="
  t0=$(date +%s)
  make -C "$here" --no-print-directory "$layer"
  rc=$?
  t1=$(date +%s)
  times+=("$((t1 - t0))")
  if [ $rc -eq 0 ]; then results+=("passed"); else results+=("FAILED (rc $rc)"); status=$rc; fi
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
exit $status
