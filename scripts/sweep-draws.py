#!/usr/bin/env python
"""Run notebooks under many seed offsets and report every assert whose truth depends on the draws.

A claim read off random draws (initial weights, sampled tokens, data order) must hold for any draw, not for
the draws of one machine. This script runs each notebook as `nbdev-test` does (one thread, the same skipped
cells), once per value of `GRPO_EDU_SEED_OFFSET`, with every assert rewritten to record the values it
compares:

- a comparison `a > b` (also chained, and `(a > b).all()`) records both sides and its margin;
- `test_close(a, b, eps=...)` records how much of `eps` the difference used;
- an assert at a cell's top level that fails is recorded and the notebook goes on, so one run finds every
  failing assert, not only the first (inside a function an assert still raises, as `test_fail` expects).

An assert whose compared values change with the offset depends on the draws; the report lists those with
their tightest margin over the offsets, and every failure with the offsets it failed at.

    python scripts/sweep-draws.py --offsets 20               # the chapters' fast cells, 20 offsets, 2 at once
    python scripts/sweep-draws.py --offsets 5 nbs/api/01_loss.ipynb --flags slow
    python scripts/sweep-draws.py --repeat nbs/03_kl.ipynb --cells a7b8c9d0:0b1c2d3e --seeds 200

`--repeat` runs the cells before the range once (at the offset in the environment, else 0), then the range
(cell ids, both ends included) once per seed offset, and reports the range's checks alone: a cell over many
seeds, for the failure rate of one claim. Exit status 1 when an assert failed or a notebook stopped on an
error."""
import argparse, ast, json, math, os, subprocess, sys, tempfile, time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHAPTERS = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "nbs").glob("[0-9]*.ipynb"))
# Widely spaced offsets: a chapter seeds several generators with small seeds (0, 1, 2, ...), so offsets 1
# apart would share most of their draws.
OFFSET_STRIDE = 7919


class Recorder:
    "What the rewritten asserts call: each comparison's values and whether it held, tagged by cell and line."

    def __init__(self, notebook: str):
        self.notebook, self.cell, self.source, self.offset = notebook, None, [], None
        self.records = []

    def where(self, line: int) -> tuple:
        "(cell id, line, the line's text) of a line of the cell being run now."
        text = self.source[line - 1].strip() if 0 < line <= len(self.source) else ""
        return self.cell, line, text

    def _key(self, where: tuple) -> dict:
        "A record's place: the cell that defines the assert (not the one that calls it) and its line."
        cell, line, text = where
        return dict(notebook=self.notebook, cell=cell, line=line, text=text, offset=self.offset)

    def compare(self, line: tuple, operands: list, ops: list) -> bool:
        "Evaluate a chain `a op b op c`, recording each link's two sides."
        result = True
        for k, op in enumerate(ops):
            left, right = operands[k], operands[k + 1]
            held = bool(OPERATORS[op](left, right))
            self.records.append(dict(self._key(line), link=k, op=op, held=held,
                                     margin=margin(op, scalar(left), scalar(right)),
                                     values=[shown(left), shown(right)]))
            result = result and held
        return result

    def reduce(self, line: tuple, left, right, op: str, how: str) -> bool:
        "Evaluate `(left op right).all()` or `.any()`, recording the tightest (or loosest) element's margin."
        held_each = OPERATORS[op](left, right)
        held = bool(held_each.all() if how == "all" else held_each.any())
        margins = elementwise_margin(op, left, right)
        if margins is None: value = None
        else: value = float(margins.min() if how == "all" else margins.max())
        self.records.append(dict(self._key(line), link=0, op=f"{op}.{how}", held=held,
                                 margin=value, values=[value, 0.0]))
        return held

    def close(self, line: tuple, a, b, eps=1e-5, **kwargs):
        "test_close, recording the largest difference as a share of eps."
        from fastcore.test import test_close
        diff, tolerance = largest_difference(a, b), scalar(eps)
        held = diff is not None and tolerance is not None and diff < tolerance
        share = None if diff is None or not tolerance else diff / tolerance
        self.records.append(dict(self._key(line), link=0, op="close", held=held,
                                 margin=None if share is None else 1 - share, values=[diff, tolerance]))
        test_close(a, b, eps=eps, **kwargs)

    def failed(self, line: tuple):
        "A top-level assert that did not hold: recorded, and the notebook goes on."
        self.records.append(dict(self._key(line), link=-1, op="assert", held=False, margin=None, values=[]))
        print(f"sweep-draws: assert failed at {self.notebook} cell {line[0]} line {line[1]}", file=sys.stderr)


