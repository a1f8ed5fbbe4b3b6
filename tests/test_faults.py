"""Faults: exact resume, Ctrl-C, SIGKILL during a save, and CPU determinism."""
import json, os, re, signal, subprocess, sys, textwrap, time, warnings
from pathlib import Path
import pytest
from conftest import cli, run_cli
from grpo_edu.integrity import latest_checkpoint, load_trainer_state, write_manifest

SMALL = ["--max_steps", "6", "--toy_warm_start_steps", "200", "--per_device_train_batch_size", "32", "--eval_dataset", "none",
         "--logging_steps", "1", "--learning_rate", "1e-3", "--lr_scheduler_type", "linear", "--warmup_steps", "0",
         "--seed", "3"]


def rows(d):
    return [json.loads(l) for l in (Path(d) / "metrics.jsonl").read_text().splitlines() if l.strip()]


def same(a, b):
    assert [r["step"] for r in a] == [r["step"] for r in b]
    for x, y in zip(a, b):
        for k in x:
            if k != "step_time" and not k.startswith("time/"): assert x[k] == pytest.approx(y[k], rel=1e-6, abs=1e-9), (x["step"], k, x[k], y[k])


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    d = tmp_path_factory.mktemp("full")
    r = cli("train", *SMALL, "--save_steps", "3", "--output_dir", d)
    assert r.returncode == 0, r.stderr[-2000:]
    return d


def test_kept_warm_start_gives_the_same_run(uninterrupted, tmp_path):
    """A toy run whose warm start is loaded from GRPO_EDU_CACHE logs the same metrics as the run that computed and kept it,
    in another process, and both log what the module's uninterrupted run (same seed) logged: CPU runs are deterministic
    across processes. The computing run gets this process's thread count, which the warm start's cache key holds."""
    import torch
    env, out = {"GRPO_EDU_CACHE": str(tmp_path / "cache")}, lambda name: ["--output_dir", tmp_path / name]
    a = run_cli("train", *SMALL, *out("a"), env={**env, "OMP_NUM_THREADS": str(torch.get_num_threads())})
    assert a.returncode == 0, a.stderr[-2000:]
    assert "toy warm start: " in a.stdout and "loaded from the warm-start cache" not in a.stdout, a.stdout
    kept = list((tmp_path / "cache").glob("toy-warm-start-*.pt"))
    assert len(kept) == 1, kept
    b = cli("train", *SMALL, *out("b"), env=env)
    assert b.returncode == 0, b.stderr[-2000:]
    assert f"loaded from the warm-start cache: {kept[0]}, written " in b.stdout, b.stdout   # which file, when
    same(rows(tmp_path / "b"), rows(tmp_path / "a"))
    same(rows(tmp_path / "a"), rows(uninterrupted))


def test_resume_continues_exactly(uninterrupted, tmp_path):
    ck = uninterrupted / "checkpoint-3"
    assert load_trainer_state(ck)["step"] == 3
    r = cli("train", *SMALL, "--output_dir", tmp_path, "--resume_from_checkpoint", ck)
    assert r.returncode == 0, r.stderr[-2000:]
    assert [x["step"] for x in rows(tmp_path)] == [4, 5, 6]
    same(rows(tmp_path), rows(uninterrupted)[3:])


def tensorboard_rewards(d):
    "(step, reward) as TensorBoard shows them, read with its own loader."
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    ea = EventAccumulator(str(Path(d) / "tensorboard")); ea.Reload()
    return [(e.step, e.value) for e in ea.Scalars("reward")]


def test_resume_in_place_logs_each_step_once(tmp_path):
    "Resuming in the run's own folder: metrics.jsonl, completions.jsonl and TensorBoard hold each step once."
    log = ["--log_completions", "true", "--report_to", "tensorboard", "--save_steps", "3", "--output_dir", tmp_path]
    assert cli("train", *SMALL, *log).returncode == 0
    steps = lambda f: sorted({r["step"] for r in map(json.loads, (tmp_path / f).read_text().splitlines())})
    n_rows = len((tmp_path / "completions.jsonl").read_text().splitlines())
    r = cli("train", *SMALL, *log, "--resume_from_checkpoint", tmp_path / "checkpoint-3")
    assert r.returncode == 0, r.stderr[-2000:]
    assert steps("metrics.jsonl") == steps("completions.jsonl") == [1, 2, 3, 4, 5, 6]
    assert len((tmp_path / "metrics.jsonl").read_text().splitlines()) == 6
    assert len((tmp_path / "completions.jsonl").read_text().splitlines()) == n_rows     # steps 4-6 replaced, not added
    tb = tensorboard_rewards(tmp_path)                                                   # steps 4-6 of the first run hidden
    assert [s for s, _ in tb] == [1, 2, 3, 4, 5, 6]
    assert [v for _, v in tb] == pytest.approx([r["reward"] for r in rows(tmp_path)])
    assert cli("train", *SMALL, *log, "--overwrite_output_dir", "true").returncode == 0   # a new run in the same folder
    assert len((tmp_path / "completions.jsonl").read_text().splitlines()) == n_rows     # starts the log afresh
    assert [s for s, _ in tensorboard_rewards(tmp_path)] == [1, 2, 3, 4, 5, 6]          # TensorBoard too


