"""How long `grpo-edu doctor` takes on a 10,000-step log, grpo_edu's metrics.jsonl and TRL's trainer_state.json.

usage: python scripts/bench-doctor.py [--steps 10000] [--repeats 3] [--out FILE]

The log is built from a real run's rows: `--run RUN_DIR` (default: the default run, trained here into a temporary
folder when no run is given), its logged rows repeated with the step renumbered until there are `--steps` of them,
once as metrics.jsonl with its config.yaml, and once as a TRL trainer_state.json. Two times are measured for each, the
median of the repeats: `in_process_s`, reading, the rules, the report and the figure, in this process after the
imports (what the doctor itself costs); and `command_s`, the whole `grpo-edu doctor` command, Python's start and
imports included. The record goes to benchmarks/results/cpu-doctor-<date>.json with the CPU and its core count.
Nothing is asserted: the numbers are measurements of this machine.
"""
import argparse, json, os, statistics, subprocess, sys, tempfile, time
from datetime import date
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from grpo_edu.bench import cpu_name  # noqa: E402
from grpo_edu.doctor import examine, plot_findings, report  # noqa: E402


def long_logs(run: Path, steps: int, folder: Path) -> dict:
    "The run's rows repeated to `steps` rows: a grpo_edu run folder and a TRL one."
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines() if line.strip()]
    rows = [r for r in rows if "loss" in r]
    long = [{**rows[i % len(rows)], "step": i + 1} for i in range(steps)]
    ours, trl = folder / "ours", folder / "trl"
    ours.mkdir()
    trl.mkdir()
    (ours / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in long))
    (ours / "config.yaml").write_text((run / "config.yaml").read_text())
    (trl / "trainer_state.json").write_text(json.dumps({"log_history": long}))
    return {"grpo_edu metrics.jsonl": ours, "TRL trainer_state.json": trl}


def in_process(folder: Path, figure: Path) -> float:
    "Seconds to read, diagnose, report and draw, after the imports."
    start = time.perf_counter()
    diagnosis = examine(folder)
    report(diagnosis)
    plot_findings(diagnosis, figure)
    return time.perf_counter() - start


def command(folder: Path, figure: Path) -> float:
    "Seconds of the whole `grpo-edu doctor` command."
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "grpo_edu.cli", "doctor", str(folder), "--figure", str(figure)],
                   check=True, capture_output=True, cwd=ROOT)
    return time.perf_counter() - start


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--run", help="a grpo_edu run folder whose rows the log repeats (default: train the default run)")
    p.add_argument("--steps", type=int, default=10_000)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / f"cpu-doctor-{date.today()}.json"))
    a = p.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-doctor-"))
    run = Path(a.run) if a.run else work / "toy"
    if not a.run:
        subprocess.run([sys.executable, "-m", "grpo_edu.cli", "train", "--output_dir", str(run)], check=True,
                       capture_output=True)
    record = {"cpu": cpu_name(), "cores": len(os.sched_getaffinity(0)), "steps": a.steps, "logs": {}}
    for name, folder in long_logs(run, a.steps, work).items():
        figure = work / f"{folder.name}.png"
        times = {"in_process_s": [in_process(folder, figure) for _ in range(a.repeats)],
                 "command_s": [command(folder, figure) for _ in range(a.repeats)]}
        record["logs"][name] = {k: round(statistics.median(v), 3) for k, v in times.items()}
        print(f"{name:<24} {a.steps} steps: doctor {record['logs'][name]['in_process_s']:.2f} s in process, "
              f"{record['logs'][name]['command_s']:.2f} s as a command")
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(record, indent=1) + "\n")
    print(f"record: {a.out}")


if __name__ == "__main__":
    main()
