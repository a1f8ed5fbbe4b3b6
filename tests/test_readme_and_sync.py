"""The README's script runs as written, and the exported library is exactly what the notebooks export."""
import filecmp, re, shutil, subprocess, sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_readme_script_runs(tmp_path):
    text = (ROOT / "README.md").read_text()
    script = re.search(r"## In a script\s+```python\n(.*?)```", text, re.S).group(1)
    assert len(script.strip().splitlines()) <= 16 and "def exact(completions, answer, **kwargs)" in script
    # The script as printed, cut to 20 GRPO steps: what it checks is the API, end to end. Whether GRPO learns the toy
    # over a whole run is chapter 9's check, on the default recipe.
    assert script.count("max_steps=300") == 1
    (tmp_path / "s.py").write_text(script.replace("max_steps=300", "max_steps=20"))
    r = subprocess.run([sys.executable, "s.py"], cwd=tmp_path, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    assert re.search(r"\d+\.\d% -> \d+\.\d%", r.stdout), r.stdout[-2000:]
    assert (tmp_path / "runs" / "script" / "summary.json").exists()


def test_index_shows_the_same_script():
    nb = (ROOT / "nbs" / "index.ipynb").read_text()
    assert "def exact(completions, answer, **kwargs)" in nb and "GRPOTrainer(model, [exact]" in nb


def test_library_matches_notebooks(tmp_path):
    "nbdev-export in a copy must reproduce grpo_edu/ byte for byte: nobody edited the generated files by hand."
    for name in ("nbs", "grpo_edu"): shutil.copytree(ROOT / name, tmp_path / name)
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    exe = Path(sys.executable).with_name("nbdev-export")
    r = subprocess.run([str(exe) if exe.exists() else "nbdev-export"], cwd=tmp_path, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    for py in sorted((ROOT / "grpo_edu").glob("*.py")):
        assert filecmp.cmp(py, tmp_path / "grpo_edu" / py.name, shallow=False), f"{py.name} differs from what the notebooks export"
    assert sorted(p.name for p in (tmp_path / "grpo_edu").glob("*.py")) == sorted(p.name for p in (ROOT / "grpo_edu").glob("*.py"))


def saved_outputs():
    "(notebook path, output) for every saved output of every notebook in nbs/."
    import nbformat
    for path in sorted((ROOT / "nbs").rglob("*.ipynb")):
        for cell in nbformat.read(path, as_version=4).cells:
            for out in cell.get("outputs", []):
                yield path, out


def test_saved_outputs_hold_no_progress_bar_updates():
    "Saved outputs keep each progress bar's last line, not every carriage-return update (scripts/collapse-progress.py)."
    for path, out in saved_outputs():
        assert not (out.get("output_type") == "stream" and "\r" in out.text), f"{path.name}: run scripts/collapse-progress.py"


def test_saved_outputs_name_no_installation_or_home_folder():
    """Saved outputs are what a docs reader sees: no warning that names where Python packages are installed
    (site-packages) or whose home folder ran the notebook. Temporary run folders (/tmp/...) may appear."""
    import re
    local = re.compile(r"site-packages|/root/|/home/[^/\s]+/|/Users/[^/\s]+/")
    for path, out in saved_outputs():
        texts = [out.get("text", "")] + [v for k, v in out.get("data", {}).items()
                                         if k.startswith("text/") and isinstance(v, str)]
        found = [m.group() for t in texts for m in local.finditer(t)]
        assert not found, f"{path.name}: a saved output names {found[0]!r}; drop that output"


def test_readme_cpu_figures_are_the_records():
    "The CPU measurements the README quotes are those of the records it names, rounded as printed."
    import json
    text = " ".join((ROOT / "README.md").read_text().split())
    results = ROOT / "benchmarks" / "results"
    default = json.loads((results / "cpu-default-run-2026-12-02.json").read_text())["runs"]["candidate"]
    assert "cpu-default-run-2026-12-02.json" in text
    took = [f"{r['train_s']:.1f} s" for r in default]
    assert f"took {took[0]}, {took[1]} and {took[2]} on seeds 0, 1 and 2" in text
    gains = [f"{100 * r['gain']:g}" for r in default]
    assert f"rose by {gains[0]}, {gains[1]} and {gains[2]} points" in text
    assert all(r["intervals_apart"] and r["gain"] >= 0.25 for r in default)
    tiny = next(r for r in json.loads((results / "cpu-x86_64-2026-12-02.json").read_text())["results"]
                if r["model"] == "tiny")
    assert "cpu-x86_64-2026-12-02.json" in text
    assert (f"a step at {tiny['ours_step_s']:.1f} s against TRL's {tiny['trl_step_s']:.1f} s" in text
            and f"{tiny['step_speedup_vs_trl']:.1f} times faster" in text)
    share = {k: f"{v / tiny['ours_step_s']:.0%}" for k, v in tiny["ours_phases_s"].items()}
    assert f"the rollout {share['rollout']} of it, the forward and backward {share['forward_backward']}" in text
