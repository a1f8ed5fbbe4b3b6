"""Shared fixtures: the path to ../shared (real GSM8K, the Qwen2.5 tokenizer and config), the --runslow flag, and
the GPU: hidden unless the run is `-m cuda`, whose tests skip where there is none."""
import os, sys
from pathlib import Path
import pytest

# Under pytest-xdist (the README's `pytest -n 2`) each worker gets one thread, and so do the runs it starts (`run_cli`):
# two 2-thread workers on CI's two cores ran slower than one worker, as OpenMP threads wait on each other. Set before
# torch is imported, which reads it once.
if os.environ.get("PYTEST_XDIST_WORKER"): os.environ["OMP_NUM_THREADS"] = "1"


def gpu_tests_only(argv: list[str]) -> bool:
    "Whether this run is `pytest -m cuda` (scripts/gpu-check.sh's): the one kind of run that keeps the GPU."
    for i, a in enumerate(argv):
        if a == "-m": return argv[i + 1:i + 2] == ["cuda"]
        if a.startswith("-m") and not a.startswith("--"): return a[2:] == "cuda"
    return False

# The suite is CI's: CPU and float32, with equalities as tight as the CPU gives. On a GPU machine the trainer would pick
# the GPU and bf16, so every other run hides the GPU, from itself and from the processes it starts (xdist's workers
# inherit it). Set before torch first asks CUDA how many devices there are.
if not os.environ.get("PYTEST_XDIST_WORKER") and not gpu_tests_only(sys.argv[1:]): os.environ["CUDA_VISIBLE_DEVICES"] = ""
from grpo_edu.data import find_shared_data
from grpo_edu.recipe import TOY_SHORT_RUNS

ROOT = Path(__file__).resolve().parents[1]
# The learning-rate schedule of the chapters' short studies (recipe.TOY_SHORT_RUNS: a constant 1e-4, no warm-up) as
# command-line flags: a run of a few steps under the default's warm-up would take its first step at a rate of 0.
SHORT_SCHEDULE = [part for field, value in TOY_SHORT_RUNS.items() if field != "per_device_train_batch_size"
                  for part in (f"--{field}", str(value))]
# The same lookup as the notebooks: $GRPO_EDU_DATA, else shared/data in or beside the checkout.
SHARED = find_shared_data(ROOT) or ROOT.parent / "shared" / "data"


def pytest_addoption(parser):
    parser.addoption("--runslow", action="store_true", default=False, help="run tests marked slow")


# Whole-program runs: a training run through the command line, several processes, the docs render, the benchmark's
# smoke run. Each is the only end-to-end check of its path, and each takes tens of seconds: `pytest -m "not e2e"` is
# the fast tier (the TRL oracle, the pure functions, the configuration, the refusals of bad input).
E2E = {"test_default_run.py", "test_wheel.py", "test_distributed.py", "test_fsdp.py", "test_deepspeed.py", "test_docs.py",
       "test_bench.py", "test_faults.py", "test_real_kernel.py", "test_pathological.py", "test_sharded_fallback.py", "test_readme_and_sync.py::test_readme_script_runs",
       "test_bad_input.py::test_new_run_over_an_old_one_is_refused",
       "test_bad_input.py::test_own_reward_function_by_import_path",
       "test_bad_input.py::test_overwrite_keeps_the_old_run_until_the_new_one_has_a_checkpoint",
       # the doctor on real runs: TRL's trainer and grpo_edu's, a few steps each
       "test_doctor.py::test_the_loss_at_zero_is_expected_for_grpo_on_policy",
       "test_doctor.py::test_after_step_one_the_loss_is_beta_times_the_kl",
       "test_doctor.py::test_clipping_off_policy_is_found",
       "test_doctor.py::test_a_warm_up_longer_than_the_run_is_found",
       "test_doctor.py::test_no_signal_truncation_zero_lr_and_no_learning_are_found",
       "test_doctor.py::test_a_runaway_kl_and_a_collapsing_entropy_are_found",
       "test_doctor.py::test_findings_a_short_run_cannot_show_from_logs_derived_from_a_real_one",
       "test_doctor.py::test_a_trl_checkpoint_folder_is_read",
       "test_doctor.py::test_hostile_settings_are_one_paragraph_and_exit_2",
       "test_doctor.py::test_the_figure_and_json",
       "test_doctor.py::test_the_benchmark_script_runs",
       "test_doctor.py::test_the_tool_toy_is_healthy"}


