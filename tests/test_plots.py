"""The run's own plots, as a user opens them: PNGs at least 800 px wide, an overview with one panel per logged
quantity, y axes named with units, legends of 9 pt and more beside the curves (never on them), y ranges that do
not magnify noise, and compared runs named by the settings that differ between them. Matplotlib is used as the
package uses it, without choosing a backend."""
import json, struct
from pathlib import Path
import pytest
from grpo_edu.cli import main
from grpo_edu.recipe import TOY_RECIPE, config_from_dict
from grpo_edu.monitor import MetricsWriter, save_config, write_json
from grpo_edu.plots import AXES, TITLES, compare_runs, plot_run, run_figures


def legend_clear(fig) -> bool:
    "Whether the figure's legend lies whole inside the figure and on none of its plots."
    fig.draw_without_rendering()
    box = fig.legends[0].get_window_extent()
    whole = fig.bbox.contains(box.x0, box.y0) and fig.bbox.contains(box.x1, box.y1)
    return whole and not any(box.overlaps(ax.get_window_extent()) for ax in fig.axes)


def png_size(path) -> tuple[int, int]:
    "A PNG's (width, height) in pixels, from its IHDR chunk."
    head = Path(path).read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n", path
    return struct.unpack(">II", head[16:24])


def fake_run(folder, steps=120, generations=8, length=3.5, seed_shift=0.0):
    "A finished run's folder: metrics.jsonl with every overview quantity, evaluations, summary, config."
    w = MetricsWriter(folder)
    for s in range(1, steps + 1):
        row = {"step": s, "reward": 0.2 + s / 1000 + 0.05 * (s % 3) + seed_shift, "kl": 0.0005 * s,
               "rewards/accuracy_reward/mean": 0.2 + s / 1000, "loss": 0.01 * (s % 2), "entropy": 0.7,
               "completions/mean_length": length + 0.1 * (s % 2), "clip_ratio/region_mean": 0.0,
               "grad_norm": 2.0 + 0.5 * (s % 4), "frac_reward_zero_std": 0.4}
        if s % 40 == 0: row.update(eval_accuracy=0.3 + s / 2000, eval_n=200)
        w.write(row)
    write_json(Path(folder) / "summary.json", {"eval_before": {"accuracy": 0.23, "n": 200},
                                               "eval_after": {"accuracy": 0.36, "n": 200}})
    save_config(folder, config_from_dict({**TOY_RECIPE, "num_generations": generations,
                                          "output_dir": str(folder)}))
    return Path(folder)


def test_run_plots_are_800_px_wide_with_the_overview_first(tmp_path):
    run = fake_run(tmp_path / "toy")
    files = plot_run(run)
    assert [f.name for f in files][:2] == ["overview.png", "reward.png"]
    assert {f.name for f in files} == {"overview.png", "reward.png", "accuracy.png", "kl.png", "loss.png",
                                       "entropy.png", "length.png", "clip_ratio.png", "grad_norm.png",
                                       "frac_reward_zero_std.png"}
    for f in files:
        width, height = png_size(f)
        assert width >= 800, (f.name, width, height)
    assert png_size(run / "plots" / "overview.png")[1] > png_size(run / "plots" / "reward.png")[1]


def test_overview_has_one_labelled_panel_per_quantity_and_a_legend_off_the_curves(tmp_path):
    run = fake_run(tmp_path / "toy")
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    summary = json.loads((run / "summary.json").read_text())
    fig = run_figures(rows, {k: summary[f"eval_{k}"] for k in ("before", "after")}, title="toy")["overview.png"]
    names = ["reward", "accuracy", "kl", "loss", "entropy", "length", "clip_ratio", "grad_norm",
             "frac_reward_zero_std"]
    assert [ax.get_title("right") for ax in fig.axes] == names                # each keyed by its name...
    assert [ax.get_title("left") for ax in fig.axes] == [TITLES[n] for n in names]   # ...and titled in words
    assert all(ax.get_ylabel() == AXES[n][0] and ax.get_xlabel() == "optimizer step"
               for ax, n in zip(fig.axes, names))
    assert all(("(" in AXES[n][0]) for n in names if n != "reward")          # each with its units
    texts = [t.get_text() for t in fig.legends[0].get_texts()]
    assert "held-out greedy accuracy, 95% interval" in texts and "after training: 36.0%" in texts
    assert min(t.get_fontsize() for t in fig.legends[0].get_texts()) >= 9
    assert legend_clear(fig)
    lengths = fig.axes[names.index("length")]
    bottom, top = lengths.get_ylim()
    assert top - bottom >= 2.0, (bottom, top)           # 0.1 tokens of jitter, not stretched over the plot
    single = run_figures(rows, {k: summary[f"eval_{k}"] for k in ("before", "after")})["accuracy.png"]
    assert legend_clear(single) and single.axes[0].get_ylabel() == AXES["accuracy"][0]
    accuracy = fig.axes[names.index("accuracy")]
    assert accuracy.get_ylim()[0] >= -0.03 and accuracy.get_ylim()[1] <= 1.03     # 0 to 1, and a little room


