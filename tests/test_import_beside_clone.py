"""A script beside a folder named grpo_edu (a clone, say) imports the installed package, not the folder.

Python looks in a script's own folder first. A clone's top folder has no `__init__.py`, so it would be imported
as a namespace package, and `from grpo_edu import GRPOConfig` would fail with "unknown location", whenever the
install is a finder that Python asks only after its path entries (setuptools' default editable install of a
flat layout). The package's layout is the plain one (`pyproject.toml`), which an editable install puts on
`sys.path` as a folder, and a regular package anywhere on the path wins over a namespace folder."""
import subprocess, sys


def test_a_folder_named_grpo_edu_beside_a_script_does_not_shadow_the_package(tmp_path):
    (tmp_path / "grpo_edu").mkdir()                     # a clone's top folder: no __init__.py
    (tmp_path / "grpo_edu" / "README.md").write_text("a clone\n")
    script = "from grpo_edu import GRPOConfig\nimport grpo_edu\nprint(grpo_edu.__file__)\n"
    (tmp_path / "script.py").write_text(script)
    run = subprocess.run([sys.executable, "script.py"], cwd=tmp_path, capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip().endswith("__init__.py") and str(tmp_path) not in run.stdout
