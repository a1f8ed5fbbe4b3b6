"""The default run (`grpo-edu train`, no arguments) of two grpo_edu versions, side by side, on several seeds.

usage: python scripts/bench-default-run.py [--baseline REV] [--candidate REV] [--seeds 0 1 2]
                                           [--set FIELD=VALUE ...]

Each version is a git revision (default: the parent commit against the working tree). For each seed the
baseline and the candidate run one after the other, on the same machine in the same minutes, so a busy
machine slows both alike. Each run is `grpo-edu train --seed S` in a fresh folder, with the package imported
from that revision's tree; `--set FIELD=VALUE` adds a flag to both (for example a shorter `max_steps` to try
the script). What is recorded for each run:
- `train_s`: the trainer's `wall_s` (GRPO and its held-out evaluations before and after; the warm start is
  not in it: it runs before the trainer, and repeats are loaded from the warm-start cache);
- `process_s`: the whole command, start to exit (imports, warm start or its cache, the run);
- the held-out greedy accuracy before and after (200 problems), with 95% Wilson intervals, and whether the
  two intervals are apart.
The record goes to benchmarks/results/cpu-default-run-<date>.json with the CPU's name, the core count and
the versions; the table is printed. Nothing is asserted: the numbers are measurements of this machine.
"""
import argparse, json, os, platform, subprocess, sys, tempfile, time
from datetime import date
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))       # this checkout's grpo_edu: its Wilson interval, its CPU name
from grpo_edu.bench import cpu_name  # noqa: E402
from grpo_edu.evaluation import wilson_interval  # noqa: E402


def tree_of(rev: str, folder: Path) -> Path:
    "A checkout of `rev` ('.' is the working tree itself) in `folder`."
    if rev == ".": return ROOT
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "-f", str(folder), rev],
                   check=True, capture_output=True)
    return folder


def short_rev(rev: str) -> str:
    "A revision's short hash ('.': HEAD's, marked as the working tree)."
    named = "HEAD" if rev == "." else rev
    found = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", named],
                           capture_output=True, text=True)
    return found.stdout.strip() + ("+tree" if rev == "." else "")


def interval(evaluation: dict) -> list[float]:
    "An evaluation's 95% Wilson interval (grpo_edu's), rounded."
    k = round(evaluation["accuracy"] * evaluation["n"])
    return [round(x, 4) for x in wilson_interval(k, evaluation["n"])]


def one_run(tree: Path, seed: int, extra: list[str]) -> dict:
    "`grpo-edu train --seed seed` with the package of `tree`, in a fresh folder: times and accuracies."
    out = Path(tempfile.mkdtemp(prefix="default-run-"))
    env = {**os.environ, "PYTHONPATH": str(tree)}
    command = [sys.executable, "-c", "from grpo_edu.cli import main; main()", "train", "--seed", str(seed),
               "--output_dir", str(out / "run"), "--save_steps", "0", *extra]
    started = time.time()
    done = subprocess.run(command, cwd=out, env=env, capture_output=True, text=True)
    process_s = round(time.time() - started, 1)
    if done.returncode != 0:
        return {"seed": seed, "failed": done.stderr[-2000:]}
    summary = json.loads((out / "run" / "summary.json").read_text())
    before, after = summary["eval_before"], summary["eval_after"]
    before_interval, after_interval = interval(before), interval(after)
    return {"seed": seed, "steps": summary["steps"], "train_s": summary["wall_s"], "process_s": process_s,
            "before": round(before["accuracy"], 4), "after": round(after["accuracy"], 4),
            "gain": round(after["accuracy"] - before["accuracy"], 4),
            "before_interval": before_interval, "after_interval": after_interval,
            "intervals_apart": after_interval[0] > before_interval[1]}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--baseline", default="HEAD~1", help="git revision (default: the parent commit)")
    p.add_argument("--candidate", default=".", help="git revision, or . for the working tree (default)")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--set", nargs="*", default=[], metavar="FIELD=VALUE", help="a flag for both runs")
    p.add_argument("--out", default=str(ROOT / "benchmarks" / "results"))
    a = p.parse_args()
    extra = [part for item in a.set for part in (f"--{item.split('=', 1)[0]}", item.split("=", 1)[1])]
    with tempfile.TemporaryDirectory() as scratch:
        trees = {name: tree_of(rev, Path(scratch) / name)
                 for name, rev in (("baseline", a.baseline), ("candidate", a.candidate))}
        runs = {"baseline": [], "candidate": []}
        for seed in a.seeds:                       # interleaved: both versions see the same machine
            for name, tree in trees.items():
                runs[name].append(one_run(tree, seed, extra))
                print(name, json.dumps(runs[name][-1]), flush=True)
        for name, tree in trees.items():
            if tree != ROOT:
                subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)])
    revs = {name: short_rev(rev) for name, rev in (("baseline", a.baseline), ("candidate", a.candidate))}
    record = {"date": date.today().isoformat(), "cpu": cpu_name(), "cores": os.cpu_count(),
              "omp_num_threads": os.environ.get("OMP_NUM_THREADS"), "python": platform.python_version(),
              "revisions": revs, "flags": extra, "runs": runs}
    path = Path(a.out) / f"cpu-default-run-{record['date']}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=1) + "\n")
    print(f"\n{'version':<10} {'seed':>4} {'steps':>6} {'train s':>8} {'before':>7} {'after':>7} apart")
    for name, rows in runs.items():
        for r in rows:
            if "failed" in r: print(f"{name:<10} {r['seed']:>4} failed"); continue
            print(f"{name:<10} {r['seed']:>4} {r['steps']:>6} {r['train_s']:>8} {r['before']:>7.3f} "
                  f"{r['after']:>7.3f} {r['intervals_apart']}")
    print(f"written: {path}")


if __name__ == "__main__":
    main()
