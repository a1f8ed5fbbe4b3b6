"""`grpo-edu doctor` on real runs: TRL 1.16's GRPOTrainer and grpo_edu's, on a tiny model, with settings chosen to
produce each finding (read from TRL's own trainer_state.json and training_args.bin, and from grpo_edu's metrics.jsonl
and config.yaml), logs derived from those runs where a run of seconds cannot produce a finding (the change is stated
in each test), and hostile inputs (one paragraph, exit 2)."""
import json, os, pickle
from pathlib import Path
import pytest
from grpo_edu.cli import main
from grpo_edu.doctor import examine

trl = pytest.importorskip("trl", reason="the findings are checked on TRL's own runs: pip install -e '.[dev]'")


def trl_run(folder: Path, reward, **settings) -> Path:
    "Train TRL's GRPOTrainer for a few steps on the toy model; save its state and settings as TRL's scripts do."
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer
    from grpo_edu.toy import toy_model, toy_tokenizer
    tok = toy_tokenizer()
    model_dir = folder / "model"
    toy_model(tok, hidden_size=32, num_layers=2, seed=0).save_pretrained(model_dir)
    tok.save_pretrained(model_dir)
    settings = {"max_steps": 5, "per_device_train_batch_size": 8, "num_generations": 4,
                "max_completion_length": 6, "save_strategy": "no", **settings}
    args = GRPOConfig(output_dir=str(folder), use_cpu=True, bf16=False, report_to="none", logging_steps=1,
                      **settings)
    data = Dataset.from_list([{"prompt": f"{i}+{i}="} for i in range(32)])
    trainer = GRPOTrainer(model=str(model_dir), reward_funcs=reward, args=args, train_dataset=data,
                          processing_class=tok)
    trainer.train()
    trainer.save_state()                      # trainer_state.json
    trainer.save_model()                      # ... and training_args.bin
    return folder


def ours_run(folder: Path, reward, **settings) -> Path:
    "The same few steps with grpo_edu's GRPOTrainer: metrics.jsonl and config.yaml in the folder."
    from datasets import Dataset
    from grpo_edu.config import GRPOConfig
    from grpo_edu.toy import toy_model, toy_tokenizer
    from grpo_edu.trainer import GRPOTrainer
    tok = toy_tokenizer()
    settings = {"max_steps": 5, "per_device_train_batch_size": 8, "num_generations": 4,
                "max_completion_length": 6, **settings}
    args = GRPOConfig(output_dir=str(folder), use_cpu=True, logging_steps=1, eval_dataset=None, save_steps=0,
                      **settings)
    data = Dataset.from_list([{"prompt": f"{i}+{i}=", "answer": str(2 * i)} for i in range(32)])
    model = toy_model(tok, hidden_size=32, num_layers=2, seed=0)
    GRPOTrainer(model, [reward], args, train_dataset=data, processing_class=tok).train()
    return folder


RUNS = {"trl": trl_run, "grpo_edu": ours_run}


def by_position(completions, **kwargs):
    "A reward that differs within each group, so every group has a signal."
    return [float(i % 4) for i in range(len(completions))]


def constant(completions, **kwargs):
    "One reward for every completion: no group has a signal."
    return [1.0] * len(completions)


@pytest.fixture(scope="module", params=sorted(RUNS))
def healthy_grpo(request, tmp_path_factory):
    "loss_type='grpo', beta=0, one optimizer step per round, and a warm-up longer than the run."
    return RUNS[request.param](tmp_path_factory.mktemp("grpo"), by_position, loss_type="grpo", beta=0.0, warmup_steps=100,
                   max_steps=10)


@pytest.fixture(scope="module", params=sorted(RUNS))
def starved(request, tmp_path_factory):
    "Completions of at most 2 tokens, one reward for all, 12 steps; learning rate 0 where the trainer takes it."
    zero = {"learning_rate": 0.0} if request.param == "trl" else {}     # grpo_edu refuses it up front
    return RUNS[request.param](tmp_path_factory.mktemp("starved"), constant, max_completion_length=2, max_steps=12,
                               **zero)


@pytest.fixture(scope="module", params=sorted(RUNS))
def wild(request, tmp_path_factory):
    "beta=0.04 and a learning rate far too large (0.05, constant) for 16 steps."
    return RUNS[request.param](tmp_path_factory.mktemp("wild"), by_position, beta=0.04, learning_rate=0.05,
                               lr_scheduler_type="constant", max_steps=16)


