#!/usr/bin/env bash
# Two RTX 4090s: consumer cards have no peer-to-peer access and no InfiniBand, so NCCL must not try either.
set -euo pipefail
export NCCL_P2P_DISABLE=1 NCCL_IB_DISABLE=1
exec accelerate launch --config_file "$(dirname "$0")/../configs/accelerate/ddp-2x4090.yaml" -m grpo_edu.cli train \
  --config "${CONFIG:-$(dirname "$0")/../configs/qwen2.5-1.5b-gsm8k-2x4090.yaml}" "$@"
