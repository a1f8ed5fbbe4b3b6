"""Tools in a rollout (grpo_edu.tools): refusals of bad tools and tokenizers, parsing Qwen2.5's tool calls, every
failure mode answered and counted while the rollout goes on, the tool mask and the length budget, the static engine
kept across turns, and the multi-turn loop equal to TRL 1.16's `_tool_call_loop` on scripted completions."""
import asyncio, copy, itertools, os, re, time, warnings
from types import SimpleNamespace
import pytest
import torch
from conftest import SHARED
from grpo_edu.errors import GRPOEduError
from grpo_edu.rollout import generate_completions
from grpo_edu.toy import toy_model, toy_tokenizer
from grpo_edu.tools import (call_tool, check_tool_tokenizer, check_tools, encode_tool_prompts, parse_turn,
                            scripted_generate, tool_metrics, tool_rollout, tool_schemas, tool_suffix_ids)
from toolbox import add, backtrack, crash, explode, flood, hang, leave, multiply, silent, whoami


TOOLS = [multiply, add, explode, hang, silent]
QUESTIONS = ["What is 12*13?", "What is 0*5?", "What is 2*3?", "What is 3*4?"]


@pytest.fixture(scope="module")
def qwen():
    "The real Qwen2.5 tokenizer from ../shared, ready for tools (skips where ../shared is absent)."
    from transformers import AutoTokenizer
    if not (SHARED / "qwen2.5-tokenizer").exists():
        pytest.skip(f"{SHARED} is absent: the Qwen2.5 tokenizer lives in ../shared beside the checkout (or in "
                    "the folder $GRPO_EDU_DATA names)")
    return check_tool_tokenizer(AutoTokenizer.from_pretrained(SHARED / "qwen2.5-tokenizer"))


def prompts_for(questions):
    return [[{"role": "user", "content": q}] for q in questions]


def call(name: str, arguments: str) -> str:
    return f'<tool_call>\n{{"name": "{name}", "arguments": {arguments}}}\n</tool_call><|im_end|>'


def respond_with(first: dict):
    "A scripted policy: the first turn of question 'What is a*b?' is first[a]; after a tool turn, an answer."
    def respond(text: str) -> str:
        results = re.findall(r"<tool_response>\n(.*?)\n</tool_response>", text)
        if results: return f"The answer is {results[-1]}.<|im_end|>"
        a, b = re.findall(r"What is (\d+)\*(\d+)", text)[-1]
        return first.get(a, call("multiply", f'{{"a": {a}, "b": {b}}}')).replace("B", b)
    return respond


def test_bad_tools_are_refused():
    with pytest.raises(GRPOEduError, match="not callable"): check_tools([multiply, "add"])
    def twin():
        def multiply(a: int) -> int:
            """Twice.

            Args:
                a: a number
            """
        return multiply
    with pytest.raises(GRPOEduError, match="two tools are named 'multiply'"): check_tools([multiply, twin()])
    def undocumented(a: int): return a
    with pytest.raises(GRPOEduError, match="cannot be described"): check_tools([undocumented])
    assert check_tools(TOOLS)["add"] is add


def test_toy_tokenizer_has_no_chat_template_so_tools_are_refused():
    with pytest.raises(GRPOEduError, match="this tokenizer has none") as e: check_tool_tokenizer(toy_tokenizer())
    assert "Qwen2.5-Instruct" in str(e.value)


def test_template_that_drops_the_call_is_refused(qwen):
    plain = copy.deepcopy(qwen)
    plain.chat_template = "{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}"
    plain.response_template = None
    with pytest.raises(GRPOEduError, match="drops the tool call"): check_tool_tokenizer(plain)