@pytest.fixture(scope="module", params=sorted(RUNS))
def off_policy(request, tmp_path_factory):
    "Two optimizer steps per rollout round (num_iterations=2) at a large learning rate (0.01, constant)."
    return RUNS[request.param](tmp_path_factory.mktemp("off"), by_position, num_iterations=2, learning_rate=0.01,
                               lr_scheduler_type="constant", max_steps=6)


@pytest.fixture(scope="module", params=sorted(RUNS))
def beta_grpo(request, tmp_path_factory):
    "loss_type='grpo' with beta=0.1 and a learning rate that moves the policy off the reference (3e-3)."
    return RUNS[request.param](tmp_path_factory.mktemp("beta"), by_position, loss_type="grpo", beta=0.1,
                               learning_rate=3e-3, lr_scheduler_type="constant", max_steps=6)


def found(folder, **kw) -> dict:
    "The doctor's findings on a run, name -> kind; each one that was checked links to its chapter."
    findings = examine(folder, **kw).findings
    assert all(f.chapter.startswith("https://") for f in findings if f.kind != "not logged")
    return {f.name: f.kind for f in findings}


def training_rows(run: Path) -> list:
    "A run's logged training rows, TRL's or grpo_edu's."
    if (run / "metrics.jsonl").exists():
        return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    return [r for r in json.loads((run / "trainer_state.json").read_text())["log_history"] if "loss" in r]


def test_the_loss_at_zero_is_expected_for_grpo_on_policy(healthy_grpo):
    "Finding 1 from each trainer's own log: the loss is 0 at every step (beta=0) while grad_norm is not."
    assert all(abs(r["loss"]) < 1e-6 and r["grad_norm"] > 0 for r in training_rows(healthy_grpo))
    diagnosis = examine(healthy_grpo)
    assert Path(diagnosis.source.config_from).name in ("training_args.bin", "config.yaml")
    assert diagnosis.source.config["loss_type"] == "grpo"
    assert found(healthy_grpo)["zero_loss"] == "expected"


def test_after_step_one_the_loss_is_beta_times_the_kl(beta_grpo):
    "Finding 1's second half: with beta > 0 the logged loss is β·KL (median ratio near 1), from each trainer's log."
    import re
    (zero,) = [f for f in examine(beta_grpo).findings if f.name == "zero_loss"]
    assert zero.kind == "expected" and 0.8 < float(re.search(r"median ([\d.]+)", zero.seen).group(1)) < 1.25


def test_clipping_off_policy_is_found(off_policy):
    "Finding 5 from each trainer: with num_iterations=2 the ratio moves off 1, and at this rate a fifth is clipped."
    assert found(off_policy)["clipping"] == "problem"


def test_a_warm_up_longer_than_the_run_is_found(healthy_grpo):
    "Finding 8: warmup_steps=100 with max_steps=10: the learning rate rises through the last step."
    assert found(healthy_grpo)["warmup_never_ends"] == "problem"


def test_no_signal_truncation_zero_lr_and_no_learning_are_found(starved, tmp_path):
    "Findings 2, 3, 8 and 9 from one run, read from its folder; grpo_edu's log with its last 3 learning rates 0."
    if (starved / "metrics.jsonl").exists():
        starved = derived(starved, tmp_path / "zeroed", lambda r, i: r.update(learning_rate=0.0) if i >= 9 else None)
    kinds = found(starved)
    assert {k: kinds.get(k) for k in ("no_signal", "truncated", "lr_zero", "no_learning")} == {
        "no_signal": "problem", "truncated": "problem", "lr_zero": "problem", "no_learning": "problem"}


def test_a_runaway_kl_and_a_collapsing_entropy_are_found(wild):
    "Finding 4 from both trainers; finding 6 from grpo_edu's (TRL's entropy halves in 16 steps: derived below)."
    kinds = found(wild)
    assert kinds["kl_runaway"] == "problem"
    if (wild / "metrics.jsonl").exists(): assert kinds["entropy_collapse"] == "problem"


