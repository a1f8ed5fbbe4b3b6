"""The README's main command: `grpo-edu train` with no arguments learns (held-out greedy accuracy +25 points).

Here a shortened default run (300 GRPO steps, under a minute on 2 cores), and the check that evaluating during a run
changes nothing else; the full 750-step run is the index's `#| slow` cell (the README's `nbdev-test --flags slow`
runs it and asserts its gain), and `pytest --runslow` runs it through the command line too."""
import json
import pytest
from conftest import run_cli


def summary_and_rows(d):
    s = json.loads((d / "summary.json").read_text())
    return s, [json.loads(l) for l in (d / "metrics.jsonl").open()]


@pytest.mark.slow
def test_default_run_learns(tmp_path):
    "The full default run, exactly as the README runs it: held-out greedy accuracy rises by at least 25 points."
    r = run_cli("train", cwd=tmp_path, timeout=1200)
    assert r.returncode == 0, r.stderr[-3000:]
    s, _ = summary_and_rows(tmp_path / "runs" / "toy")
    before, after = s["eval_before"]["accuracy"], s["eval_after"]["accuracy"]
    print(f"default run: {before:.3f} -> {after:.3f} in {s['wall_s']} s")
    assert s["eval_before"]["n"] == s["eval_after"]["n"] == 200
    assert after - before >= 0.25, (before, after)


def test_short_default_run_learns(tmp_path):
    """The default run cut to 300 GRPO steps (the warm-up and the cosine shrink with it): held-out accuracy rises by
    at least 10 points (measured: +22.5 and +32 points for seeds 0 and 1000), the training reward rises, and the
    plots and the summary are where the run says."""
    r = run_cli("train", "--max_steps", "300", "--save_steps", "0", cwd=tmp_path, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    s, rows = summary_and_rows(tmp_path / "runs" / "toy")
    before, after = s["eval_before"]["accuracy"], s["eval_after"]["accuracy"]
    print(f"short default run: {before:.3f} -> {after:.3f} in {s['wall_s']} s")
    assert s["eval_before"]["n"] == s["eval_after"]["n"] == 200 and s["steps"] == 300
    assert after - before >= 0.10, (before, after)
    first, last = (sum(x["reward"] for x in part) / len(part) for part in (rows[:3], rows[-3:]))
    assert last > first, (first, last)
    assert {"reward.png", "accuracy.png"} <= {p.split("/")[-1] for p in s["plots"]}
    assert "held-out greedy accuracy" in r.stdout and "plots:" in r.stdout


def test_evaluations_leave_the_run_unchanged(tmp_path):
    """A held-out evaluation every few steps (`--eval_steps`) changes nothing else: greedy decoding draws no random
    numbers, so the run logs the same rewards, losses and KL as without it. The index's figure relies on this: it is
    `grpo-edu train`'s run with an evaluation every 100 steps added."""
    common = ("train", "--max_steps", "30", "--save_steps", "0")
    for folder, extra in (("plain", ()), ("evaluated", ("--eval_steps", "10"))):
        r = run_cli(*common, *extra, "--output_dir", folder, cwd=tmp_path, timeout=900)
        assert r.returncode == 0, r.stderr[-3000:]
    (plain, plain_rows), (evaluated, evaluated_rows) = (summary_and_rows(tmp_path / f)
                                                        for f in ("plain", "evaluated"))
    timing = lambda key: key.startswith(("time/", "eval_")) or key in ("step_time", "wall_s")
    same = lambda row: {k: v for k, v in row.items() if not timing(k)}
    assert any("eval_accuracy" in row for row in evaluated_rows)          # it did evaluate
    assert not any("eval_accuracy" in row for row in plain_rows)
    assert len(plain_rows) == len(evaluated_rows) == 3
    assert {"reward", "loss"} <= set(same(plain_rows[0]))
    assert [same(row) for row in plain_rows] == [same(row) for row in evaluated_rows]
    assert plain["eval_before"] == evaluated["eval_before"] and plain["eval_after"] == evaluated["eval_after"]
