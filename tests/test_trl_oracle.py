"""grpo_edu's loss and advantages against TRL 1.16's GRPOTrainer on the same inputs (TRL is the oracle).

The loss: TRL's `_compute_loss` runs its own forward on a real (tiny, random) Qwen2 model; we run `per_token_logps` +
`grpo_loss` on the same model and inputs; value and every parameter gradient must match.
The advantages: TRL's `_generate_and_score_completions` with reward functions that return fixed values.
"""
import copy
import dataclasses
import pytest
import torch

trl = pytest.importorskip("trl", reason="TRL is the oracle: pip install -e '.[dev]'")
from trl import GRPOConfig as TRLConfig, GRPOTrainer as TRLTrainer
from datasets import Dataset
from grpo_edu.advantages import group_advantages
from grpo_edu.logprobs import per_token_logps, selective_log_softmax
from grpo_edu.loss import LossOptions, grpo_loss, high_entropy_mask
from grpo_edu.toy import toy_tokenizer, toy_model


def make_trl(tmp_path, reward_funcs, **kw):
    tok = toy_tokenizer()
    path = tmp_path / "tiny-qwen2"                      # a folder, so TRL can load its reference model from it
    toy_model(tok, hidden_size=32, num_layers=2, seed=0).save_pretrained(path); tok.save_pretrained(path)
    kw = {"per_device_train_batch_size": 8, **kw}
    args = TRLConfig(output_dir=str(tmp_path), use_cpu=True, bf16=False, report_to="none", gradient_checkpointing=False,
                     num_generations=4, max_completion_length=6, logging_steps=1, save_strategy="no", **kw)
    ds = Dataset.from_list([{"prompt": f"{i}+{i}=", "answer": str(2 * i)} for i in range(16)])
    return TRLTrainer(model=str(path), reward_funcs=reward_funcs, args=args, train_dataset=ds, processing_class=tok)


def _inputs(tok, B=8, K=6, seed=0):
    g = torch.Generator().manual_seed(seed)
    prompts = [f"{i}{i}+{i}=" if i % 2 else f"{i}+{i}=" for i in range(B)]
    enc = tok(prompts, padding=True, return_tensors="pt", add_special_tokens=False)
    cids = torch.randint(2, len(tok), (B, K), generator=g)
    cmask = torch.ones(B, K, dtype=torch.long)
    for i, L in enumerate([6, 3, 5, 1, 6, 2, 4, 6]): cmask[i, L:] = 0
    adv = torch.randn(B, generator=g)
    return enc["input_ids"], enc["attention_mask"], cids, cmask, adv, g


CASES = [(lt, beta, eh, "token", {}) for lt in ("grpo", "bnpo", "dr_grpo", "dapo") for beta in (0.0, 0.04) for eh in (None, 0.28)]
CASES += [(lt, beta, None, "sequence", {}) for lt in ("grpo", "bnpo", "dr_grpo", "dapo") for beta in (0.0, 0.04)]   # GSPO
CASES += [(lt, 0.04, None, lvl, {"use_bias_correction_kl": False}) for lt in ("grpo", "dapo") for lvl in ("token", "sequence")]
CASES += [("cispo", 0.0, 5.0, "token", {}), ("cispo", 0.04, 1.2, "token", {}), ("cispo", 0.04, 1.2, "sequence", {}),
          ("sapo", 0.0, None, "token", {}), ("sapo", 0.04, None, "sequence", {}),
          ("sapo", 0.04, None, "token", {"sapo_temperature_pos": 2.0, "sapo_temperature_neg": 0.5}),
          ("luspo", 0.0, None, "sequence", {}), ("luspo", 0.04, None, "sequence", {}), ("luspo", 0.04, None, "token", {}),
          ("grpo", 0.04, None, "token", {"delta": 1.3}), ("dapo", 0.0, 0.28, "token", {"delta": 1.3}),   # two-sided clip
          ("dapo", 0.04, None, "token", {"top_entropy_quantile": 0.2}), ("grpo", 0.0, 0.28, "sequence", {"top_entropy_quantile": 0.5}),
          ("vespo", 0.0, None, "token", {}), ("vespo", 0.04, None, "token", {"vespo_k_pos": 1.0, "vespo_lambda_neg": 0.5}),
          ("dapo", 0.04, None, "token", {"off_policy_mask_threshold": 0.05}),                  # DeepSeek-V3.2's sequence mask
          ("grpo", 0.0, None, "sequence", {"off_policy_mask_threshold": 0.02}), ("vespo", 0.0, None, "token", {"off_policy_mask_threshold": 0.05})]


@pytest.mark.parametrize("loss_type,beta,epsilon_high,level,extra", CASES,
                         ids=["-".join([f"{c[0]}-beta{c[1]}-eh{c[2]}-{c[3]}", *(f"{k}={v}" for k, v in c[4].items())]) for c in CASES])
