"""Two processes (gloo on CPU) on a global batch give the same loss, metrics and gradients as one process."""
import json, os, shutil, subprocess, sys
from pathlib import Path
import pytest
import torch
from conftest import SHORT_SCHEDULE, assert_same_logged, run_cli, torchrun, train_on_two

WORKER = Path(__file__).with_name("dist_worker.py")


def _run(cmd, tmp_path):
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MASTER_ADDR": "127.0.0.1", "ACCELERATE_USE_CPU": "1"}
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600, cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]


# bnpo is left out on purpose: like TRL's, it divides by each process's own token count, so on several processes it is
# the mean of per-process token means (not the global token mean). dapo is the exact global token mean.
# dapo+entropy: top_entropy_quantile's threshold is taken over every process's tokens (gathered), so it is the same.
# dapo+adaptive: the entropy controller's step entropy is reduced over every process (its first step applies no bonus).
LOSS_TYPES = ["grpo", "dapo", "dr_grpo", "dapo+entropy", "dapo+adaptive"]


@pytest.fixture(scope="module")
def one_and_two(tmp_path_factory):
    "Every loss type's update on one process and on two: one launch of each serves them all."
    tmp = tmp_path_factory.mktemp("dist")
    _run([sys.executable, str(WORKER), str(tmp / "one.json"), ",".join(LOSS_TYPES)], tmp)
    # two CPU processes with the gloo backend; ACCELERATE_USE_CPU makes accelerate use them (MULTI_CPU)
    _run(torchrun(2) + [str(WORKER), str(tmp / "two.json"), ",".join(LOSS_TYPES)], tmp)
    one, two = (json.loads((tmp / f).read_text()) for f in ("one.json", "two.json"))
    for run in (one, two):                                  # each update took its own loss (adaptive's = dapo's)
        assert len({run[name]["loss"] for name in LOSS_TYPES}) == 4
        assert all(run[name]["grads"] for name in LOSS_TYPES)     # and its gradients were captured
    return one, two


@pytest.mark.parametrize("loss_type", LOSS_TYPES)
def test_two_processes_equal_one(one_and_two, loss_type):
    one, two = (run[loss_type] for run in one_and_two)
    for k in ("kl", "entropy", "entropy_coef", "last_world_entropy"): assert two[k] == pytest.approx(one[k], rel=1e-5), k
    if "adaptive" in loss_type:                                              # it measured the entropy and moved: +δ
        assert one["entropy_coef"] == pytest.approx(0.005) and one["last_world_entropy"] < 100
    assert two["loss"] == pytest.approx(one["loss"], rel=1e-5, abs=1e-7)
    assert two["world"] == 2 and one["world"] == 1
    assert one["grads"].keys() == two["grads"].keys()
    for k in one["grads"]:
        torch.testing.assert_close(torch.tensor(two["grads"][k]), torch.tensor(one["grads"][k]), rtol=1e-4, atol=1e-6)


def test_two_process_cli_resume_continues_exactly(tmp_path):
    "`grpo-edu train` on two processes: a run resumed from its step-3 checkpoint logs exactly what the full run logged."
    common = ["--max_steps", "6", "--save_steps", "3", "--logging_steps", "1", "--toy_warm_start_steps", "300",
              "--eval_dataset", "none",
              "--per_device_train_batch_size", "128", *SHORT_SCHEDULE]
    train_on_two(common + ["--output_dir", tmp_path / "full"], tmp_path)
    (tmp_path / "part").mkdir()
    shutil.copytree(tmp_path / "full" / "checkpoint-3", tmp_path / "part" / "checkpoint-3")
    train_on_two(common + ["--output_dir", tmp_path / "part", "--resume_from_checkpoint", "latest"], tmp_path)
    # every process restores its own RNG stream: sampling continues exactly
    full, part = assert_same_logged(tmp_path / "full", tmp_path / "part", (4, 5, 6))
    assert sorted(full) == [1, 2, 3, 4, 5, 6] and sorted(part) == [4, 5, 6]
    assert len({full[s]["completions/mean_length"] for s in (4, 5, 6)}) > 1   # sampling really ran
    # one process resuming a two-process checkpoint: allowed, and it says what is not exact
    r = run_cli("train", *common, "--max_steps", "4", "--output_dir", tmp_path / "part", "--resume_from_checkpoint",
                tmp_path / "part" / "checkpoint-3", cwd=tmp_path, env={"OMP_NUM_THREADS": "1"})
    assert r.returncode == 0, r.stderr[-3000:]
    assert "saved by 2 process(es), resuming on 1" in r.stdout


def test_a_signal_to_one_process_stops_every_process(tmp_path):
    "SIGINT to one of two processes: both leave the loop after the same step and save one checkpoint (it hung before)."
    import signal, time
    from grpo_edu.integrity import latest_checkpoint, load_trainer_state
    out = tmp_path / "run"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "ACCELERATE_USE_CPU": "1", "PYTHONUNBUFFERED": "1"}
    cmd = torchrun(2) + ["-m", "grpo_edu.cli", "train", "--max_steps", "400", "--toy_warm_start_steps", "20",
                         "--eval_dataset", "none", "--per_device_train_batch_size", "64", "--output_dir", str(out)]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path)
    deadline = time.time() + 300
    while time.time() < deadline and not ((out / "metrics.jsonl").exists() and (out / "metrics.jsonl").read_text().count("\n") >= 2):
        time.sleep(0.05)
    workers = [int(x) for x in subprocess.run(["pgrep", "-P", str(p.pid)], capture_output=True, text=True).stdout.split()]
    assert len(workers) == 2, workers
    os.kill(workers[1], signal.SIGINT)                       # process 1 only: a signal need not reach every process
    try: stdout, stderr = p.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        for pid in [*workers, p.pid]:
            try: os.kill(pid, signal.SIGKILL)
            except ProcessLookupError: pass
        pytest.fail("the processes did not stop together: the run hung after a signal to one process")
    assert "interrupted (SIGINT): saved" in stdout, stdout[-2000:] + stderr[-3000:]
    assert p.returncode != 0 and "exitcode: 130) local_rank: 0" in stderr, stderr[-3000:]   # Ctrl-C's status, from process 0
    last = json.loads((out / "metrics.jsonl").read_text().splitlines()[-1])["step"]
    assert load_trainer_state(latest_checkpoint(out))["step"] == last < 400
