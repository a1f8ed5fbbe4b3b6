"""scripts/gpu-check.sh's preflight: it must stop before any GPU work, with one paragraph naming what is missing (a step,
a package, the GPU, the data folder), and otherwise hand the data folder to the steps. Also the two scripts around it
for an offline GPU machine: gpu-pack.sh (packs wheels and data here) and gpu-device.sh (runs there, brings results back)."""
import importlib.util, os, re, subprocess
import pytest
import torch
from conftest import ROOT, gpu_tests_only

spec = importlib.util.spec_from_file_location("gpu_preflight", ROOT / "scripts" / "gpu-preflight.py")
pre = importlib.util.module_from_spec(spec); spec.loader.exec_module(pre)


def run_check(*steps):
    return subprocess.run(["bash", "scripts/gpu-check.sh", *steps], cwd=ROOT, capture_output=True, text=True, timeout=120)


def test_the_suite_hides_the_gpu_unless_it_runs_the_gpu_tests():
    "A run without `-m cuda` is CI's (CPU, float32) on any machine: the GPU is hidden from it and from what it starts."
    assert os.environ.get("CUDA_VISIBLE_DEVICES") == "" and not torch.cuda.is_available()
    assert gpu_tests_only(["-q", "-m", "cuda", "tests"]) and gpu_tests_only(["-mcuda"])          # scripts/gpu-check.sh's
    for argv in (["-q", "tests"], ["-m", "not cuda"], ["-m", "cuda or slow"], ["--maxfail", "1"], ["-m"]):
        assert not gpu_tests_only(argv), argv


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


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks what comes back where there is no GPU")
def test_device_wrapper_brings_the_log_back_and_keeps_the_status(tmp_path):
    out, whl = tmp_path / "out", tmp_path / "whl"; out.mkdir(); whl.mkdir()     # no wheels: nothing to install
    r = subprocess.run(["bash", "scripts/gpu-device.sh", "tests", "bench"], cwd=ROOT, capture_output=True, text=True,
                       timeout=120, env={**os.environ, "OUT": str(out), "GPU_WHEELS": str(whl)})
    assert r.returncode == 2                                 # gpu-check's status, not tee's
    assert sorted(p.name for p in out.iterdir()) == ["log"]  # no results were written, so only the log comes back
    assert "no CUDA GPU is visible" in (out / "log").read_text()
    r = subprocess.run(["bash", "scripts/gpu-device.sh"], cwd=ROOT, capture_output=True, text=True, timeout=60,
                       env={k: v for k, v in os.environ.items() if k != "OUT"})
    assert r.returncode != 0 and "OUT is not set" in r.stderr


def test_pack_refuses_a_missing_data_folder_before_downloading(tmp_path):
    r = subprocess.run(["bash", "scripts/gpu-pack.sh"], cwd=ROOT, capture_output=True, text=True, timeout=60,
                       env={**os.environ, "GRPO_EDU_DATA": str(tmp_path / "nowhere")})
    assert r.returncode == 2 and "no data folder with gsm8k/ and qwen2.5-tokenizer/" in r.stderr


def test_wheel_list_pins_each_package_once_and_covers_the_steps():
    pins = [l for l in (ROOT / "scripts" / "gpu-wheels.txt").read_text().splitlines() if l and not l.startswith("#")]
    names = [p.split("==")[0] for p in pins]
    assert all(re.fullmatch(r"[a-z0-9-]+==[0-9][0-9.]*", p) for p in pins), pins   # exact pins: one version each
    assert len(set(names)) == len(names)
    assert {"trl", "datasets", "nbdev", "execnb", "bitsandbytes", "deepspeed"} <= set(names)  # not in the GPU image
    trl_dev = re.search(r'"trl==([0-9.]+)\.\*"', (ROOT / "pyproject.toml").read_text()).group(1)
    assert dict(p.split("==") for p in pins)["trl"].startswith(trl_dev + ".")        # the TRL the oracle tests use


def test_only_the_cuda_cells_take_the_gpu_runs_outputs(tmp_path):
    "The notebooks come back re-executed; the CPU cells' outputs stay those saved here (the text quotes them)."
    import nbformat
    from nbformat.v4 import new_code_cell, new_notebook, new_output
    spec = importlib.util.spec_from_file_location("take_cuda", ROOT / "scripts" / "take-cuda-outputs.py")
    take = importlib.util.module_from_spec(spec); spec.loader.exec_module(take)
    def nb(cpu_out, gpu_out, gpu_src="#| cuda\nprint(torch.cuda.get_device_name())"):
        return new_notebook(cells=[new_code_cell("print(1)", id="cpu", outputs=[new_output("stream", text=cpu_out)]),
                                   new_code_cell(gpu_src, id="gpu", outputs=[new_output("stream", text=t) for t in gpu_out])])
    (tmp_path / "gpu").mkdir()
    nbformat.write(nb("1 (this machine)\n", []), tmp_path / "ch.ipynb")
    nbformat.write(nb("1 (the GPU machine's CPU)\n", ["NVIDIA H100\n"]), tmp_path / "gpu" / "ch.ipynb")
    assert take.take(tmp_path / "gpu" / "ch.ipynb", tmp_path / "ch.ipynb") == 1
    cells = nbformat.read(tmp_path / "ch.ipynb", as_version=4).cells
    assert [c.outputs[0].text for c in cells] == ["1 (this machine)\n", "NVIDIA H100\n"]
    nbformat.write(nb("1\n", [], gpu_src="#| cuda\nprint('edited since')"), tmp_path / "ch.ipynb")
    with pytest.raises(SystemExit, match="is not in .* with the same source"):
        take.take(tmp_path / "gpu" / "ch.ipynb", tmp_path / "ch.ipynb")
    assert nbformat.read(tmp_path / "ch.ipynb", as_version=4).cells[1].outputs == []   # nothing was changed