def test_qwen_prompt_shows_the_tools_and_the_tool_turn_tokens(qwen):
    ids, mask = encode_tool_prompts(qwen, prompts_for(QUESTIONS[:1]), [multiply, add])
    text = qwen.decode(ids[0][mask[0].bool()])
    assert "# Tools" in text and '"name": "multiply"' in text and '"name": "add"' in text
    # the same tokens as the chat template gives the tokenizer's own tools= rendering
    direct = qwen.apply_chat_template(prompts_for(QUESTIONS[:1])[0], tools=[multiply, add], tokenize=True,
                                      add_generation_prompt=True, return_dict=False)
    assert ids[0][mask[0].bool()].tolist() == direct
    suffix = tool_suffix_ids(qwen, [{"role": "tool", "name": "multiply", "content": "156"}])
    assert qwen.decode(suffix) == ("\n<|im_start|>user\n<tool_response>\n156\n</tool_response><|im_end|>\n"
                                   "<|im_start|>assistant\n")
    with pytest.raises(GRPOEduError, match="conversational prompts"): encode_tool_prompts(qwen, ["hi"], [add])


def test_parse_qwen_tool_calls(qwen):
    prefix = encode_tool_prompts(qwen, prompts_for(QUESTIONS[:1]), TOOLS)[0][0].tolist()
    ids = lambda s: qwen(s, add_special_tokens=False)["input_ids"]
    schemas = tool_schemas(TOOLS)
    two = "Let me see.\n" + call("multiply", '{"a": "12", "b": 13}')[:-10] + "\n" + call("add", '{"a": 1, "b": 2}')
    message, calls = parse_turn(qwen, ids(two), prefix, schemas)
    assert message["content"] == "Let me see."
    assert calls == [{"name": "multiply", "arguments": {"a": 12, "b": 13}},       # typed by the schema
                     {"name": "add", "arguments": {"a": 1, "b": 2}}]
    assert parse_turn(qwen, ids("156<|im_end|>"), prefix, schemas) == ({"role": "assistant", "content": "156"}, [])
    broken = ids(call("multiply", '{"a": 12, "b": }'))
    assert parse_turn(qwen, broken, prefix, schemas)[1][0]["error"].startswith("Malformed tool call")
    assert parse_turn(qwen, broken[:6], prefix, schemas, ended=False)[1] == []   # cut by the limit
    assert parse_turn(qwen, ids(call("multiply", '"12, 13"')), prefix, schemas)[1][0]["error"].startswith(
        "Tool call arguments must be a JSON object")


FAILURES = {   # the first turn of 'What is a*b?' for a = 2, and what its error result says
    "unknown tool": (call("divide", '{"a": 2, "b": B}'), "Tool divide not found."),
    "bad arguments": (call("multiply", '{"a": 2, "c": B}'), "unexpected keyword argument 'c'"),
    "malformed JSON": (call("multiply", '{"a": 2, "b": B'), "Malformed tool call"),
    "an exception": (call("explode", '{"x": 2}'), "the tool broke"),
    "a timeout": (call("hang", '{"x": 2}'), "Tool hang timed out after 0.3 s."),
    "a result that is not text": (call("silent", '{"x": 2}'), "returned a NoneType, not text"),
    # A tool runs in a worker process: what would end or stall the run costs that worker, which is replaced.
    "os._exit(0)": (call("leave", '{"x": 2}'), "Tool leave ended its worker process (exit status 0)"),
    "a segmentation fault": (call("crash", '{"x": 2}'), "Tool crash ended its worker process (killed by SIGSEGV)"),
    "the GIL held": (call("backtrack", '{"x": 2}'), "Tool backtrack timed out after 0.3 s."),
}
HOSTILE = [leave, crash, backtrack, flood, whoami]


@pytest.mark.parametrize("failure", list(FAILURES))
def test_every_failure_is_answered_counted_and_the_rollout_goes_on(qwen, failure):
    first, expected = FAILURES[failure]
    ids, mask = encode_tool_prompts(qwen, prompts_for(QUESTIONS[:3]), TOOLS + HOSTILE)
    start = time.perf_counter()
    out = tool_rollout(None, qwen, ids, mask, TOOLS + HOSTILE, 512, tool_timeout=0.3,
                       generate=scripted_generate(respond_with({"0": "Zero.<|im_end|>", "2": first})))
    assert time.perf_counter() - start < 10
    failed = out.completions[2]
    assert [m["role"] for m in failed] == ["assistant", "tool", "assistant"]     # answered, then continued
    assert failed[1]["content"].startswith("{'error': ") and expected in failed[1]["content"]
    assert failed[2]["content"].startswith("The answer is {'error'")
    assert out.completions[0][-1]["content"] == "The answer is 156."            # the other rows are unharmed
    assert out.completions[1] == [{"role": "assistant", "content": "Zero."}]
    assert (out.tool_calls, out.tool_failures) == (2, 1)
    assert tool_metrics(out.tool_calls, out.tool_failures, 3) == {"tools/call_frequency": 2 / 3,
                                                                  "tools/failure_frequency": 0.5}