def test_runs_are_named_by_what_differs(tmp_path):
    g8, g2 = fake_run(tmp_path / "toy-short"), fake_run(tmp_path / "toy-short-G2", generations=2)
    drawn = {}
    files = compare_runs([g8, g2], tmp_path / "compare", window=5)
    for f in files: assert png_size(f)[0] >= 800, f
    from matplotlib.figure import Figure
    real = Figure.savefig
    Figure.savefig = lambda fig, path, *a, **k: drawn.__setitem__(Path(path).name, fig)
    try: compare_runs([g8, g2], tmp_path / "compare", window=5)
    finally: Figure.savefig = real
    legend = [t.get_text() for t in drawn["reward.png"].legends[0].get_texts()]
    assert legend == ["num_generations=8", "num_generations=2"]
    assert drawn["accuracy.png"].legends[0].get_texts()[0].get_text() == "num_generations=8 (eval 0.23 → 0.36)"
    assert all(legend_clear(fig) for fig in drawn.values())
    assert min(t.get_fontsize() for t in drawn["length.png"].legends[0].get_texts()) >= 9


def test_cli_names_compared_runs_and_falls_back_to_folders(tmp_path, capsys):
    a, b = fake_run(tmp_path / "a"), fake_run(tmp_path / "b")      # the same settings: named by folder
    assert main(["plot", str(a), str(b)]) == 0
    said = capsys.readouterr().out
    assert f"[grpo-edu] runs:    {a}, {b}" in said
    c = fake_run(tmp_path / "c", generations=4)
    assert main(["plot", str(a), str(c)]) == 0
    said = capsys.readouterr().out
    assert f"[grpo-edu] runs:    num_generations=8 ({a}), num_generations=4 ({c})" in said
    assert main(["plot", str(a)]) == 0
    assert capsys.readouterr().out.startswith(f"[grpo-edu] plots:   {a}/plots/overview.png, ")


@pytest.mark.parametrize("steps", [1, 3])
def test_short_runs_still_draw(tmp_path, steps):
    run = tmp_path / "short"
    w = MetricsWriter(run)
    for s in range(1, steps + 1): w.write({"step": s, "reward": 0.5})
    files = plot_run(run)
    assert [f.name for f in files] == ["overview.png", "reward.png"]
    assert png_size(files[0])[0] >= 800


def test_the_trainer_saves_its_config(tmp_path):
    "A run's folder holds config.yaml: what compare_runs names it by, and a recipe that reruns it."
    from grpo_edu.recipe import load_config
    from grpo_edu.config import GRPOConfig
    from grpo_edu.toy import addition_dataset, toy_model, toy_tokenizer
    from grpo_edu.trainer import GRPOTrainer
    tok = toy_tokenizer()
    args = GRPOConfig(output_dir=str(tmp_path / "run"), num_generations=4, per_device_train_batch_size=8,
                      max_completion_length=4, max_steps=2, logging_steps=1, save_steps=0, report_to="none")
    summary = GRPOTrainer(toy_model(tok, seed=0), lambda completions, **kw: [0.0] * len(completions), args,
                          addition_dataset(16, seed=1), processing_class=tok).train()
    saved = load_config(tmp_path / "run" / "config.yaml")
    assert saved.num_generations == 4 and saved.max_steps == 2 and saved.output_dir == args.output_dir
    assert Path(summary["plots"][0]).name == "overview.png"


def test_long_run_names_keep_the_legend_whole(tmp_path):
    "Runs that differ in several settings get long names: the legend takes one column and stays in the figure."
    runs = [fake_run(tmp_path / f"r{i}") for i in range(3)]
    for i, run in enumerate(runs):
        save_config(run, {"learning_rate": 1e-4 * (i + 1), "beta": 0.04 * i, "loss_type": ["grpo", "dapo",
                                                                                          "dr_grpo"][i]})
    from matplotlib.figure import Figure
    drawn, real = {}, Figure.savefig
    Figure.savefig = lambda fig, path, *a, **k: drawn.__setitem__(Path(path).name, fig)
    try: compare_runs(runs, tmp_path / "compare")
    finally: Figure.savefig = real
    texts = [t.get_text() for t in drawn["reward.png"].legends[0].get_texts()]
    assert texts[2] == "learning_rate=0.0003, beta=0.08, loss_type=dr_grpo"
    assert all(legend_clear(fig) for fig in drawn.values())
