"""What a `pip install` user gets: the built wheel, installed in a fresh virtual environment and run from another
folder, holds the recipes (by name) and runs the default job. The environment reuses the installed dependencies
(torch, transformers, ...) through a .pth file, so nothing is downloaded."""
import os, shutil, subprocess, sys, sysconfig
from pathlib import Path
import pytest

ROOT = Path(__file__).resolve().parents[1]
RECIPE = "qwen2.5-0.5b-gsm8k-1x4090"
# No PYTHONPATH for anything here: with a checkout on it, pip would find grpo_edu installed and skip the wheel.
CLEAN_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}


def build_wheel(tmp_path: Path) -> Path:
    "The wheel of a copy of the checkout (a build writes build/ and *.egg-info beside its sources)."
    src = tmp_path / "src"
    for name in ("grpo_edu", "configs"):
        shutil.copytree(ROOT / name, src / name, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"): shutil.copy(ROOT / name, src / name)
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
                        "-q", str(src), "-w", str(tmp_path / "dist")], capture_output=True, text=True, timeout=300,
                       env=CLEAN_ENV)
    assert r.returncode == 0, r.stderr[-3000:]
    return next((tmp_path / "dist").glob("grpo_edu-*.whl"))


def fresh_venv(tmp_path: Path, wheel: Path) -> Path:
    "A new virtual environment with the wheel installed, and this one's packages readable (a .pth file)."
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120, env=CLEAN_ENV)
    python = venv / "bin" / "python"
    r = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "--no-index",
                        "-q", str(wheel)], capture_output=True, text=True, timeout=300, env=CLEAN_ENV)
    assert r.returncode == 0, r.stderr[-3000:]
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True, env=CLEAN_ENV).stdout.strip()
    # Appended after the venv's own site-packages: its grpo_edu (the wheel's) comes first.
    shared = dict.fromkeys(sysconfig.get_paths()[k] for k in ("purelib", "platlib"))
    (Path(site) / "installed-dependencies.pth").write_text("\n".join(shared) + "\n")
    return venv


def test_wheel_ships_the_recipes_and_runs_from_another_folder(tmp_path):
    pytest.importorskip("setuptools", reason="the wheel is built with this environment's setuptools (offline)")
    venv = fresh_venv(tmp_path, build_wheel(tmp_path))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = dict(CLEAN_ENV)                                                   # nothing of the checkout on the path
    env.update(PYTHONUNBUFFERED="1", HF_HUB_OFFLINE="1")
    run = lambda *argv, timeout=600: subprocess.run([str(a) for a in argv], cwd=elsewhere, env=env,
                                                    capture_output=True, text=True, timeout=timeout)
    python, grpo_edu = venv / "bin" / "python", venv / "bin" / "grpo-edu"
    where = run(python, "-c", "import grpo_edu; print(grpo_edu.__file__)")
    assert where.stdout.startswith(str(venv)), (where.stdout, where.stderr[-2000:])    # the wheel's, not the clone's
    listed = run(grpo_edu, "recipes")
    assert listed.returncode == 0 and RECIPE in listed.stdout and "toy-tools" in listed.stdout, listed.stderr
    assert f"{venv}" in listed.stdout and "ddp-2x4090.yaml" in listed.stdout     # accelerate configs, in the package
    check = (f"from grpo_edu.recipe import load_config; from grpo_edu.preflight import check_config; "
             f"c = check_config(load_config({RECIPE!r}), offline=True); "
             "print(c.model_name_or_path, c.dataset)")
    loaded = run(python, "-c", check)
    assert loaded.returncode == 0 and loaded.stdout.split() == ["Qwen/Qwen2.5-0.5B-Instruct", "gsm8k"], loaded.stderr
    trained = run(grpo_edu, "train", "--max_steps", 2, "--toy_warm_start_steps", 20)
    assert trained.returncode == 0, trained.stderr[-3000:]
    assert (elsewhere / "runs" / "toy" / "checkpoint-2").is_dir() and "held-out greedy accuracy" in trained.stdout
    measured = run(grpo_edu, "eval", "--model", "runs/toy/checkpoint-2", "--max_samples", 20)
    assert measured.returncode == 0, measured.stderr[-3000:]
    assert "--dataset toy --max_new_tokens 6" in measured.stdout and "pass@1 (greedy)" in measured.stdout
