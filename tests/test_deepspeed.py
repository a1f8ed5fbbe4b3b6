"""The trainer under accelerate's DeepSpeed integration, ZeRO-2 and ZeRO-3, on two CPU processes (gloo): the same run as
plain DDP, metric for metric, with gradient accumulation (the engine's boundary) and a sharded reference model (beta > 0);
sharded checkpoints and an exact resume. The DeepSpeed settings are those `accelerate launch` derives from the repo's
configs/accelerate/zero2.yaml and zero3.yaml; tests/deepspeed_shim.py says how DeepSpeed is turned on on CPU.
Needs deepspeed (`DS_BUILD_OPS=0 pip install --no-build-isolation deepspeed`; .ci/run installs it), else it skips."""
import importlib.util, json, shutil
from pathlib import Path
import pytest
from conftest import SHORT_SCHEDULE, accelerate_env, assert_close_logged, assert_same_logged, cli, train_on_two

if importlib.util.find_spec("deepspeed") is None:   # (not imported here: only the launched processes use it)
    pytest.skip("deepspeed is not installed (DS_BUILD_OPS=0 pip install --no-build-isolation deepspeed)", allow_module_level=True)
SHIM = Path(__file__).with_name("deepspeed_shim.py")
# GA = 2 micro-batches of 64 completions per step, so the engine must accumulate; beta > 0 brings in the reference model.
# Every run samples with HF generate, which ZeRO-3's sharded weights need: the runs compared differ in the update only.
COMMON = ["--max_steps", "4", "--save_steps", "2", "--logging_steps", "1", "--toy_warm_start_steps", "300", *SHORT_SCHEDULE,
          "--eval_max_samples", "33", "--per_device_train_batch_size", "64", "--gradient_accumulation_steps", "2",
          "--beta", "0.04", "--rollout_engine", "hf"]


def _launch(out: Path, zero: int | None, *extra, common=COMMON):
    "torchrun 2 processes: plain DDP (zero=None), or DeepSpeed with configs/accelerate/zero{2,3}.yaml through the shim."
    args = [*common, "--output_dir", out, *extra]
    if zero is None: return train_on_two(args, out.parent, timeout=500)
    r = train_on_two(args, out.parent, SHIM, {**accelerate_env(f"zero{zero}.yaml"), "DS_ACCELERATOR": "cpu"}, timeout=500)
    assert f"[deepspeed-shim] ZeRO-{zero} on 2 processes" in r.stdout
    return r


@pytest.fixture(scope="module")
def ddp(tmp_path_factory):
    out = tmp_path_factory.mktemp("ds") / "ddp"
    _launch(out, None)
    return out


@pytest.mark.parametrize("zero", [2, 3])
def test_zero_trains_like_ddp(ddp, tmp_path, zero):
    out = tmp_path / f"zero{zero}"
    r = _launch(out, zero)
    assert "policy loaded as shards: False" in r.stdout      # the toy model is built, not loaded: π_ref is a copy
    a, _ = assert_close_logged(ddp, out, [1, 2, 3, 4])
    assert a[2]["kl"] > 0 and a[1]["grad_norm"] > 0          # the reference model and the gradients are really there
    summ = [json.loads((d / "summary.json").read_text()) for d in (ddp, out)]
    assert summ[1]["eval_after"] == summ[0]["eval_after"] and summ[1]["eval_after"]["n"] == 33   # 17 + 16 rows
    ck = out / "checkpoint-2"
    assert (ck / "model.safetensors").exists() and (ck / "sharded" / "latest").exists()       # full weights + ZeRO shards
    from safetensors.torch import load_file
    full, ours = load_file(str(ddp / "checkpoint-2" / "model.safetensors")), load_file(str(ck / "model.safetensors"))
    assert all(ours[k].shape == full[k].shape and (ours[k] - full[k]).abs().max() < 1e-5 for k in full)   # not shards
    if zero == 3:   # resume from the ZeRO-3 checkpoint: steps 3-4 and the final eval exactly as the full run
        part = tmp_path / "part"; part.mkdir(); shutil.copytree(ck, part / "checkpoint-2")
        _launch(part, zero, "--resume_from_checkpoint", "latest")
        _, resumed = assert_same_logged(out, part, (3, 4))
        assert sorted(resumed) == [3, 4]
        assert json.loads((part / "summary.json").read_text())["eval_after"] == summ[1]["eval_after"]
        r = cli("train", *COMMON, "--output_dir", part, "--resume_from_checkpoint", part / "checkpoint-2")
        assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr[-3000:]
        assert "saved with FSDP / DeepSpeed" in r.stderr and "--model_name_or_path" in r.stderr


def test_zero3_init_loads_shards_and_its_own_reference(ddp, tmp_path):
    "zero3_init_flag (zero3.yaml): from_pretrained loads the policy as ZeRO-3 shards, so π_ref is loaded again, not copied."
    common = ["--max_steps", "2", *COMMON[2:], "--model_name_or_path", str(ddp / "checkpoint-2")]   # max_steps 2, a saved model
    _launch(tmp_path / "plain", None, common=common)
    r = _launch(tmp_path / "init", 3, common=common)           # zero3.yaml sets zero3_init_flag: true
    assert "[deepspeed-shim] policy loaded as shards: True" in r.stdout
    a, _ = assert_close_logged(tmp_path / "plain", tmp_path / "init", [1, 2])
    assert a[2]["kl"] > 0
