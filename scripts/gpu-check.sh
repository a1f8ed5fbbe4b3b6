#!/usr/bin/env bash
# Everything in this repo that needs a GPU, in one go, from the repo root:
#   0. `smoke` (scripts/gpu-smoke.py, 90 s or less): each package imported on its own under a 30 s timeout,
#      CUDA visible, a tiny forward and backward, 2 steps of the 0.5B recipe; if it fails nothing else runs.
#      `scripts/gpu-check.sh smoke --cpu` runs the same checks on a CPU, as a rehearsal;
#   1. the `cuda`-marked tests (the CUDA-graph engine vs HF generate, before and after in-place weight
#      updates);
#   2. `grpo-edu bench` (grpo_edu before/after vs TRL's GRPOTrainer, same GPU, one process) ->
#      benchmarks/results/ (both shapes; BENCH_SHAPES=1.5b picks one: a later call's shape joins the same
#      day's file);
#   3. the notebooks' `#| cuda` cells, re-executed with their outputs saved for the docs (back here, take
#      only those cells' outputs: scripts/take-cuda-outputs.py; the CPU cells keep the outputs their chapters
#      quote);
#   4. a smoke run of each full fine-tuning one-GPU recipe in configs/ through the CLI (2 steps, random
#      weights of the recipe's shape, since the Hub may be unreachable), each under a 24 GiB cap like an RTX
#      4090 (the LoRA recipes are measured by the LoRA chapter's `#| cuda` cell, step 3);
#   5. the sharded launcher configs on one GPU: `accelerate launch --config_file
#      configs/accelerate/{fsdp,zero2,zero3}.yaml --num_processes 1` on the 0.5B recipe (2 steps, a checkpoint
#      at step 1, resumed for step 2); the DeepSpeed ones need
#      `DS_BUILD_OPS=0 pip install --no-build-isolation deepspeed` and are skipped without it.
# Needs the data folder (GSM8K + the Qwen2.5 tokenizer: $GRPO_EDU_DATA, else shared/data in or beside this
# checkout) and the dev extras (pip install -e ".[dev]": trl, nbdev, bitsandbytes for the 1.5B recipe's 8-bit
# AdamW). grpo_edu itself runs from this checkout (PYTHONPATH), so an offline GPU machine needs no install of
# it. Steps can be picked: scripts/gpu-check.sh smoke tests bench notebooks recipes sharded (default: all,
# in that order). After the smoke step a preflight checks the GPU, the data folder and each picked step's
# packages, and stops with the list of what is missing.
# Every step runs under its own `timeout`, inside one budget for the whole call (BUDGET_S, default 570 s),
# with the Hugging Face libraries offline; each step appends a JSON line (step, exit status, seconds) to the
# results file (RESULTS, default $OUT/results.jsonl, else gpu-out/results.jsonl) as soon as it ends, and the
# smoke step one per check, so a call cut short still leaves everything measured up to that point.
set -uo pipefail
self="$(cd "$(dirname "$0")" && pwd)/$(basename "$0")"
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1
export HF_HUB_DISABLE_TELEMETRY=1 DISABLE_TELEMETRY=1
export RESULTS="${RESULTS:-${OUT:-gpu-out}/results.jsonl}"
mkdir -p "$(dirname "$RESULTS")"
DATA="${GRPO_EDU_DATA:-}"

random_model() {                                        # random_model SHAPE DIR: random fp32 weights, saved
  python -c "import torch; from grpo_edu.bench import random_model_dir
random_model_dir('$1', '$DATA/qwen2.5-tokenizer', '$2', torch.float32)"
}

step_smoke() { python scripts/gpu-smoke.py --results "$RESULTS"; }

step_tests() {
  python -m pytest -q -m cuda tests
}

step_bench() {
  python -m grpo_edu.cli bench --data_dir "$DATA" --shapes "${BENCH_SHAPES:-0.5b,1.5b}"
}

