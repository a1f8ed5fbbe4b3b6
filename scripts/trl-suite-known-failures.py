"""Regenerate tests/trl_suite/known_failures.py: run TRL's GRPO tests against grpo_edu without the list, and
record each failing test with its cause, read from the error it raised.

    python scripts/trl-suite-known-failures.py
"""
import os
import re
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "tests" / "trl_suite" / "known_failures.py"
# (pattern in the error, cause): the first pattern an error matches names its cause.
CAUSES = [
    ("unexpected keyword", "a TRL / TrainingArguments field grpo_edu does not take"),
    ("caplog|logger|warning", "a TRL warning, on TRL's logger, that grpo_edu does not emit"),
    ("AttributeError", "a TRL trainer internal the test reaches for (a private method or attribute)"),
    ("GRPOEduError|ValueError|TypeError", "input TRL accepts that grpo_edu refuses, or another error contract"),
    ("", "another check of the test: see its assertion"),
]
HEADER = '"""TRL\'s GRPO tests that fail against grpo_edu today, by cause (scripts/trl-suite-known-failures.py)."""'


def failures(junit: Path) -> dict:
    "{'Class::test[param]': cause number} of the failing tests of TRL's file in a JUnit report."
    known = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        failure = case.find("failure") if case.find("failure") is not None else case.find("error")
        _, found, cls = case.get("classname", "").partition("test_trl_grpo_trainer")
        if failure is None or not found:
            continue
        text = (failure.get("message") or "") + (failure.text or "")
        cause = next(i for i, (pattern, _) in enumerate(CAUSES) if re.search(pattern, text))
        node = f"{cls.lstrip('.')}::{case.get('name')}" if cls else case.get("name")
        known[node] = cause + 1
    return known


def main() -> None:
    junit = Path(tempfile.mkdtemp()) / "trl-suite.xml"
    env = {**os.environ, "GRPO_EDU_TRL_SUITE_IGNORE_KNOWN": "1"}
    command = [sys.executable, "-m", "pytest", "tests/trl_suite", "-q", "-n", "2", "-p", "no:cacheprovider",
               f"--junitxml={junit}"]
    subprocess.run(command, cwd=ROOT, env=env)
    known = failures(junit)
    lines = [HEADER, "", "CAUSES = {"]
    lines += [f"    {i + 1}: {why!r}," for i, (_, why) in enumerate(CAUSES)]
    lines += ["}", "", "KNOWN = {"]
    lines += [f"    {node!r}: {cause}," for node, cause in sorted(known.items())]
    OUT.write_text("\n".join(lines + ["}", ""]))
    print(f"{len(known)} known failures written to {OUT}")


if __name__ == "__main__":
    main()