OPERATORS = {"Gt": lambda a, b: a > b, "GtE": lambda a, b: a >= b, "Lt": lambda a, b: a < b,
             "LtE": lambda a, b: a <= b, "Eq": lambda a, b: a == b, "NotEq": lambda a, b: a != b,
             "In": lambda a, b: a in b, "NotIn": lambda a, b: a not in b, "Is": lambda a, b: a is b,
             "IsNot": lambda a, b: a is not b}


def scalar(x):
    "x as a float when it is one number (a Python or NumPy number, a one-element tensor), else None."
    if isinstance(x, bool): return float(x)
    if isinstance(x, (int, float)): return float(x)
    try:
        if hasattr(x, "numel") and x.numel() == 1: return float(x)
        if hasattr(x, "size") and getattr(x, "size", 2) == 1 and hasattr(x, "item"): return float(x.item())
    except (TypeError, ValueError, RuntimeError):
        return None
    return None


def shown(x):
    "x as recorded: a float when it is one number, else a short text (to compare runs and to read a failure)."
    value = scalar(x)
    return value if value is not None else repr(x)[:120]


def margin(op: str, left, right):
    "How far a comparison held (positive) or failed (negative), relative to the larger side."
    if left is None or right is None or op not in ("Gt", "GtE", "Lt", "LtE"): return None
    gap = left - right if op in ("Gt", "GtE") else right - left
    scale = max(abs(left), abs(right))
    if not math.isfinite(gap): return None
    return gap / scale if scale > 0 else 0.0


def elementwise_margin(op: str, left, right):
    "Per-element relative margins of a tensor comparison (None for what is not numeric)."
    try:
        import torch
        lt, rt = torch.as_tensor(left, dtype=torch.float64), torch.as_tensor(right, dtype=torch.float64)
        lt, rt = torch.broadcast_tensors(lt, rt)
    except (TypeError, ValueError, RuntimeError):
        return None
    if op not in ("Gt", "GtE", "Lt", "LtE") or lt.numel() == 0: return None
    gap = lt - rt if op in ("Gt", "GtE") else rt - lt
    scale = torch.maximum(lt.abs(), rt.abs()).clamp_min(1e-300)
    return (gap / scale).flatten()


def largest_difference(a, b):
    "max |a - b| over the elements (None when the two are not numbers of one shape)."
    try:
        import torch
        diff = (torch.as_tensor(a, dtype=torch.float64) - torch.as_tensor(b, dtype=torch.float64)).abs()
        return float(diff.max()) if diff.numel() else 0.0
    except (TypeError, ValueError, RuntimeError):
        return None


