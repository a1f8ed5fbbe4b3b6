"""Preflight for scripts/gpu-check.sh: before any GPU time is spent, check the GPU, each picked step's packages and the
data folder, and stop with one paragraph naming what is missing. Prints the data folder on stdout (the rest on stderr).

Usage: python scripts/gpu-preflight.py [tests] [bench] [notebooks] [recipes] [sharded]"""
import importlib, sys
from pathlib import Path

STEPS = ("tests", "bench", "notebooks", "recipes", "sharded")
ROOT = Path(__file__).resolve().parents[1]
NEEDS = {"base": ["torch", "transformers", "accelerate", "datasets", "matplotlib", "grpo_edu.trainer"],  # grpo_edu itself
         "tests": ["pytest"], "bench": ["trl"],
         "notebooks": ["nbdev", "execnb", "bitsandbytes"],  # 11_memory's GPU cell runs the 1.5B recipe (8-bit AdamW)
         "recipes": ["bitsandbytes"], "sharded": []}           # deepspeed is optional: its configs skip without it


def missing_packages(steps) -> list[str]:
    "The packages the picked steps need that cannot be imported, each with the reason (a missing dependency, say)."
    bad = []
    for m in sorted({m for s in ("base", *steps) for m in NEEDS[s]}):
        try: importlib.import_module(m)
        except Exception as e: bad.append(f"{m} ({type(e).__name__}: {str(e).splitlines()[0][:120]})")
    return bad


def main(argv) -> int:
    steps = argv or list(STEPS)
    if str(ROOT) not in sys.path: sys.path.insert(0, str(ROOT))  # grpo_edu runs from the checkout
    def fail(msg): print(f"gpu-check: {msg}", file=sys.stderr); return 2
    if bad := sorted(set(steps) - set(STEPS)): return fail(f"unknown step(s) {bad}; the steps are: {' '.join(STEPS)}.")
    if miss := missing_packages(steps):
        return fail(f"the step(s) {' '.join(steps)} cannot import {'; '.join(miss)}. Install the "
                    "dev extras (pip install -e \".[dev]\"), or on an offline machine carry their wheels and put them on "
                    "PYTHONPATH; or pick only the steps whose packages are here.")
    import torch
    if not torch.cuda.is_available(): return fail(f"no CUDA GPU is visible (torch {torch.__version__}).")
    from grpo_edu.data import find_shared_data                  # the notebooks' and the tests' lookup
    if (data := find_shared_data(ROOT)) is None or not (data / "qwen2.5-tokenizer").is_dir():
        return fail("no data folder with gsm8k/ and qwen2.5-tokenizer/ was found (looked at $GRPO_EDU_DATA, else "
                    f"shared/data in {ROOT} and its parents). Set GRPO_EDU_DATA to the folder that holds them.")
    print(f"gpu-check: {torch.cuda.get_device_name(0)}, torch {torch.__version__}; steps: {' '.join(steps)}; "
          f"data: {data}", file=sys.stderr)
    print(data)
    return 0


if __name__ == "__main__": sys.exit(main(sys.argv[1:]))
