"""The trainer under accelerate's FSDP2 with two processes (gloo, CPU), set up as `accelerate launch --config_file
configs/accelerate/fsdp.yaml` sets it up: training, collective generation, evaluation on an uneven split, atomic sharded
checkpoints and an exact resume; and a saved model loaded the way fsdp.yaml loads it (cpu_ram_efficient_loading) with
a reference model, against plain DDP. See tests/fsdp_shim.py for how FSDP is turned on on CPU."""
import json, shutil
from pathlib import Path
import pytest
from conftest import SHORT_SCHEDULE, accelerate_env, assert_close_logged, assert_same_logged, cli, train_on_two

SHIM = Path(__file__).with_name("fsdp_shim.py")
# eval_max_samples: 65 + 64 rows; without padding the processes would run 2 and 1 eval batches.
COMMON = ["--max_steps", "4", "--save_steps", "2", "--logging_steps", "1", "--toy_warm_start_steps", "300",
          "--per_device_train_batch_size", "128", *SHORT_SCHEDULE, "--eval_max_samples", "129"]


def _launch(args, cwd, fsdp=True):
    "torchrun 2 processes: FSDP2 from configs/accelerate/fsdp.yaml through the shim, or plain DDP (fsdp=False)."
    if not fsdp: return train_on_two(args, cwd)
    r = train_on_two(args, cwd, SHIM, accelerate_env("fsdp.yaml"), timeout=400)
    assert "[fsdp-shim] FSDP2 on 2 processes" in r.stdout
    return r


@pytest.fixture(scope="module")
def full(tmp_path_factory):
    "A 4-step FSDP2 run of the toy, checkpoints at steps 2 and 4."
    tmp = tmp_path_factory.mktemp("fsdp")
    _launch([*COMMON, "--output_dir", str(tmp / "full")], tmp)
    return tmp / "full"


def test_fsdp2_trains_saves_and_resumes_exactly(full, tmp_path):
    ck = full / "checkpoint-2"
    assert (ck / "model.safetensors").exists() and (ck / "sharded" / "optimizer.bin").exists()   # full weights + shards
    assert not list(full.glob(".checkpoint-*"))
    (tmp_path / "part").mkdir(); shutil.copytree(ck, tmp_path / "part" / "checkpoint-2")
    _launch([*COMMON, "--output_dir", str(tmp_path / "part"), "--resume_from_checkpoint", "latest"], tmp_path)
    _, part = assert_same_logged(full, tmp_path / "part", (3, 4))
    assert sorted(part) == [3, 4]
    summ = {d: json.loads((p / "summary.json").read_text()) for d, p in (("full", full), ("part", tmp_path / "part"))}
    assert summ["full"]["eval_before"]["n"] == summ["full"]["eval_after"]["n"] == 129   # padding rows are not counted
    assert summ["part"]["eval_after"] == summ["full"]["eval_after"]
    # a sharded checkpoint cannot resume unsharded (its optimizer state is in shards): a clear error, exit 2
    r = cli("train", *COMMON, "--output_dir", tmp_path / "part", "--resume_from_checkpoint",
            tmp_path / "part" / "checkpoint-2")
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr[-3000:]
    assert "saved with FSDP / DeepSpeed" in r.stderr and "--model_name_or_path" in r.stderr


def test_fsdp2_loaded_model_with_reference_matches_ddp(full, tmp_path):
    "fsdp.yaml's cpu_ram_efficient_loading + a reference model (beta > 0) from a saved model: the same run as plain DDP."
    args = ["--max_steps", "2", "--logging_steps", "1", "--eval_max_samples", "16", "--beta", "0.04", *SHORT_SCHEDULE,
            "--per_device_train_batch_size", "64", "--gradient_accumulation_steps", "2",
            "--model_name_or_path", str(full / "checkpoint-4"),
            "--rollout_engine", "hf"]     # as FSDP's sharded weights sample: the runs differ in the update only
    _launch([*args, "--output_dir", str(tmp_path / "ddp")], tmp_path, fsdp=False)
    _launch([*args, "--output_dir", str(tmp_path / "fsdp")], tmp_path)
    ddp, _ = assert_close_logged(tmp_path / "ddp", tmp_path / "fsdp", [1, 2])
    assert ddp[2]["kl"] > 0                                 # the reference model is really there