class RecordAsserts(ast.NodeTransformer):
    "Rewrite asserts and test_close calls to go through the Recorder (`__sweep__` in the cell's namespace)."

    def __init__(self, recorder: Recorder):
        self.recorder = recorder  # which cell is being transformed, for each call's place
        self.depth = 0            # how many function bodies we are inside

    def _call(self, method: str, args: list, node, keywords=()) -> ast.Call:
        func = ast.Attribute(ast.Name("__sweep__", ast.Load()), method, ast.Load())
        where = ast.Constant(self.recorder.where(node.lineno))
        call = ast.Call(func, [where, *args], list(keywords))
        return ast.copy_location(call, node)

    def _test(self, node):
        "An assert's test with its comparisons recorded (a compare, a reduced compare, and/or/not of them)."
        if isinstance(node, ast.Compare):
            ops = [ast.Constant(type(op).__name__) for op in node.ops]
            return self._call("compare", [ast.List([node.left, *node.comparators], ast.Load()),
                                          ast.List(ops, ast.Load())], node)
        if isinstance(node, ast.BoolOp):
            return ast.copy_location(ast.BoolOp(node.op, [self._test(v) for v in node.values]), node)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            return ast.copy_location(ast.UnaryOp(node.op, self._test(node.operand)), node)
        reduced = self._reduced_compare(node)
        return reduced if reduced is not None else node

    def _reduced_compare(self, node):
        "`(a op b).all()` / `.any()` with one operator, recorded element by element."
        if not (isinstance(node, ast.Call) and not node.args and isinstance(node.func, ast.Attribute)):
            return None
        inner, how = node.func.value, node.func.attr
        if how not in ("all", "any") or not isinstance(inner, ast.Compare) or len(inner.ops) != 1: return None
        op = ast.Constant(type(inner.ops[0]).__name__)
        return self._call("reduce", [inner.left, inner.comparators[0], op, ast.Constant(how)], node)

    def visit_FunctionDef(self, node):
        self.depth += 1
        self.generic_visit(node)
        self.depth -= 1
        return node

    visit_AsyncFunctionDef = visit_Lambda = visit_FunctionDef

    def visit_Assert(self, node):
        test = self._test(node.test)
        if self.depth:  # inside a function: keep raising, as the caller (e.g. test_fail) may expect
            return ast.copy_location(ast.Assert(test, node.msg), node)
        failed = ast.Expr(self._call("failed", [], node))
        return ast.copy_location(ast.If(ast.UnaryOp(ast.Not(), test), [failed], []), node)

    def visit_Call(self, node):
        self.generic_visit(node)
        if isinstance(node.func, ast.Name) and node.func.id == "test_close":
            return self._call("close", node.args, node, node.keywords)
        return node


def notebook_cells(path: Path, flags: list[str]):
    "The cells nbdev-test would run (its skip flags less `flags`), in order."
    from nbdev.config import get_config
    from nbdev.test import nb_test_cells
    skip = get_config(path.parent).tst_flags
    return nb_test_cells(path, skip.split() if isinstance(skip, str) else skip, flags)


def run_cells(shell, recorder, cells, offset: int) -> str | None:
    "Run cells in the shell at one seed offset; the error that stopped them, if any."
    os.environ["GRPO_EDU_SEED_OFFSET"] = str(offset)
    recorder.offset = offset
    for cell in cells:
        recorder.cell, recorder.source = cell.id, cell.source.splitlines()
        shell.exc = None
        shell.cell(cell, timeout=None)
        if shell.exc is not None:
            return f"cell {cell.id}: {type(shell.exc).__name__}: {shell.exc}"
    return None


# API pages seed torch directly (`torch.manual_seed(0)`), not through the offset: `--shift-torch-seed` adds
# the offset to those seeds too, so that their claims are also tried on other draws.
SHIFT_TORCH_SEED = """
import os as _os, torch as _torch
_manual_seed = _torch.manual_seed
_torch.manual_seed = lambda seed: _manual_seed(int(seed) + int(_os.environ.get("GRPO_EDU_SEED_OFFSET") or 0))
"""