def test_loss_and_gradient_equal_trl(tmp_path, loss_type, beta, epsilon_high, level, extra):
    t = make_trl(tmp_path, reward_funcs=lambda completions, **k: [0.0] * len(completions), loss_type=loss_type, beta=beta,
                 epsilon_high=epsilon_high, importance_sampling_level=level, **extra)   # TRL's defaults otherwise
    model, tok = t.model, t.processing_class
    model.train()
    t.current_gradient_accumulation_steps = 1
    pids, pmask, cids, cmask, adv, g = _inputs(tok)
    ids, attn, K = torch.cat([pids, cids], 1), torch.cat([pmask, cmask], 1), cids.size(1)
    with torch.no_grad(): base = per_token_logps(model, ids, attn, K)
    old = base + 0.3 * torch.randn(base.shape, generator=g)          # ratios away from 1: clipping is exercised
    ref = base + 0.2 * torch.randn(base.shape, generator=g)
    inputs = {"prompt_ids": pids, "prompt_mask": pmask, "completion_ids": cids, "completion_mask": cmask,
              "advantages": adv, "old_per_token_logps": old, "ref_per_token_logps": ref,
              "num_items_in_batch": cmask.sum()}
    params = [p for p in model.parameters() if p.requires_grad]
    loss_trl = t._compute_loss(model, inputs)
    g_trl = torch.autograd.grad(loss_trl, params)
    logps, ent = per_token_logps(model, ids, attn, K, compute_entropy=True)
    q = extra.get("top_entropy_quantile", 1.0)                           # the forking tokens only (TRL's entropy mask)
    extra = {k: v for k, v in extra.items() if k != "top_entropy_quantile"}
    keep = high_entropy_mask(ent.detach(), cmask, q) if q < 1 else None
    if keep is not None: assert 0 < keep.sum() < cmask.sum()
    options = LossOptions(beta=beta, epsilon=0.2, epsilon_high=epsilon_high, loss_type=loss_type, max_completion_length=6,
                          importance_sampling_level=level, **extra)
    # the loss and TRL's kl / clip ratio statistics, from one pass
    ours, metrics = grpo_loss(logps, old, ref if beta else None, adv, cmask, options, entropy_mask=keep)
    g_ours = torch.autograd.grad(ours, params)
    for knob in ("delta", "off_policy_mask_threshold"):                  # the cap / the mask really binds on these inputs
        if knob in extra:
            loose = dataclasses.replace(options, **{knob: None})
            loose_loss, _ = grpo_loss(logps, old, ref if beta else None, adv, cmask, loose, entropy_mask=keep)
            assert abs(ours.item() - loose_loss.item()) > 1e-4, knob
    assert abs(ours.item() - loss_trl.item()) < 1e-6 * max(1.0, abs(loss_trl.item())), (ours.item(), loss_trl.item())
    for a, b in zip(g_ours, g_trl): torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-7)
    # and the gradient is not trivially zero
    assert max(x.abs().max().item() for x in g_trl) > 1e-4
    # the logged kl and clip ratios (per token, or per completion at sequence level) equal TRL's
    theirs = {k: v[-1] for k, v in t._metrics["train"].items()}
    clip_keys = {k for k in theirs if k.startswith("clip_ratio/") and k.endswith("_mean") or k in ("cispo_clip_ratio", "vespo/phi_seq_mean")}
    assert set(metrics) == clip_keys | ({"kl"} if beta else set()), (set(metrics), set(theirs))
    for s_, c in metrics.values(): assert s_.dim() == c.dim() == 0 and not s_.requires_grad   # detached 0-dim tensors
    metrics = {k: (s_.item(), c.item()) for k, (s_, c) in metrics.items()}
    for k, (s_, c) in metrics.items(): assert s_ / c == pytest.approx(theirs[k], rel=1e-5, abs=1e-7), (k, s_ / c, theirs[k])
    if loss_type == "vespo": assert abs(metrics["vespo/phi_seq_mean"][0] / 8 - 1) > 1e-2   # off-policy: φ(w) ≠ φ(1) = 1
    elif clip_keys and epsilon_high != 5.0:                                 # (no ratio here reaches cispo's cap of 5)
        assert metrics["cispo_clip_ratio" if loss_type == "cispo" else "clip_ratio/region_mean"][0] > 0   # clipping happened


def test_bias_correction_changes_the_kl_gradient_as_trl_says(tmp_path):
    "use_bias_correction_kl (TRL's default) changes the gradient even on-policy, where ρ = 1 in value; TRL agrees both ways."
    torch.manual_seed(0)
    lp = torch.randn(4, 5) - 1.0; ref = lp + 0.3 * torch.randn(4, 5); mask = torch.ones(4, 5); adv = torch.zeros(4)
    grads = []
    for bias in (True, False):
        x = lp.clone().requires_grad_()
        l, _ = grpo_loss(x, None, ref, adv, mask, LossOptions(beta=0.1, use_bias_correction_kl=bias))
        l.backward(); grads.append((l.item(), x.grad))
    assert grads[0][0] == pytest.approx(grads[1][0], abs=1e-7)                  # the same value at ρ = 1...
    k3 = torch.exp(ref - lp) - (ref - lp) - 1
    torch.testing.assert_close(grads[0][1] - grads[1][1], 0.1 * k3 / 5 / 4)     # ...plus β·k3·∇log π in the gradient


