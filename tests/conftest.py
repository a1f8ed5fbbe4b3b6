"""Shared fixtures: the path to ../shared (real GSM8K, the Qwen2.5 tokenizer and config), the --runslow flag, and
skipping `cuda`-marked tests where there is no GPU."""
import os, sys
from pathlib import Path
import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "data"


def pytest_addoption(parser):
    parser.addoption("--runslow", action="store_true", default=False, help="run tests marked slow")


def pytest_collection_modifyitems(config, items):
    import torch
    skip_slow = pytest.mark.skip(reason="slow: run with --runslow")
    skip_cuda = pytest.mark.skip(reason="needs a CUDA GPU (none here)")
    for item in items:
        if "slow" in item.keywords and not config.getoption("--runslow"): item.add_marker(skip_slow)
        if "cuda" in item.keywords and not torch.cuda.is_available(): item.add_marker(skip_cuda)


@pytest.fixture
def shared():
    "../shared/data, or skip: these tests read the real GSM8K files and the Qwen2.5 tokenizer kept beside the checkout."
    if not (SHARED / "gsm8k" / "test.jsonl").exists():
        pytest.skip(f"{SHARED} is absent: the real GSM8K / Qwen2.5 files live in ../shared beside the checkout")
    return SHARED


def run_cli(*args, cwd=None, timeout=600, env=None):
    "Run `python -m grpo_edu.cli ARGS` in a subprocess; return the CompletedProcess."
    import subprocess
    e = {**os.environ, "PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "2"), **(env or {})}
    return subprocess.run([sys.executable, "-m", "grpo_edu.cli", *map(str, args)], capture_output=True, text=True,
                          cwd=cwd, timeout=timeout, env=e)
