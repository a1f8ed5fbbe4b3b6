"""grpo_edu: learn GRPO properly, then train with it. The core math (`logprobs`, `advantages`, `kl`, `loss`) is pure
torch; `GRPOConfig` and `GRPOTrainer` are imported lazily so that `import grpo_edu` stays light."""
__version__ = "0.1.0"


def __getattr__(name):
    if name == "GRPOConfig":
        from grpo_edu.config import GRPOConfig; return GRPOConfig
    if name == "GRPOTrainer":
        from grpo_edu.trainer import GRPOTrainer; return GRPOTrainer
    raise AttributeError(f"module 'grpo_edu' has no attribute {name!r}")
