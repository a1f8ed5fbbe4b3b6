"""LoRA through peft: TRL's fields and trainer argument, π_ref as the model with its adapters off (no second copy),
the loss and adapter gradients equal to TRL 1.16's, the static engine sampling with the adapters, checkpoints of the
adapters with an exact resume, `grpo-edu eval` and `grpo-edu merge` on them, the planner's LoRA terms, the toy learning
with adapters on a CPU, and bad settings refused before anything loads."""
import copy, gc, json
from pathlib import Path
import pytest
import torch
from datasets import Dataset
from conftest import cli, run_cli

peft = pytest.importorskip("peft", reason="LoRA needs peft: pip install -e '.[lora]'")
from peft import LoraConfig, PeftModel, get_peft_model
from transformers import AutoModelForCausalLM, PreTrainedModel
from grpo_edu.config import GRPOConfig
from grpo_edu.errors import GRPOEduError
from grpo_edu.logprobs import per_token_logps
from grpo_edu.memory import ALL_SHAPES, LORA_SHAPES, estimate_memory, lora_param_count, param_count
from grpo_edu.policy import lora_config, quantization_config
from grpo_edu.preflight import check_config
from grpo_edu.toy import addition_dataset, toy_model, toy_tokenizer
from grpo_edu.step import RolloutBatch, old_and_ref_logps
from grpo_edu.trainer import GRPOTrainer
from test_faults import rows, same
from test_memory_paths import grads_of_update

LORA = ["--use_peft", "true", "--lora_r", "8", "--lora_alpha", "16", "--lora_dropout", "0",
        "--lora_target_modules", "all-linear", "--learning_rate", "1e-3"]   # the toy's LoRA settings (the chapter's)
SMALL = ["--max_steps", "6", "--toy_warm_start_steps", "200", "--per_device_train_batch_size", "32", "--eval_dataset",
         "none", "--logging_steps", "1", "--lr_scheduler_type", "linear", "--seed", "3", "--beta", "0.04"]
SEVENS = lambda completions, **k: [float(c.count("7")) - 0.3 * len(c) for c in completions]   # varied lengths pay off


def set_lora_b(model, seed=1, scale=0.3):
    "B ≠ 0 (peft starts it at 0): the adapters change the model, so A gets gradients and π_θ ≠ π_ref."
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for n, p in model.named_parameters():
            if "lora_B" in n: p.copy_(torch.randn(p.shape, generator=g) * scale)


def lora_trainer(peft_config=None, model=None, **kw):
    "A toy GRPOTrainer with LoRA adapters (peft_config, or the config's use_peft fields), β 0.04."
    import tempfile
    tok = toy_tokenizer()
    args = GRPOConfig(**{**dict(max_steps=2, per_device_train_batch_size=16, gradient_accumulation_steps=2,
                                num_generations=8, max_completion_length=8, max_prompt_length=None,
                                output_dir=tempfile.mkdtemp(), eval_dataset=None, learning_rate=1e-2, beta=0.04,
                                seed=3), **kw})
    model = model if model is not None else toy_model(tok, seed=0)
    return GRPOTrainer(model, SEVENS, args, addition_dataset(64, seed=0), processing_class=tok, peft_config=peft_config)


QV = dict(r=4, lora_alpha=8, lora_dropout=0.0, target_modules=["q_proj", "v_proj"], task_type="CAUSAL_LM")


# ---- the config: TRL's names, defaults and objects ------------------------------------------------------------------

def test_fields_have_trls_names_and_defaults():
    "use_peft, lora_r, ... are TRL's ModelConfig fields with its defaults; the LoraConfig is TRL's get_peft_config's."
    from trl import ModelConfig
    from trl.trainer.utils import get_peft_config, get_quantization_config
    ours, theirs = GRPOConfig(), ModelConfig()
    shared = ["use_peft", "lora_r", "lora_alpha", "lora_dropout", "lora_target_modules", "lora_modules_to_save",
              "lora_task_type", "use_rslora", "use_dora", "load_in_4bit", "bnb_4bit_quant_type", "use_bnb_nested_quant"]
    assert {k: getattr(ours, k) for k in shared} == {k: getattr(theirs, k) for k in shared}
    assert lora_config(ours) is None and quantization_config(ours) is None        # use_peft false: full fine-tuning
    kw = dict(use_peft=True, lora_r=8, lora_alpha=16, lora_dropout=0.1, lora_target_modules=["q_proj", "o_proj"],
              lora_modules_to_save=["lm_head"], use_rslora=True, use_dora=True)
    a, b = lora_config(GRPOConfig(**kw)), get_peft_config(ModelConfig(**kw))
    assert a.to_dict() == b.to_dict()
    assert lora_config(GRPOConfig(use_peft=True, lora_target_modules=["all-linear"])).target_modules == "all-linear"
    q = dict(use_peft=True, load_in_4bit=True, bnb_4bit_quant_type="fp4", use_bnb_nested_quant=True)
    ours_q = quantization_config(GRPOConfig(torch_dtype="bfloat16", **q))
    theirs_q = get_quantization_config(ModelConfig(dtype="bfloat16", **q))
    assert ours_q.to_dict() == theirs_q.to_dict()


