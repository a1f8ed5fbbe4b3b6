"""Learn GRPO (Group Relative Policy Optimization) properly, then train with it for real.

Modules:

- `grpo_edu.loss`: The GRPO loss: clipped surrogate + β·k3 KL, with TRL's aggregations and surrogates; equals TRL's."""

__version__ = "0.1.0"


def __getattr__(name):
    if name == "GRPOConfig":
        from grpo_edu.config import GRPOConfig; return GRPOConfig
    if name == "GRPOTrainer":
        from grpo_edu.trainer import GRPOTrainer; return GRPOTrainer
    raise AttributeError(f"module 'grpo_edu' has no attribute {name!r}")
