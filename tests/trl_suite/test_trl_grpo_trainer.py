"""A placeholder: at collection, conftest.py puts TRL's own GRPO test file here, unmodified.

The tests collected under this name are those of ../shared/trl-tests/test_grpo_trainer.py (TRL main at
f2cd577), imported with `from trl import GRPOConfig, GRPOTrainer` resolving to grpo_edu's classes, or to TRL's
own with GRPO_EDU_TRL_SUITE_TARGET=trl. Nothing in this file runs.
"""