@pytest.mark.parametrize("args,expected", [
    (["--lora_r", "0"], "lora_r=0 must be"),
    (["--lora_alpha", "0"], "lora_alpha=0 must be"),
    (["--lora_dropout", "1"], "lora_dropout=1.0 must be"),
    (["--lora_task_type", "SEQ_CLS"], "lora_task_type='SEQ_CLS' is not supported"),
    (["--bnb_4bit_quant_type", "int4"], "bnb_4bit_quant_type='int4' is not supported"),
    (["--load_in_4bit", "true", "--use_peft", "false"], "load_in_4bit=true quantizes the base model"),
    (["--sync_ref_model", "true", "--beta", "0.04"], "sync_ref_model=true"),
    (["--load_in_4bit", "true"], "needs a CUDA GPU"),
    (["--lora_target_parameters", "experts"], "--lora_target_parameters is not a GRPOConfig field (a TRL one:"),
    (["--load_in_8bit", "true"], "--load_in_8bit is not a GRPOConfig field (a TRL one:"),
    (["--model_init_kwargs", '{"quantization_config": {"load_in_4bit": true}}'], "load_in_4bit"),
])
def test_bad_lora_settings_are_refused_before_any_model_loads(args, expected, tmp_path):
    r = cli("train", "--use_peft", "true", *args, "--output_dir", tmp_path)
    assert r.returncode == 2, r.stderr
    assert expected in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert "toy warm start" not in r.stdout                       # the toy model was never built


def test_unknown_target_module_is_refused_before_any_model_loads(tmp_path, monkeypatch):
    "A target the model does not have (peft would adapt the others and say nothing): refused with the layers it has."
    r = cli("train", "--use_peft", "true", "--lora_target_modules", "q_proj,wq", "--output_dir", tmp_path)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert "lora_target_modules: 'wq' is not a module of the model" in r.stderr and "q_proj" in r.stderr
    assert "toy warm start" not in r.stdout and not (tmp_path / "metrics.jsonl").exists()   # before the warm start
    r = cli("train", "--use_peft", "true", "--lora_target_modules", "mlp.proj_up", "--output_dir", tmp_path)
    assert r.returncode == 2 and "Did you mean `mlp.up_proj`?" in r.stderr, r.stderr
    # a saved model: checked on its config.json alone, before from_pretrained reads a weight
    import grpo_edu.policy
    from grpo_edu.policy import build_policy
    toy_model(toy_tokenizer()).save_pretrained(tmp_path / "model")
    def no_loading(*args, **kwargs): raise AssertionError("the weights were loaded")
    monkeypatch.setattr(grpo_edu.policy, "load_policy", no_loading)
    args = GRPOConfig(use_peft=True, lora_target_modules=["wq"], output_dir=str(tmp_path / "run"))
    with pytest.raises(GRPOEduError, match="lora_target_modules: 'wq' is not a module of the model"):
        build_policy(str(tmp_path / "model"), None, args)


def test_peft_or_bitsandbytes_missing_says_how(monkeypatch):
    import importlib.util
    real = importlib.util.find_spec
    for name, kw in [("peft", dict(use_peft=True)), ("bitsandbytes", dict(use_peft=True, load_in_4bit=True))]:
        monkeypatch.setattr(importlib.util, "find_spec", lambda n, *a, gone=name: None if n == gone else real(n, *a))
        with pytest.raises(GRPOEduError, match="pip install"):
            check_config(GRPOConfig(**kw))


def test_sharded_setups_are_refused_with_lora(monkeypatch, tmp_path):
    "FSDP and DeepSpeed slice weights or states across processes; LoRA runs on one GPU or DDP: said before loading."
    from grpo_edu.distributed import Placement
    for placement in (Placement(sharded_weights=True, sharded_optimizer=True),
                      Placement(deepspeed=True, sharded_optimizer=True)):
        monkeypatch.setattr(Placement, "of", classmethod(lambda cls, accelerator, p=placement: p))
        with pytest.raises(GRPOEduError, match="LoRA .*one GPU or DDP"):
            GRPOTrainer("/no/such/model/never/loaded", SEVENS, GRPOConfig(use_peft=True, output_dir=str(tmp_path)),
                        addition_dataset(8, seed=0))


