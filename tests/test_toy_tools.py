"""The tool toy (grpo_edu.toy_tools): the trainer's evaluation runs tool rollouts, and GRPO on configs/toy-tools.yaml
makes a tiny model learn to call its tool: held-out accuracy and tool-call rate both rise, beyond their 95% intervals."""
import re
from pathlib import Path
from unittest.mock import patch
import pytest
from grpo_edu.config import GRPOConfig
from grpo_edu.evaluation import wilson_interval
from grpo_edu.rewards import accuracy_reward
from grpo_edu.tools import scripted_generate
from grpo_edu.toy import toy_model
from grpo_edu.toy_tools import has_call_parser, multiplication_dataset, multiply, toy_tool_tokenizer
from grpo_edu.trainer import GRPOTrainer

# Where transformers cannot parse the toy's Python-syntax calls, the tool toy refuses to run (07b_toy_tools tests it).
pytestmark = pytest.mark.skipif(not has_call_parser(), reason="this transformers has no python-call-list parser")

ROOT = Path(__file__).resolve().parents[1]


def caller(text: str) -> str:
    "A scripted policy: call multiply on the question, then copy the tool's result."
    results = re.findall(r"<tool_response>(.*?)</tool_response>", text)
    if results: return results[-1] + "<eos>"
    a, b = re.findall(r"(\d+)\*(\d+)=", text)[-1]
    return f"<tool_call>[multiply(a={a},b={b})]</tool_call><eos>"


def guesser(text: str) -> str:
    "A scripted policy that answers directly, with a product it cannot compute."
    return "1000<eos>"


@pytest.mark.parametrize("respond, expected", [(caller, (1.0, 1.0)), (guesser, (0.0, 0.0))])
def test_trainer_evaluates_with_tool_rollouts(tmp_path, respond, expected):
    "GRPOTrainer.evaluate with tools: greedy multi-turn rollouts, their accuracy and tool-call rate."
    tok, held_out = toy_tool_tokenizer(), multiplication_dataset(12, seed=1)
    args = GRPOConfig(output_dir=str(tmp_path), num_generations=2, per_device_train_batch_size=4,
                      max_completion_length=40, max_steps=1, use_cpu=True, max_tool_calling_iterations=1)
    trainer = GRPOTrainer(toy_model(tok), [accuracy_reward], args, train_dataset=held_out,
                          eval_dataset=held_out, processing_class=tok, tools=[multiply])
    with patch("grpo_edu.tools.generate_completions", scripted_generate(respond)):
        result = trainer.accuracy()
    # A single-turn evaluation would score the caller's call text ("[multiply(a=..,b=..)]"), not its answer.
    assert (result["accuracy"], result["tool_call_rate"], result["n"]) == (*expected, 12)


def rates(evaluation: dict) -> dict:
    "Each rate of an evaluation with its 95% Wilson interval."
    n = evaluation["n"]
    return {k: wilson_interval(round(evaluation[k] * n), n) for k in ("accuracy", "tool_call_rate")}


@pytest.mark.slow
def test_recipe_learns_to_call_the_tool(tmp_path):
    "configs/toy-tools.yaml (seed 0): accuracy and tool-call rate rise beyond their 95% Wilson intervals; no problem."
    from grpo_edu.recipe import load_config
    from grpo_edu.launch import trainer_from_config
    args = load_config(ROOT / "configs" / "toy-tools.yaml")
    args.output_dir = str(tmp_path / "run")
    summary = trainer_from_config(args).train()
    before, after = rates(summary["eval_before"]), rates(summary["eval_after"])
    for rate in ("accuracy", "tool_call_rate"):
        assert after[rate][0] > before[rate][1], (rate, summary["eval_before"], summary["eval_after"])
    from grpo_edu.doctor import examine
    diagnosis = examine(tmp_path / "run")                  # the doctor finds the run healthy, and learning
    assert not diagnosis.of_kind("problem") and "learning" in {f.name for f in diagnosis.of_kind("expected")}


def test_calculator_round_trips_with_qwen(shared):
    "Qwen2.5's chat template with `calculator`: a scripted call, its result and the answer, scored right."
    from transformers import AutoTokenizer
    from grpo_edu.data import gsm8k_dataset
    from grpo_edu.evaluation import made_tool_call
    from grpo_edu.tools import check_tool_tokenizer, encode_tool_prompts, tool_rollout
    from grpo_edu.toy_tools import calculator
    tok = check_tool_tokenizer(AutoTokenizer.from_pretrained(shared / "qwen2.5-tokenizer"))
    row = gsm8k_dataset("test", shared / "gsm8k")[0]
    ids, mask = encode_tool_prompts(tok, [row["prompt"]], [calculator])
    def respond(text: str) -> str:
        "Call the calculator on the reference answer's expression, then copy its result."
        results = re.findall(r"<tool_response>\n(.*?)\n</tool_response>", text)
        if results: return f"So the answer is {results[-1]}.<|im_end|>"
        arguments = '{"expression": "' + row["answer"] + ' * 1"}'
        return f'<tool_call>\n{{"name": "calculator", "arguments": {arguments}}}\n</tool_call><|im_end|>'
    out = tool_rollout(None, tok, ids, mask, [calculator], 200, generate=scripted_generate(respond))
    messages = out.completions[0]
    assert [m["role"] for m in messages] == ["assistant", "tool", "assistant"], messages
    assert messages[0]["tool_calls"][0]["function"]["arguments"] == {"expression": row["answer"] + " * 1"}
    assert messages[1]["content"] == row["answer"] and out.tool_failures == 0
    assert accuracy_reward(out.completions, [row["answer"]]) == [1.0] and made_tool_call(messages)
    sampled = out.tool_mask[0][out.completion_mask[0].bool()]
    assert 0 < int((sampled == 0).sum()) < len(sampled)        # the tool's turn is masked out of the loss


def test_eval_command_runs_tool_rollouts(tmp_path, capsys):
    "`grpo-edu eval --tools`: a saved tool model is scored on its final answers, with its tool-call rate."
    import json
    from grpo_edu.cli import cmd_eval
    tok = toy_tool_tokenizer()
    toy_model(tok).save_pretrained(tmp_path / "model")
    tok.save_pretrained(tmp_path / "model")
    argv = ["--model", str(tmp_path / "model"), "--dataset", "multiply", "--max_samples", "6",
            "--max_new_tokens", "40", "--tools", "grpo_edu.toy_tools:multiply",
            "--max_tool_calling_iterations", "1", "--output", str(tmp_path / "eval.json")]
    with patch("grpo_edu.tools.generate_completions", scripted_generate(caller)):
        assert cmd_eval(argv) == 0
    result = json.loads((tmp_path / "eval.json").read_text())
    assert (result["n"], result["pass@1"], result["tool_call_rate"]) == (6, 1.0, 1.0)
    assert "tool-call rate 100.0%" in capsys.readouterr().out
