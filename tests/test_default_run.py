"""The README's main command: `grpo-edu train` with no arguments learns (held-out greedy accuracy +25 points)."""
import json
import pytest
from conftest import run_cli


def test_default_run_learns(tmp_path):
    r = run_cli("train", cwd=tmp_path, timeout=1200)
    assert r.returncode == 0, r.stderr[-3000:]
    s = json.loads((tmp_path / "runs" / "toy" / "summary.json").read_text())
    before, after = s["eval_before"]["accuracy"], s["eval_after"]["accuracy"]
    print(f"default run: {before:.3f} -> {after:.3f} in {s['wall_s']} s")
    assert s["eval_before"]["n"] == s["eval_after"]["n"] == 200
    assert after - before >= 0.25, (before, after)
    assert {"reward.png", "accuracy.png"} <= {p.split("/")[-1] for p in s["plots"]}
    assert "held-out greedy accuracy" in r.stdout and "plots:" in r.stdout


def test_short_run_moves_reward(tmp_path):
    "A shortened default run: the training reward rises over 150 GRPO steps."
    r = run_cli("train", "--max_steps", "150", "--eval_dataset", "none", "--output_dir", tmp_path, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    rows = [json.loads(l) for l in (tmp_path / "metrics.jsonl").open()]
    first, last = sum(x["reward"] for x in rows[:3]) / 3, sum(x["reward"] for x in rows[-3:]) / 3
    assert last > first, (first, last)