def test_peft_config_and_a_peft_model_together_are_refused():
    "As in TRL: a PeftModel already has its adapters; a second peft_config is ambiguous. So is use_peft + peft_config."
    tok = toy_tokenizer()
    wrapped = get_peft_model(toy_model(tok, seed=0), LoraConfig(**QV))
    with pytest.raises(GRPOEduError, match="already has adapters"):
        lora_trainer(LoraConfig(**QV), model=wrapped)
    with pytest.raises(GRPOEduError, match="use_peft=true and peft_config"):
        lora_trainer(LoraConfig(**QV), use_peft=True)


# ---- the model: adapters only, π_ref free ---------------------------------------------------------------------------

def live_models() -> int:
    "Causal LMs alive in this process (a reference copy would be one more)."
    gc.collect()
    # type(o), not isinstance: isinstance reads a stranger's __class__, and torch's deprecated
    # torch.distributed.reduce_op object warns when asked.
    return sum(issubclass(type(o), PreTrainedModel) and hasattr(o, "lm_head") for o in gc.get_objects())


def test_only_the_adapters_train_and_no_reference_copy_is_made(monkeypatch):
    """β > 0 with LoRA: no π_ref model is built (building one fails here) and no second model is alive; the optimizer
    holds the adapters only; the base weights do not move, bit for bit; the KL is 0 at step one and > 0 after."""
    import grpo_edu.trainer as trainer
    monkeypatch.setattr(trainer, "reference_model", lambda *a, **k: pytest.fail("a reference copy was made"))
    before = live_models()
    tr = lora_trainer(LoraConfig(**QV))
    model = tr.accelerator.unwrap_model(tr.model)
    assert isinstance(model, PeftModel) and tr.ref_model is None and live_models() == before + 1
    adapters = [p for n, p in model.named_parameters() if "lora_" in n]
    held = [p for group in tr.optimizer.param_groups for p in group["params"]]
    assert {id(p) for p in held} == {id(p) for p in adapters} and all(p.requires_grad for p in adapters)
    assert all(not p.requires_grad for n, p in model.named_parameters() if "lora_" not in n)
    base = {n: p.detach().clone() for n, p in model.named_parameters() if "lora_" not in n}
    lora = {n: p.detach().clone() for n, p in model.named_parameters() if "lora_" in n}
    tr.train()
    assert all(torch.equal(p, base[n]) for n, p in model.named_parameters() if n in base)      # bit for bit
    assert any(not torch.equal(p, lora[n]) for n, p in model.named_parameters() if n in lora)
    logged = [json.loads(l) for l in (Path(tr.args.output_dir) / "metrics.jsonl").open()]
    assert logged[0]["kl"] < 1e-7 and logged[1]["kl"] > 1e-5       # B = 0: π_θ = π_ref at step one, then they part
    assert live_models() == before + 1


def test_reference_log_probs_are_the_base_models(tmp_path):
    "π_ref = the model with its adapters off: the base model's log-probs, bit for bit, at step one and after updates."
    tok = toy_tokenizer()
    base = toy_model(tok, seed=0)
    frozen = copy.deepcopy(base).eval()                             # the test's own copy, to compare against
    tr = lora_trainer(LoraConfig(**QV), model=base, max_steps=3)
    model = tr.accelerator.unwrap_model(tr.model)
    for step in range(3):
        batch, _, _ = tr.generate_and_score(tr.prompt_rows(step))
        ids, attn, K = batch.input_ids, batch.attention_mask, batch.logits_to_keep
        score = lambda m: per_token_logps(m, ids, attn, K, tr.args.temperature, tr.args.per_device_train_batch_size,
                                          chunk_size=tr.args.lm_head_chunk_size)      # as the trainer scores
        with torch.no_grad(): expected, policy = score(frozen), score(model)
        assert torch.equal(batch.ref_logps, expected)
        assert torch.equal(policy, expected) == (step == 0)         # B = 0 at step one only
        tr.update(batch)