def derived(run: Path, folder: Path, change) -> Path:
    "A copy of a run's log (TRL's or grpo_edu's) and settings, with `change(row, i)` applied to each training row."
    folder.mkdir()
    if (run / "metrics.jsonl").exists():
        rows = training_rows(run)
        for i, row in enumerate(rows): change(row, i)
        (folder / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        (folder / "config.yaml").write_text((run / "config.yaml").read_text())
        return folder
    state = json.loads((run / "trainer_state.json").read_text())
    for i, row in enumerate([r for r in state["log_history"] if "loss" in r]): change(row, i)
    (folder / "trainer_state.json").write_text(json.dumps(state))
    (folder / "training_args.bin").write_bytes((run / "training_args.bin").read_bytes())
    return folder


def test_findings_a_short_run_cannot_show_from_logs_derived_from_a_real_one(healthy_grpo, tmp_path):
    "Findings 4–7: a run's rows with one metric changed each (the change is in each line)."
    def kl_away(row, i): row["kl"] = 0.01 * 20 ** i                               # KL × 20 each step
    def clipped(row, i): row["clip_ratio/region_mean"] = 0.05                     # clipping on-policy
    def collapse(row, i): row["entropy"] = 1.0 if i < 3 else 0.01                 # entropy / 100
    def gamed(row, i): row["rewards/format_reward/mean"] = 0.2 * i                # format up, accuracy flat
    def accuracy(row, i): row["rewards/accuracy_reward/mean"] = 0.3
    def weights(row, i): row["sampling/importance_sampling_ratio/mean"] = 0.001   # a correction's weights
    cases = {"kl_runaway": kl_away, "clip_on_policy": clipped, "entropy_collapse": collapse,
             "vanishing_weights": weights}
    for name, change in cases.items():
        assert found(derived(healthy_grpo, tmp_path / name, change))[name] == "problem", name
    hacked = derived(healthy_grpo, tmp_path / "hacked", lambda r, i: (gamed(r, i), accuracy(r, i)))
    assert examine(hacked).findings and found(hacked)["reward_hacking"] == "problem"


def test_a_trl_checkpoint_folder_is_read(tmp_path):
    "TRL's checkpoint-N folder (save_strategy='steps') holds trainer_state.json and training_args.bin."
    run = trl_run(tmp_path, by_position, max_steps=2, save_strategy="steps", save_steps=2)
    diagnosis = examine(run / "checkpoint-2")
    assert diagnosis.log.last_step == 2 and diagnosis.source.config_from.endswith("training_args.bin")
    assert examine(run).source.log_path == run / "trainer_state.json"


def doctor(*argv, capsys) -> tuple[int, str]:
    "Run `grpo-edu doctor` in this process: its exit status and what it printed to stderr."
    status = main(["doctor", *map(str, argv), "--figure", "none"])
    return status, capsys.readouterr().err


def test_hostile_inputs_are_one_paragraph_and_exit_2(tmp_path, capsys):
    cases = {}
    (tmp_path / "cut").mkdir()
    (tmp_path / "cut" / "trainer_state.json").write_text('{"log_history": [{"step": 1, "lo')
    cases["cut"] = "is not readable JSON"
    (tmp_path / "garbage").mkdir()
    (tmp_path / "garbage" / "trainer_state.json").write_bytes(os.urandom(4096))
    cases["garbage"] = "is not readable JSON"
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "metrics.jsonl").write_text("")
    cases["empty"] = "has no readable rows"
    (tmp_path / "huge").mkdir()
    with open(tmp_path / "huge" / "metrics.jsonl", "wb") as f: f.truncate(2**30)   # 1 GiB, sparse
    cases["huge"] = "is larger than the 128 MiB read here"
    (tmp_path / "one-row").mkdir()
    (tmp_path / "one-row" / "metrics.jsonl").write_bytes(b"{" * 2**21)
    cases["one-row"] = "has a row longer than 1 MiB"
    (tmp_path / "deep").mkdir()
    (tmp_path / "deep" / "trainer_state.json").write_text("[" * 200_000)
    cases["deep"] = "is not readable JSON"
    (tmp_path / "unreadable").mkdir()
    (tmp_path / "unreadable" / "trainer_state.json").symlink_to("/proc/self/mem")
    cases["unreadable"] = "trainer_state.json"          # an I/O error, or no JSON: either way, refused
    (tmp_path / "not-a-run").mkdir()
    cases["not-a-run"] = "holds no metrics.jsonl and no trainer_state.json"
    for name, expected in cases.items():
        status, err = doctor(tmp_path / name, capsys=capsys)
        assert status == 2 and expected in err and "Traceback" not in err, (name, err)
        assert len(err.strip().splitlines()) == 1, err