step_notebooks() {
  failed=()                                   # one notebook failing must not cost the others their run
  every=(nbs/api/03_engine.ipynb nbs/09_training.ipynb nbs/10_speed.ipynb nbs/11_memory.ipynb
         nbs/12_lora.ipynb)                   # every notebook with a `#| cuda` cell
  # GPU_NOTEBOOKS="nbs/11_memory.ipynb": some of them, in a call of their own
  if [[ -n ${GPU_NOTEBOOKS:-} ]]; then read -ra nbs <<< "$GPU_NOTEBOOKS"; else nbs=("${every[@]}"); fi
  for nb in "${nbs[@]}"; do
    nbdev-test "$nb" --flags cuda --save || failed+=("$nb")
  done
  python scripts/collapse-progress.py "${nbs[@]}"
  nbdev-clean
  if (( ${#failed[@]} )); then echo "notebooks: failed: ${failed[*]}" >&2; exit 1; fi
}

step_recipes() {
  for shape in 0.5b 1.5b; do
    dir=/tmp/grpo-edu-random-$shape
    random_model "$shape" "$dir"
    PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True python - "$shape" "$dir" "$DATA" <<'PY'
import sys, torch
total = torch.cuda.get_device_properties(0).total_memory
torch.cuda.set_per_process_memory_fraction(min(1.0, 24 * 2**30 / total))
from grpo_edu.cli import main
shape, model_dir, data = sys.argv[1], sys.argv[2], sys.argv[3]
recipe = f"configs/qwen2.5-{shape}-gsm8k-1x4090.yaml"
rc = main(["train", "--config", recipe, "--model_name_or_path", model_dir,
           "--dataset_path", f"{data}/gsm8k", "--max_steps", "2", "--eval_max_samples", "64",
           "--save_steps", "0", "--output_dir", f"/tmp/grpo-edu-recipe-{shape}"])
from grpo_edu.bench import planner_gib          # the planner, with the longest GSM8K prompt as the width
from grpo_edu.recipe import load_config
from grpo_edu.data import gsm8k_dataset
est = planner_gib(model_dir, gsm8k_dataset("train", f"{data}/gsm8k"), load_config(recipe))
print(f"recipe {shape}: exit {rc}, peak {torch.cuda.max_memory_allocated() / 2**30:.2f} GiB of a 24 GiB "
      f"cap (planner: {est:.2f} GiB)")
sys.exit(rc)
PY
  done
}

step_sharded() {
  dir=/tmp/grpo-edu-random-0.5b                            # the recipes step's model, when that step ran
  [[ -f $dir/config.json ]] || random_model 0.5b "$dir"
  for cfg in fsdp zero2 zero3; do
    if [[ $cfg == zero* ]] && ! python -c "import deepspeed" 2>/dev/null; then
      echo "sharded $cfg: skipped (deepspeed is not installed)"
      continue
    fi
    out=/tmp/grpo-edu-sharded-$cfg
    rm -rf "$out"
    run=(accelerate launch --config_file "configs/accelerate/$cfg.yaml" --num_processes 1
         -m grpo_edu.cli train --config configs/qwen2.5-0.5b-gsm8k-1x4090.yaml --model_name_or_path "$dir"
         --dataset_path "$DATA/gsm8k" --eval_max_samples 64 --save_steps 1 --output_dir "$out")
    "${run[@]}" --max_steps 1
    "${run[@]}" --max_steps 2 --resume_from_checkpoint latest
    echo "sharded $cfg: ok ($(tail -n 1 "$out/metrics.jsonl" | cut -c1-120))"
  done
}

if [[ ${1:-} == --one ]]; then set -e; "step_$2"; exit 0; fi      # one step, in a process of its own
if [[ ${1:-} == smoke && ${2:-} == --cpu ]]; then                # the smoke checks on a CPU: a rehearsal
  exec python scripts/gpu-smoke.py --cpu --results "$RESULTS"
fi

steps="${*:-smoke tests bench notebooks recipes sharded}"
budget=${BUDGET_S:-570}
record() { printf '{"step": "%s", "rc": %s, "seconds": %s}\n' "$1" "$2" "$3" >> "$RESULTS"; }
for step in $steps; do
  left=$(( budget - SECONDS ))
  if (( left < 20 )); then
    echo "gpu-check: $step: not run, $left s of BUDGET_S left"
    record "$step" null 0
    continue
  fi
  if [[ $step != smoke && -z $DATA ]]; then           # the preflight, once, before the first GPU step
    others=$(echo "$steps" | tr ' ' '\n' | grep -v '^smoke$' | tr '\n' ' ')
    DATA="$(timeout 120 python scripts/gpu-preflight.py $others)" || { record preflight 2 0; exit 2; }
    export GRPO_EDU_DATA="$DATA"
    left=$(( budget - SECONDS ))
  fi
  limit=$left
  if [[ $step == smoke ]] && (( limit > 120 )); then limit=120; fi
  echo "gpu-check: $step: up to $limit s"
  started=$SECONDS
  timeout -k 15 "$limit" bash "$self" --one "$step"
  rc=$?
  record "$step" "$rc" $(( SECONDS - started ))
  if (( rc == 124 )); then echo "gpu-check: $step: stopped after $limit s"; fi
  if [[ $step == smoke ]] && (( rc != 0 )); then
    echo "gpu-check: the smoke step failed ($RESULTS says which check): no GPU step is run." >&2
    exit 1
  fi
done
