"""The docs site, checked without Quarto: nbdev-proc-nbs, each processed notebook rendered to standalone
HTML by nbconvert with a local MathJax (Debian's libjs-mathjax), then loaded in headless Chromium. The cell
options Quarto reads are applied as Quarto would (`#| echo: false` and `#| code-fold: true` hide the code,
`#| output: false` the outputs). Asserts: equations typeset, no raw `$$`, plots present as images and no
wider than the window, every picture a page links to loads, display equations within the text column, no
page wider than the window, no cell shows an error. Screenshots of the first screens of the index and
chapters 01, 02, 03, 06 and 09 go to $GRPO_EDU_TEST_ARTIFACTS (else a temporary folder: the tests leave the
checkout as it was), with the overview figure of 09's toy run as a reader sees it at 800 px wide."""
import os, re, shutil, subprocess, sys, tempfile
from pathlib import Path
import pytest

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
MATHJAX = Path("/usr/share/javascript/mathjax/MathJax.js")
# screenshots: where asked, else a temporary folder
ARTIFACTS = Path(os.environ.get("GRPO_EDU_TEST_ARTIFACTS") or tempfile.mkdtemp(prefix="grpo-edu-docs-"))
WIDTH, HEIGHT = 1100, 1400                       # the window; a screenshot is its first few screens
SCREENSHOTS = {"index.ipynb": 2, "01_objective.ipynb": 2, "02_zero_loss.ipynb": 2, "03_kl.ipynb": 2,
               "06_naive_loop.ipynb": 2, "09_training.ipynb": 4}        # page: how many screens
_CELL_KEYS = {"code": {"id", "cell_type", "metadata", "source", "outputs", "execution_count"},
              "markdown": {"id", "cell_type", "metadata", "source", "attachments"},
              "raw": {"id", "cell_type", "metadata", "source", "attachments"}}

pytestmark = [
    pytest.mark.skipif(not Path(CHROMIUM).exists(),
                       reason="no chromium: `apt-get install chromium` (Debian) to check the rendered docs"),
    pytest.mark.skipif(not MATHJAX.exists(),
                       reason="no local MathJax: `apt-get install libjs-mathjax` to check equations"),
]


def cell_options(source: str) -> dict:
    "The `#| key: value` options at the top of a code cell (Quarto's and nbdev's)."
    options = {}
    for line in source.splitlines():
        if not line.startswith("#|"): break
        key, _, value = line[2:].partition(":")
        options[key.strip()] = value.strip().lower()
    return options


def as_quarto_shows(cell) -> None:
    "Hide what Quarto hides (code of echo: false / code-fold: true cells, outputs of output: false) via tags."
    for out in cell.get("outputs", []):        # show_doc's `[source](url){target=...}` is Quarto's syntax
        if "text/markdown" in out.get("data", {}):
            out["data"]["text/markdown"] = re.sub(r"\)\{target=[^}]*\}", ")", out["data"]["text/markdown"])
    options = cell_options(cell.source)
    tags = cell.metadata.setdefault("tags", [])
    if options.get("echo") == "false" or options.get("code-fold") == "true": tags.append("remove_input")
    if options.get("output") == "false": tags.append("remove_output")
    cell.source = "\n".join(line for line in cell.source.splitlines() if not line.startswith("#|"))


