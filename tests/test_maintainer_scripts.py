"""The maintainer's GPU tools: `scripts/gpu-check.sh` stops before any GPU work, with one paragraph naming what is
missing (a step, a package, the GPU, the data folder), and `scripts/take-cuda-outputs.py` brings back only the outputs
of the `#| cuda` cells. Also: the suite hides the GPU unless it runs the GPU tests."""
import importlib.util, os, subprocess, sys
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
    "scripts/gpu-check.sh's answer, its results file in a temporary folder (the checkout stays as it was)."
    import tempfile
    env = {**os.environ, "RESULTS": os.path.join(tempfile.mkdtemp(), "results.jsonl")}
    return subprocess.run(["bash", "scripts/gpu-check.sh", *steps], cwd=ROOT, capture_output=True, text=True,
                          timeout=120, env=env)


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
    save = load_script("save_outputs", "save-outputs.py")
    assert cells[1].metadata["grpo_edu"]["source"] == save.source_hash(cells[1].source)   # stamped as saved
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


def test_sweep_draws_finds_the_asserts_that_depend_on_the_draws(tmp_path):
    """scripts/sweep-draws.py runs a notebook at several seed offsets: an assert that fails at some of them is
    reported with those offsets, and one whose compared values change with the offset is listed as depending on the
    draws; an exact one is not. (torch's CPU generator gives the same draws on any machine for a seed.)"""
    import json
    import nbformat
    from nbformat.v4 import new_code_cell, new_notebook
    cells = ["import torch\nfrom fastcore.test import test_close\nfrom grpo_edu.toy import seed_everything",
             "seed_everything(0)\nx = torch.rand(1).item()\nassert x < 0.5\nassert 1 + 1 == 2",
             "test_close(2 * x, x + x, eps=1e-6)"]
    (tmp_path / "nbs").mkdir()
    nbformat.write(new_notebook(cells=[new_code_cell(c, id=f"c{i}") for i, c in enumerate(cells)]),
                   tmp_path / "nbs" / "draws.ipynb")
    (tmp_path / "pyproject.toml").write_text((ROOT / "pyproject.toml").read_text())
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "sweep-draws.py"), "nbs/draws.ipynb", "--offsets", "6",
                        "--jobs", "1", "--json", "rows.jsonl"], cwd=tmp_path, capture_output=True, text=True,
                       timeout=600)
    rows = [json.loads(line) for line in (tmp_path / "rows.jsonl").read_text().splitlines()]
    x = {row["offset"]: row["values"][0] for row in rows if row.get("op") == "Lt"}
    failed = sorted(offset for offset, value in x.items() if value >= 0.5)
    assert len(x) == 6 and 0 < len(failed) < 6, x                       # these six draws: some pass, some fail
    assert r.returncode == 1 and f"at offsets {failed}" in r.stdout, r.stdout + r.stderr
    listed = r.stdout.split("change with the offset")[1]
    assert "assert x < 0.5" in listed                                       # its values change with the draws
    assert "1 + 1 == 2" not in listed and "test_close(2 * x" not in listed  # exact: the same at every offset