def test_a_pretrained_adapter_is_its_own_reference_as_in_trl():
    "A PeftModel passed in with trained adapters: π_ref is a frozen copy of those adapters ('ref'), not the base."
    tok = toy_tokenizer()
    wrapped = get_peft_model(toy_model(tok, seed=0), LoraConfig(**QV))
    set_lora_b(wrapped)
    tr = lora_trainer(model=wrapped)
    assert "ref" in wrapped.peft_config and tr.ref_model is None
    assert all(not p.requires_grad for n, p in wrapped.named_parameters() if ".ref." in n)
    held = {id(p) for group in tr.optimizer.param_groups for p in group["params"]}
    assert held == {id(p) for n, p in wrapped.named_parameters() if ".default." in n}   # the adapters being trained
    batch, _, _ = tr.generate_and_score(tr.prompt_rows(0))
    score = lambda: per_token_logps(wrapped, batch.input_ids, batch.attention_mask, batch.logits_to_keep, 1.0, 16,
                                    chunk_size=256)                                   # as the trainer scores
    with torch.no_grad():
        now = score()
        with wrapped.disable_adapter(): bare = score()
    assert torch.equal(batch.ref_logps, now) and not torch.equal(batch.ref_logps, bare)


def test_gradient_checkpointing_gives_the_same_adapter_gradients():
    "A frozen embedding feeds checkpointed layers: without TRL's enable_input_require_grads the adapters get no gradient."
    grads = []
    for checkpointing in (False, True):
        tr = lora_trainer(LoraConfig(**QV), gradient_checkpointing=checkpointing)
        set_lora_b(tr.accelerator.unwrap_model(tr.model))
        batch, _, _ = tr.generate_and_score(tr.prompt_rows(0))
        grads.append(grads_of_update(tr, batch)[1])
    assert set(grads[0]) == set(grads[1]) and all("lora_" in n for n in grads[0])
    for n, g in grads[0].items(): torch.testing.assert_close(grads[1][n], g, rtol=1e-5, atol=1e-7)
    assert max(g.abs().max().item() for n, g in grads[0].items() if "lora_A" in n) > 1e-5


# ---- equal to TRL -----------------------------------------------------------------------------------------------------

def trl_with_lora(tmp_path, peft_config, **kw):
    "TRL 1.16's GRPOTrainer with peft_config on a tiny random Qwen2 saved in tmp_path (β 0.04), and its tokenizer."
    from trl import GRPOConfig as TRLConfig, GRPOTrainer as TRLTrainer
    tok = toy_tokenizer()
    path = tmp_path / "tiny-qwen2"
    toy_model(tok, hidden_size=32, num_layers=2, seed=0).save_pretrained(path)
    tok.save_pretrained(path)
    args = TRLConfig(output_dir=str(tmp_path / "trl"), use_cpu=True, bf16=False, report_to="none", save_strategy="no",
                     per_device_train_batch_size=8, num_generations=4, max_completion_length=6, beta=0.04, **kw)
    t = TRLTrainer(model=str(path), reward_funcs=lambda completions, **k: [float(i % 3) for i in range(len(completions))],
                   args=args, train_dataset=Dataset.from_list([{"prompt": f"{i}+{i}="} for i in range(8)]),
                   processing_class=tok, peft_config=copy.deepcopy(peft_config))
    return t, path, tok


CASES = {"lora": dict(QV, target_modules=["q_proj", "v_proj", "up_proj"]),
         "all-linear+rslora": dict(QV, target_modules="all-linear", use_rslora=True),
         "dora": dict(QV, use_dora=True)}