def test_selective_log_softmax_equals_trl():
    from trl.trainer.utils import selective_log_softmax as trl_sls
    torch.manual_seed(0)
    logits, idx = torch.randn(3, 7, 50), torch.randint(0, 50, (3, 7))
    torch.testing.assert_close(selective_log_softmax(logits, idx), trl_sls(logits, idx))
    torch.testing.assert_close(selective_log_softmax(logits.bfloat16(), idx), trl_sls(logits.bfloat16(), idx))


REWARDS = [1.0, 0.0, 0.0, 1.0,   0.5, 0.5, 0.5, 0.5,   2.0, None, 0.0, 1.0,   0.0, 0.0, 0.0, 3.0]


@pytest.mark.parametrize("scale", ["group", "batch", "none"])
def test_advantages_equal_trl(tmp_path, scale):
    queue = list(REWARDS)
    def fixed(completions, **kw):
        out = queue[:len(completions)]; del queue[:len(completions)]
        return out
    t = make_trl(tmp_path, reward_funcs=fixed, scale_rewards=scale, per_device_train_batch_size=16)
    torch.manual_seed(0)
    inputs = [{"prompt": f"{i}+{i}=", "answer": "0"} for i in range(4) for _ in range(4)]
    out = t._generate_and_score_completions(inputs)
    r = torch.tensor([float("nan") if x is None else x for x in REWARDS])
    torch.testing.assert_close(group_advantages(r, 4, scale=scale), out["advantages"], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("scale", ["group", "batch", "none"])
def test_reward_metrics_equal_trl(tmp_path, scale):
    "The logged reward, reward_std, frac_reward_zero_std and per-function mean/std equal TRL's for the same rewards."
    from grpo_edu.config import GRPOConfig
    from grpo_edu.trainer import GRPOTrainer
    def fixed_from(values):
        queue = list(values)
        def fixed(completions, **kw):
            out = queue[:len(completions)]; del queue[:len(completions)]
            return out
        return fixed
    t = make_trl(tmp_path, reward_funcs=fixed_from(REWARDS), scale_rewards=scale, per_device_train_batch_size=16)
    torch.manual_seed(0)
    t._generate_and_score_completions([{"prompt": f"{i}+{i}=", "answer": "0"} for i in range(4) for _ in range(4)])
    theirs = {k: v[-1] for k, v in (t._metrics["train"] or t._metrics["eval"]).items()}   # mode follows model.training
    tok = toy_tokenizer()
    ours_tr = GRPOTrainer(toy_model(tok, hidden_size=32, num_layers=2, seed=0), fixed_from(REWARDS),
                          GRPOConfig(output_dir=str(tmp_path / "ours"), num_generations=4, per_device_train_batch_size=16,
                                     max_completion_length=6, scale_rewards=scale, eval_dataset=None, max_steps=1),
                          Dataset.from_list([{"prompt": f"{i}+{i}=", "answer": "0"} for i in range(16)]), None, tok)
    _, ours, _ = ours_tr.generate_and_score(ours_tr.prompt_rows(0))
    for k in ("reward", "reward_std", "frac_reward_zero_std", "rewards/fixed/mean", "rewards/fixed/std"):
        assert ours[k] == pytest.approx(theirs[k], rel=1e-5, abs=1e-6), (k, ours[k], theirs[k])


def test_trl_reward_functions_run_unchanged(tmp_path):
    "Reward functions written for TRL (bools, numpy, tensors with NaN, async, trainer_state, log_metric) give TRL's metrics."
    import asyncio
    import numpy as np
    from grpo_edu.config import GRPOConfig
    from grpo_edu.trainer import GRPOTrainer
    def as_bools(completions, **kw): return [i % 3 == 0 for i in range(len(completions))]
    def as_numpy(completions, **kw): return np.arange(len(completions), dtype=np.float32) ** 2 / 7
    def as_tensor(completions, **kw): return torch.tensor([float("nan") if i % 4 == 1 else i / 3 for i in range(len(completions))])
    async def remote(completions, **kw): await asyncio.sleep(0); return [np.int64(i % 5) for i in range(len(completions))]
    def staged(completions, trainer_state, log_metric, **kw):
        log_metric("stage", trainer_state.global_step + 0.5)
        return [float(trainer_state.global_step + 1)] * len(completions)
    funcs = [as_bools, as_numpy, as_tensor, remote, staged]
    t = make_trl(tmp_path, reward_funcs=funcs, per_device_train_batch_size=16)
    torch.manual_seed(0)
    t._generate_and_score_completions([{"prompt": f"{i}+{i}=", "answer": "0"} for i in range(4) for _ in range(4)])
    theirs = {k: v[-1] for k, v in (t._metrics["train"] or t._metrics["eval"]).items()}
    tok = toy_tokenizer()
    ours_tr = GRPOTrainer(toy_model(tok, hidden_size=32, num_layers=2, seed=0), funcs,
                          GRPOConfig(output_dir=str(tmp_path / "ours"), num_generations=4, per_device_train_batch_size=16,
                                     max_completion_length=6, eval_dataset=None, max_steps=1),
                          Dataset.from_list([{"prompt": f"{i}+{i}=", "answer": "0"} for i in range(16)]), None, tok)
    _, ours, _ = ours_tr.generate_and_score(ours_tr.prompt_rows(0))
    keys = ["reward", "reward_std", "stage"] + [f"rewards/{f.__name__}/{s}" for f in funcs for s in ("mean", "std")]
    for k in keys:
        assert k in theirs, (k, sorted(theirs))
        assert ours[k] == pytest.approx(theirs[k], rel=1e-5, abs=1e-6), (k, ours[k], theirs[k])


def test_trls_config_object_drives_our_trainer(tmp_path):
    "Code written for TRL passes trl.GRPOConfig as args: the same object scores a batch as in TRL's trainer, and trains."
    import json
    from grpo_edu.trainer import GRPOTrainer
    def graded(completions, **kw): return [float(i % 5) for i in range(len(completions))]
    t = make_trl(tmp_path, reward_funcs=[graded], per_device_train_batch_size=16, beta=0.04, loss_type="dapo",
                 scale_rewards="batch", learning_rate=1e-3, max_steps=2)
    rows = [{"prompt": f"{i}+{i}=", "answer": "0"} for i in range(4) for _ in range(4)]
    torch.manual_seed(0)
    t._generate_and_score_completions(rows)
    theirs = {k: v[-1] for k, v in (t._metrics["train"] or t._metrics["eval"]).items()}
    tok = toy_tokenizer()
    with pytest.warns(UserWarning, match="save_strategy='no' is save_steps=0"):    # make_trl's TRL setting, said once
        ours_tr = GRPOTrainer(toy_model(tok, hidden_size=32, num_layers=2, seed=0), [graded], t.args,
                              Dataset.from_list([{"prompt": f"{i}+{i}=", "answer": "0"} for i in range(16)]), None, tok)
    a = ours_tr.args
    assert (a.beta, a.loss_type, a.scale_rewards, a.learning_rate, a.max_steps, a.num_generations, a.max_completion_length,
            a.per_device_train_batch_size, a.logging_steps, a.output_dir) == (0.04, "dapo", "batch", 1e-3, 2, 4, 6, 16, 1, str(tmp_path))
    _, ours, _ = ours_tr.generate_and_score(ours_tr.prompt_rows(0))
    for k in ("reward", "reward_std", "rewards/graded/mean", "rewards/graded/std"):
        assert ours[k] == pytest.approx(theirs[k], rel=1e-5, abs=1e-6), (k, ours[k], theirs[k])
    ours_tr.train()
    logged = [json.loads(l) for l in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in logged] == [1, 2] and all(r["kl"] >= 0 for r in logged)     # beta > 0: π_ref and its KL


@pytest.mark.parametrize("chat", [False, True])
def test_reward_model_scores_equal_trl(tmp_path, chat):
    "A sequence-classification reward model scores what TRL's GRPOTrainer feeds it: the same text, tokens and logits."
    from transformers import Qwen2Config, Qwen2ForSequenceClassification
    from grpo_edu.rewards import ModelReward
    tok = toy_tokenizer()
    tok.chat_template = "{% for m in messages %}{{ m['content'] }}{% if m['role'] == 'user' %} {% else %}<eos>{% endif %}{% endfor %}"
    torch.manual_seed(0)
    rm = Qwen2ForSequenceClassification(Qwen2Config(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                                    num_attention_heads=4, num_key_value_heads=2, num_labels=1))
    path = tmp_path / "rm"; rm.save_pretrained(path); tok.save_pretrained(path)      # no pad_token_id in its config
    t = make_trl(tmp_path, reward_funcs=str(path))
    prompts = [f"{i}+{i}=" if i % 2 else f"{i}{i}+{i}=" for i in range(8)]
    completions = [str(7 * i) + "9" * (i % 3) for i in range(8)]                     # different lengths: padding matters
    if chat:
        prompts = [[{"role": "user", "content": p}] for p in prompts]
        completions = [[{"role": "assistant", "content": c}] for c in completions]
    theirs = t._calculate_rewards([{"prompt": p, "answer": "0"} for p in prompts], prompts, completions, [[0]] * 8)[:, 0]
    ours = ModelReward(str(path), batch_size=3)(prompts, completions)               # other batches than TRL's: same scores
    torch.testing.assert_close(torch.tensor(ours), theirs, rtol=1e-4, atol=1e-5)
    assert theirs.std() > 0                                                          # the texts really differ


def test_model_init_kwargs_load_the_models_as_trl_does(tmp_path):
    "A TRL recipe's model_init_kwargs (dtype, attn_implementation) reach the policy, π_ref and a reward model as in TRL."
    from transformers import Qwen2Config, Qwen2ForSequenceClassification
    from grpo_edu import GRPOConfig, GRPOTrainer
    tok = toy_tokenizer()
    rm = Qwen2ForSequenceClassification(Qwen2Config(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                                                    num_attention_heads=4, num_key_value_heads=2, num_labels=1))
    rpath = tmp_path / "rm"; rm.save_pretrained(rpath); tok.save_pretrained(rpath)
    kw = {"dtype": "bfloat16", "attn_implementation": "eager"}                        # transformers' default: fp32 (TRL's), sdpa
    t = make_trl(tmp_path, reward_funcs=str(rpath), beta=0.04, model_init_kwargs=dict(kw))
    args = GRPOConfig(model_init_kwargs=dict(kw), beta=0.04, num_generations=4, output_dir=str(tmp_path / "ours"), bf16=False)
    ours = GRPOTrainer(str(tmp_path / "tiny-qwen2"), [str(rpath)], args, Dataset.from_list([{"prompt": "1+1="}] * 4))
    seen = lambda m: (m.dtype, m.config._attn_implementation)
    assert seen(ours.accelerator.unwrap_model(ours.model)) == seen(t.model) == (torch.bfloat16, "eager")
    assert seen(ours.ref_model) == seen(t.ref_model)
    assert seen(ours.reward_funcs[0].model) == seen(t.reward_funcs[0]) == (torch.bfloat16, "eager")


def _fixed(values, name):
    "A reward function that hands out `values` in order, named `name` (TRL names metrics after __name__)."
    queue = list(values)
    def f(completions, **kw):
        out = queue[:len(completions)]; del queue[:len(completions)]
        return out
    f.__name__ = name
    return f


@pytest.mark.parametrize("aggregation", ["sum_then_normalize", "normalize_then_sum"])
def test_two_weighted_rewards_equal_trl(tmp_path, aggregation):
    "Two weighted reward functions, summed then normalised (TRL's default) or normalised then summed (GDPO): TRL's numbers."
    from grpo_edu.config import GRPOConfig
    from grpo_edu.trainer import GRPOTrainer
    other = [0.0, 1.0, 1.0, 0.0,   1.0, 0.0, 0.0, 0.0,   None, 1.0, 1.0, 1.0,   2.0, 0.0, 1.0, 0.0]
    t = make_trl(tmp_path, reward_funcs=[_fixed(REWARDS, "first"), _fixed(other, "second")], reward_weights=[1.0, 0.5],
                 multi_objective_aggregation=aggregation, per_device_train_batch_size=16)
    torch.manual_seed(0)
    out = t._generate_and_score_completions([{"prompt": f"{i}+{i}=", "answer": "0"} for i in range(4) for _ in range(4)])
    theirs = {k: v[-1] for k, v in (t._metrics["train"] or t._metrics["eval"]).items()}
    tok = toy_tokenizer()
    ours_tr = GRPOTrainer(toy_model(tok, hidden_size=32, num_layers=2, seed=0), [_fixed(REWARDS, "first"), _fixed(other, "second")],
                          GRPOConfig(output_dir=str(tmp_path / "ours"), num_generations=4, per_device_train_batch_size=16,
                                     max_completion_length=6, reward_weights=[1.0, 0.5], multi_objective_aggregation=aggregation,
                                     eval_dataset=None, max_steps=1),
                          Dataset.from_list([{"prompt": f"{i}+{i}=", "answer": "0"} for i in range(16)]), None, tok)
    batch, ours, _ = ours_tr.generate_and_score(ours_tr.prompt_rows(0))
    torch.testing.assert_close(batch.advantages, out["advantages"], rtol=1e-5, atol=1e-6)
    for k in ("reward", "reward_std", "frac_reward_zero_std", "rewards/first/mean", "rewards/second/std"):
        assert ours[k] == pytest.approx(theirs[k], rel=1e-5, abs=1e-6), (k, ours[k], theirs[k])
    if aggregation == "normalize_then_sum":              # and it really differs from summing first
        s = torch.tensor([float("nan") if x is None else x for x in REWARDS]).nan_to_num() + 0.5 * torch.tensor(
            [float("nan") if x is None else x for x in other]).nan_to_num()
        assert (group_advantages(s, 4) - batch.advantages).abs().max() > 0.1


THINK = ("{% if enable_thinking is defined and not enable_thinking %} {% endif %}"       # a Qwen3-style switch: a leading space
         "{% for m in messages %}{{ m['content'] }}{% endfor %}{% if add_generation_prompt %}={% endif %}")


def test_chat_template_kwargs_reach_every_template_as_in_trl(tmp_path):
    "chat_template_kwargs: the prompts we generate from, a reward model's input and the eval prompts get TRL's text."
    from trl.data_utils import apply_chat_template
    from grpo_edu.config import GRPOConfig
    from grpo_edu.rewards import ModelReward
    from grpo_edu.rollout import prompt_texts
    from grpo_edu.trainer import GRPOTrainer
    tok = toy_tokenizer(); tok.chat_template = THINK
    kw = {"enable_thinking": False}
    chats = [[{"role": "user", "content": f"{i}+{i}"}] for i in range(4)]
    ours = prompt_texts(tok, chats, kw)
    assert ours == [apply_chat_template({"prompt": c}, tok, **kw)["prompt"] for c in chats] and ours[0] == " 0+0="
    assert prompt_texts(tok, chats) == ["0+0=", "1+1=", "2+2=", "3+3="]                       # without: the default
    from transformers import Qwen2Config, Qwen2ForSequenceClassification
    rm = Qwen2ForSequenceClassification(Qwen2Config(vocab_size=len(tok), hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                                                    num_attention_heads=2, num_key_value_heads=1, num_labels=1))
    args = GRPOConfig(output_dir=str(tmp_path), num_generations=4, per_device_train_batch_size=8, max_completion_length=4,
                      eval_dataset=None, max_steps=1, chat_template_kwargs=kw, max_prompt_length=None)
    tr = GRPOTrainer(toy_model(tok, seed=0), ["accuracy", rm], args,
                     Dataset.from_list([{"prompt": c, "answer": "0"} for c in chats]), None, tok, [None, tok])
    done = [[{"role": "assistant", "content": "12"}]] * 4
    assert tr.reward_funcs[1].texts(chats, done) == [apply_chat_template({"messages": c + d}, tok, **kw)["text"]
                                                     for c, d in zip(chats, done)] == [f" {i}+{i}12" for i in range(4)]
    batch, _, _ = tr.generate_and_score(tr.prompt_rows(0))
    P = batch.input_ids.size(1) - batch.logits_to_keep
    assert all(t.startswith(" ") for t in tok.batch_decode(batch.input_ids[:, :P], skip_special_tokens=True))
    assert tr.accuracy(Dataset.from_list([{"prompt": c, "answer": "0"} for c in chats]))["n"] == 4


@pytest.mark.parametrize("loss_type", ["dapo", "grpo", "cispo"])
def test_a_generation_split_over_steps_equals_trl(tmp_path, loss_type):
    "steps_per_generation = 2 × gradient_accumulation_steps: each of the two optimizer steps has TRL's gradient on its rows."
    from test_memory_paths import grads_of_update, make_trainer
    from grpo_edu.step import split_round
    extra = {"epsilon_high": 1.3} if loss_type == "cispo" else {}
    tr = make_trainer(loss_type=loss_type, per_device_train_batch_size=8, gradient_accumulation_steps=2, steps_per_generation=4,
                      bucket_by_length=False, max_grad_norm=1e9, **extra)              # TRL's micro-batches: rows in order
    assert (tr.plan.optimizer_steps_per_pass, tr.plan.optimizer_steps_per_round, tr.plan.prompts_per_process) == (2, 2, 4)
    batch, _, _ = tr.generate_and_score(tr.prompt_rows(0))                           # 4 prompts × 8 = 32 completions
    assert batch.old_logps is not None                            # the second step sees them after an update: π_old kept
    batch.old_logps = batch.old_logps + 0.3 * torch.randn(batch.old_logps.shape, generator=torch.Generator().manual_seed(0))
    parts = split_round(batch, 2, torch.Generator().manual_seed(1))
    t = trl_on(tr, tmp_path, gradient_accumulation_steps=2, steps_per_generation=4, loss_type=loss_type, **extra)
    for part in parts:
        assert part.input_ids.size(0) == 16
        _, ours = grads_of_update(tr, part)
        theirs = trl_step_grads(t, part, batch.round_tokens)              # TRL's: the whole generation's tokens
        for n, g in theirs.items(): torch.testing.assert_close(ours[n], g, rtol=1e-4, atol=1e-6)
        assert max(g.abs().max().item() for g in theirs.values()) > 1e-4


def test_sync_ref_model_equals_trl(tmp_path):
    "sync_ref_model: after the trainer's steps, π_ref is what TRL's SyncRefModelCallback makes of the same policies."
    from trl.trainer.callbacks import SyncRefModelCallback
    from test_memory_paths import make_trainer
    tr = make_trainer(max_steps=3, sync_ref_model=True, ref_model_sync_steps=2, ref_model_mixup_alpha=0.6, beta=0.04,
                      gradient_accumulation_steps=1)
    model = tr.accelerator.unwrap_model(tr.model)
    expected, policies = copy.deepcopy(tr.ref_model), []
    update = tr.update
    def recording(batch):
        out = update(batch); policies.append(copy.deepcopy(model)); return out
    tr.update = recording
    tr.train()
    for step, pol in enumerate(policies, 1):                       # TRL's callback runs at each step's end
        if step % 2 == 0: SyncRefModelCallback._sync_target_model(pol, expected, 0.6)
    assert len(policies) == 3
    for (n, a), b in zip(tr.ref_model.named_parameters(), expected.parameters()): torch.testing.assert_close(a, b, rtol=0, atol=1e-7)
    init = make_trainer().ref_model                                 # it really moved: not the initial model, not the policy
    assert max((a - b).abs().max().item() for a, b in zip(tr.ref_model.parameters(), init.parameters())) > 1e-5
    assert max((a - b).abs().max().item() for a, b in zip(tr.ref_model.parameters(), model.parameters())) > 1e-5


def trl_on(tr, tmp_path, **kw):
    "TRL's GRPOTrainer on our trainer's weights (π_ref loaded from them too), per_device_train_batch_size 8, β 0.04."
    path = tmp_path / "policy"
    tr.accelerator.unwrap_model(tr.model).save_pretrained(path); tr.tokenizer.save_pretrained(path)
    t = TRLTrainer(model=str(path), reward_funcs=lambda completions, **k: [0.0] * len(completions), processing_class=tr.tokenizer,
                   train_dataset=Dataset.from_list([{"prompt": "1+1="}] * 8),
                   args=TRLConfig(output_dir=str(tmp_path / "trl"), use_cpu=True, bf16=False, report_to="none", save_strategy="no",
                                  per_device_train_batch_size=8, num_generations=8, max_completion_length=8, beta=0.04, **kw))
    t.model.train(); t.current_gradient_accumulation_steps = kw.get("gradient_accumulation_steps", 1)
    return t


def trl_step_grads(t, batch, num_items) -> dict:
    "The summed gradients of TRL's _compute_loss over the batch's micro-batches of 8 rows, in order."
    named = [(n, p) for n, p in t.model.named_parameters() if p.requires_grad]
    theirs, K = [torch.zeros_like(p) for _, p in named], batch.logits_to_keep
    for rows in torch.arange(batch.input_ids.size(0)).split(8):
        ids, attn = batch.input_ids[rows], batch.attention_mask[rows]
        pick = lambda key: None if getattr(batch, key) is None else getattr(batch, key)[rows]
        inputs = {"prompt_ids": ids[:, :-K], "prompt_mask": attn[:, :-K], "completion_ids": ids[:, -K:],
                  "completion_mask": batch.mask[rows], "advantages": batch.advantages[rows],
                  "old_per_token_logps": pick("old_logps"), "ref_per_token_logps": pick("ref_logps"), "num_items_in_batch": num_items}
        for g, x in zip(theirs, torch.autograd.grad(t._compute_loss(t.model, inputs), [p for _, p in named])): g += x
    return {n: g for (n, _), g in zip(named, theirs)}


@pytest.mark.parametrize("case", ["static", "static+top_entropy_quantile", "adaptive"])
def test_entropy_bonus_equals_trl(tmp_path, case):
    "entropy_coef, and Skywork-OR1's adaptive control of it: each step's gradient and coefficient equal TRL's."
    from test_memory_paths import grads_of_update, make_trainer
    kw = dict(entropy_coef=0.01, gradient_accumulation_steps=2)
    if case == "static+top_entropy_quantile": kw["top_entropy_quantile"] = 0.5
    if case == "adaptive":            # TRL updates the controller after every _compute_loss call here: one micro-batch a step
        kw = dict(entropy_coef=0.01, use_adaptive_entropy=True, entropy_target=100.0, entropy_coef_delta=0.02,
                  entropy_coef_max=0.04, gradient_accumulation_steps=1)
    tr = make_trainer(loss_type="dapo", per_device_train_batch_size=8, max_grad_norm=1e9, **kw)
    t = trl_on(tr, tmp_path, loss_type="dapo", **kw)
    batch, _, _ = tr.generate_and_score(tr.prompt_rows(0))
    coefs = []
    for step in range(3):                                               # the same weights each step: only the coefficient moves
        out, ours = grads_of_update(tr, batch)
        theirs = trl_step_grads(t, batch, batch.round_tokens)
        for n, g in theirs.items(): torch.testing.assert_close(ours[n], g, rtol=1e-4, atol=1e-6)
        assert out["entropy_coef"] == pytest.approx(t.entropy_coef)
        assert tr.entropy_control.last_world_entropy == pytest.approx(t._last_world_entropy)
        coefs.append(out["entropy_coef"])
    if case == "adaptive": assert coefs == pytest.approx([0.03, 0.04, 0.04])   # +δ while H ≤ target, capped at the max
    tr.entropy_control.entropy_coef, tr.entropy_control.use_adaptive_entropy = 0.0, False   # without the bonus: another gradient
    assert max((grads_of_update(tr, batch)[1][n] - g).abs().max().item() for n, g in theirs.items()) > 1e-6


def test_every_trl_grpo_field_is_ours_or_explained():
    "Each field TRL's GRPOConfig adds to TrainingArguments is a GRPOConfig field here, read as TRL's, or refused with why."
    import dataclasses
    from transformers import TrainingArguments
    from grpo_edu.config import FIELD_NAMES
    from grpo_edu.recipe import SETTINGS_HONOURED, not_a_field
    base = {f.name for f in dataclasses.fields(TrainingArguments)}
    theirs = [f.name for f in dataclasses.fields(TRLConfig) if f.name not in base]
    assert len(theirs) > 60
    unexplained = [k for k in theirs if k not in FIELD_NAMES and k not in SETTINGS_HONOURED
                   and "(a TRL one:" not in not_a_field(k)]
    assert not unexplained, unexplained
    from grpo_edu.config import GRPOConfig
    ours, trl_defaults = GRPOConfig(), TRLConfig(output_dir="/tmp/unused", use_cpu=True)
    differ = {k for k in FIELD_NAMES if hasattr(trl_defaults, k) and getattr(ours, k) != getattr(trl_defaults, k)}
    assert differ == {
        "steps_per_generation", "generation_batch_size",   # TRL resolves None to gradient_accumulation_steps in __post_init__
        "max_completion_length",                            # 256: GSM8K answers fit; the recipes set 512 where it matters
        "num_completions_to_print",                          # 4 rows into completions.jsonl (TRL: all, to the console)
        "bf16",                                              # None: on where the GPU supports it (TRL: True, fails on CPU)
        "use_cpu",                                           # False in both: set above only so that TRL's config builds here
        "gradient_checkpointing",                            # off for the tiny default model; the 4090 recipes turn it on
        "optim",                                             # adamw_torch (TRL: the fused CUDA kernel of the same AdamW)
        "vllm_importance_sampling_correction",               # None: on where the sampler differs from π_θ (TRL: True, vLLM only)
        "eval_steps", "logging_steps", "save_steps", "save_total_limit", "output_dir", "per_device_eval_batch_size",
    }, differ                                                # (the run's bookkeeping: see GRPOConfig)


IS_CASES = [(mode, lt, extra) for mode in ("token_truncate", "token_mask", "sequence_truncate", "sequence_mask")
            for lt in ("grpo", "dapo")  for extra in ({}, {"vllm_importance_sampling_clip_min": 0.5})]
IS_CASES += [("token_mask", "vespo", {}), ("token_truncate", "vespo", {"vllm_importance_sampling_clip_min": 0.5}),
             ("sequence_mask", "dapo", {"off_policy_mask_threshold": 0.05}), ("token_truncate", "cispo", {"epsilon_high": 5.0}),
             ("sequence_truncate", "grpo", {"importance_sampling_level": "sequence", "beta": 0.04})]


@pytest.mark.parametrize("mode,loss_type,extra", IS_CASES, ids=[f"{m}-{l}-{'-'.join(e)}" for m, l, e in IS_CASES])
def test_sampler_correction_equals_trl(tmp_path, mode, loss_type, extra):
    "A sampler q ≠ π_old: TRL's importance weights (every mode), its sampling/* metrics, and the corrected loss and gradient."
    from grpo_edu.loss import SamplerCorrection, importance_sampling_ratio, sampling_metrics
    kw = {"vllm_importance_sampling_mode": mode, "vllm_importance_sampling_clip_max": 1.5, "loss_type": loss_type, **extra}
    t = make_trl(tmp_path, reward_funcs=lambda completions, **k: [1.0, 0.0, 0.0, 1.0, 2.0, 0.0, 1.0, 0.5], **kw)
    model, tok = t.model, t.processing_class
    pids, pmask, cids, cmask, _, g = _inputs(tok)
    prompt_lists = [ids[m.bool()].tolist() for ids, m in zip(pids, pmask)]
    completion_lists = [ids[m.bool()].tolist() for ids, m in zip(cids, cmask)]
    with torch.no_grad():
        trainer_logps = per_token_logps(model, torch.cat([pids, cids], 1), torch.cat([pmask, cmask], 1), cids.size(1))
    logq = (trainer_logps + 0.4 * torch.randn(trainer_logps.shape, generator=g)) * cmask    # a sampler that differs
    sampled = [row[m.bool()].tolist() for row, m in zip(logq, cmask)]
    texts = tok.batch_decode(cids, skip_special_tokens=True)
    t.use_vllm, t.vllm_importance_sampling_correction = True, True                    # TRL's path for a separate sampler
    t._generate = lambda prompts: (prompt_lists, completion_lists, None, texts, sampled, {}, None, None)
    model.train()
    out = t._generate_and_score_completions([{"prompt": f"{i}+{i}="} for i in range(8)])
    old = out["old_per_token_logps"]
    ours_ratio = importance_sampling_ratio(old, logq, cmask, mode, extra.get("vllm_importance_sampling_clip_min"), 1.5)
    torch.testing.assert_close(ours_ratio, out["importance_sampling_ratio"], rtol=1e-6, atol=1e-7)
    assert ((ours_ratio != 1) & (ours_ratio != 0)).any()                              # weights that are not trivial,
    assert (ours_ratio == (1.5 if mode.endswith("truncate") else 0.0)).any()          # and the bound binds somewhere
    theirs = {k: v[-1] for k, v in t._metrics["train"].items() if k.startswith("sampling/")}
    ours = {k: v.item() for k, v in sampling_metrics(old, logq, ours_ratio, cmask).items()}
    assert set(ours) == set(theirs)
    for k in ours: assert ours[k] == pytest.approx(theirs[k], rel=1e-5, abs=1e-7), (k, ours[k], theirs[k])
    # the corrected loss and every gradient
    t.current_gradient_accumulation_steps = 1
    params = [p for p in model.parameters() if p.requires_grad]
    loss_trl = t._compute_loss(model, out)
    g_trl = torch.autograd.grad(loss_trl, params)
    ids, attn = torch.cat([pids, cids], 1), torch.cat([pmask, cmask], 1)
    logps = per_token_logps(model, ids, attn, cids.size(1))
    beta = extra.get("beta", 0.0)
    options, num_items = LossOptions.from_config(t.args), out["num_items_in_batch"]
    assert (options.beta, options.loss_type, options.epsilon_high) == (beta, loss_type, extra.get("epsilon_high"))
    assert (options.epsilon, options.max_completion_length) == (0.2, 6)           # read from TRL's config by name
    ours_loss, _ = grpo_loss(logps, old, out.get("ref_per_token_logps") if beta else None, out["advantages"], cmask,
                             options, SamplerCorrection(ours_ratio, logq), num_items_in_batch=num_items)
    g_ours = torch.autograd.grad(ours_loss, params, retain_graph=True)
    assert ours_loss.item() == pytest.approx(loss_trl.item(), rel=1e-5, abs=1e-7)
    for a, b in zip(g_ours, g_trl): torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-7)
    assert max(x.abs().max().item() for x in g_trl) > 1e-5
    plain, _ = grpo_loss(logps, old, out.get("ref_per_token_logps") if beta else None, out["advantages"], cmask, options,
                         num_items_in_batch=num_items)
    g_plain = torch.autograd.grad(plain, params)
    assert max((a - b).abs().max().item() for a, b in zip(g_plain, g_trl)) > 1e-6     # the correction changed the step
