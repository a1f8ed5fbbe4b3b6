"""The trainer under accelerate's FSDP2 with two processes (gloo, CPU): training, collective generation, evaluation on an
uneven split, atomic sharded checkpoints, and an exact resume. See tests/fsdp_shim.py for how FSDP is turned on on CPU."""
import json, os, shutil, subprocess
from pathlib import Path
import pytest
from conftest import assert_same_logged, run_cli, torchrun

SHIM = Path(__file__).with_name("fsdp_shim.py")
COMMON = ["--max_steps", "4", "--save_steps", "2", "--logging_steps", "1", "--toy_warm_start_steps", "300",
          "--eval_max_samples", "129"]      # 65 + 64 rows: without padding the processes would run 2 and 1 eval batches


def _launch(args, cwd):
    env = {**os.environ, "OMP_NUM_THREADS": "1", "ACCELERATE_USE_CPU": "1"}
    r = subprocess.run(torchrun(2) + [str(SHIM), "train", *COMMON, *args], capture_output=True, text=True, env=env,
                       timeout=400, cwd=cwd)
    if r.returncode != 0 and "did not take the FSDP2 state" in r.stderr:
        pytest.skip("this accelerate version does not accept the FSDP2 state on CPU (tests/fsdp_shim.py)")
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-4000:]
    assert "[fsdp-shim] FSDP2 on 2 processes" in r.stdout
    return r


def test_fsdp2_trains_saves_and_resumes_exactly(tmp_path):
    _launch(["--output_dir", str(tmp_path / "full")], tmp_path)
    ck = tmp_path / "full" / "checkpoint-2"
    assert (ck / "model.safetensors").exists() and (ck / "sharded" / "optimizer.bin").exists()   # full weights + shards
    assert not list((tmp_path / "full").glob(".checkpoint-*"))
    (tmp_path / "part").mkdir(); shutil.copytree(ck, tmp_path / "part" / "checkpoint-2")
    _launch(["--output_dir", str(tmp_path / "part"), "--resume_from_checkpoint", "latest"], tmp_path)
    _, part = assert_same_logged(tmp_path / "full", tmp_path / "part", (3, 4))
    assert sorted(part) == [3, 4]
    summ = {d: json.loads((tmp_path / d / "summary.json").read_text()) for d in ("full", "part")}
    assert summ["full"]["eval_before"]["n"] == summ["full"]["eval_after"]["n"] == 129   # padding rows are not counted
    assert summ["part"]["eval_after"] == summ["full"]["eval_after"]
    # a sharded checkpoint cannot resume unsharded (its optimizer state is in shards): a clear error, exit 2
    r = run_cli("train", *COMMON, "--output_dir", tmp_path / "part", "--resume_from_checkpoint",
                tmp_path / "part" / "checkpoint-2", cwd=tmp_path, env={"OMP_NUM_THREADS": "1"})
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr[-3000:]
    assert "saved with FSDP / DeepSpeed" in r.stderr and "--model_name_or_path" in r.stderr