def test_a_long_result_is_cut_before_it_is_tokenised(qwen):
    "A tool that returns 2 MB: the model reads its first max_tool_result_chars characters and a marker."
    ids, mask = encode_tool_prompts(qwen, prompts_for(QUESTIONS[2:3]), HOSTILE)
    respond = respond_with({"2": call("flood", '{"x": 2}')})
    out = tool_rollout(None, qwen, ids, mask, HOSTILE, 512, max_tool_result_chars=20,
                       generate=scripted_generate(respond))
    assert out.completions[0][1] == {"role": "tool", "name": "flood",
                                     "content": "7" * 20 + "… [cut: 2000000 characters, the first 20 kept]"}
    assert (out.tool_calls, out.tool_failures) == (1, 0)


def test_the_calls_of_a_turn_run_side_by_side_in_worker_processes(qwen):
    "Four rows call at once: four worker processes answer, none of them this one."
    import os
    questions = ["What is 2*3?", "What is 3*4?", "What is 4*5?", "What is 5*6?"]
    ids, mask = encode_tool_prompts(qwen, prompts_for(questions), [whoami])
    first = {a: call("whoami", '{"x": 1}') for a in "2345"}
    out = tool_rollout(None, qwen, ids, mask, [whoami], 512, tool_workers=4,
                       generate=scripted_generate(respond_with(first)))
    pids = {int(row[1]["content"]) for row in out.completions}
    assert len(pids) == 4 and os.getpid() not in pids


def test_a_tool_defined_in_main_runs_in_a_worker(qwen):
    "A tool from __main__ (a notebook, the training script) is sent to a worker by value: it runs isolated."
    def double(x: int) -> int:
        """Double, and say where.

        Args:
            x: a number
        """
        return f"{2 * x} in {os.getpid()}"
    double.__module__ = "__main__"
    ids, mask = encode_tool_prompts(qwen, prompts_for(QUESTIONS[2:3]), [double])
    respond = respond_with({"2": call("double", '{"x": 21}')})
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)        # no "runs in this process"
        out = tool_rollout(None, qwen, ids, mask, [double], 512, generate=scripted_generate(respond))
    answer, pid = out.completions[0][1]["content"].split(" in ")
    assert answer == "42" and int(pid) != os.getpid()


def test_async_tool_and_the_tool_mask(qwen):
    ids, mask = encode_tool_prompts(qwen, prompts_for(QUESTIONS[3:]), TOOLS)
    respond = respond_with({"3": call("add", '{"a": 3, "b": B}')})
    out = tool_rollout(None, qwen, ids, mask, TOOLS, 512, generate=scripted_generate(respond), return_logprobs=True)
    assert out.completions[0][1] == {"role": "tool", "name": "add", "content": "7"}
    tokens = lambda s: qwen(s, add_special_tokens=False)["input_ids"]
    first, answer = tokens(call("add", '{"a": 3, "b": 4}')), tokens("The answer is 7.<|im_end|>")
    suffix = tool_suffix_ids(qwen, [out.completions[0][1]])
    n = len(first) + len(suffix) + len(answer)
    assert out.completion_ids[0].tolist() == first + suffix + answer
    assert out.tool_mask[0].tolist() == [1] * len(first) + [0] * len(suffix) + [1] * len(answer)
    assert out.completion_mask[0].tolist() == [1] * n and not out.truncated[0]
    assert out.logprobs.shape == (1, n)


