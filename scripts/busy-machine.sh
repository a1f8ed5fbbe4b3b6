#!/usr/bin/env bash
# How much slower the default run gets beside CPU-bound processes, for several thread settings.
#
#   bash scripts/busy-machine.sh [STEPS]    (default 200)
#
# For each load (alone, beside 1 and beside 2 busy processes: `python -c "while True: pass"`), runs
# `grpo-edu train --max_steps STEPS` (its warm start cached) under each setting below and prints the wall
# time in seconds. Run it on an otherwise idle machine: anything else running counts as load.
set -euo pipefail
steps=${1:-200}
out=$(mktemp -d)
trap 'rm -rf "$out"; kill $(jobs -p) 2>/dev/null || true' EXIT
settings=(
  "fitted (default)|"
  "OpenMP's spinning threads|GRPO_EDU_FIT_THREADS=0"
  "OMP_WAIT_POLICY=PASSIVE|GRPO_EDU_FIT_THREADS=0 OMP_WAIT_POLICY=PASSIVE"
  "one thread|OMP_NUM_THREADS=1"
)
grpo-edu train --max_steps 1 --output_dir "$out/warm" --save_steps 0 > /dev/null 2>&1   # the warm start, cached
printf "%-28s %8s %8s %8s\n" setting alone "1 busy" "2 busy"
declare -A seconds
for load in 0 1 2; do
  busy=()
  for _ in $(seq 1 "$load"); do python -c "while True: pass" & busy+=($!); done
  sleep 1
  for entry in "${settings[@]}"; do
    name=${entry%%|*}
    rm -rf "$out/run"
    start=$(date +%s.%N)
    env ${entry#*|} grpo-edu train --max_steps "$steps" --output_dir "$out/run" --save_steps 0 > /dev/null 2>&1
    seconds["$name,$load"]=$(echo "$(date +%s.%N) - $start" | bc)
  done
  for pid in "${busy[@]}"; do kill "$pid"; done
  wait 2>/dev/null || true
done
for entry in "${settings[@]}"; do
  name=${entry%%|*}
  printf "%-28s %8.1f %8.1f %8.1f\n" "$name" "${seconds[$name,0]}" "${seconds[$name,1]}" "${seconds[$name,2]}"
done
