"""Learn GRPO (Group Relative Policy Optimization) properly, then train with it for real.

Modules:

- `grpo_edu.advantages`: GRPO's baseline is the group: Â_i = (r_i − mean(r)) / (std(r) + ε) within a prompt.
- `grpo_edu.bench`: grpo_edu, with and without its speed work, and TRL's GRPOTrainer on the same GPU.
- `grpo_edu.checkpoint`: Atomic checkpoints (a temp folder renamed), exact resume, and stopping a run cleanly.
- `grpo_edu.cli`: The grpo-edu command: bad input is one paragraph and exit status 2, never a traceback.
- `grpo_edu.config`: GRPOConfig: every knob of a run, TRL's names; the CLI, YAML and Python share it.
- `grpo_edu.data`: Every task is a `datasets.Dataset`: a `prompt` column, and the columns its rewards read.
- `grpo_edu.docs`: How the notebooks become the package and the site: our two processors on top of nbdev's.
- `grpo_edu.errors`: GRPOEduError: bad input's one exception, its message naming the field and the fix.
- `grpo_edu.evaluation`: Greedy pass@1, sampled pass@k, 95% intervals: one evaluator for trainer, CLI and toy.
- `grpo_edu.kl`: Estimating KL(π_θ ‖ π_ref) from sampled tokens, and what the gradient of k3 pushes.
- `grpo_edu.logprobs`: log π of the sampled tokens, without keeping the (B, T, 151 936) logits in memory.
- `grpo_edu.loss`: The GRPO loss: clipped surrogate + β·k3 KL, with TRL's aggregations and surrogates.
- `grpo_edu.memory`: An offline estimate of a GRPO run's peak GPU memory per process, part by part.
- `grpo_edu.monitor`: metrics.jsonl with TRL's names, trackers, PNG plots, and warnings when training stalls.
- `grpo_edu.policy`: π_θ, π_ref and the optimizer, and where accelerate put them (DDP, FSDP, DeepSpeed).
- `grpo_edu.rewards`: Reward functions with TRL's signature: the built-ins, a reward model, and calling yours.
- `grpo_edu.rollout`: Tokenise prompts, sample completions (static-cache engine or HF generate), mask them.
- `grpo_edu.tools`: Tool calling: schemas, running the model's calls, the multi-turn rollout, the tool mask.
- `grpo_edu.toy`: A task, tokenizer and tiny model built in code: `grpo-edu train` needs no network, no GPU.
- `grpo_edu.trainer`: GRPO's loop — prompts, rollout, rewards, advantages, loss, update — one call each."""

__version__ = "0.1.0"

import logging as _logging

# Where peft is installed, importing transformers' trainer utilities imports it, and it imports
# bitsandbytes; on a CPU with AVX512-BF16, bitsandbytes then logs that an optional 4-bit CPU kernel could not
# be fetched. grpo_edu never runs a 4-bit matmul on a CPU, so that one notice is dropped; every other
# bitsandbytes message stays.
_cpu_ops_log = _logging.getLogger("bitsandbytes.backends.cpu.ops")
_cpu_ops_log.addFilter(lambda record: "gemm_4bit_forward" not in record.msg)
# Where DeepSpeed is installed, accelerate imports it, and on a machine without a GPU it warns that it falls
# back to the CPU. That is where grpo_edu's CPU runs want it, so that one notice is dropped too.
_logging.getLogger("DeepSpeed").addFilter(lambda record: "Setting accelerator to CPU" not in str(record.msg))


def __getattr__(name):
    "`grpo_edu.GRPOConfig` and `grpo_edu.GRPOTrainer`, imported on first use: `import grpo_edu` stays light."
    if name == "GRPOConfig":
        from grpo_edu.config import GRPOConfig
        return GRPOConfig
    if name == "GRPOTrainer":
        from grpo_edu.trainer import GRPOTrainer
        return GRPOTrainer
    raise AttributeError(f"module 'grpo_edu' has no attribute {name!r}")
