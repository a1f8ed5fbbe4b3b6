#!/usr/bin/env bash
# Runs on the device machine (the `device` tool's command): installs the wheels that scripts/gpu-pack.sh put in .whl/
# (when they are there) into /tmp/site, runs scripts/gpu-check.sh with the given steps, and copies into $OUT what must
# come back: the log, the benchmark JSON and the notebooks whose `#| cuda` outputs were saved. Exits with
# gpu-check.sh's status (124 when stopped at GPU_DEVICE_BUDGET_S, 570 s by default: the device's per-call limit is 600 s
# and only what lies in $OUT comes back). Usage: bash scripts/gpu-device.sh tests bench   (then: notebooks; then:
# recipes sharded; BENCH_SHAPES=1.5b bash scripts/gpu-device.sh bench runs one shape).
set -uo pipefail
cd "$(dirname "$0")/.."
out="${OUT:?gpu-device: OUT is not set (the device tool sets it: the folder whose files come back)}"
whl="${GPU_WHEELS:-.whl}"                                  # where gpu-pack.sh put them
if compgen -G "$whl/*.whl" >/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site "$whl"/*.whl || exit
  export PYTHONPATH="/tmp/site${PYTHONPATH:+:$PYTHONPATH}" PATH="/tmp/site/bin:$PATH"
fi
command -v python >/dev/null || { mkdir -p /tmp/pybin && ln -sf "$(command -v python3)" /tmp/pybin/python && export PATH="/tmp/pybin:$PATH"; }
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1                # nothing is reachable from there: fail at once, not after retries
stamp=$(mktemp); sleep 1
budget=$(( ${GPU_DEVICE_BUDGET_S:-570} - SECONDS ))       # stop before the device call's limit (600 s by default),
echo "gpu-device: $budget s for gpu-check.sh $*"           # so that what was written still gets copied back
timeout -s INT -k 20 "$budget" bash scripts/gpu-check.sh "$@" 2>&1 | tee "$out/log"; rc=${PIPESTATUS[0]}
(( rc == 124 )) && echo "gpu-device: stopped after $budget s (GPU_DEVICE_BUDGET_S); what was written comes back" | tee -a "$out/log"
# what gpu-check wrote (at most 8 files come back, 2 folders down: the log, the JSON, the 4 notebooks)
find benchmarks/results nbs/api/05_rollout.ipynb nbs/09_training.ipynb nbs/10_speed.ipynb nbs/11_memory.ipynb \
     -newer "$stamp" -type f 2>/dev/null |
  while read -r f; do mkdir -p "$out/$(dirname "$f")"; cp "$f" "$out/$f"; echo "gpu-device: back: $f"; done
rm -f "$stamp"
exit "$rc"
