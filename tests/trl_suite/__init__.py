"""TRL's own GRPO tests, run unmodified against grpo_edu (see conftest.py): a package, so that this folder's
conftest is imported under a name of its own beside tests/conftest.py."""
