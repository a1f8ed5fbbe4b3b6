"""The package keeps the import directions of its design: each module imports only from its own layer or the layers
above it (errors, then the core math, then data/rewards/rollout, evaluation, training, and the faces last)."""
import ast
from pathlib import Path
import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "grpo_edu"

LAYER = {"errors": 0, "docs": 0,
         "logprobs": 1, "advantages": 1, "kl": 1, "loss": 1,
         "data": 2, "toy": 2, "toy_tools": 2, "calculators": 2, "tabular": 2, "rewards": 2, "rollout": 2, "engine": 2,
         "tools": 2, "usercode": 2, "environments": 2,
         "evaluation": 3,
         "config": 4, "preflight": 4, "recipe": 4, "trainer": 4, "launch": 4, "plots": 4, "monitor": 4, "checkpoint": 4, "integrity": 4, "policy": 4, "distributed": 4, "entropy": 4,
         "step": 4, "callbacks": 4, "trl_surface": 4, "eval_step": 4, "health": 4,
         "cli": 5, "bench": 5, "memory": 5, "doctor": 5}
# The toy's warm start stops at a held-out accuracy; the tool toy measures with the trainer's evaluation.
ALSO_ALLOWED = {("toy", "evaluation"), ("toy_tools", "evaluation")}
# sampling knows no task, and a task no sampler
SAME_LAYER_FORBIDDEN = {("rollout", "data"), ("rollout", "rewards"), ("rollout", "toy"), ("engine", "rollout"),
                        ("data", "rollout"), ("rewards", "rollout")}
THIRD_PARTY_FORBIDDEN = {1: {"accelerate", "datasets", "transformers"}, 2: {"accelerate"}, 3: {"accelerate"}}


def imports(module: str) -> tuple[set, set]:
    "The grpo_edu modules and the third-party packages `module` imports, anywhere in its file."
    ours, theirs = set(), set()
    for node in ast.walk(ast.parse((PACKAGE / f"{module}.py").read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level == 1 and node.module is None: continue   # `from . import __version__`
            if node.level == 1: ours.add(node.module.split(".")[0])
            elif node.module.startswith("grpo_edu."): ours.add(node.module.split(".")[1])
            else: theirs.add(node.module.split(".")[0])
        elif isinstance(node, ast.Import):
            theirs |= {alias.name.split(".")[0] for alias in node.names}
    return ours - {module}, theirs


def test_every_module_has_a_layer():
    modules = {p.stem for p in PACKAGE.glob("*.py")} - {"__init__", "_modidx"}
    assert modules == set(LAYER), f"give each module a layer in tests/test_layers.py: {modules ^ set(LAYER)}"


@pytest.mark.parametrize("module", sorted(LAYER))
def test_imports_follow_the_layers(module):
    ours, theirs = imports(module)
    upward = {m for m in ours if LAYER[m] > LAYER[module] and (module, m) not in ALSO_ALLOWED}
    assert not upward, f"{module} (layer {LAYER[module]}) imports {sorted(upward)} from a later layer"
    sideways = {m for m in ours if (module, m) in SAME_LAYER_FORBIDDEN}
    assert not sideways, f"{module} imports {sorted(sideways)}"
    assert not theirs & THIRD_PARTY_FORBIDDEN.get(LAYER[module], set()), f"{module} imports {theirs}"


def test_importing_the_config_loads_no_sampler():
    "The config dataclass is read by every face; importing it must not load the rollout's CUDA-graph engine."
    import os, subprocess, sys
    check = "import grpo_edu.config, sys; assert 'grpo_edu.engine' not in sys.modules, 'grpo_edu.engine loaded'"
    env = {**os.environ, "PYTHONPATH": str(PACKAGE.parent)}
    done = subprocess.run([sys.executable, "-c", check], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]


def test_importing_the_config_loads_no_data_tool_toy_or_training_module():
    "Every face reads a GRPOConfig: importing it loads the core math and errors, and no module that checks a machine."
    import os, subprocess, sys
    heavy = ["grpo_edu.data", "grpo_edu.toy", "grpo_edu.toy_tools", "grpo_edu.tools", "grpo_edu.trainer",
             "grpo_edu.preflight", "grpo_edu.checkpoint", "grpo_edu.rewards", "grpo_edu.rollout"]
    check = f"import sys, grpo_edu.config; loaded = [m for m in {heavy!r} if m in sys.modules]; assert not loaded, loaded"
    env = {**os.environ, "PYTHONPATH": str(PACKAGE.parent)}
    done = subprocess.run([sys.executable, "-c", check], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]


def test_the_import_graph_has_no_cycle():
    "Following imports, in-function ones included, never leads back to where it started."
    graph = {m: imports(m)[0] & set(LAYER) for m in LAYER}
    done, on_path = set(), []

    def visit(module):
        if module in on_path: raise AssertionError(f"import cycle: {' -> '.join(on_path + [module])}")
        if module in done: return
        on_path.append(module)
        for imported in sorted(graph[module]): visit(imported)
        on_path.pop()
        done.add(module)

    for module in sorted(graph): visit(module)
