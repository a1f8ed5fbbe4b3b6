"""The docs site, checked without Quarto: nbdev-proc-nbs, each processed notebook rendered to standalone HTML by
nbconvert with a local MathJax (Debian's libjs-mathjax), then loaded in headless Chromium. Asserts: equations typeset,
no raw `$$`, plots present as images, no cell shows an error. Screenshots of two pages go to test-artifacts/."""
import json, re, shutil, subprocess, sys
from pathlib import Path
import pytest

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
MATHJAX = Path("/usr/share/javascript/mathjax/MathJax.js")
ARTIFACTS = ROOT / "test-artifacts"
_CELL_KEYS = {"code": {"id", "cell_type", "metadata", "source", "outputs", "execution_count"},
              "markdown": {"id", "cell_type", "metadata", "source", "attachments"}, "raw": {"id", "cell_type", "metadata", "source", "attachments"}}

pytestmark = [
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="no chromium: `apt-get install chromium` (Debian) to check the rendered docs"),
    pytest.mark.skipif(not MATHJAX.exists(), reason="no local MathJax: `apt-get install libjs-mathjax` to check equation typesetting"),
]


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    pytest.importorskip("playwright", reason="pip install -e '.[dev]' (playwright drives the system chromium)")
    from nbconvert import HTMLExporter
    import nbformat
    repo = tmp_path_factory.mktemp("repo")
    for name in ("nbs", "grpo_edu", "configs"): shutil.copytree(ROOT / name, repo / name)
    for name in ("pyproject.toml", "README.md"): shutil.copy(ROOT / name, repo / name)
    exe = Path(sys.executable).with_name("nbdev-proc-nbs")
    r = subprocess.run([str(exe) if exe.exists() else "nbdev-proc-nbs"], cwd=repo, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    proc = repo / "_proc"
    exporter = HTMLExporter(template_name="lab", mathjax_url=f"file://{MATHJAX}?config=TeX-AMS_CHTML")
    pages = {}
    for nb_path in sorted(proc.rglob("*.ipynb")):
        if ".ipynb_checkpoints" in nb_path.parts: continue
        nb = nbformat.read(nb_path, 4)
        nb.cells = [c for c in nb.cells if c.cell_type != "raw"]   # Quarto front matter: Quarto reads it, a browser would show it
        for c in nb.cells:                                   # nbdev adds bookkeeping keys (has_sd) that nbformat rejects
            for k in [k for k in c if k not in _CELL_KEYS[c.cell_type]]: del c[k]
            c.metadata.pop("execution", None)
        html, _ = exporter.from_notebook_node(nb)
        out = repo / "html" / nb_path.relative_to(proc).with_suffix(".html")
        out.parent.mkdir(parents=True, exist_ok=True); out.write_text(html)
        pngs = sum(1 for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []) if "image/png" in o.get("data", {}))
        prose = lambda src: re.sub(r"```.*?```|`[^`\n]*`", "", src, flags=re.S)    # code spans (`$GRPO_EDU_CACHE`) are not math
        has_math = any(c.cell_type == "markdown" and re.search(r"\$\$|\$[^$\n]*[\\_^{][^$\n]*\$", prose(c.source)) for c in nb.cells)
        pages[str(nb_path.relative_to(proc))] = dict(html=out, pngs=pngs, math=has_math,
                                                     src="\n".join(c.source for c in nb.cells))
    return pages


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=["--headless", "--no-sandbox", "--disable-gpu"])
        yield b
        b.close()


def _load(browser, path):
    page = browser.new_page(viewport={"width": 1100, "height": 1400})
    page.goto(path.as_uri())
    page.wait_for_function("() => !window.MathJax || (MathJax.Hub && MathJax.Hub.queue.pending === 0 && MathJax.Hub.queue.running === 0)",
                           timeout=60_000)
    return page


def test_every_chapter_is_rendered(site):
    names = set(site)
    for nb in ["index.ipynb", "01_objective.ipynb", "02_zero_loss.ipynb", "03_kl.ipynb", "04_advantages.ipynb",
               "05_logprobs.ipynb", "06_naive_loop.ipynb", "07_ppo_vs_grpo.ipynb", "08_batches.ipynb", "09_training.ipynb",
               "10_speed.ipynb", "11_memory.ipynb", "api/00_loss.ipynb", "api/09_trainer.ipynb"]:
        assert nb in names, nb


def test_pages_typeset_math_show_plots_and_no_errors(site, browser):
    ARTIFACTS.mkdir(exist_ok=True)
    for name, info in site.items():
        page = _load(browser, info["html"])
        text = page.inner_text("body")
        assert "Traceback (most recent call last)" not in text, f"{name} shows an error"
        assert page.locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr'] >> text=Error").count() == 0, name
        if info["math"]:
            assert page.locator(".MathJax_CHTML, .MathJax_Display, mjx-container").count() > 0, f"{name}: equations not typeset"
            assert "$$" not in text, f"{name}: raw $$ left in the page"
        if info["pngs"]:
            n = page.locator("img[src^='data:image/png']").count()
            assert n >= info["pngs"], f"{name}: {n} images for {info['pngs']} plots"
        if name in ("index.ipynb", "03_kl.ipynb"):
            page.screenshot(path=str(ARTIFACTS / name.replace(".ipynb", ".png")), full_page=False)
        page.close()
    assert (ARTIFACTS / "index.png").exists() and (ARTIFACTS / "03_kl.png").exists()


def test_every_exported_function_has_a_docstring_and_doc_entry(site):
    "Each public exported function/class has a docstring, and a show_doc entry in the processed notebooks."
    import importlib, inspect
    idx = importlib.import_module("grpo_edu._modidx").d["syms"]
    all_src = "\n".join(p["src"] for p in site.values())
    checked = 0
    for mod, syms in idx.items():
        m = importlib.import_module(mod)
        for sym in syms:
            name = sym[len(mod) + 1:]
            if any(part.startswith("_") for part in name.split(".")): continue
            obj = m
            for part in name.split("."): obj = getattr(obj, part)
            if not (inspect.isfunction(obj) or inspect.isclass(obj)): continue
            assert inspect.getdoc(obj), f"{sym} has no docstring"
            assert f"show_doc({name.split('.')[0]}" in all_src, f"{sym} has no show_doc entry in the docs"
            checked += 1
    assert checked > 40, checked
