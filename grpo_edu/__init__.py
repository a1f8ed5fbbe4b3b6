"""Learn GRPO (Group Relative Policy Optimization) properly, then train with it for real.

Modules:

- `grpo_edu.advantages`: GRPO's baseline is the group: Â_i = (r_i − mean(r)) / (std(r) + ε).
- `grpo_edu.bench`: grpo_edu, with and without its speed work, and TRL's trainer on one GPU.
- `grpo_edu.calculators`: Multiply and a safe calculator: standard library only, so tool workers start fast.
- `grpo_edu.callbacks`: Callbacks in a run: TR-DPO's moving reference, a GRPOConfig read as TrainingArguments.
- `grpo_edu.checkpoint`: Atomic checkpoints (a temp folder renamed), and exact resume.
- `grpo_edu.cli`: The grpo-edu command: bad input is one paragraph and exit status 2.
- `grpo_edu.config`: GRPOConfig: every knob of a run, with TRL's names, and its validation.
- `grpo_edu.data`: Every task is a `datasets.Dataset`: a `prompt` column and what rewards read.
- `grpo_edu.distributed`: What DDP, FSDP and DeepSpeed change for the loop, in one place.
- `grpo_edu.docs`: Our two processors on top of nbdev's: notebooks into package and site.
- `grpo_edu.doctor`: Is my run healthy? A GRPO run's log, ours or TRL's, read by the health rules.
- `grpo_edu.engine`: StaticRollout: a static KV cache, and a decode step a CUDA graph replays.
- `grpo_edu.entropy`: TRL's entropy bonus, and Skywork-OR1's controller of its coefficient.
- `grpo_edu.environments`: TRL's environment_factory: an environment per rollout, its methods as tools.
- `grpo_edu.errors`: Bad input: finding it, and one message naming the field and the fix.
- `grpo_edu.eval_step`: Evaluation as TRL runs it: eval prompts' rewards and GRPO's loss, with no update.
- `grpo_edu.evaluation`: Greedy pass@1, sampled pass@k and 95% intervals, for trainer, CLI, toy.
- `grpo_edu.health`: The rules behind the live health monitor and `grpo-edu doctor`: one finding per question.
- `grpo_edu.integrity`: Manifests, and the checks a checkpoint passes before anything of it loads.
- `grpo_edu.kl`: Estimating KL(π_θ ‖ π_ref) from sampled tokens; what k3's gradient pushes.
- `grpo_edu.launch`: Build what a GRPOConfig names: datasets, rewards, the model, the GRPOTrainer.
- `grpo_edu.logprobs`: log π of the sampled tokens, without keeping the (B, T, V) logits.
- `grpo_edu.loss`: The GRPO loss: clipped surrogate + β·k3, TRL's variants and aggregations.
- `grpo_edu.memory`: An offline estimate of a GRPO run's peak GPU memory per process, part by part.
- `grpo_edu.monitor`: metrics.jsonl with TRL's names, trackers, a run's log, and warnings on stalls.
- `grpo_edu.plots`: A run's PNGs, redrawn from its folder, and several runs on one plot.
- `grpo_edu.policy`: π_θ, π_ref, LoRA and the optimizer: the models a run trains and reads.
- `grpo_edu.preflight`: Rewards, tools, packages and paths a valid config names, looked for here.
- `grpo_edu.recipe`: A dict, a YAML recipe or TRL's config, read into one checked GRPOConfig.
- `grpo_edu.rewards`: Reward functions with TRL's signature: built-ins, reward models, yours.
- `grpo_edu.rollout`: Tokenise prompts, sample completions (static engine or HF), mask them.
- `grpo_edu.step`: One GRPO step as four plain functions: sample a round, score it, build its rows, update.
- `grpo_edu.tabular`: Policies whose every probability is a parameter: GRPO runs of a second.
- `grpo_edu.tools`: Tool calling: schemas, running calls, the multi-turn rollout, the tool mask.
- `grpo_edu.toy`: A task, tokenizer and tiny model built in code: no network, no GPU.
- `grpo_edu.toy_tools`: Multiplication that a tiny model gets right only by calling a tool.
- `grpo_edu.trainer`: GRPO's loop: prompts, rollout, rewards, advantages, loss, update.
- `grpo_edu.trl_surface`: TRL's GRPOTrainer helpers and transformers' train() result, on grpo_edu's trainer.
- `grpo_edu.usercode`: Users' code: imports that shadow no package, tools in killable worker processes."""