def run_one(path: Path, offsets: list[int], flags: list[str], cell_range: str | None,
            shift_torch_seed: bool = False) -> list[dict]:
    "Run one notebook in this process: whole at each offset, or its prefix once and then a range per offset."
    from execnb.shell import CaptureShell
    from nbdev.config import get_config
    from fastcore.xtras import working_directory
    os.environ["IN_TEST"] = "1"
    sys.path.insert(0, str(get_config(path.parent).config_path))
    cells = notebook_cells(path, flags)
    recorder = Recorder(path.name)
    rows = []
    with working_directory(path.parent):
        shell = CaptureShell(path)
        transformer = RecordAsserts(recorder)
        shell.ast_transformers.append(transformer)
        shell.user_ns["__sweep__"] = recorder
        if shift_torch_seed: shell.run(SHIFT_TORCH_SEED)
        if cell_range is None:
            error = run_cells(shell, recorder, cells, offsets[0])
            rows.append(dict(notebook=path.name, offset=offsets[0], error=error))
        else:
            first, last = cell_indices(cells, cell_range)
            base = int(os.environ.get("GRPO_EDU_SEED_OFFSET") or 0)
            error = run_cells(shell, recorder, cells[:first], base)
            if error: raise SystemExit(f"the cells before the range failed: {error}")
            recorder.records.clear()                    # only the range's checks are reported
            for offset in offsets:
                error = run_cells(shell, recorder, cells[first:last + 1], offset)
                rows.append(dict(notebook=path.name, offset=offset, error=error))
        if transformer not in shell.ast_transformers:
            raise SystemExit("the assert recorder was dropped by IPython (it raised): nothing was recorded")
    return rows + recorder.records


def cell_indices(cells, cell_range: str) -> tuple[int, int]:
    "Positions of the first and last cell id of `FROM:TO` (or one id) among the cells that run."
    first_id, _, last_id = cell_range.partition(":")
    ids = [c.id for c in cells]
    for i in (first_id, last_id or first_id):
        if i not in ids: raise SystemExit(f"cell id {i!r} is not among the cells that run in this notebook")
    return ids.index(first_id), ids.index(last_id or first_id)


def child(args) -> None:
    "The worker: run one job and write its rows as JSON lines."
    offsets = [int(o) for o in args.child_offsets.split(",")]
    rows = run_one(Path(args.notebooks[0]).resolve(), offsets, args.flags.split(), args.cells,
                   args.shift_torch_seed)
    with open(args.child_out, "w") as f:
        for row in rows: f.write(json.dumps(row) + "\n")


def launch(notebook: str, offsets: list[int], args, out: Path) -> tuple[str, list[dict]]:
    "Run a job in a fresh one-thread Python (as nbdev-test's workers run), returning its rows."
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONHASHSEED="0")
    cmd = [sys.executable, __file__, notebook, "--child-out", str(out), "--child-offsets",
           ",".join(map(str, offsets)), "--flags", args.flags]
    cmd += ["--cells", args.cells] if args.cells else []
    cmd += ["--shift-torch-seed"] if args.shift_torch_seed else []
    started = time.time()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    rows = [json.loads(line) for line in out.read_text().splitlines()] if out.exists() else []
    label = f"{Path(notebook).name} at offset{'s' if len(offsets) > 1 else ''} {offsets[0]}" + \
            (f"..{offsets[-1]}" if len(offsets) > 1 else "")
    if proc.returncode != 0:
        rows.append(dict(notebook=Path(notebook).name, offset=offsets[0],
                         error=f"the worker exited with {proc.returncode}: {proc.stderr.strip()[-800:]}"))
    print(f"  {label}: {time.time() - started:.0f} s", flush=True)
    return label, rows


def jobs_for(args) -> list[tuple[str, list[int]]]:
    "The (notebook, offsets) jobs: each notebook at each offset, or a range's seeds split over the workers."
    if args.repeat:
        seeds = list(range(args.first, args.first + args.seeds))
        return [(args.repeat, seeds[k::args.jobs]) for k in range(args.jobs)]
    offsets = [args.first + OFFSET_STRIDE * i for i in range(args.offsets)]
    notebooks = args.notebooks or CHAPTERS
    return [(nb, [o]) for o in offsets for nb in notebooks]