def as_the_site_typesets(html: str) -> str:
    "nbconvert's page made closer to Quarto's: inline math is not broken, tables are sized by content."
    # nbconvert asks MathJax 2 for automatic line breaks, which cut formulas apart in table cells;
    # Quarto's MathJax 3 never breaks inline math. JupyterLab's tables have a fixed layout, Bootstrap's not.
    html = re.sub(r"(linebreaks:\s*\{\s*automatic:\s*)true", r"\1false", html)
    style = "<style>.jp-RenderedHTMLCommon table { table-layout: auto; }</style>"
    return html.replace("</head>", style + "</head>", 1)


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    pytest.importorskip("playwright", reason="pip install -e '.[dev]' (playwright drives chromium)")
    from nbconvert import HTMLExporter
    from nbconvert.preprocessors import TagRemovePreprocessor
    import nbformat
    repo = tmp_path_factory.mktemp("repo")
    for name in ("nbs", "grpo_edu", "configs", "tests"): shutil.copytree(ROOT / name, repo / name)
    for name in ("pyproject.toml", "README.md"): shutil.copy(ROOT / name, repo / name)
    exe = Path(sys.executable).with_name("nbdev-proc-nbs")
    r = subprocess.run([str(exe) if exe.exists() else "nbdev-proc-nbs"], cwd=repo, capture_output=True,
                       text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    proc = repo / "_proc"
    # The pages' own pictures (markdown images such as the front page's run), where their relative links point.
    shutil.copytree(repo / "nbs" / "images", repo / "html" / "images")
    exporter = HTMLExporter(template_name="lab", mathjax_url=f"file://{MATHJAX}?config=TeX-AMS_CHTML")
    hide = TagRemovePreprocessor(remove_input_tags={"remove_input"},
                                 remove_all_outputs_tags={"remove_output"})
    exporter.register_preprocessor(hide, enabled=True)
    pages = {}
    for nb_path in sorted(proc.rglob("*.ipynb")):
        if ".ipynb_checkpoints" in nb_path.parts: continue
        nb = nbformat.read(nb_path, 4)
        nb.cells = [c for c in nb.cells if c.cell_type != "raw"]   # Quarto's front matter, not for a browser
        for c in nb.cells:                           # nbdev adds bookkeeping keys (has_sd) nbformat rejects
            for k in [k for k in c if k not in _CELL_KEYS[c.cell_type]]: del c[k]
            c.metadata.pop("execution", None)
            if c.cell_type == "code": as_quarto_shows(c)
        shown = [c for c in nb.cells
                 if c.cell_type == "code" and "remove_output" not in c.metadata.get("tags", [])]
        html, _ = exporter.from_notebook_node(nb)
        html = as_the_site_typesets(html)
        out = repo / "html" / nb_path.relative_to(proc).with_suffix(".html")
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(html)
        pngs = sum(1 for c in shown for o in c.get("outputs", []) if "image/png" in o.get("data", {}))
        prose = lambda src: re.sub(r"```.*?```|`[^`\n]*`", "", src, flags=re.S)    # code spans are not math
        math = re.compile(r"\$\$|\$[^$\n]*[\\_^{][^$\n]*\$")
        has_math = any(c.cell_type == "markdown" and math.search(prose(c.source)) for c in nb.cells)
        pages[str(nb_path.relative_to(proc))] = dict(html=out, pngs=pngs, math=has_math,
                                                     src="\n".join(c.source for c in nb.cells))
    return pages


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright
    # Every host name fails at once: a page is checked as a reader without network sees it, and what the
    # HTML template links from a CDN (require.js, mermaid) never waits on a name server that does not answer.
    offline = "--host-resolver-rules=MAP * ~NOTFOUND"
    args = ["--headless", "--no-sandbox", "--disable-gpu", offline]
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=args)
        yield b
        b.close()


WIDE_EQUATIONS = """() => [...document.querySelectorAll('.MathJax_Display, .MJXc-display')].map(d => {
    const eq = d.querySelector('.mjx-chtml') || d;
    const column = d.closest('.jp-RenderedHTMLCommon') || d.parentElement;
    return [Math.round(eq.getBoundingClientRect().right), Math.round(column.getBoundingClientRect().right)];
}).filter(([right, edge]) => right > edge + 1)"""


def _load(browser, path):
    page = browser.new_page(viewport={"width": WIDTH, "height": HEIGHT})
    page.goto(path.as_uri())
    page.wait_for_function("() => !window.MathJax || (MathJax.Hub && MathJax.Hub.queue.pending === 0 "
                           "&& MathJax.Hub.queue.running === 0)", timeout=60_000)
    return page


def test_site_typesetting():
    page = "<head></head>MathJax.Hub.Config({CommonHTML: {\n linebreaks: {\n  automatic: true\n }}})"
    shown = as_the_site_typesets(page)
    assert "automatic: false" in shown and "automatic: true" not in shown and "table-layout: auto" in shown


def test_cell_options_are_read_as_quarto_reads_them():
    import nbformat
    cell = nbformat.v4.new_code_cell("#| slow\n#| code-fold: true\n#| output: false\nx = 1")
    as_quarto_shows(cell)
    assert cell.metadata["tags"] == ["remove_input", "remove_output"] and cell.source == "x = 1"
    assert cell_options("#| echo: false\nimport os\n#| not an option") == {"echo": "false"}