def test_budget_rolls_back_a_tool_turn_and_cuts_a_continuation(qwen):
    ids, mask = encode_tool_prompts(qwen, prompts_for(QUESTIONS[:1]), TOOLS)
    generate = scripted_generate(respond_with({}))
    m = len(qwen(call("multiply", '{"a": 12, "b": 13}'), add_special_tokens=False)["input_ids"])
    s = len(tool_suffix_ids(qwen, [{"role": "tool", "name": "multiply", "content": "156"}]))
    exact = tool_rollout(None, qwen, ids, mask, TOOLS, m + s, generate=generate)      # room for the tool turn only
    assert exact.tool_mask[0].tolist() == [1] * m + [0] * s and bool(exact.truncated[0])
    rolled = tool_rollout(None, qwen, ids, mask, TOOLS, m + s - 1, generate=generate)
    assert rolled.completion_mask[0].sum() == m and rolled.tool_mask.min() == 1
    assert [x["role"] for x in rolled.completions[0]] == ["assistant"] and rolled.tool_calls == 1
    cut = tool_rollout(None, qwen, ids, mask, TOOLS, m + s + 2, generate=generate)
    assert cut.completion_mask[0].sum() == m + s + 2 and bool(cut.truncated[0])


def test_iteration_limit(qwen):
    ids, mask = encode_tool_prompts(qwen, prompts_for(QUESTIONS[:2]), TOOLS)
    always = scripted_generate(lambda text: call("multiply", '{"a": 1, "b": 2}'))
    for limit, calls in [(0, 0), (1, 2), (3, 6)]:
        out = tool_rollout(None, qwen, ids, mask, TOOLS, 4096, max_tool_calling_iterations=limit, generate=always)
        assert out.tool_calls == calls and [len(c) for c in out.completions] == [2 * limit + 1] * 2


@pytest.fixture(scope="module")
def tiny(qwen):
    "A tiny random Qwen2 over Qwen2.5's vocabulary, with room for the tool prompts."
    model = toy_model(qwen, hidden_size=16, num_layers=1)
    model.config.max_position_embeddings = 4096
    return model


def test_without_calls_it_is_generate_completions(qwen, tiny):
    ids, mask = encode_tool_prompts(qwen, prompts_for(QUESTIONS[:2]), [multiply])
    plain = generate_completions(tiny, qwen, ids, mask, 6, do_sample=False, engine="hf")
    out = tool_rollout(tiny, qwen, ids, mask, [multiply], 6, do_sample=False, engine="hf")
    assert out.tool_calls == 0 and out.tool_mask.min() == 1
    assert torch.equal(out.completion_ids, plain[0]) and torch.equal(out.completion_mask, plain[1])
    assert torch.equal(out.truncated, plain[2])


def test_static_engine_is_sized_once_for_every_turn(qwen, tiny):
    from grpo_edu import rollout
    ids, mask = encode_tool_prompts(qwen, prompts_for(QUESTIONS[:2]), [multiply])
    scripted, engines = scripted_generate(respond_with({})), []
    def sample_then_script(model, tokenizer, ids, mask, n, **kw):
        generate_completions(model, tokenizer, ids, mask, n, **kw)               # the real engine, every turn
        engines.append([id(e) for e in rollout._ENGINES[model].values()])
        return scripted(model, tokenizer, ids, mask, n, **kw)
    out = tool_rollout(tiny, qwen, ids, mask, [multiply], 64, generate=sample_then_script, engine="static")
    assert out.tool_calls == 2 and len(engines) == 2                               # two turns
    assert engines[0] == engines[1] and len(engines[0]) == 1                      # one engine, never rebuilt


