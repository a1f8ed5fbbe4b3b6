#!/usr/bin/env python
"""Re-execute notebooks and save their outputs, each code cell stamped with the source that produced them.

A saved output that no longer comes from its cell misleads every reader of the docs site. This script runs a
notebook as `nbdev-test --flags slow` does (one thread, the seeds as written: `GRPO_EDU_SEED_OFFSET` unset;
the `#| cuda` cells are left as they are), and only when every cell passed writes the outputs back, with a
hash of each executed cell's source in its metadata (`grpo_edu.source`). `tests/test_saved_outputs.py` fails
for any cell whose saved outputs were not produced by its current source. It also collapses progress bars to
their last line and drops stderr output that names where packages are installed or a home folder, then runs
`nbdev-clean`.

    python scripts/save-outputs.py nbs/15_loss_family.ipynb nbs/api/07c_tabular.ipynb   # two at a time
      python scripts/save-outputs.py --stale                                               # every stale
  notebook

Exit status 1 when a notebook failed (it is then left unchanged)."""
import argparse, hashlib, os, re, subprocess, sys, time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STAMP = "grpo_edu"
LOCAL_PATH = re.compile(r"site-packages|/root/|/home/[^/\s]+/|/Users/[^/\s]+/")


def source_hash(source: str) -> str:
    "The stamp of a cell's source: the first 16 hex digits of its SHA-256."
    return hashlib.sha256(source.encode()).hexdigest()[:16]


def cells_that_run(path: Path) -> set:
    "The ids of the code cells `nbdev-test --flags slow` runs in this notebook."
    from nbdev.config import get_config
    from nbdev.test import nb_test_cells
    skip = get_config(path.parent).tst_flags
    skip = skip.split() if isinstance(skip, str) else list(skip)
    return {c.id for c in nb_test_cells(path, skip, ["slow"])}


def stale_cells(path: Path) -> list:
    "The ids of the cells that run whose stamp is missing or is not their source's."
    import nbformat
    runs = cells_that_run(path)
    nb = nbformat.read(path, as_version=4)
    return [c.id for c in nb.cells if c.id in runs
            and c.metadata.get(STAMP, {}).get("source") != source_hash(c.source)]


def tidy(output) -> object | None:
    "An output as it is kept: progress bars at their last line; stderr naming a local path dropped."
    if output.get("output_type") != "stream": return output
    if isinstance(output.text, list): output.text = "".join(output.text)
    if "\r" in output.text:
        output.text = "\n".join(line.rstrip("\r").split("\r")[-1] for line in output.text.split("\n"))
    if output.name == "stderr" and LOCAL_PATH.search(output.text): return None
    return output


def execute(path: Path) -> str | None:
    "Run the notebook in this process and save it stamped; the error that stopped it, if any."
    import nbformat
    from execnb.shell import CaptureShell
    from fastcore.xtras import working_directory
    from nbdev.config import get_config
    from nbdev.process import NBProcessor
    os.environ["IN_TEST"] = "1"
    sys.path.insert(0, str(get_config(path.parent).config_path))
    runs = cells_that_run(path)
    processed = NBProcessor(path, rm_directives=False, process=True).nb
    outputs = {}
    with working_directory(path.parent):
        shell = CaptureShell(path)
        for cell in processed.cells:
            if cell.cell_type != "code" or cell.id not in runs: continue
            shell.cell(cell, timeout=None)
            if shell.exc is not None:
                return f"cell {cell.id}: {type(shell.exc).__name__}: {shell.exc}"
            outputs[cell.id] = [o for o in map(tidy, nbformat.from_dict(cell.outputs)) if o is not None]
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        if cell.get("id") in outputs:
            cell.outputs, cell.execution_count = outputs[cell.id], None
            cell.metadata[STAMP] = {"source": source_hash(cell.source)}
    nbformat.write(nb, path)
    return None


def launch(path: Path) -> bool:
    "Save one notebook in a fresh one-thread Python, as nbdev-test's workers run; whether it passed."
    env = {k: v for k, v in os.environ.items() if k != "GRPO_EDU_SEED_OFFSET"}
    env["OMP_NUM_THREADS"] = "1"
    started = time.time()
    done = subprocess.run([sys.executable, __file__, "--one", str(path)], env=env, capture_output=True,
                          text=True)
    if done.returncode != 0:
        said = f"{done.stdout.strip()}{done.stderr.strip()[-2000:]}"
        print(f"FAILED {path} ({time.time() - started:.0f} s): {said}", flush=True)
        return False
    subprocess.run(["nbdev-clean", "--fname", str(path)], check=True, capture_output=True)
    print(f"saved  {path} ({time.time() - started:.0f} s)", flush=True)
    return True


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("notebooks", nargs="*", type=Path)
    parser.add_argument("--stale", action="store_true", help="every notebook with a stale or unstamped cell")
    parser.add_argument("--jobs", type=int, default=2, help="notebooks run at once, one thread each")
    parser.add_argument("--one", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        error = execute(args.one.resolve())
        if error: print(error)
        return 1 if error else 0
    paths = list(args.notebooks)
    if args.stale:
        paths += [p for p in sorted((ROOT / "nbs").rglob("*.ipynb")) if stale_cells(p)]
    if not paths: parser.error("name the notebooks, or --stale")
    with ThreadPoolExecutor(args.jobs) as pool:
        passed = list(pool.map(launch, paths))
    return 0 if all(passed) else 1


if __name__ == "__main__":
    sys.exit(main())
