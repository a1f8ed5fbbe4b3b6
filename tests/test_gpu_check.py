"""scripts/gpu-check.sh's preflight: it must stop before any GPU work, with one paragraph naming what is missing (a step,
a package, the GPU, the data folder), and otherwise hand the data folder to the steps."""
import importlib.util, subprocess
import pytest
import torch
from conftest import ROOT

spec = importlib.util.spec_from_file_location("gpu_preflight", ROOT / "scripts" / "gpu-preflight.py")
pre = importlib.util.module_from_spec(spec); spec.loader.exec_module(pre)


def run_check(*steps):
    return subprocess.run(["bash", "scripts/gpu-check.sh", *steps], cwd=ROOT, capture_output=True, text=True, timeout=120)


def test_unknown_step_stops_before_anything():
    r = run_check("tests", "benhc")
    assert r.returncode == 2 and "unknown step(s) ['benhc']" in r.stderr and "Traceback" not in r.stderr
    assert r.stdout == ""                                   # no step ran


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message given where there is no GPU")
def test_no_gpu_stops_before_anything():
    r = run_check("tests")
    assert r.returncode == 2 and "no CUDA GPU is visible" in r.stderr and "Traceback" not in r.stderr
    assert r.stdout == ""


def test_missing_packages_are_named(monkeypatch, capsys):
    monkeypatch.setitem(pre.NEEDS, "bench", ["trl", "no_such_package_here"])
    assert pre.missing_packages(["tests"]) == []            # the dev install has everything the tests step needs
    assert pre.main(["tests", "bench"]) == 2
    err = capsys.readouterr().err
    assert "tests bench cannot import no_such_package_here (ModuleNotFoundError: No module named" in err


def test_data_folder_comes_from_grpo_edu_data(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)          # pretend, to reach the data check
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda i=0: "Fake GPU")
    (tmp_path / "gsm8k").mkdir()
    monkeypatch.setenv("GRPO_EDU_DATA", str(tmp_path))
    assert pre.main(["sharded"]) == 2                                     # no tokenizer beside gsm8k/
    assert "no data folder with gsm8k/ and qwen2.5-tokenizer/" in capsys.readouterr().err
    (tmp_path / "qwen2.5-tokenizer").mkdir()
    assert pre.main(["sharded"]) == 0
    out = capsys.readouterr()
    assert out.out.strip() == str(tmp_path) and "Fake GPU" in out.err
