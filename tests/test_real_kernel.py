"""Two chapters run as a learner runs them: from a fresh install of `.[notebooks]` (the README's first command), in a
real Jupyter kernel (ipykernel's `python3`, started by nbclient as JupyterLab starts it), not in nbdev-test's in-process
shell. What a learner sees is checked: no cell fails, nothing reaches stderr but progress bars (no warning about
missing widgets), and the figures come out as images."""
import json, os, re, subprocess, sys
from pathlib import Path
import pytest

ROOT = Path(__file__).resolve().parents[1]
CHAPTERS = ["03_kl.ipynb", "04_advantages.ipynb"]   # fast, no `#| slow` or `#| cuda` cell, several figures each
PROGRESS_BAR = re.compile(r"^[^\n]*\d+%\|[^\n]*\|[^\n]*$")   # tqdm's text bar, when a bar falls back to text

# Run by the fresh environment's interpreter: each chapter executed by nbclient in a `python3` kernel from that
# environment, and for each cell its stderr text and the MIME types of its outputs, as JSON on stdout.
EXECUTE = r"""
import json, sys
import nbformat
from nbclient import NotebookClient
report = {}
for path in sys.argv[1:]:
    nb = nbformat.read(path, as_version=4)
    NotebookClient(nb, kernel_name="python3", timeout=600,
                   resources={"metadata": {"path": str(__import__("pathlib").Path(path).parent)}}).execute()
    cells = []
    for cell in nb.cells:
        if cell.cell_type != "code": continue
        outputs = cell.get("outputs", [])
        stderr = "".join(o.get("text", "") for o in outputs if o.get("name") == "stderr")
        kinds = sorted({k for o in outputs for k in o.get("data", {})})
        errors = [o.get("ename") for o in outputs if o.get("output_type") == "error"]
        cells.append({"stderr": stderr, "kinds": kinds, "errors": errors})
    report[path] = cells
print(json.dumps(report))
"""


def fresh_notebooks_env(folder: Path) -> Path:
    "A new venv with torch (the version installed here) and `pip install -e .[notebooks]`; its python."
    import torch
    subprocess.run([sys.executable, "-m", "venv", str(folder)], check=True, timeout=300)
    python = folder / "bin" / "python"
    # --no-compile skips pip's byte-compilation of every installed module: the kernel compiles what it imports.
    pip = [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-compile"]
    steps = [[f"torch=={torch.__version__.split('+')[0]}"], ["-e", f"{ROOT}[notebooks]"]]
    for args in steps:
        r = subprocess.run(pip + args, capture_output=True, text=True, timeout=1800)
        if r.returncode != 0:
            pytest.skip(f"`pip install {' '.join(args)}` failed here (no package index?): {r.stderr[-500:]}")
    return python


def test_chapters_run_in_a_real_kernel_from_a_fresh_install(tmp_path):
    python = fresh_notebooks_env(tmp_path / "venv")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST", "JUPYTER", "PYTHONPATH"))}
    (tmp_path / "home").mkdir()
    env.update(OMP_NUM_THREADS="1", JUPYTER_PLATFORM_DIRS="1", HOME=str(tmp_path / "home"),
               GRPO_EDU_CACHE=str(tmp_path / "cache"))     # no kernels or settings from the user's own folders
    paths = [str(ROOT / "nbs" / name) for name in CHAPTERS]
    r = subprocess.run([str(python), "-c", EXECUTE, *paths], capture_output=True, text=True, env=env,
                       timeout=1800, cwd=tmp_path)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-5000:]
    report = json.loads(r.stdout.strip().splitlines()[-1])
    for path, cells in report.items():
        name = Path(path).name
        assert not [c["errors"] for c in cells if c["errors"]], name
        for cell in cells:
            lines = [line for line in re.split(r"[\r\n]+", cell["stderr"]) if line.strip()]
            unexpected = [line for line in lines if not PROGRESS_BAR.match(line)]
            assert not unexpected, (name, unexpected[:5])              # e.g. TqdmWarning: IProgress not found
        figures = sum("image/png" in c["kinds"] for c in cells)
        assert figures >= 2, (name, figures)                          # matplotlib's figures, inline, as images