def is_e2e(item) -> bool:
    "Whether a collected test is one of the whole-program runs in E2E (a file, or a file::test)."
    file = Path(str(item.fspath)).name
    return file in E2E or f"{file}::{item.originalname}" in E2E


def pytest_collection_modifyitems(config, items):
    import torch
    for item in items:
        if is_e2e(item): item.add_marker(pytest.mark.e2e)
    skip_slow = pytest.mark.skip(reason="slow: run with --runslow")
    skip_cuda = pytest.mark.skip(reason="needs a CUDA GPU: run `pytest -m cuda tests` on a GPU machine (other runs hide it)")
    for item in items:
        if "slow" in item.keywords and not config.getoption("--runslow"): item.add_marker(skip_slow)
        if "cuda" in item.keywords and not torch.cuda.is_available(): item.add_marker(skip_cuda)


@pytest.fixture(scope="session", autouse=True)
def warm_start_cache(tmp_path_factory):
    """The toy warm starts kept for this test run (`GRPO_EDU_CACHE`), in one folder that the xdist workers and the runs
    they start share: each distinct start is computed once per run, never read from or written to the user's ~/.cache.
    A GRPO_EDU_CACHE already set (e.g. `off`) is kept."""
    base = tmp_path_factory.getbasetemp()
    root = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base      # a worker's basetemp is <run>/<worker>
    os.environ.setdefault("GRPO_EDU_CACHE", str(root / "warm-start-cache"))
    return os.environ["GRPO_EDU_CACHE"]


@pytest.fixture(autouse=True)
def own_working_folder(tmp_path_factory, monkeypatch):
    """Each test runs in a fresh working folder of its own (beside its `tmp_path`, not in it). A relative path a test
    writes (a recipe's `runs/...`) lands there, and nothing a user left in the checkout (the README examples' `runs/`)
    changes what a test sees."""
    folder = tmp_path_factory.mktemp("cwd")
    monkeypatch.chdir(folder)
    return folder


@pytest.fixture
def shared():
    "../shared/data, or skip: these tests read the real GSM8K files and the Qwen2.5 tokenizer kept beside the checkout."
    if not (SHARED / "gsm8k" / "test.jsonl").exists():
        pytest.skip(f"{SHARED} is absent: the real GSM8K / Qwen2.5 files live in ../shared beside the checkout "
                    "(or in the folder $GRPO_EDU_DATA names)")
    return SHARED


def run_cli(*args, cwd=None, timeout=600, env=None):
    "Run `python -m grpo_edu.cli ARGS` in a subprocess; return the CompletedProcess."
    import subprocess
    e = {**os.environ, "PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "2"), **(env or {})}
    return subprocess.run([sys.executable, "-m", "grpo_edu.cli", *map(str, args)], capture_output=True, text=True,
                          cwd=cwd, timeout=timeout, env=e)


class RanTooLong(BaseException):
    "Raised by `cli`'s alarm: a BaseException, so that no `except Exception` in the library can take it for its own."


def cli(*args, timeout=600, cwd=None, env=None):
    """Run `grpo-edu ARGS` in this process: the console script's own `main()`, without a new interpreter's ~4 s of
    imports. For input that must be refused (a refusal may come after a load: another model's checkpoint), and for
    runs whose results a test compares; `run_cli` checks the real entry point, and what only a process shows (its exit
    on a signal, its stdout as a pipe, output written below Python). `cwd` and `env` hold for the call only (a library
    that reads a variable when it is imported does not see it: such tests use `run_cli`). An exception that escapes
    `main()` (a traceback for the user) fails the test with that exception, and so does a run that goes on past
    `timeout` s, or one that would end the test's process as a multi-process run ends its own."""
    import contextlib, io, signal
    from types import SimpleNamespace
    from unittest import mock
    from grpo_edu.cli import main
    def too_long(*_): raise RanTooLong(f"grpo-edu {' '.join(map(str, args))} ran past {timeout} s: was the input accepted?")
    def would_exit(status): raise AssertionError(f"grpo-edu {' '.join(map(str, args))} ran on several processes here")
    out, err = io.StringIO(), io.StringIO()
    saved_env = {k: os.environ.get(k) for k in (env or {})}
    here = os.getcwd()
    old = signal.signal(signal.SIGALRM, too_long)
    signal.alarm(timeout)
    try:
        os.environ.update({k: str(v) for k, v in (env or {}).items()})
        if cwd is not None: os.chdir(cwd)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), \
                mock.patch("grpo_edu.cli.leave_without_teardown", would_exit):
            try: rc = main([str(a) for a in args])
            except SystemExit as e: rc = e.code if isinstance(e.code, int) else 1     # argparse's errors exit 2
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
        os.chdir(here)
        for k, v in saved_env.items():
            if v is None: os.environ.pop(k, None)
            else: os.environ[k] = v
    return SimpleNamespace(returncode=rc, stdout=out.getvalue(), stderr=err.getvalue())