def summarise(rows: list[dict]) -> int:
    "Print the failures, the errors and the asserts that depend on the draws; the number of problems."
    errors = [r for r in rows if r.get("error")]
    checks = [r for r in rows if "held" in r]
    by_key = {}
    for r in checks:
        by_key.setdefault((r["notebook"], r["cell"], r["line"], r["link"]), []).append(r)
    # A statement failed: an assert (its comparisons may be parts of an `or`) or a test_close.
    failed = {k: v for k, v in by_key.items()
              if any(not r["held"] and r["op"] in ("assert", "close") for r in v)}
    print(f"\n{len({(r['notebook'], r['offset']) for r in rows if 'error' in r})} runs, "
          f"{len(by_key)} recorded checks")
    for r in errors: print(f"ERROR {r['notebook']} offset {r['offset']}: {r['error']}")
    for (nb, cell, line, link), rs in sorted(failed.items()):
        bad = sorted({r["offset"] for r in rs if not r["held"] and r["op"] in ("assert", "close")})
        print(f"FAILED {nb} cell {cell} line {line}: {rs[0]['text']}\n       at offsets {bad}")
    drawn = sampled_checks(by_key)
    print(f"\n{len(drawn)} checks whose compared values change with the offset (tightest first):")
    print(f"{'min margin':>10} {'runs':>5} {'fails':>5}  notebook cell:line  assert")
    for worst, runs, fails, (nb, cell, line, link), text in sorted(drawn, key=lambda d: d[0]):
        print(f"{worst:>10.3f} {runs:>5} {fails:>5}  {nb} {cell}:{line}  {text[:90]}")
    return len(errors) + len(failed)


def sampled_checks(by_key: dict) -> list[tuple]:
    "The checks whose recorded values differ between offsets, with their tightest margin per key."
    out = []
    for key, rs in by_key.items():
        per_offset = {}
        for r in rs: per_offset.setdefault(r["offset"], []).append(r)
        fingerprints = {o: tuple(tuple(r["values"]) for r in group) for o, group in per_offset.items()}
        if len(set(fingerprints.values())) < 2: continue
        margins = [r["margin"] for r in rs if r["margin"] is not None]
        worst = min(margins) if margins else float("nan")
        fails = len({r["offset"] for r in rs if not r["held"]})
        out.append((worst, len(per_offset), fails, key, rs[0]["text"]))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("notebooks", nargs="*", help="notebooks to run (default: the chapters)")
    parser.add_argument("--offsets", type=int, default=20, help="how many seed offsets")
    parser.add_argument("--first", type=int, default=1, help="the first offset (or the first --repeat seed)")
    parser.add_argument("--jobs", type=int, default=2, help="notebooks run at once, one thread each")
    parser.add_argument("--flags", default="", help="cell flags to run that nbdev-test skips, e.g. slow")
    parser.add_argument("--repeat", help="a notebook whose --cells range runs once per seed")
    parser.add_argument("--cells", help="FROM:TO, cell ids (both included) of the range to repeat")
    parser.add_argument("--seeds", type=int, default=200, help="how many seeds for --repeat")
    parser.add_argument("--json", help="also write every recorded row to this JSON-lines file")
    parser.add_argument("--shift-torch-seed", action="store_true",
                        help="add the offset to torch.manual_seed's seeds too (API pages call it directly)")
    parser.add_argument("--child-out", help=argparse.SUPPRESS)
    parser.add_argument("--child-offsets", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child_out: return child(args) or 0
    if args.repeat and not args.cells: parser.error("--repeat needs --cells FROM:TO")
    jobs = jobs_for(args)
    print(f"sweep-draws: {len(jobs)} jobs, {args.jobs} at a time, one thread each", flush=True)
    with tempfile.TemporaryDirectory() as tmp, ThreadPoolExecutor(args.jobs) as pool:
        futures = [pool.submit(launch, nb, offs, args, Path(tmp) / f"{i}.jsonl")
                   for i, (nb, offs) in enumerate(jobs)]
        rows = [row for f in futures for row in f.result()[1]]
    if args.json: Path(args.json).write_text("".join(json.dumps(r) + "\n" for r in rows))
    return 1 if summarise(rows) else 0


if __name__ == "__main__":
    sys.exit(main())