__version__ = "0.1.0"

import importlib.machinery as _machinery
import logging as _logging
import sys as _sys

# Where peft is installed, importing transformers' trainer utilities imports it, and it imports
# bitsandbytes. On a CPU with AVX512-BF16, bitsandbytes' CPU ops then ask the Hub for an optional fused
# 4-bit kernel, while they are imported and with no timeout: on a network that takes a connection and
# never answers (a stalled proxy or firewall), importing the trainer would wait forever. grpo_edu never
# runs a 4-bit matmul on a CPU, so that one module is imported with the Hub offline: the kernel is
# taken from the local cache if it is there, else bitsandbytes' own CPU code stays. The flag is the
# process's own for the moment that import takes (kernels, which reads it, is imported before), and
# it does nothing where bitsandbytes was imported before grpo_edu. kernels' notice that offline it
# skips the publisher check of this one repository, and bitsandbytes' that the kernel did not load,
# are dropped; every other bitsandbytes and kernels message stays.
_CPU_OPS = "bitsandbytes.backends.cpu.ops"
_FILE_LOADERS = (_machinery.SourceFileLoader, _machinery.SourcelessFileLoader)


class _HubOfflineWhileImporting:
    "An import hook: the modules named are executed with huggingface_hub's HF_HUB_OFFLINE set."
    def __init__(self, *names): self.names = set(names)

    def find_spec(self, name, path, target=None):
        if name not in self.names: return None
        finders = [f for f in _sys.meta_path if f is not self and hasattr(f, "find_spec")]
        spec = next(filter(None, (f.find_spec(name, path, target) for f in finders)), None)
        # A file's loader is its own (a zip's serves the whole archive): only it is wrapped.
        if spec is None or not isinstance(spec.loader, _FILE_LOADERS): return spec
        execute = spec.loader.exec_module

        def exec_module(module):
            try:
                import kernels      # noqa: F401  (first: no module is first imported while offline)
                from huggingface_hub import constants
            except ImportError: return execute(module)
            was_offline = constants.HF_HUB_OFFLINE
            constants.HF_HUB_OFFLINE = True
            try: execute(module)
            finally: constants.HF_HUB_OFFLINE = was_offline
        spec.loader.exec_module = exec_module
        return spec


if not any(type(f).__name__ == "_HubOfflineWhileImporting" for f in _sys.meta_path):   # once, even on reload
    _sys.meta_path.insert(0, _HubOfflineWhileImporting(_CPU_OPS))
    _logging.getLogger(_CPU_OPS).addFilter(lambda record: "gemm_4bit_forward" not in str(record.msg))
    _logging.getLogger("kernels._internals.hf_hub").addFilter(
        lambda record: "quantization-bitsandbytes" not in str(record.msg))
# Where DeepSpeed is installed, accelerate imports it, and on a machine without a GPU it warns that it
# falls back to the CPU. That is where grpo_edu's CPU runs want it, so that one notice is dropped too.
_cpu_notice = "Setting accelerator to CPU"
_logging.getLogger("DeepSpeed").addFilter(lambda record: _cpu_notice not in str(record.msg))


def __getattr__(name):
    "`grpo_edu.GRPOConfig` and `grpo_edu.GRPOTrainer`, imported on first use: importing stays light."
    if name == "GRPOConfig":   # with recipe's reader of TRL's and TrainingArguments' settings
        from grpo_edu.config import GRPOConfig
        import grpo_edu.recipe  # noqa: F401
        return GRPOConfig
    if name == "GRPOTrainer":
        from grpo_edu.trainer import GRPOTrainer
        return GRPOTrainer
    raise AttributeError(f"module 'grpo_edu' has no attribute {name!r}")
