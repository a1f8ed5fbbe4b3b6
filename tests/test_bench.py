"""`grpo-edu bench` runs end to end (tiny shape on CPU: a smoke test of the command, not a speed measurement)."""
import json
from conftest import cli, run_cli


def test_bench_smoke(shared, tmp_path):
    r = run_cli("bench", "--shapes", "tiny", "--steps", "1", "--max_completion_length", "8", "--data_dir", shared,
                "--per_device_train_batch_size", "8", "--gradient_accumulation_steps", "1",
                "--ours", "rollout_release_memory=true", "--out_dir", tmp_path, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    files = list(tmp_path.glob("*.json"))
    assert len(files) == 1
    rec = json.loads(files[0].read_text())
    row = rec["results"][0]
    assert rec["gpu"].startswith("cpu-") and row["model"] == "tiny"                 # never named as a GPU
    assert {"python", "torch", "transformers", "accelerate", "trl", "grpo_edu"} <= set(rec["versions"])
    assert "bench" in rec["command"] and "--shapes" in rec["command"]
    assert rec["config"]["ours_overrides"] == {"rollout_release_memory": True}
    for k in ("ours_step_s", "trl_step_s", "rollout_tok_s", "hf_generate_tok_s", "ours_before_step_s"):
        assert row[k] and row[k] > 0, k
    assert row["ours_peak_gib"] is None and row["trl_peak_gib"] is None              # no GPU: no peak memory
    assert row["ours_planner_gib"] > 0
    # sampler vs trainer at step one: in fp32 on a CPU both samplers' q is the trainer's π, token for token
    ratios = row["sampler_vs_trainer"]
    assert ratios["precision"] == "fp32"
    for sampler in ("engine", "hf_generate"):
        assert ratios[sampler]["tokens"] > 0 and ratios[sampler]["outside_0.9_1.1"] == 0.0, ratios
        assert ratios[sampler]["mean_abs_rho_minus_1"] < 1e-4, ratios
    assert row["rollout_compiled_tok_s"] is None                        # compiled engine: GPU only
    assert row["step_speedup_vs_trl"] == round(row["trl_step_s"] / row["ours_step_s"], 2)
    for phases in (row["ours_phases_s"], row["ours_before_phases_s"]):
        assert set(phases) == {"rollout", "rewards", "ref_old_logps", "forward_backward", "optimizer"}
        assert 0 < sum(phases.values()) <= 1.05 * max(row["ours_step_s"], row["ours_before_step_s"]) * 1.5


def test_bench_bad_override(shared, tmp_path):
    r = cli("bench", "--data_dir", shared, "--ours", "rollout_engin=hf", "--out_dir", tmp_path)
    assert r.returncode == 2 and "Did you mean `rollout_engine`?" in r.stderr and "Traceback" not in r.stderr


def test_bench_needs_data(tmp_path):
    r = cli("bench", "--data_dir", tmp_path)
    assert r.returncode == 2 and "must hold gsm8k/" in r.stderr


def test_bench_cut_short_keeps_what_it_measured(shared, tmp_path, monkeypatch):
    "A run stopped mid-shape (Ctrl-C, a job's time limit) leaves a file with the measurements made so far."
    import pytest
    import grpo_edu.bench as b
    fake = lambda *a, **kw: {"step_s": [2.0, 4.0], "peak_gib": 1.5, "mean_length": [8, 8], "phases": {"rollout": 1.0}}
    monkeypatch.setattr(b, "random_model_dir", lambda *a, **kw: "unused")
    monkeypatch.setattr(b, "bench_ours", fake)
    monkeypatch.setattr(b, "planner_gib", lambda *a, **kw: 1.4)
    monkeypatch.setattr(b, "bench_trl", lambda *a, **kw: {**fake(), "step_s": [9.0, 9.0]})
    def tok_s(mdir, prompts, n, batch, engine):
        if engine == "hf": raise KeyboardInterrupt                      # stopped while timing HF generate
        return 1000.0
    monkeypatch.setattr(b, "generate_tok_s", tok_s)
    with pytest.raises(KeyboardInterrupt): b.run_bench(("0.5b",), str(shared), out_dir=str(tmp_path))
    [f] = tmp_path.glob("*.json")
    row = json.loads(f.read_text())["results"][0]
    assert (row["ours_step_s"], row["trl_step_s"], row["step_speedup_vs_trl"], row["rollout_tok_s"]) == (3.0, 9.0, 3.0, 1000)
    assert row["ours_planner_gib"] == 1.4
    assert row["hf_generate_tok_s"] is None and row["rollout_speedup_vs_hf"] is None and row["ours_before_step_s"] is None


def test_planner_column_uses_the_runs_config_and_longest_prompt(shared, tmp_path):
    "ours_planner_gib: the planner on bench_args' config with the prompt width of the longest GSM8K prompt sampled."
    from dataclasses import asdict
    from transformers import AutoTokenizer
    from grpo_edu.bench import bench_args, planner_gib, random_model_dir
    from grpo_edu.data import gsm8k_dataset
    from grpo_edu.memory import estimate_memory
    mdir = random_model_dir("tiny", str(shared / "qwen2.5-tokenizer"), str(tmp_path / "m"))
    ds = gsm8k_dataset("train", shared / "gsm8k").select(range(64))
    tok = AutoTokenizer.from_pretrained(mdir)
    texts = [tok.apply_chat_template(r["prompt"], add_generation_prompt=True, tokenize=False) for r in ds]
    width = max(len(tok(t, add_special_tokens=False)["input_ids"]) for t in texts)
    assert 100 < width < 512                                                 # real prompts: far below the 512 cap
    args = bench_args(3, 512, 16, 4, optim="adamw_torch")
    got = planner_gib(mdir, ds, args)
    assert got == round(estimate_memory(mdir, **{**asdict(args), "max_prompt_length": width})["total"], 2)
    assert got < estimate_memory(mdir, **asdict(args))["total"]             # the 512 cap would overestimate


def test_the_correction_is_priced_when_it_is_on(shared, tmp_path, monkeypatch):
    "Where grpo_edu's run corrected its sampler (a bf16 rollout on a GPU), the same run without it prices the correction."
    import grpo_edu.bench as b
    calls = []
    def fake_ours(*a, **kw):
        calls.append(kw)
        on = kw.get("vllm_importance_sampling_correction") is not False
        return {"step_s": [3.0 if on else 2.5], "peak_gib": None, "mean_length": [8], "phases": {"rollout": 1.0},
                "sampling": {"sampling/importance_sampling_ratio/mean": 0.98} if on else {}}
    monkeypatch.setattr(b, "random_model_dir", lambda *a, **kw: "unused")
    monkeypatch.setattr(b, "bench_ours", fake_ours)
    monkeypatch.setattr(b, "planner_gib", lambda *a, **kw: 1.4)
    monkeypatch.setattr(b, "generate_tok_s", lambda *a, **kw: 1000.0)
    monkeypatch.setattr(b, "sampler_vs_trainer", lambda *a, **kw: {})
    b.run_bench(("0.5b",), str(shared), out_dir=str(tmp_path), trl=False, before=False, compiled=False)
    [f] = tmp_path.glob("*.json")
    row = json.loads(f.read_text())["results"][0]
    assert row["ours_sampling"] == {"sampling/importance_sampling_ratio/mean": 0.98}
    assert (row["ours_step_s"], row["ours_uncorrected_step_s"]) == (3.0, 2.5)
    assert [c.get("vllm_importance_sampling_correction") for c in calls] == [None, False]


def test_bench_toy_shape(tmp_path):
    """`--shapes toy` times the default run's own model and step (256 completions of at most 6 tokens, one
    micro-batch) against TRL, with no data folder: the toy brings its model, tokenizer and task."""
    r = run_cli("bench", "--shapes", "toy", "--steps", "1", "--no_compiled", "--no_before",
                "--data_dir", tmp_path / "absent", "--out_dir", tmp_path, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    row = json.loads(next(tmp_path.glob("*.json")).read_text())["results"][0]
    assert row["model"] == "toy"
    assert row["step"] == {"max_completion_length": 6, "batch": 256, "accum": 1}      # the default run's step
    for k in ("ours_step_s", "trl_step_s", "rollout_tok_s", "hf_generate_tok_s"):
        assert row[k] and row[k] > 0, k
    assert row["ours_before_step_s"] is None                                           # --no_before
    for sampler in ("engine", "hf_generate"):
        assert row["sampler_vs_trainer"][sampler]["mean_abs_rho_minus_1"] < 1e-4
