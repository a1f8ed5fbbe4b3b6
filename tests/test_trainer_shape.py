"""The trainer's shape, measured: one GRPO step is four plain functions (`grpo_edu.step`) that the trainer's loop
and the chapters call the same way, and `GRPOTrainer` is a plain class whose methods are written in its body."""
import ast
import json
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "grpo_edu"
GENERATED = {"_modidx.py"}
STEP = ("sample_round", "score", "build_batch", "update")
# The chapters that show one step, and the step functions each calls (08, 13 and 14 are about the batch).
CHAPTERS = {"02_zero_loss": STEP, "06_naive_loop": STEP, "08_batches": STEP[:3], "09_training": STEP,
            "13_sampler": STEP, "14_tools": STEP[:3], "15_loss_family": STEP}


def chapter_code(name: str) -> str:
    "A chapter's code cells, joined."
    cells = json.loads((REPO / "nbs" / f"{name}.ipynb").read_text())["cells"]
    return "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")


def calls(source: str) -> set:
    "The names of the plain functions a module's code calls."
    return {node.func.id for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)}


def test_no_module_is_over_700_lines():
    long = {p.name: n for p in PACKAGE.glob("*.py") if p.name not in GENERATED
            if (n := len(p.read_text().splitlines())) > 700}
    assert not long, long


def test_the_trainer_is_a_plain_class_under_500_lines():
    source = (PACKAGE / "trainer.py").read_text()
    assert len(source.splitlines()) <= 500
    assert "@patch" not in source and "fastcore" not in source
    from grpo_edu.trainer import GRPOTrainer
    tree = ast.parse(source)
    body = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "GRPOTrainer")
    written = {n.name for n in body.body if isinstance(n, ast.FunctionDef)}
    methods = {name for name, value in vars(GRPOTrainer).items() if callable(value)}
    assert methods == written, methods ^ written                 # every method is in the class body


def test_the_loop_calls_the_four_step_functions():
    called = calls((PACKAGE / "trainer.py").read_text())
    assert set(STEP) <= called, set(STEP) - called
    functions = {node.name: node for node in ast.parse((PACKAGE / "step.py").read_text()).body
                 if isinstance(node, ast.FunctionDef)}
    assert set(STEP) <= set(functions)
    for name, node in functions.items():                        # explicit inputs, no hidden state
        names = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
        assert not names & {"self", "trainer"}, name


def test_chapters_call_the_step_functions():
    for chapter, names in CHAPTERS.items():
        code = chapter_code(chapter)
        assert "from grpo_edu.step import" in code, chapter
        missing = set(names) - calls(code)
        assert not missing, (chapter, missing)


def test_no_chapter_imports_the_cli():
    for nb in sorted((REPO / "nbs").glob("*.ipynb")):
        imports = r"from grpo_edu\.cli import|import grpo_edu\.cli\b|from grpo_edu import cli\b"
        assert not re.search(imports, "\n".join(chapter_code(nb.stem).splitlines())), nb.name