@pytest.mark.parametrize("loss_type", ["dapo", "grpo"])
@pytest.mark.parametrize("case", CASES)
def test_loss_and_adapter_gradients_equal_trl(tmp_path, case, loss_type):
    """The same LoraConfig, weights and inputs: TRL computes π_ref with the adapters off (its use_adapter); our
    reference log-probs, loss and every adapter's gradient equal TRL's. lora_dropout 0: dropout would draw its own
    masks in each trainer."""
    from test_trl_oracle import trl_step_grads
    config = LoraConfig(**CASES[case])
    t, path, tok = trl_with_lora(tmp_path, config, loss_type=loss_type)
    set_lora_b(t.model)                                         # B ≠ 0: π_θ ≠ π_ref, and A's gradients are not 0
    args = GRPOConfig(output_dir=str(tmp_path / "ours"), num_generations=4, per_device_train_batch_size=8,
                      max_completion_length=6, beta=0.04, loss_type=loss_type, eval_dataset=None, max_grad_norm=1e9,
                      bucket_by_length=False, max_prompt_length=None)
    ours = GRPOTrainer(str(path), SEVENS, args, Dataset.from_list([{"prompt": "1+1="}] * 8), processing_class=tok,
                       peft_config=copy.deepcopy(config))
    model = ours.accelerator.unwrap_model(ours.model)
    theirs_params = dict(t.model.named_parameters())
    with torch.no_grad():
        for n, p in model.named_parameters(): p.copy_(theirs_params[n])
    torch.manual_seed(0)
    out = t._generate_and_score_completions([{"prompt": f"{i}+{i}="} for i in range(2) for _ in range(4)])
    K, mask = out["completion_ids"].size(1), out["completion_mask"]
    ids, attn = torch.cat([out["prompt_ids"], out["completion_ids"]], 1), torch.cat([out["prompt_mask"], mask], 1)
    old, ref = old_and_ref_logps(ours.model, ours.ref_model, ids, attn, K, ours.args, False, ours.accelerator,
                                 ours.placement)
    batch = RolloutBatch(input_ids=ids, logits_to_keep=K, mask=mask, attention_mask=attn, advantages=out["advantages"],
                         round_tokens=mask.sum().float(), old_logps=old, ref_logps=ref)
    torch.testing.assert_close(batch.ref_logps * mask, out["ref_per_token_logps"] * mask, rtol=1e-5, atol=1e-6)
    t.model.train()
    t.current_gradient_accumulation_steps = 1
    theirs = trl_step_grads(t, batch, batch.round_tokens)
    result, grads = grads_of_update(ours, batch)
    assert set(grads) == set(theirs) and all("lora_" in n for n in theirs)
    for n, g in theirs.items(): torch.testing.assert_close(grads[n], g, rtol=1e-4, atol=1e-6)
    assert max(g.abs().max().item() for n, g in theirs.items() if "lora_A" in n) > 1e-4
    inputs = {**out, "old_per_token_logps": None}
    assert result["loss"] == pytest.approx(t._compute_loss(t.model, inputs).item(), rel=1e-5, abs=1e-7)
    assert result["kl"] > 0


# ---- rollouts with adapters ------------------------------------------------------------------------------------------

def test_static_engine_samples_with_the_adapters(monkeypatch):
    """The CUDA-graph engine (tests/fake_cuda_graph.py on a CPU) runs peft's LoRA layers inside its captured step:
    HF generate's greedy tokens of the PEFT model, again after an in-place adapter update (no recapture), and the base
    model's tokens with the adapters off (a graph of its own)."""
    import fake_cuda_graph
    from grpo_edu.rollout import generate_completions
    from test_rollout_engine import qwen_like
    fake_cuda_graph.install(monkeypatch)
    from grpo_edu import rollout
    monkeypatch.setattr(rollout, "StaticRollout", lambda *a, **k: real_engine(*a, **{**k, "cuda_graph": True}))
    model = get_peft_model(qwen_like(300), LoraConfig(r=4, lora_alpha=8, target_modules="all-linear",
                                                      lora_dropout=0.1))
    set_lora_b(model)
    ids = torch.randint(2, 300, (4, 9), generator=torch.Generator().manual_seed(0))
    pm = torch.ones_like(ids)
    ids[1, :3], pm[1, :3] = 0, 0
    class Tok: pad_token_id, eos_token_id = 0, 1
    greedy = lambda engine: generate_completions(model, Tok, ids, pm, 40, do_sample=False, engine=engine)[0]
    for _ in range(2):
        a, b = greedy("static"), greedy("hf")
        assert torch.equal(a[:, :b.size(1)], b) and b.size(1) > 30
        with model.disable_adapter():
            off_static, off_hf = greedy("static"), greedy("hf")
        assert torch.equal(off_static[:, :off_hf.size(1)], off_hf) and not torch.equal(off_hf, b[:, :off_hf.size(1)])
        with torch.no_grad():
            for n, p in model.named_parameters():
                if p.requires_grad: p.add_(torch.randn_like(p) * 0.05)
    assert fake_cuda_graph.FakeCUDAGraph.captures == 8              # 4 buckets with adapters on, 4 off; never again


real_engine = __import__("grpo_edu.engine", fromlist=["StaticRollout"]).StaticRollout