def trl_loop(tokenizer, prompts, tools, respond, max_completion_length, max_iterations):
    "TRL 1.16's `_tool_call_loop` on a stand-in trainer whose generation is `respond`, as TRL's `_generate` calls it."
    from trl.chat_template_utils import parse_response
    from trl.trainer.grpo_trainer import GRPOTrainer
    eos = tokenizer.eos_token_id
    def complete(context: list) -> list:
        ids = tokenizer(respond(tokenizer.decode(context)), add_special_tokens=False)["input_ids"]
        return (ids[:ids.index(eos) + 1] if eos in ids else ids)[:max_completion_length]
    def single_turn(prompt_ids, images, fields, num_generations, has_tool_images=False):
        return [complete(p) for p in prompt_ids], None
    table = {t.__name__: t for t in tools}
    trainer = SimpleNamespace(
        _sync_tool_dicts=[{n: t for n, t in table.items() if not asyncio.iscoroutinefunction(t)}] * len(prompts),
        _async_tool_dicts=[{}] * len(prompts), max_tool_calling_iterations=max_iterations,
        processing_class=tokenizer, _tokenizer=tokenizer, chat_template=None, chat_template_kwargs={},
        _is_vlm=False, use_vllm=False, model=SimpleNamespace(config=SimpleNamespace(max_position_embeddings=32768)),
        max_completion_length=max_completion_length, environment_factories=None, tools=tools,
        _generate_single_turn=single_turn)
    trainer._get_tool_suffix_ids = lambda messages: GRPOTrainer._get_tool_suffix_ids(trainer, messages)
    prompt_ids = [tokenizer.apply_chat_template(p, tools=tools, tokenize=True, add_generation_prompt=True,
                                                return_dict=False) for p in prompts]
    completion_ids = [complete(p) for p in prompt_ids]
    completions = [[parse_response(tokenizer, c, prefix=p, tools=tools)] for p, c in zip(prompt_ids, completion_ids)]
    return GRPOTrainer._tool_call_loop(trainer, copy.deepcopy(prompts), prompt_ids, completion_ids, completions,
                                       None, None, {})


@pytest.mark.parametrize("budget,limit", [(512, None), (512, 1), (50, None)])
def test_rollout_equals_trl_tool_call_loop(qwen, budget, limit):
    tools = [multiply, explode]           # sync tools: TRL runs async ones on its trainer's event loop
    questions = ["What is 12*13?", "What is 0*5?", "What is 2*3?", "What is 3*4?", "What is 4*4?"]
    first = {"0": "Zero.<|im_end|>", "2": call("divide", '{"a": 2, "b": B}'),
             "3": call("multiply", '{"a": 3, "c": B}'), "4": call("explode", '{"x": 4}')}
    respond = respond_with(first)
    tool_mask, completions, completion_ids, _, calls, failures, _ = trl_loop(
        qwen, prompts_for(questions), tools, respond, budget, limit or 10**9)
    ids, mask = encode_tool_prompts(qwen, prompts_for(questions), tools)
    out = tool_rollout(None, qwen, ids, mask, tools, budget, max_tool_calling_iterations=limit,
                       generate=scripted_generate(respond))
    lengths = out.completion_mask.sum(1).tolist()
    assert [out.completion_ids[i, :n].tolist() for i, n in enumerate(lengths)] == completion_ids
    assert [out.tool_mask[i, :n].tolist() for i, n in enumerate(lengths)] == tool_mask
    assert (out.tool_calls, out.tool_failures) == (calls, failures)
    assert out.completions == completions
    assert calls > 0 and any(0 in m for m in tool_mask)                        # the case has tool turns
    if budget == 50:                                     # 12*13's tool turn fits, 2*3's and 3*4's are rolled back
        assert [len(c) for c in completions] == [3, 1, 1, 1, 3]


