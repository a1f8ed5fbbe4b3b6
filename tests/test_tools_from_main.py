"""Tools defined where a worker cannot import them (the training script, a notebook kernel) are sent to the workers
by value, so they are as isolated as an imported tool: a timeout stops a call that holds the GIL, and a tool that
calls os._exit costs a worker, not the run. Each probe runs as a user would: a script, a Jupyter kernel, a trainer."""
import json
import os
import subprocess
import sys
import textwrap
import nbformat
import pytest
from nbclient import NotebookClient

# What a user writes in a script or a notebook cell: tools that misbehave, and calls to them.
PROBE = textwrap.dedent('''
    import json, os, re
    from grpo_edu.tools import answer_calls

    def spin(x: int) -> int:
        """Backtrack for minutes inside the regex engine, holding the GIL.

        Args:
            x: ignored
        """
        return int(bool(re.match("(a+)+$", "a" * 40 + "b")))

    def leave(x: int) -> int:
        """End the process at once.

        Args:
            x: ignored
        """
        os._exit(0)

    def where(x: int) -> str:
        """The process that runs the call.

        Args:
            x: ignored
        """
        return str(os.getpid())

    tools = {"spin": spin, "leave": leave, "where": where}
    calls = [{"name": name, "arguments": {"x": 1}} for name in tools]
    answers = answer_calls(tools, calls, timeout=0.3, workers=3)
    print("PROBE " + json.dumps({"answers": [[m["content"], failed] for m, failed in answers],
                                 "pid": os.getpid()}))
''')


def check(report: dict) -> None:
    (spun, spin_failed), (left, leave_failed), (pid, where_failed) = report["answers"]
    assert spin_failed and "timed out after 0.3 s" in spun
    assert leave_failed and "ended its worker process (exit status 0)" in left
    assert not where_failed and int(pid) != report["pid"]           # it ran in a worker, not here


def probe_line(text: str) -> dict:
    return json.loads(next(line for line in text.splitlines() if line.startswith("PROBE "))[6:])


def test_tools_defined_in_a_script_are_isolated(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(PROBE)
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300,
                         cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "runs in this process" not in out.stderr
    check(probe_line(out.stdout))


def test_tools_defined_in_a_notebook_kernel_are_isolated(tmp_path):
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(PROBE)])
    NotebookClient(nb, kernel_name="python3", timeout=300,
                   resources={"metadata": {"path": str(tmp_path)}}).execute()
    outputs = nb.cells[0].outputs
    assert not [o for o in outputs if o.get("output_type") == "error"]
    stdout = "".join(o.get("text", "") for o in outputs if o.get("name") == "stdout")
    stderr = "".join(o.get("text", "") for o in outputs if o.get("name") == "stderr")
    assert "runs in this process" not in stderr
    check(probe_line(stdout))


TRAINER = textwrap.dedent('''
    import json, os, re, sys
    from unittest.mock import patch
    from grpo_edu.config import GRPOConfig
    from grpo_edu.rewards import accuracy_reward
    from grpo_edu.tools import scripted_generate
    from grpo_edu.toy import toy_model
    from grpo_edu.toy_tools import multiplication_dataset, toy_tool_tokenizer
    from grpo_edu.trainer import GRPOTrainer

    def multiply(a: int, b: int) -> int:
        """Multiply two integers.

        Args:
            a: the first factor
            b: the second factor
        """
        with open(os.environ["PIDS"], "a") as f: f.write(f"{os.getpid()}\\n")
        os._exit(0)                        # every call ends the process it runs in

    def caller(text):
        results = re.findall(r"<tool_response>(.*?)</tool_response>", text)
        if results: return results[-1] + "<eos>"
        a, b = re.findall(r"(\\d+)\\*(\\d+)=", text)[-1]
        return f"<tool_call>[multiply(a={a},b={b})]</tool_call><eos>"

    tok, rows = toy_tool_tokenizer(), multiplication_dataset(8, seed=0)
    args = GRPOConfig(output_dir=sys.argv[1], num_generations=2, per_device_train_batch_size=4,
                      max_completion_length=40, max_steps=1, use_cpu=True, max_tool_calling_iterations=1,
                      logging_steps=1, save_steps=0, tool_timeout=30)
    trainer = GRPOTrainer(toy_model(tok), [accuracy_reward], args, train_dataset=rows, processing_class=tok,
                          tools=[multiply])
    with patch("grpo_edu.tools.generate_completions", scripted_generate(caller)):
        trainer.train()
    print("PROBE " + json.dumps({"pid": os.getpid(), "row": trainer.state.log_history[0]}))
''')


def test_a_trainers_tool_from_main_is_isolated(tmp_path):
    "GRPOTrainer(..., tools=[f]) with f in the training script: the calls run in workers; a crash is a result."
    script, pids = tmp_path / "train.py", tmp_path / "pids.txt"
    script.write_text(TRAINER)
    env = {**os.environ, "PIDS": str(pids)}
    out = subprocess.run([sys.executable, str(script), str(tmp_path / "run")], capture_output=True, text=True,
                         timeout=600, cwd=tmp_path, env=env)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "runs in this process" not in out.stderr
    report = probe_line(out.stdout)
    called = {int(p) for p in pids.read_text().split()}
    assert called and report["pid"] not in called                  # every call ran in a worker
    assert report["row"]["tools/call_frequency"] > 0
    assert report["row"]["tools/failure_frequency"] == 1.0          # each call failed, and the run went on