@pytest.mark.cuda
@pytest.mark.parametrize("base", ["fp32", "4-bit"])
def test_cuda_graph_engine_with_adapters(tmp_path, base):
    """On a GPU: the captured CUDA graphs sample HF generate's greedy tokens with LoRA on a fp32 base and on a 4-bit one
    (bitsandbytes, fp32 compute), adapters on and off, also after an in-place update of the adapters."""
    from transformers import BitsAndBytesConfig
    from grpo_edu.rollout import _ENGINES, generate_completions, pick_engine
    from test_rollout_engine import qwen_like
    model = qwen_like(300, "cuda")
    if base == "4-bit":
        pytest.importorskip("bitsandbytes")
        model.save_pretrained(tmp_path)
        quantized = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_compute_dtype=torch.float32, bnb_4bit_quant_type="nf4")
        model = AutoModelForCausalLM.from_pretrained(tmp_path, quantization_config=quantized, device_map={"": 0})
    model = get_peft_model(model, LoraConfig(r=4, lora_alpha=8, target_modules="all-linear"))
    set_lora_b(model)
    ids = torch.randint(2, 300, (8, 12), device="cuda", generator=torch.Generator("cuda").manual_seed(0))
    pm = torch.ones_like(ids)
    ids[1, :4], pm[1, :4] = 0, 0
    class Tok: pad_token_id, eos_token_id = 0, 1
    greedy = lambda engine: generate_completions(model, Tok, ids, pm, 40, do_sample=False, engine=engine)[0]
    assert pick_engine(model.get_base_model()) == "static"
    for _ in range(2):
        a, b = greedy("auto"), greedy("hf")
        assert torch.equal(a[:, :b.size(1)], b)
        with model.disable_adapter():
            c, d = greedy("auto"), greedy("hf")
        assert torch.equal(c[:, :d.size(1)], d) and not torch.equal(b[:, :d.size(1)], d[:, :b.size(1)])
        with torch.no_grad():
            for n, p in model.named_parameters():
                if p.requires_grad: p.add_(torch.randn_like(p) * 0.05)
    assert all(engine.cuda_graph for engine in _ENGINES[model.get_base_model()].values())


def test_bf16_base_samples_without_a_copy():
    "A bf16 base with fp32 adapters (peft's default) under bf16 autocast: the engine reads the model, no bf16 copy."
    from grpo_edu.engine import sampling_weights
    from test_rollout_engine import qwen_like
    model = get_peft_model(qwen_like(300).bfloat16(), LoraConfig(**QV))
    assert {p.dtype for n, p in model.named_parameters() if "lora_" in n} == {torch.float32}
    inner = model.get_base_model()
    assert sampling_weights(inner, torch.bfloat16) is inner


def test_trainer_rollouts_use_the_static_engine_with_adapters():
    "rollout_engine=static with LoRA: the engine is built for the model holding the adapters, and follows training."
    from grpo_edu.rollout import _ENGINES, encode_prompts, generate_completions
    tr = lora_trainer(LoraConfig(**QV), rollout_engine="static", max_steps=3)
    tr.train()
    model = tr.accelerator.unwrap_model(tr.model)
    assert model.get_base_model() in _ENGINES
    ids, pm = encode_prompts(tr.tokenizer, ["12+34=", "5+6=", "999+1=", "7+70="], None)
    a = generate_completions(model, tr.tokenizer, ids, pm, 6, do_sample=False, engine="static")[0]
    b = generate_completions(model, tr.tokenizer, ids, pm, 6, do_sample=False, engine="hf")[0]
    assert torch.equal(a[:, :b.size(1)], b)


# ---- checkpoints, resume, eval, merge ----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def lora_run(tmp_path_factory):
    "A toy run with LoRA through the command line: 6 steps, checkpoints at 3 and 6."
    d = tmp_path_factory.mktemp("lora-run")
    r = cli("train", *SMALL, *LORA, "--save_steps", "3", "--output_dir", d)
    assert r.returncode == 0, r.stderr[-3000:]
    return d


@pytest.mark.e2e
def test_checkpoint_holds_the_adapters_and_the_training_state(lora_run):
    ck = lora_run / "checkpoint-3"
    names = {p.name for p in ck.iterdir()}
    assert {"adapter_model.safetensors", "adapter_config.json", "trainer_state.pt", "base_model"} <= names
    assert "model.safetensors" not in names                         # the base is not saved again beside its adapters
    config = json.loads((ck / "adapter_config.json").read_text())
    assert (config["r"], config["lora_alpha"], config["base_model_name_or_path"]) == (8, 16, "base_model")
    assert (ck / "base_model" / "config.json").exists()             # the toy is built in code: its base comes along
    # ... and its weights are those of the warm start, bit for bit
    from grpo_edu.checkpoint import read_safetensors
    from grpo_edu.data import load_task
    from grpo_edu.toy import toy_policy
    seed, steps = (int(SMALL[SMALL.index(flag) + 1]) for flag in ("--seed", "--toy_warm_start_steps"))
    target = GRPOConfig.toy_warm_start_accuracy                          # SMALL leaves it at its default
    base, _ = toy_policy(load_task("toy", "train"), seed, steps, target)  # SMALL's warm start, recomputed
    saved, own = read_safetensors(ck / "base_model"), base.state_dict()
    assert saved and all(torch.equal(saved[k], own[k]) for k in saved)


