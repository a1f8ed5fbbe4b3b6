#!/usr/bin/env bash
# Everything in this repo that needs a GPU, in one go, from the repo root:
#   1. the `cuda`-marked tests (the CUDA-graph engine vs HF generate, before and after in-place weight updates);
#   2. `grpo-edu bench` (grpo_edu before/after vs TRL's GRPOTrainer, same GPU, one process) -> benchmarks/results/;
#   3. the notebooks' `#| cuda` cells, re-executed with their outputs saved for the docs.
# Needs ../shared/data (GSM8K + the Qwen2.5 tokenizer), trl and datasets (pip install -e ".[dev]"), and bitsandbytes for
# the 1.5B memory check. Steps can be picked: scripts/gpu-check.sh tests bench notebooks (default: all three).
set -euo pipefail
cd "$(dirname "$0")/.."
steps="${*:-tests bench notebooks}"
python -c "import torch; assert torch.cuda.is_available(), 'no CUDA GPU visible'; print(torch.cuda.get_device_name(0))"
if [[ " $steps " == *" tests "* ]]; then python -m pytest -q -m cuda tests; fi
if [[ " $steps " == *" bench "* ]]; then grpo-edu bench --data_dir ../shared/data; fi
if [[ " $steps " == *" notebooks "* ]]; then
  for nb in nbs/api/05_rollout.ipynb nbs/09_training.ipynb nbs/10_speed.ipynb nbs/11_memory.ipynb; do
    nbdev-test "$nb" --flags cuda --save
  done
  nbdev-clean
fi
