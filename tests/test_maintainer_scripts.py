"""The maintainer's GPU tools: `scripts/gpu-check.sh` stops before any GPU work, with one paragraph naming what is
missing (a step, a package, the GPU, the data folder), and `scripts/take-cuda-outputs.py` brings back only the outputs
of the `#| cuda` cells. Also: the suite hides the GPU unless it runs the GPU tests."""
import importlib.util, os, subprocess
import pytest
import torch
from conftest import ROOT, gpu_tests_only


def load_script(name: str, file: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / file)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


preflight = load_script("gpu_preflight", "gpu-preflight.py")


def run_check(*steps):
    return subprocess.run(["bash", "scripts/gpu-check.sh", *steps], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)


def test_the_suite_hides_the_gpu_unless_it_runs_the_gpu_tests():
    "A run without `-m cuda` is CI's (CPU, float32) on any machine: the GPU is hidden from it and from what it starts."
    assert os.environ.get("CUDA_VISIBLE_DEVICES") == ""
    assert not torch.cuda.is_available()
    assert gpu_tests_only(["-q", "-m", "cuda", "tests"])                  # scripts/gpu-check.sh's run
    assert gpu_tests_only(["-mcuda"])
    for argv in (["-q", "tests"], ["-m", "not cuda"], ["-m", "cuda or slow"], ["--maxfail", "1"], ["-m"]):
        assert not gpu_tests_only(argv), argv


def test_unknown_step_stops_before_anything():
    r = run_check("tests", "benhc")
    assert r.returncode == 2
    assert "unknown step(s) ['benhc']" in r.stderr and "Traceback" not in r.stderr
    assert r.stdout == ""                                                 # no step ran


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message given where there is no GPU")
def test_no_gpu_stops_before_anything():
    r = run_check("tests")
    assert r.returncode == 2
    assert "no CUDA GPU is visible" in r.stderr and "Traceback" not in r.stderr
    assert r.stdout == ""


def test_missing_packages_are_named(monkeypatch, capsys):
    monkeypatch.setitem(preflight.NEEDS, "bench", ["trl", "no_such_package_here"])
    assert preflight.missing_packages(["tests"]) == []          # the dev install has what the tests step needs
    assert preflight.main(["tests", "bench"]) == 2
    err = capsys.readouterr().err
    assert "tests bench cannot import no_such_package_here (ModuleNotFoundError: No module named" in err


def test_data_folder_comes_from_grpo_edu_data(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)          # pretend, to reach the data check
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda i=0: "Fake GPU")
    (tmp_path / "gsm8k").mkdir()
    monkeypatch.setenv("GRPO_EDU_DATA", str(tmp_path))
    assert preflight.main(["sharded"]) == 2                               # no tokenizer beside gsm8k/
    assert "no data folder with gsm8k/ and qwen2.5-tokenizer/" in capsys.readouterr().err
    (tmp_path / "qwen2.5-tokenizer").mkdir()
    assert preflight.main(["sharded"]) == 0
    out = capsys.readouterr()
    assert out.out.strip() == str(tmp_path) and "Fake GPU" in out.err


def test_only_the_cuda_cells_take_the_gpu_runs_outputs(tmp_path):
    "The notebooks come back re-executed; the CPU cells' outputs stay those saved here (the text quotes them)."
    import nbformat
    from nbformat.v4 import new_code_cell, new_notebook, new_output
    take = load_script("take_cuda", "take-cuda-outputs.py")
    def notebook(cpu_out, gpu_out, gpu_src="#| cuda\nprint(torch.cuda.get_device_name())"):
        cells = [new_code_cell("print(1)", id="cpu", outputs=[new_output("stream", text=cpu_out)]),
                 new_code_cell(gpu_src, id="gpu", outputs=[new_output("stream", text=t) for t in gpu_out])]
        return new_notebook(cells=cells)
    (tmp_path / "gpu").mkdir()
    nbformat.write(notebook("1 (this machine)\n", []), tmp_path / "ch.ipynb")
    nbformat.write(notebook("1 (the GPU machine's CPU)\n", ["NVIDIA H100\n"]), tmp_path / "gpu" / "ch.ipynb")
    assert take.take(tmp_path / "gpu" / "ch.ipynb", tmp_path / "ch.ipynb") == 1
    cells = nbformat.read(tmp_path / "ch.ipynb", as_version=4).cells
    assert [c.outputs[0].text for c in cells] == ["1 (this machine)\n", "NVIDIA H100\n"]
    nbformat.write(notebook("1\n", [], gpu_src="#| cuda\nprint('edited since')"), tmp_path / "ch.ipynb")
    with pytest.raises(SystemExit, match="is not in .* with the same source"):
        take.take(tmp_path / "gpu" / "ch.ipynb", tmp_path / "ch.ipynb")
    assert nbformat.read(tmp_path / "ch.ipynb", as_version=4).cells[1].outputs == []   # nothing was changed


def test_gpu_check_runs_every_notebook_with_cuda_cells():
    "A chapter or API page with a `#| cuda` cell is in gpu-check.sh's default list, so its GPU outputs get made."
    import json, re
    script = (ROOT / "scripts" / "gpu-check.sh").read_text()
    listed = re.search(r"every=\(([^)]*)\)", script).group(1).split()
    with_cuda = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "nbs").rglob("*.ipynb")
                       if any(c["cell_type"] == "code" and "".join(c["source"]).startswith("#| cuda")
                              for c in json.loads(p.read_text())["cells"]))
    assert with_cuda and sorted(listed) == with_cuda


reflow = load_script("reflow", "reflow.py")


def test_reflow_lays_out_long_lines_and_never_changes_meaning():
    "Long trailing comments go above their line, long calls are laid out, and the syntax tree stays the same."
    long_comment = "# " + "why " * 20
    source = "\n".join(["#| export",
                        "def f(alpha: int,  " + long_comment,
                        "      beta: int = 2) -> int:",
                        "    total = alpha + beta      " + long_comment,
                        "    return max(" + ", ".join(f"alpha * {i}" for i in range(12)) + ", total)"])
    out = reflow.reflow(source)
    assert max(len(line) for line in source.split("\n")) >= 100
    assert max(len(line) for line in out.split("\n")) < 100
    assert reflow.same_tree(source, out)
    assert out.count("# why") == 2 * len(reflow.wrapped_comment(long_comment, "    "))
    unparsable = "def f(:\n    return " + "x" * 120
    assert reflow.reflow(unparsable) == unparsable                       # left for a person to mend
    assert not reflow.same_tree("x = 1", "x = 2")


def test_reflow_rewraps_exported_markdown_keeping_lists():
    item = "- " + "word " * 30
    out = reflow.reflow_markdown("#| export\nWhy:\n\n" + item + "\n- short")
    lines = out.split("\n")
    assert max(len(line) for line in lines) < 100
    assert [line for line in lines if line.startswith("- ")] == [lines[3], "- short"]
    assert all(line.startswith("  ") for line in lines[4:-1])
