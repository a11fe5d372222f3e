#!/usr/bin/env bash
# Run the test layers in order (`make LAYER` each), stop at the first failure,
# and end with a table of each layer's wall time, so the trend shows in every CI log.  Each layer's output is
# also kept in .build/logs/LAYER.log; when one fails, the lines that say why are repeated after the table, so a
# CI log that keeps only its tail still names the failing test.
#
# A step written A+B+C runs those layers beside each other (for layers that mostly wait beside ones that
# compute; `make test` runs its layers in turn, as no pair of them was faster side by side on two cores); their
# output is in their logs only, each is timed on its own, and the step fails when one of them fails.
#
#   hack/layers.sh unit integration molecule sanity lint consumers fresh
set -uo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
declare -a names=() results=() times=()
status=0
failed=""
logs="$here/.build/logs"
mkdir -p "$logs"
rm -f "$logs"/*.xml "$logs"/*.rc "$logs"/*.seconds  # each pytest layer writes its JUnit XML here: this run's
started=$(date +%s)

# One layer, its output to its log (and to stdout when $2 is "tee"); writes LAYER.rc and LAYER.seconds.
run_layer() {
  local layer=$1 t0 rc
  t0=$(date +%s)
  if [ "$2" = tee ]; then
    make -C "$here" --no-print-directory "$layer" 2>&1 | tee "$logs/$layer.log"
    rc=${PIPESTATUS[0]}
  else
    make -C "$here" --no-print-directory "$layer" >"$logs/$layer.log" 2>&1
    rc=$?
  fi
  echo "$rc" >"$logs/$layer.rc"
  echo "$(($(date +%s) - t0))" >"$logs/$layer.seconds"
}

for step in "$@"; do
  IFS=+ read -r -a group <<<"$step"
  if [ "$status" -ne 0 ]; then
    for layer in "${group[@]}"; do names+=("$layer"); results+=("not run"); times+=("-"); done
    continue
  fi
  if [ "${#group[@]}" -eq 1 ]; then
    echo "=== make $step ==="
    run_layer "$step" tee
  else
    echo "=== make ${group[*]} (beside each other; their output is in .build/logs/LAYER.log) ==="
    pids=()
    for layer in "${group[@]}"; do run_layer "$layer" quiet & pids+=($!); done
    wait "${pids[@]}"
  fi
  for layer in "${group[@]}"; do
    names+=("$layer")
    rc=$(cat "$logs/$layer.rc")
    times+=("$(cat "$logs/$layer.seconds")")
    if [ "$rc" -eq 0 ]; then
      results+=("passed")
    else
      results+=("FAILED (rc $rc)"); status=$rc; failed="$failed $layer"
    fi
    if [ "${#group[@]}" -gt 1 ]; then echo "make $layer: ${results[-1]} in ${times[-1]} s"; fi
  done
done
total=$(( $(date +%s) - started ))
echo
echo "=== make test: time per layer (layers of one step ran beside each other) ==="
printf '%-12s %-16s %8s %8s\n' layer result seconds "m:ss"
for i in "${!names[@]}"; do
  s=${times[$i]}
  if [ "$s" = "-" ]; then mmss="-"; else mmss=$(printf '%d:%02d' $((s / 60)) $((s % 60))); fi
  printf '%-12s %-16s %8s %8s\n' "${names[$i]}" "${results[$i]}" "$s" "$mmss"
done
printf '%-12s %-16s %8s %8s\n' total "" "$total" "$(printf '%d:%02d' $((total / 60)) $((total % 60)))"
echo
"$here/.venv/bin/python" "$here/hack/slowest.py" 20 || true
for layer in $failed; do
  echo
  echo "=== why $layer failed (lines from .build/logs/$layer.log) ==="
  grep -E 'FAILED|ERROR|Error|error:|fatal:|\*\*\*|failed=[1-9]|Assertion|assert ' "$logs/$layer.log" \
    | grep -vE 'WARNING|^INFO' | cut -c1-400 | tail -n 25
done
exit "$status"
