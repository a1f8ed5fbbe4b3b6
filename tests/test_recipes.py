"""The YAML recipes in configs/ load, validate, and are estimated to fit their cards (24 GiB RTX 4090s)."""
import os, subprocess, sys
from dataclasses import asdict
from pathlib import Path
import pytest
import yaml
from grpo_edu.recipe import load_config
from grpo_edu.memory import estimate_memory
from grpo_edu.preflight import check_config

ROOT = Path(__file__).resolve().parents[1]
RECIPES = sorted((ROOT / "configs").glob("qwen2.5-*.yaml"))


@pytest.mark.parametrize("path", RECIPES, ids=lambda p: p.name)
def test_recipe_validates_and_fits(path):
    cfg = check_config(load_config(path), 2 if "2x4090" in path.name else 1)
    est = estimate_memory(cfg.model_name_or_path, **{**asdict(cfg), "gpus": 2 if "2x4090" in path.name else 1})
    assert est["fits"], (path.name, est["total"])


def test_two_gpu_recipe_keeps_the_one_gpu_batch():
    one = load_config(ROOT / "configs" / "qwen2.5-1.5b-gsm8k-1x4090.yaml")
    two = load_config(ROOT / "configs" / "qwen2.5-1.5b-gsm8k-2x4090.yaml")
    assert one.prompts_per_step(1) == two.prompts_per_step(2)


def test_accelerate_configs_parse():
    for f in (ROOT / "configs" / "accelerate").glob("*.yaml"):
        d = yaml.safe_load(f.read_text())
        assert d["num_processes"] == 2 and d["distributed_type"] in ("MULTI_GPU", "FSDP", "DEEPSPEED"), f.name


def test_toy_tools_recipe_validates():
    "configs/toy-tools.yaml, the CPU tool toy: it loads and validates (tests/test_toy_tools.py runs it)."
    cfg = check_config(load_config(ROOT / "configs" / "toy-tools.yaml"))
    assert (cfg.model_name_or_path, cfg.dataset, cfg.eval_dataset) == ("toy", "multiply", "auto")
    assert cfg.tools == ["grpo_edu.toy_tools:multiply"] and cfg.use_cpu


def test_recipe_checks_pass_beside_old_runs(tmp_path):
    """The checks above pass from a folder whose runs/ holds the runs the README's examples write (runs/toy,
    runs/toy-tools, with a checkpoint each): a test never reads what a user has done in the checkout."""
    for run, step in (("toy", 3000), ("toy-tools", 40)):
        checkpoint = tmp_path / "runs" / run / f"checkpoint-{step}"
        checkpoint.mkdir(parents=True)
        (checkpoint / "trainer_state.pt").write_bytes(b"")
        (tmp_path / "runs" / run / "summary.json").write_text("{}")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST")}
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
                        str(Path(__file__)), "-k", "not beside_old_runs"],
                       cwd=tmp_path, capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode == 0 and " passed" in r.stdout, r.stdout[-3000:] + r.stderr[-2000:]