def torchrun(nproc: int = 2) -> list[str]:
    "The torchrun command for `nproc` local processes on a free-ish port (what `accelerate launch --multi_gpu` runs)."
    import shutil
    exe = shutil.which("torchrun") or str(Path(sys.executable).with_name("torchrun"))
    return [exe, "--nproc_per_node", str(nproc), "--master_addr", "127.0.0.1", "--master_port", str(30000 + os.getpid() % 2000)]


def accelerate_env(config: str) -> dict:
    "The ACCELERATE_* / FSDP_* variables `accelerate launch --config_file configs/accelerate/CONFIG` sets (accelerate's code)."
    from accelerate.commands.launch import _validate_launch_command, launch_command_parser
    from accelerate.utils.launch import prepare_deepspeed_cmd_env, prepare_multi_gpu_env
    args = launch_command_parser().parse_args(["--config_file", str(ROOT / "configs" / "accelerate" / config), "-m", "x"])
    args, defaults, _ = _validate_launch_command(args)
    if args.use_deepspeed:
        args.deepspeed_fields_from_accelerate_config = ",".join(defaults.deepspeed_config)   # as accelerate's launch_command
        env = prepare_deepspeed_cmd_env(args)[1]
    else:
        env = prepare_multi_gpu_env(args)
    return {k: v for k, v in env.items() if k.startswith(("ACCELERATE_", "FSDP_"))}


def train_on_two(args, cwd, shim=None, env=None, timeout=600):
    "`grpo-edu train ARGS` on two CPU processes (torchrun, gloo), through a tests/*_shim.py if given; skips if it is refused."
    import subprocess
    e = {**os.environ, **(env or {}), "OMP_NUM_THREADS": "1", "ACCELERATE_USE_CPU": "1"}
    cmd = torchrun(2) + ([str(shim)] if shim else ["-m", "grpo_edu.cli"]) + ["train", *map(str, args)]
    r = subprocess.run(cmd, capture_output=True, text=True, env=e, timeout=timeout, cwd=cwd)
    if shim and r.returncode != 0 and "did not take the" in r.stderr:
        pytest.skip(f"this accelerate version does not accept the state {Path(shim).name} sets on CPU")
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-4000:]
    return r


def assert_same_logged(run_a, run_b, steps, rel: float = 0.0):
    "metrics.jsonl of two run folders agree at `steps` on every metric except wall-clock times (rel > 0: within rel)."
    import json
    rows = [{r["step"]: r for r in map(json.loads, (Path(d) / "metrics.jsonl").open())} for d in (run_a, run_b)]
    for s in steps:
        a, b = rows[0][s], rows[1][s]
        keys = {k for k in a if not k.startswith("time/") and k != "step_time"}
        want = {k: pytest.approx(a[k], rel=rel, abs=1e-6) if rel else a[k] for k in keys}
        assert {k: b[k] for k in keys} == want, s
    return rows


def assert_close_logged(run_a, run_b, steps):
    "Both runs log exactly `steps`, every metric equal up to the order of float sums (rel 1e-4): same rollouts, rewards."
    rows = assert_same_logged(run_a, run_b, steps, rel=1e-4)
    assert sorted(rows[0]) == sorted(rows[1]) == list(steps)
    return rows
