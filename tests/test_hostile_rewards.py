"""Reward functions that misbehave, as users write them: in the training script (__main__) or in a module named on the
command line. None may end a run in silence: a crash, `sys.exit` or a wrong shape is one clear error that names the
function, and a reward that runs on and on is said while it runs."""
import os
import subprocess
import sys
import textwrap
import pytest

SCRIPT = textwrap.dedent('''
    import sys, time
    import grpo_edu.rewards
    from grpo_edu import GRPOConfig, GRPOTrainer
    from grpo_edu.toy import addition_dataset, toy_model, toy_tokenizer

    grpo_edu.rewards.SLOW_CALL_SECONDS = 0.5       # say a slow reward sooner than the default minute

    def reward(completions, **kwargs):
        BODY

    tok = toy_tokenizer()
    args = GRPOConfig(output_dir=sys.argv[1], num_generations=4, per_device_train_batch_size=8, max_steps=1,
                      max_completion_length=4, save_steps=0, use_cpu=True)
    GRPOTrainer(toy_model(tok), [reward], args, addition_dataset(8, seed=0), processing_class=tok).train()
    print("TRAINED")
''')


def run_script(tmp_path, body: str) -> subprocess.CompletedProcess:
    script = tmp_path / "train.py"
    script.write_text(SCRIPT.replace("BODY", body))
    return subprocess.run([sys.executable, str(script), str(tmp_path / "run")], capture_output=True, text=True,
                          timeout=600, cwd=tmp_path)


@pytest.mark.parametrize("body, says", [
    ("sys.exit(0)", "`reward` raised SystemExit: 0"),                       # was: status 0, nothing said
    ("raise RuntimeError('no grader')", "`reward` raised RuntimeError: no grader — on row 0"),
    ("return {'score': 1.0}", "`reward` returned dict values for 8 completions"),
    ("return [1.0] * (len(completions) - 1)", "`reward` returned 7 values for 8 completions"),
])
def test_a_reward_in_main_that_fails_stops_the_run_with_its_name(tmp_path, body, says):
    out = run_script(tmp_path, body)
    assert out.returncode == 1 and "TRAINED" not in out.stdout
    assert says in out.stderr, out.stderr[-2000:]


def test_a_slow_reward_is_said_while_it_runs(tmp_path):
    out = run_script(tmp_path, "time.sleep(1.5)\n    return [0.0] * len(completions)")
    assert out.returncode == 0 and "TRAINED" in out.stdout, out.stderr[-2000:]
    assert "reward function `reward` has run for 0.5 s on 8 completions and has not returned" in out.stderr


def test_a_module_reward_that_calls_sys_exit_is_one_paragraph(tmp_path):
    "grpo-edu train --reward_funcs quitter.reward: exit 2, the reason, no traceback (not a silent exit 0)."
    (tmp_path / "quitter.py").write_text("import sys\n\ndef reward(completions, **kwargs):\n    sys.exit(0)\n")
    cli = os.path.join(os.path.dirname(sys.executable), "grpo-edu")
    out = subprocess.run([cli, "train", "--max_steps", "1", "--reward_funcs", "quitter.reward", "--save_steps", "0",
                          "--output_dir", str(tmp_path / "run")], capture_output=True, text=True, timeout=900,
                         cwd=tmp_path)
    assert out.returncode == 2, out.stderr[-2000:]
    assert "`reward` raised SystemExit: 0" in out.stderr and "Traceback" not in out.stderr


def test_a_completion_budget_no_memory_holds_is_one_paragraph(tmp_path):
    "A valid but pathological config: a 10^12-token completion budget is refused before its cache, exit 2."
    cli = os.path.join(os.path.dirname(sys.executable), "grpo-edu")
    out = subprocess.run([cli, "train", "--max_steps", "1", "--max_completion_length", str(10**12), "--save_steps",
                          "0", "--output_dir", str(tmp_path / "run")], capture_output=True, text=True, timeout=900,
                         cwd=tmp_path)
    assert out.returncode == 2, out.stderr[-2000:]
    assert "needs a KV cache of" in out.stderr and "Traceback" not in out.stderr
