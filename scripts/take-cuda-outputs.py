#!/usr/bin/env python
"""Copy the outputs of the `#| cuda` cells from notebooks re-executed on a GPU machine into this checkout's notebooks,
and nothing else. Usage: take-cuda-outputs.py GPU_DIR NB.ipynb ... (GPU_DIR holds the re-executed copies at the same
relative paths: a copy of the checkout where `scripts/gpu-check.sh notebooks` ran).

Why only those cells: `nbdev-test NB --flags cuda --save` on the GPU machine re-runs every cell, and the CPU cells there
give other numbers (another CPU, thread count and torch), while the chapters' text quotes the outputs saved here.
A cell is matched by its id and must have the same source on both sides, or the notebook is left as it is."""
import hashlib, sys
from pathlib import Path
import nbformat


def is_cuda(cell) -> bool:
    return cell.cell_type == "code" and cell.source.lstrip().startswith("#| cuda")


def take(gpu_path, path) -> int:
    "Put the `#| cuda` cells' outputs of the notebook at `gpu_path` into the one at `path`; return how many cells changed."
    gpu, nb = nbformat.read(gpu_path, as_version=4), nbformat.read(path, as_version=4)
    ran = {c.get("id"): c for c in gpu.cells if is_cuda(c)}
    for c in nb.cells:
        if is_cuda(c) and (c.get("id") not in ran or ran[c.get("id")].source != c.source):
            raise SystemExit(f"{path}: cell {c.get('id')} is not in {gpu_path} with the same source: re-run that notebook "
                             f"on the GPU from this checkout's version; nothing was changed")
    n = 0
    for c in nb.cells:
        if is_cuda(c) and c.outputs != ran[c.get("id")].outputs:
            c.outputs, c.execution_count, n = ran[c.get("id")].outputs, None, n + 1
            # the stamp scripts/save-outputs.py gives: these outputs come from this source
            c.metadata["grpo_edu"] = {"source": hashlib.sha256(c.source.encode()).hexdigest()[:16]}
    if n: nbformat.write(nb, path)
    return n


if __name__ == "__main__":
    if len(sys.argv) < 3: raise SystemExit(__doc__.split("\n\n")[0])
    for p in sys.argv[2:]:
        print(f"{p}: {take(Path(sys.argv[1]) / p, p)} cuda cell(s) took the GPU run's outputs")