@pytest.mark.e2e
def test_resume_continues_exactly(lora_run, tmp_path):
    "Resumed from checkpoint-3, steps 4-6 log what the uninterrupted run logged (adapters, AdamW, schedule, RNG)."
    r = cli("train", *SMALL, *LORA, "--output_dir", tmp_path, "--resume_from_checkpoint", lora_run / "checkpoint-3")
    assert r.returncode == 0, r.stderr[-3000:]
    assert [x["step"] for x in rows(tmp_path)] == [4, 5, 6]
    same(rows(tmp_path), rows(lora_run)[3:])


@pytest.mark.e2e
def test_adapters_of_another_rank_or_layers_are_refused():
    "load_adapters names what differs (another rank: shapes; other layers: missing and unexpected) and loads nothing."
    from peft import get_peft_model_state_dict
    from grpo_edu.checkpoint import load_adapters
    tok = toy_tokenizer()
    run = get_peft_model(toy_model(tok, seed=0), LoraConfig(**QV))
    before = {k: v.clone() for k, v in get_peft_model_state_dict(run).items()}
    for other in (dict(QV, r=8), dict(QV, target_modules=["k_proj"])):
        saved = get_peft_model_state_dict(get_peft_model(toy_model(tok, seed=1), LoraConfig(**other)))
        with pytest.raises(GRPOEduError, match="its adapters are not this run's") as refused:
            load_adapters(run, saved, "ck")
        assert ("of another shape (saved vs this run)" in str(refused.value)) == (other["r"] == 8)
        assert all(torch.equal(v, before[k]) for k, v in get_peft_model_state_dict(run).items())


def test_resume_across_lora_and_full_fine_tuning_is_refused(lora_run, tmp_path):
    r = cli("train", *SMALL, "--output_dir", tmp_path, "--resume_from_checkpoint", lora_run / "checkpoint-3")
    assert r.returncode == 2 and "holds LoRA adapters" in r.stderr and "--use_peft true" in r.stderr, r.stderr


@pytest.mark.e2e
def test_eval_and_merge_a_lora_checkpoint(lora_run, tmp_path):
    """`grpo-edu eval` on a checkpoint loads the base it names with the adapters on; `grpo-edu merge` writes a plain model
    folder with the same logits and the same greedy pass@1."""
    ck = lora_run / "checkpoint-6"
    common = ["--dataset", "toy", "--max_samples", "40", "--max_new_tokens", "6", "--batch_size", "20"]
    r = cli("eval", "--model", ck, *common, "--output", tmp_path / "lora.json")
    assert r.returncode == 0, r.stderr[-2000:]
    r = cli("merge", ck, "--output", tmp_path / "merged")
    assert r.returncode == 0, r.stderr[-2000:]
    assert (tmp_path / "merged" / "config.json").exists() and not (tmp_path / "merged" / "adapter_config.json").exists()
    r = cli("eval", "--model", tmp_path / "merged", *common, "--output", tmp_path / "merged.json")
    assert r.returncode == 0, r.stderr[-2000:]
    a, b = (json.loads((tmp_path / f).read_text()) for f in ("lora.json", "merged.json"))
    assert a["pass@1"] == b["pass@1"] and a["n"] == 40
    from grpo_edu.policy import load_policy
    lora, tok = load_policy(str(ck))
    merged = AutoModelForCausalLM.from_pretrained(tmp_path / "merged")
    enc = tok(["12+34=", "5+6="], return_tensors="pt", padding=True)
    ids = dict(input_ids=enc["input_ids"], attention_mask=enc["attention_mask"])
    with torch.no_grad():
        torch.testing.assert_close(merged.eval()(**ids).logits, lora.eval()(**ids).logits, rtol=1e-4, atol=1e-5)
    r = cli("merge", lora_run, "--output", tmp_path / "again")
    assert r.returncode == 2 and "checkpoint-6" in r.stderr     # a run's folder: the message names its checkpoint