def test_trainer_with_tools_equals_trl(tmp_path, qwen, monkeypatch):
    "GRPOTrainer(tools=...) on a scripted multi-turn rollout: TRL 1.16's tool mask, metrics, loss and every gradient."
    from datasets import Dataset
    from trl import GRPOConfig as TRLConfig, GRPOTrainer as TRLTrainer
    from grpo_edu import tools as tools_module
    from grpo_edu.config import GRPOConfig
    from grpo_edu.trainer import GRPOTrainer
    path = tmp_path / "tiny"                             # a folder, so both load the same weights and π_ref from it
    model = toy_model(qwen, hidden_size=16, num_layers=1, seed=0)
    model.config.max_position_embeddings = 4096
    model.save_pretrained(path)
    qwen.save_pretrained(path)
    tools = [multiply, explode]
    def varied():                                        # the two completions of a group differ in their end
        script, n = respond_with({"0": "Zero.<|im_end|>", "2": call("divide", '{"a": 2, "b": B}'),
                                  "3": call("explode", '{"x": 3}')}), itertools.count()
        return lambda text: script(text).replace(".<|im_end|>", "." * (1 + next(n) % 2) + "<|im_end|>")
    rows = [{"prompt": [{"role": "user", "content": q}]} for q in QUESTIONS[:3]]      # 12*13, 0*5, 2*3
    reward = lambda completions, **kw: [float(i % 3) for i in range(len(completions))]
    shared = dict(num_generations=2, per_device_train_batch_size=6, max_completion_length=80, beta=0.04)
    t = TRLTrainer(model=str(path), reward_funcs=reward, tools=tools, train_dataset=Dataset.from_list(rows),
                   args=TRLConfig(output_dir=str(tmp_path / "trl"), use_cpu=True, bf16=False, report_to="none",
                                  logging_steps=1, save_strategy="no", **shared))
    eos, respond = qwen.eos_token_id, varied()
    def single_turn(prompt_ids, images, fields, num_generations, has_tool_images=False):
        out = [qwen(respond(qwen.decode(p)), add_special_tokens=False)["input_ids"] for p in prompt_ids]
        return [(ids[:ids.index(eos) + 1] if eos in ids else ids)[:80] for ids in out], None
    t._generate_single_turn = single_turn
    t.model.train()
    theirs = t._generate_and_score_completions([r for r in rows for _ in range(2)])
    metrics = {k: v[-1] for k, v in t._metrics["train"].items()}
    monkeypatch.setattr(tools_module, "generate_completions", scripted_generate(varied()))
    ours = GRPOTrainer(str(path), reward, GRPOConfig(output_dir=str(tmp_path / "ours"), max_steps=1,
                                                     max_grad_norm=0.0, **shared), Dataset.from_list(rows),
                       tools=tools)
    batch, ours_metrics, _ = ours.generate_and_score(rows)
    K = batch.logits_to_keep
    assert torch.equal(batch.input_ids[:, -K:], theirs["completion_ids"])
    assert torch.equal(batch.mask, theirs["completion_mask"] * theirs["tool_mask"])      # the loss mask
    assert (theirs["tool_mask"] == 0).any() and batch.round_tokens == theirs["num_items_in_batch"]
    torch.testing.assert_close(batch.advantages, theirs["advantages"])
    torch.testing.assert_close(batch.ref_logps * batch.mask, theirs["ref_per_token_logps"] * batch.mask)
    for k in ("tools/call_frequency", "tools/failure_frequency", "completions/mean_length"):
        assert ours_metrics[k] == pytest.approx(metrics[k]), (k, ours_metrics[k], metrics[k])
    assert (metrics["tools/call_frequency"], metrics["tools/failure_frequency"]) == pytest.approx((4 / 6, 2 / 4))
    t.current_gradient_accumulation_steps = 1
    named = dict(t.model.named_parameters())
    loss = t._compute_loss(t.model, theirs)
    grads = dict(zip(named, torch.autograd.grad(loss, list(named.values()))))
    model = ours.accelerator.unwrap_model(ours.model)
    model.zero_grad(set_to_none=True)
    ours.optimizer.step, ours.optimizer.zero_grad = (lambda *a, **k: None), (lambda *a, **k: None)
    out = ours.update(batch)
    assert out["loss"] == pytest.approx(loss.item(), rel=1e-5, abs=1e-7)
    for name, p in model.named_parameters():
        torch.testing.assert_close(p.grad, grads[name], rtol=1e-5, atol=1e-7)
    assert max(g.abs().max().item() for g in grads.values()) > 1e-6


MY_TOOLS = '''
def multiply(a: int, b: int) -> int:
    """Multiply two integers.

    Args:
        a: the first factor
        b: the second factor
    """
    return a * b

NUMBER = 3
'''


