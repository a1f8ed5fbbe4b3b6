"""Two processes (gloo on CPU) on a global batch give the same loss, metrics and gradients as one process."""
import json, os, shutil, subprocess, sys
from pathlib import Path
import pytest
import torch

WORKER = Path(__file__).with_name("dist_worker.py")


def _run(cmd, tmp_path):
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MASTER_ADDR": "127.0.0.1", "ACCELERATE_USE_CPU": "1"}
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600, cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]


# bnpo is left out on purpose: like TRL's, it divides by each process's own token count, so on several processes it is
# the mean of per-process token means (not the global token mean). dapo is the exact global token mean.
@pytest.mark.parametrize("loss_type", ["grpo", "dapo", "dr_grpo"])
def test_two_processes_equal_one(tmp_path, loss_type):
    torchrun = shutil.which("torchrun") or str(Path(sys.executable).with_name("torchrun"))
    _run([sys.executable, str(WORKER), str(tmp_path / "one.json"), loss_type], tmp_path)
    # two CPU processes with the gloo backend; ACCELERATE_USE_CPU makes accelerate use them (MULTI_CPU)
    _run([torchrun, "--nproc_per_node", "2", "--master_addr", "127.0.0.1", "--master_port", str(29500 + os.getpid() % 1000),
          str(WORKER), str(tmp_path / "two.json"), loss_type], tmp_path)
    one, two = (json.loads((tmp_path / f).read_text()) for f in ("one.json", "two.json"))
    for k in ("kl", "entropy"): assert two[k] == pytest.approx(one[k], rel=1e-5), k
    assert two["loss"] == pytest.approx(one["loss"], rel=1e-5, abs=1e-7)
    assert two["world"] == 2 and one["world"] == 1
    assert one["grads"].keys() == two["grads"].keys()
    for k in one["grads"]:
        torch.testing.assert_close(torch.tensor(two["grads"][k]), torch.tensor(one["grads"][k]), rtol=1e-4, atol=1e-6)