@pytest.mark.e2e
def test_an_adapter_folder_trains_its_adapters_further(lora_run, tmp_path):
    "model_name_or_path = a LoRA checkpoint: its base with its adapters, trained on (TRL's PeftModel case)."
    r = cli("train", *SMALL, "--model_name_or_path", lora_run / "checkpoint-6", "--use_peft", "true",
            "--output_dir", tmp_path)
    assert r.returncode == 2 and "already has adapters" in r.stderr, r.stderr
    r = cli("train", *SMALL, "--max_steps", "2", "--model_name_or_path", lora_run / "checkpoint-6",
                "--learning_rate", "1e-3", "--output_dir", tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    assert (tmp_path / "checkpoint-2" / "adapter_model.safetensors").exists()


# ---- the toy learns with adapters -------------------------------------------------------------------------------------

@pytest.mark.slow
def test_toy_learns_with_lora(tmp_path):
    """The README's command, `grpo-edu train --use_peft true` with the toy's LoRA settings (rank 8 on every linear
    layer, lr 1e-3, the default recipe's schedule cut to 300 steps): held-out greedy accuracy rises by 5 points or more.
    Slow (`pytest --runslow`): chapter 12's rank study runs in every test run (ranks 1 and 16, three seeds)."""
    r = run_cli("train", *LORA, "--max_steps", "300", "--save_steps", "0", "--output_dir", tmp_path, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    s = json.loads((tmp_path / "summary.json").read_text())
    before, after = s["eval_before"]["accuracy"], s["eval_after"]["accuracy"]
    print(f"toy with LoRA: {before:.3f} -> {after:.3f} in {s['wall_s']} s")
    assert after - before >= 0.05, (before, after)


# ---- the planner -------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["qwen2.5-0.5b", "qwen2.5-1.5b", "qwen2.5-3b", "qwen2.5-7b"])
def test_lora_parameter_count_equals_peft(name):
    "The planner's count of adapter parameters equals peft's own on the real shapes (a meta-device model, no weights)."
    from transformers import Qwen2Config, Qwen2ForCausalLM
    shape = ALL_SHAPES[name]
    with torch.device("meta"):
        model = Qwen2ForCausalLM(Qwen2Config(**shape))
    assert sum(p.numel() for p in model.parameters()) == param_count(shape)
    for r, targets in [(16, None), (32, "all-linear"), (8, ["q_proj", "o_proj", "down_proj"])]:
        wrapped = get_peft_model(copy.deepcopy(model), LoraConfig(r=r, target_modules=targets, task_type="CAUSAL_LM"))
        assert wrapped.get_nb_trainable_parameters()[0] == lora_param_count(shape, r, targets), (r, targets)


def test_planner_counts_lora():
    "LoRA: frozen weights, the adapters' weights, gradients and AdamW states, no reference model even with β > 0."
    kw = dict(per_device_train_batch_size=8, gradient_accumulation_steps=8, max_completion_length=512,
              gradient_checkpointing=True, beta=0.04)
    full = estimate_memory("qwen2.5-3b", torch_dtype="bfloat16", **kw)
    lora = estimate_memory("qwen2.5-3b", torch_dtype="bfloat16", use_peft=True, lora_r=32,
                           lora_target_modules=["all-linear"], **kw)
    qlora = estimate_memory("qwen2.5-3b", torch_dtype="bfloat16", use_peft=True, lora_r=32,
                            lora_target_modules=["all-linear"], load_in_4bit=True, use_bnb_nested_quant=True, **kw)
    adapters = lora_param_count(LORA_SHAPES["qwen2.5-3b"], 32, "all-linear")
    GiB = 2 ** 30
    assert full["reference model"] > 5 and lora["reference model"] == qlora["reference model"] == 0
    assert lora["weights"] == pytest.approx(param_count(LORA_SHAPES["qwen2.5-3b"]) * 2 / GiB)
    assert lora["adapters"] == pytest.approx(adapters * 4 / GiB)             # fp32 adapters (peft's default)
    assert lora["gradients"] == pytest.approx(adapters * 4 / GiB)
    assert lora["optimizer (AdamW)"] == pytest.approx(2 * adapters * 4 / GiB)
    assert qlora["weights"] < lora["weights"] / 2.5 and qlora["total"] < lora["total"] < full["total"]
    assert full["adapters"] == 0


def test_memory_command_on_the_lora_recipes():
    for name in ("qwen2.5-3b-gsm8k-lora-1x4090", "qwen2.5-7b-gsm8k-lora-1x4090"):
        r = cli("memory", "--config", Path(__file__).resolve().parents[1] / "configs" / f"{name}.yaml")
        assert r.returncode == 0, r.stderr
        assert "LoRA" in r.stdout and "fits" in r.stdout and "does NOT fit" not in r.stdout, r.stdout