def test_a_crafted_training_args_bin_is_refused_and_never_run(tmp_path, capsys):
    marker = tmp_path / "made-by-the-pickle"

    class Exploit:
        def __reduce__(self): return (os.mkdir, (str(marker),))
    run = tmp_path / "crafted"
    run.mkdir()
    (run / "trainer_state.json").write_text(json.dumps({"log_history": [{"step": 1, "loss": 0.0}]}))
    (run / "training_args.bin").write_bytes(pickle.dumps(Exploit()))
    status, err = doctor(run, capsys=capsys)
    assert status == 2 and "cannot be read as training arguments" in err and not marker.exists()


def test_hostile_settings_are_one_paragraph_and_exit_2(healthy_grpo, tmp_path, capsys):
    "A --config YAML with a 5,000-digit number, or nested 100,000 deep; a pickle that unfolds into 10^8 values."
    (tmp_path / "big-number.yaml").write_text("beta: " + "9" * 5000 + "\n")
    (tmp_path / "deep.yaml").write_text("[" * 100_000)
    for name in ("big-number.yaml", "deep.yaml"):
        status, err = doctor(healthy_grpo, "--config", tmp_path / name, capsys=capsys)
        assert status == 2 and "is not readable YAML" in err and len(err.strip().splitlines()) == 1, err
    nested = list(range(100))
    for _ in range(3): nested = [nested] * 100
    run = tmp_path / "bomb"
    run.mkdir()
    (run / "trainer_state.json").write_text(json.dumps({"log_history": [{"step": 1, "loss": 0.0}]}))
    (run / "training_args.bin").write_bytes(pickle.dumps(Carrier(nested)))
    status, err = doctor(run, capsys=capsys)
    assert status == 2 and "more values than training arguments hold" in err


class Carrier:
    "An object with one field, as TrainingArguments pickles: its class, then its fields."
    def __init__(self, beta): self.beta = beta


def test_nan_and_inf_are_reported_not_refused(tmp_path, capsys):
    rows = [{"step": 1, "loss": 0.1, "grad_norm": 1.0}, {"step": 2, "loss": float("nan"), "grad_norm": float("inf")}]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))   # NaN, Infinity
    assert main(["doctor", str(tmp_path), "--figure", "none"]) == 0
    assert "nonfinite_grad (steps 2–2)" in capsys.readouterr().out


def test_the_figure_and_json(healthy_grpo, tmp_path, capsys):
    png = tmp_path / "doctor.png"
    assert main(["doctor", str(healthy_grpo), "--figure", str(png)]) == 0
    assert png.read_bytes()[:4] == b"\x89PNG"
    capsys.readouterr()
    assert main(["doctor", str(healthy_grpo), "--json"]) == 0
    names = {f["name"] for f in json.loads(capsys.readouterr().out)}
    assert {"zero_loss", "warmup_never_ends"} <= names


def test_the_benchmark_script_runs(tmp_path):
    "scripts/bench-doctor.py on a short log: it writes its record (its times are measurements, not asserted)."
    import subprocess, sys
    run = ours_run(tmp_path / "run", by_position)
    out = tmp_path / "record.json"
    done = subprocess.run([sys.executable, "scripts/bench-doctor.py", "--run", str(run), "--steps", "50",
                           "--repeats", "1", "--out", str(out)], cwd=Path(__file__).parents[1], capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    record = json.loads(out.read_text())
    assert set(record["logs"]) == {"grpo_edu metrics.jsonl", "TRL trainer_state.json"} and record["steps"] == 50


def test_the_tool_toy_is_healthy(tmp_path):
    "configs/toy-tools.yaml (40 steps, seconds): no problem, and the reward's rise clears its noise."
    from grpo_edu.launch import trainer_from_config
    from grpo_edu.recipe import load_config
    from grpo_edu.toy_tools import has_call_parser
    if not has_call_parser(): pytest.skip("this transformers has no python-call-list parser")
    args = load_config(Path(__file__).parents[1] / "configs" / "toy-tools.yaml")
    args.output_dir = str(tmp_path / "run")
    trainer_from_config(args).train()
    diagnosis = examine(tmp_path / "run")
    assert not diagnosis.of_kind("problem"), report_of(diagnosis)
    assert "learning" in {f.name for f in diagnosis.of_kind("expected")}, report_of(diagnosis)


def report_of(diagnosis) -> str:
    "The doctor's report, for a failing assertion's message."
    from grpo_edu.doctor import report
    return report(diagnosis)