def test_ctrl_c_saves_and_resume_matches(tmp_path):
    "Ctrl-C: the step finishes, a checkpoint is saved, exit 130; resuming gives the uninterrupted run's metrics."
    const = [a if a != "linear" else "constant" for a in SMALL]   # a schedule that does not depend on max_steps
    ref = tmp_path / "ref"
    r = cli("train", *const, "--output_dir", ref)
    assert r.returncode == 0, r.stderr[-2000:]
    run = tmp_path / "run"
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    long = [*const[:1], "400", *const[2:]]                          # the same run, long enough to interrupt
    p = subprocess.Popen([sys.executable, "-m", "grpo_edu.cli", "train", *long, "--output_dir", str(run)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    deadline = time.time() + 300
    while time.time() < deadline and not ((run / "metrics.jsonl").exists() and len(rows(run)) >= 1):
        time.sleep(0.05)
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=300)
    assert p.returncode == 130, err[-2000:]
    assert "interrupted (SIGINT): saved" in out and "Traceback" not in err
    assert (run / "plots" / "reward.png").exists()                     # the curves up to the stop are drawn
    ck = latest_checkpoint(run); step = load_trainer_state(ck)["step"]
    assert 1 <= step < 6, step
    r = cli("train", *const, "--output_dir", run, "--resume_from_checkpoint", "latest")
    assert r.returncode == 0, r.stderr[-2000:]
    same(rows(run), rows(ref))



def test_sigterm_saves_like_ctrl_c(tmp_path):
    "SIGTERM (a scheduler's preemption, `kill`): the step finishes, a checkpoint is saved, exit 143 (128 + 15), no traceback."
    run = tmp_path / "run"
    p = subprocess.Popen([sys.executable, "-m", "grpo_edu.cli", "train", "--max_steps", "400", *SMALL[2:], "--output_dir", str(run)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    deadline = time.time() + 300
    while time.time() < deadline and not ((run / "metrics.jsonl").exists() and len(rows(run)) >= 1): time.sleep(0.05)
    p.send_signal(signal.SIGTERM)
    out, err = p.communicate(timeout=300)
    assert p.returncode == 143, err[-2000:]
    assert "interrupted (SIGTERM): saved" in out and "Traceback" not in err
    assert f"plots in {run / 'plots'}" in out and (run / "plots" / "reward.png").exists()   # the curves up to the stop
    assert load_trainer_state(latest_checkpoint(run))["step"] == rows(run)[-1]["step"]     # saved after the step it logged


KILLER = textwrap.dedent("""
    import sys, time, torch, grpo_edu.checkpoint as ck
    from grpo_edu.cli import main
    real_save, n = torch.save, [0]
    def slow_save(obj, f, *a, **k):                 # the 2nd checkpoint's state file is half-written, then we stall
        n[0] += 1; real_save(obj, f, *a, **k)
        if n[0] == 2:
            print("SAVING", flush=True); time.sleep(60)
    ck.torch.save = slow_save
    sys.exit(main(["train", *sys.argv[1:]]))
""")


def test_sigkill_during_save_keeps_previous_checkpoint(tmp_path):
    p = subprocess.Popen([sys.executable, "-c", KILLER, *SMALL, "--save_steps", "2", "--save_total_limit", "5",
                          "--output_dir", str(tmp_path)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    for line in p.stdout:
        if "SAVING" in line: break
    p.kill(); p.wait(timeout=30)
    assert (tmp_path / ".checkpoint-4.tmp").exists()            # the half-written one
    ck = latest_checkpoint(tmp_path)
    assert ck.name == "checkpoint-2" and load_trainer_state(ck)["step"] == 2
    r = cli("train", *SMALL, "--output_dir", tmp_path, "--resume_from_checkpoint", "latest")
    assert r.returncode == 0, r.stderr[-2000:]
    assert [x["step"] for x in rows(tmp_path)] == [1, 2, 3, 4, 5, 6]
    assert not (tmp_path / ".checkpoint-4.tmp").exists()        # cleaned by the next save


def test_resume_from_missing_checkpoint_is_clear(tmp_path):
    r = cli("train", *SMALL, "--output_dir", tmp_path, "--resume_from_checkpoint", tmp_path / "checkpoint-9")
    assert r.returncode == 2 and "no complete checkpoint there" in r.stderr


def test_resume_from_another_models_checkpoint_is_clear(uninterrupted, tmp_path):
    "A checkpoint whose weights do not fit the model (here: one layer's tensors gone) is refused, not half-loaded."
    import shutil
    from safetensors.torch import load_file, save_file
    ck = tmp_path / "checkpoint-3"; shutil.copytree(uninterrupted / "checkpoint-3", ck)
    sd = load_file(str(ck / "model.safetensors"))
    save_file({k: v for k, v in sd.items() if ".layers.1." not in k}, str(ck / "model.safetensors"), metadata={"format": "pt"})
    write_manifest(ck)                                       # sealed, as that other model's own checkpoint would be
    r = cli("train", *SMALL, "--output_dir", tmp_path / "run", "--resume_from_checkpoint", ck)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr[-2000:]
    assert "its weights are not this model's" in r.stderr and "tensors missing, e.g. model.layers.1." in r.stderr


def test_resume_with_another_optimizer_is_clear(uninterrupted, tmp_path):
    "A checkpoint records its optimizer; resuming it with another one (8-bit AdamW's states vs torch's) is refused."
    import shutil, torch
    ck = tmp_path / "checkpoint-3"; shutil.copytree(uninterrupted / "checkpoint-3", ck)
    st = load_trainer_state(ck)
    assert st["optim"] == "adamw_torch"
    torch.save({**st, "optim": "adamw_8bit"}, ck / "trainer_state.pt")       # as an 8-bit run would have saved it
    write_manifest(ck)                                                       # and sealed it
    r = cli("train", *SMALL, "--output_dir", tmp_path / "run", "--resume_from_checkpoint", ck)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr[-2000:]
    assert "holds the state of optim=adamw_8bit, and this run uses optim=adamw_torch" in r.stderr
    assert "--optim adamw_8bit" in r.stderr


def test_eval_command_on_a_checkpoint(uninterrupted, tmp_path):
    "grpo-edu eval: greedy pass@1 with a 95% interval, and sampled pass@k, on a saved checkpoint."
    out = tmp_path / "eval.json"
    r = cli("eval", "--model", uninterrupted / "checkpoint-6", "--dataset", "toy", "--max_samples", "40",
                "--pass_k", "4", "--max_new_tokens", "6", "--batch_size", "16", "--output", out)
    assert r.returncode == 0, r.stderr[-2000:]
    res = json.loads(out.read_text())
    assert res["n"] == 40 and 0 <= res["ci95"][0] <= res["pass@1"] <= res["ci95"][1] <= 1
    assert 0 <= res["pass@4"] <= 1 and "pass@1 (greedy)" in r.stdout
    bar = re.findall(r"eval: 100%.* 40/40 .*pass@1 ([\d.]+)%", r.stderr)          # the progress bar, with the live pass@1
    assert bar and abs(float(bar[-1]) / 100 - res["pass@1"]) < 1e-3, r.stderr[-2000:]


def test_nonfinite_gradient_skips_the_step(tmp_path):
    "A NaN gradient norm skips the optimizer step (weights unchanged), is counted, and the health monitor says so."
    import torch
    from datasets import Dataset
    from grpo_edu.config import GRPOConfig
    from grpo_edu.toy import toy_model, toy_tokenizer
    from grpo_edu.trainer import GRPOTrainer
    tok = toy_tokenizer(); model = toy_model(tok, 32, 1)
    ds = Dataset.from_list([{"prompt": f"{i}+1=", "answer": str(i + 1)} for i in range(8)])
    args = GRPOConfig(output_dir=str(tmp_path), num_generations=4, per_device_train_batch_size=8, max_completion_length=3,
                      max_steps=2, learning_rate=1e-3, eval_dataset=None, logging_steps=1)
    alternate = lambda completions, **kw: [float(i % 2) for i in range(len(completions))]   # every group has a signal
    tr = GRPOTrainer(model, [alternate], args, ds, None, tok)
    real_update = tr.update
    def poisoned(batch):                                         # make the loss's gradient NaN for step 1 only
        if tr.step == 0:
            h = tr.model.model.embed_tokens.weight.register_hook(lambda g: g * float("nan"))
            try: return real_update(batch)
            finally: h.remove()
        return real_update(batch)
    before = [p.detach().clone() for p in tr.model.parameters()]
    tr.update = poisoned
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        s = tr.train()
    first, second = [json.loads(l) for l in (tmp_path / "metrics.jsonl").open()][:2]
    assert first["skipped_step"] == 1 and first["grad_norm"] != first["grad_norm"]      # NaN
    assert second["learning_rate"] == pytest.approx(1e-3 * (2 - 1) / 2)                 # the schedule moved on (linear)
    assert not [w for w in caught if "lr_scheduler.step" in str(w.message)], "torch's misordering warning reached the user"
    assert s["health"]["skipped_steps"] == 1 and "nonfinite_grad" in s["health"]["warnings"]
    assert any((p - q).abs().max() > 0 for p, q in zip(tr.model.parameters(), before))    # step 2 did update


STATEFUL = {"steps_per_generation": ["--steps_per_generation", "2"], "num_iterations": ["--num_iterations", "2"],
            "sync_ref_model": ["--beta", "0.04", "--sync_ref_model", "true", "--ref_model_sync_steps", "2"]}


@pytest.mark.parametrize("kind", STATEFUL)
def test_resume_keeps_what_the_step_count_cannot_recompute(tmp_path, kind):
    "checkpoint-3 falls between two steps fed by one rollout round, or after π_ref moved (step 2): a resume continues exactly."
    split = [*SMALL, *STATEFUL[kind]]
    r = cli("train", *split, "--save_steps", "3", "--output_dir", tmp_path / "full")
    assert r.returncode == 0, r.stderr[-2000:]
    ck = tmp_path / "full" / "checkpoint-3"
    assert ("rollout_round" in load_trainer_state(ck)) == (kind != "sync_ref_model")
    assert (ck / "reference").is_dir() == (kind == "sync_ref_model")
    r = cli("train", *split, "--output_dir", tmp_path / "resumed", "--resume_from_checkpoint", tmp_path / "full" / "checkpoint-3")
    assert r.returncode == 0, r.stderr[-2000:]
    same(rows(tmp_path / "resumed"), rows(tmp_path / "full")[3:])


def test_resume_keeps_the_adaptive_entropy_controller(tmp_path):
    "use_adaptive_entropy: the coefficient and the last entropy it saw come back with the checkpoint, not the initial values."
    from test_memory_paths import make_trainer
    kw = dict(entropy_coef=0.01, use_adaptive_entropy=True, entropy_target=100.0, entropy_coef_delta=0.02, output_dir=str(tmp_path),
              gradient_accumulation_steps=1, per_device_train_batch_size=8)
    tr = make_trainer(max_steps=2, **kw)
    tr.train()
    assert tr.entropy_control.entropy_coef == pytest.approx(0.05) and tr.entropy_control.last_world_entropy < 100
    back = make_trainer(max_steps=3, resume_from_checkpoint="latest", **kw)
    assert back._resume("latest") == 2
    assert back.entropy_control.state_dict() == tr.entropy_control.state_dict()


def test_resume_with_another_round_layout_samples_anew(tmp_path):
    "Saved between the two steps of num_iterations 2, resumed with steps_per_generation 2× instead: a new round, no crash."
    from test_memory_paths import make_trainer
    kw = dict(output_dir=str(tmp_path), gradient_accumulation_steps=1, per_device_train_batch_size=8)
    make_trainer(max_steps=3, num_iterations=2, **kw).train()                 # checkpoint-3 holds the rest of round 1
    assert "rollout_round" in load_trainer_state(tmp_path / "checkpoint-3")
    back = make_trainer(max_steps=4, steps_per_generation=2, resume_from_checkpoint="latest", **kw)
    assert back.train()["steps"] == 4


@pytest.mark.parametrize("schedule", ["linear", "cosine", "constant", "constant_with_warmup"])
def test_resume_with_more_steps_follows_the_longer_schedule(schedule, tmp_path):
    "2 steps, then resumed to 4 (as users train longer): steps 3 and 4 are those of the uninterrupted 4-step run."
    def args(max_steps):
        changed = {"--max_steps": str(max_steps), "--lr_scheduler_type": schedule, "--warmup_steps": "1"}
        return [changed.get(SMALL[i - 1], a) if i % 2 else a for i, a in enumerate(SMALL)]
    full, run = tmp_path / "full", tmp_path / "run"
    assert cli("train", *args(4), "--output_dir", full).returncode == 0
    assert cli("train", *args(2), "--save_steps", "2", "--output_dir", run).returncode == 0
    r = cli("train", *args(4), "--output_dir", run, "--resume_from_checkpoint", run / "checkpoint-2")
    assert r.returncode == 0, r.stderr[-2000:]
    assert [x["step"] for x in rows(run)] == [1, 2, 3, 4]
    same(rows(run)[2:], rows(full)[2:])
