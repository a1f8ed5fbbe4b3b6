"""The package's shape, measured: what a reader meets when they open the code after the chapters. Each number here
is a promise of `../DESIGN`-style readability (one room per idea, one exported function per cell with its test
below it, lines a reader takes in at a glance), kept by the test rather than by memory."""
import ast
import inspect
import json
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "grpo_edu"
GENERATED = {"_modidx.py"}


def package_lines() -> list[str]:
    "Every line of the package's modules (the generated index aside)."
    return [line for p in sorted(PACKAGE.glob("*.py")) if p.name not in GENERATED
            for line in p.read_text().splitlines()]


def code_cells(nb: Path) -> list[str]:
    "The sources of a notebook's code cells, in order."
    cells = json.loads(nb.read_text())["cells"]
    return ["".join(c["source"]) for c in cells if c["cell_type"] == "code"]


def is_export(source: str) -> bool:
    "Whether a code cell exports into the package (`#| export` or `#| exports`)."
    return any(re.fullmatch(r"#\|\s*exports?\s*", line.strip()) for line in source.splitlines())


def export_cells_shown(nb: Path) -> tuple[int, int]:
    "(export cells followed by a cell that shows or tests them, export cells) in one notebook."
    cells = code_cells(nb)
    exports = [i for i, source in enumerate(cells) if is_export(source)]
    shown = [i for i in exports if i + 1 < len(cells) and not is_export(cells[i + 1])]
    return len(shown), len(exports)


def test_long_lines_are_rare():
    lines = package_lines()
    long = [line for line in lines if len(line) >= 100]
    assert len(long) < 0.05 * len(lines), f"{len(long)} of {len(lines)} package lines are ≥ 100 characters"
    assert max(len(line) for line in lines) <= 110


def test_methods_are_patched_not_assigned():
    assigned = [line for line in package_lines() if re.fullmatch(r"[A-Z]\w*\.(\w+) = \1", line.strip())]
    assert not assigned, f"use fastcore's @patch: {assigned[:5]}"


def test_export_cells_are_followed_by_their_tests():
    counts = [export_cells_shown(nb) for nb in sorted((REPO / "nbs").rglob("*.ipynb"))]
    shown, total = sum(c[0] for c in counts), sum(c[1] for c in counts)
    assert shown >= 0.8 * total, f"only {shown} of {total} export cells are followed by a cell that uses them"


def test_chapter_code_fits_100_columns():
    "A chapter's code is read on the page and in JupyterLab: no line of it over 100 characters."
    long = [(nb.name, line) for nb in sorted((REPO / "nbs").glob("*.ipynb"))
            for source in code_cells(nb) for line in source.splitlines() if len(line) > 100]
    assert not long, long


def test_grpo_loss_takes_few_parameters():
    from grpo_edu.loss import grpo_loss
    # the tensors, one options object, and what changes each micro-batch (TRL's num_items_in_batch)
    assert len(inspect.signature(grpo_loss).parameters) <= 9


def test_config_holds_the_dataclass_and_its_validation_only():
    source = (PACKAGE / "config.py").read_text()
    imported = {alias.name.split(".")[0] for node in ast.walk(ast.parse(source))
                if isinstance(node, (ast.Import, ast.ImportFrom)) for alias in node.names}
    imported |= {node.module.split(".")[0] for node in ast.walk(ast.parse(source))
                 if isinstance(node, ast.ImportFrom) and node.module}
    assert not imported & {"argparse", "yaml", "json", "os"}, "text and files are read by the cli and recipe"
    for name in ("FieldParser", "parse_config", "config_from_dict", "as_config", "from_trl", "check_paths"):
        assert f"def {name}" not in source and f"class {name}" not in source, name
    assert len(source.splitlines()) <= 610     # the dataclass (~250 lines), StepPlan, checks, tracker names


def test_no_function_is_over_60_lines():
    "A function is read whole on one screen: none in the package is over 60 lines, its signature included."
    long = [f"{p.stem}.{node.name}: {node.end_lineno - node.lineno + 1} lines"
            for p in sorted(PACKAGE.glob("*.py")) if p.name not in GENERATED
            for node in ast.walk(ast.parse(p.read_text()))
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno - node.lineno >= 60]
    assert not long, long


def test_core_math_knows_no_sharding():
    source = (PACKAGE / "logprobs.py").read_text()
    assert not re.search(r"DTensor|FlatParameter|ds_id", source)


def test_one_name_for_a_rollout_round():
    "A round of sampling is a rollout round (`num_generations` stays TRL's G, completions per prompt)."
    other_names = (r"\b(generate_every|steps_per_round|steps_between_generations|generation_steps"
                   r"|\w*_per_generation|split_generation|_new_generation|Generation)\b")
    used = [line for line in package_lines() if re.search(other_names, line) and "steps_per_generation" not in line]
    assert not used, f"say rollout round (optimizer_steps_per_round, split_round): {used[:5]}"


def test_every_public_function_says_what_it_returns():
    missing = []
    for p in sorted(PACKAGE.glob("*.py")):
        if p.name in GENERATED or p.name == "__init__.py": continue
        for node in ast.parse(p.read_text()).body:
            public = isinstance(node, ast.FunctionDef) and not node.name.startswith("_")
            if public and node.returns is None and not node.decorator_list: missing.append(f"{p.stem}.{node.name}")
    assert not missing, f"give these a return type: {missing}"


def test_the_e2e_tier_names_files_and_tests_that_exist():
    "conftest's E2E list (the whole-program runs, `-m e2e`) names test files and tests that exist."
    from conftest import E2E
    tests = REPO / "tests"
    files = {p.name for p in tests.glob("test_*.py")}
    for entry in E2E:
        file, _, test = entry.partition("::")
        assert file in files, entry
        if test: assert re.search(rf"^def {test}\(", (tests / file).read_text(), re.M), entry