@pytest.mark.parametrize("tools,expected", [
    ("no_such_module:multiply", "importing `no_such_module` raised ModuleNotFoundError"),
    ("my_tools:NUMBER", "is not callable"),
    ("my_tools:multiply,my_tools.multiply", "two tools are named 'multiply'"),
    ("my_tools:divide", "has no `divide`"),
    ("my_tools:multiply", "the toy model's tokenizer has none"),       # the toy model: no chat template
])
def test_cli_refuses_bad_tools_before_anything_loads(tmp_path, monkeypatch, tools, expected):
    from conftest import cli
    (tmp_path / "my_tools.py").write_text(MY_TOOLS)
    monkeypatch.chdir(tmp_path)
    r = cli("train", "--tools", tools, "--max_steps", "1", "--output_dir", tmp_path / "out")
    assert r.returncode == 2 and expected in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert not (tmp_path / "out" / "metrics.jsonl").exists()


def test_config_fields():
    from grpo_edu.cli import parse_config
    from grpo_edu.config import GRPOConfig
    from grpo_edu.recipe import TRL_NOT_HERE
    c = parse_config(["--tools", "my_tools:multiply,my_tools:add", "--max_tool_calling_iterations", "3",
                      "--tool_timeout", "5"])
    assert (c.tools, c.max_tool_calling_iterations, c.tool_timeout) == (["my_tools:multiply", "my_tools:add"], 3, 5.0)
    assert "max_tool_calling_iterations" not in TRL_NOT_HERE
    for field, value in [("max_tool_calling_iterations", -1), ("tool_timeout", 0.0)]:
        with pytest.raises(GRPOEduError, match=field): GRPOConfig(**{field: value}).validate()


def test_trainer_refuses_tools_before_any_weight_loads(tmp_path, monkeypatch):
    "A tokenizer without a tool-capable chat template is refused before the policy (or π_ref) is built."
    from datasets import Dataset
    from grpo_edu import trainer as trainer_module
    from grpo_edu.config import GRPOConfig
    def no_weights(*a, **k): raise AssertionError("weights were loaded before the tools were checked")
    monkeypatch.setattr(trainer_module, "build_policy", no_weights)
    rows = Dataset.from_list([{"prompt": [{"role": "user", "content": "1+1?"}]}] * 4)
    args = GRPOConfig(output_dir=str(tmp_path), num_generations=2, per_device_train_batch_size=4, max_steps=1)
    tok = toy_tokenizer()
    with pytest.raises(GRPOEduError, match="this tokenizer has none"):
        trainer_module.GRPOTrainer(toy_model(tok, hidden_size=16, num_layers=1), lambda completions, **k: [0.0] * 4,
                                   args, rows, processing_class=tok, tools=[multiply])
    with pytest.raises(GRPOEduError, match="two tools are named 'multiply'"):
        trainer_module.GRPOTrainer("some/model", lambda completions, **k: [0.0] * 4, args, rows,
                                   tools=[multiply, multiply])


def test_long_prompt_warning_counts_the_tool_preamble(tmp_path, qwen, tiny):
    "The warning about prompts the rollout would cut measures them as sampled: with the tools' schemas."
    import warnings
    from grpo_edu.config import GRPOConfig
    from grpo_edu.rollout import encode_prompts
    from grpo_edu.trainer import GRPOTrainer
    rows = [{"prompt": p} for p in prompts_for(QUESTIONS[:2])]
    bare = int(encode_prompts(qwen, [r["prompt"] for r in rows], None)[1].sum(1).max())
    with_tools = int(encode_tool_prompts(qwen, [r["prompt"] for r in rows], [multiply])[1].sum(1).max())
    assert with_tools > bare + 50                           # the schema is most of such a prompt
    args = GRPOConfig(output_dir=str(tmp_path), num_generations=2, per_device_train_batch_size=4,
                      max_steps=1, max_prompt_length=bare + 1)        # room for the question, not the tools
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        GRPOTrainer(tiny, lambda completions, **k: [0.0] * len(completions), args, rows,
                    processing_class=qwen, tools=[multiply])
    said = [str(w.message) for w in caught if "max_prompt_length" in str(w.message)]
    assert len(said) == 1 and f"(the longest: {with_tools})" in said[0], said