def test_every_chapter_is_rendered(site):
    names = set(site)
    for nb in ["index.ipynb", "01_objective.ipynb", "02_zero_loss.ipynb", "03_kl.ipynb",
               "04_advantages.ipynb", "05_logprobs.ipynb", "06_naive_loop.ipynb", "07_ppo_vs_grpo.ipynb",
               "08_batches.ipynb", "09_training.ipynb", "10_speed.ipynb", "11_memory.ipynb",
               "12_lora.ipynb", "13_sampler.ipynb", "14_tools.ipynb", "15_loss_family.ipynb",
               "api/01_loss.ipynb", "api/15_trainer.ipynb"]:
        assert nb in names, nb


def page_problems(page, info) -> list[str]:
    "What is wrong with one rendered page: errors, untypeset math, missing or oversized plots, overflow."
    problems, text = [], page.inner_text("body")
    if "Traceback (most recent call last)" in text: problems.append("shows an error")
    stderr = ".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr'] >> text=Error"
    if page.locator(stderr).count(): problems.append("an Error on stderr")
    if info["math"]:
        if not page.locator(".MathJax_CHTML, .MathJax_Display, mjx-container").count():
            problems.append("equations not typeset")
        if "$$" in text: problems.append("raw $$ left in the page")
    if info["pngs"]:
        images = page.locator("img[src^='data:image/png']").count()
        if images < info["pngs"]: problems.append(f"{images} images for {info['pngs']} plots")
        widest = page.evaluate("() => Math.max(...[...document.querySelectorAll('img')]"
                               ".map(i => i.getBoundingClientRect().right))")
        if widest > WIDTH: problems.append(f"a plot reaches {widest:.0f} px, past the {WIDTH} px window")
    if too_wide := page.evaluate(WIDE_EQUATIONS):
        problems.append(f"display equations past the text column (right edge, column's): {too_wide}")
    broken = page.evaluate("() => [...document.images].filter(i => i.complete && i.naturalWidth === 0)"
                           ".map(i => (i.getAttribute('src') || '').slice(0, 80))")
    if broken: problems.append(f"images that do not load: {broken}")
    if (page_width := page.evaluate("() => document.documentElement.scrollWidth")) > WIDTH:
        problems.append(f"the page is {page_width} px wide, the window {WIDTH} px")
    return problems


def test_pages_typeset_math_show_plots_and_no_errors(site, browser):
    "Every page checked, the screenshots taken, then every problem reported at once."
    ARTIFACTS.mkdir(exist_ok=True)
    problems = {}
    for name, info in site.items():
        page = _load(browser, info["html"])
        if found := page_problems(page, info): problems[name] = found
        if name in SCREENSHOTS:
            page.screenshot(path=str(ARTIFACTS / name.replace(".ipynb", ".png")), full_page=True,
                            clip={"x": 0, "y": 0, "width": WIDTH, "height": SCREENSHOTS[name] * HEIGHT})
        page.close()
    for name in SCREENSHOTS: assert (ARTIFACTS / name.replace(".ipynb", ".png")).exists(), name
    assert not problems, "\n".join(f"{name}: {'; '.join(found)}" for name, found in problems.items())


def test_run_overview_is_readable_at_800_px(browser):
    "The overview a toy run writes (09 shows it), drawn 800 px wide as a reader may see it: a screenshot."
    import base64, json, struct
    nb = json.loads((ROOT / "nbs" / "09_training.ipynb").read_text())
    shown = [o["data"]["image/png"] for c in nb["cells"] if "overview.png" in "".join(c["source"])
             for o in c.get("outputs", []) if "image/png" in o.get("data", {})]
    assert shown, "09 shows no overview figure in its saved outputs"
    png = "".join(shown[0]) if isinstance(shown[0], list) else shown[0]
    width = struct.unpack(">I", base64.b64decode(png)[16:20])[0]
    assert width >= 800, width                                   # drawn at least as wide as it is shown
    page = browser.new_page(viewport={"width": 820, "height": 1200})
    page.set_content(f'<img src="data:image/png;base64,{png}" style="width: 800px">')
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "run-overview-800px.png"), full_page=True)
    page.close()
    assert (ARTIFACTS / "run-overview-800px.png").exists()


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
