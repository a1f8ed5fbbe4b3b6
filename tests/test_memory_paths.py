"""The lean-memory paths of the update give the same step as the plain ones: micro-batches bucketed by length and
cut to their longest completion, the chunked lm_head, and bitsandbytes' 8-bit AdamW (states really 8-bit)."""
import copy, tempfile
import pytest
import torch
from grpo_edu.config import GRPOConfig
from grpo_edu.errors import GRPOEduError
from grpo_edu.toy import addition_dataset, toy_model, toy_tokenizer
from grpo_edu.trainer import GRPOTrainer


def make_trainer(**kw):
    tok = toy_tokenizer(); model = toy_model(tok, seed=0)
    args = GRPOConfig(**{**dict(max_steps=2, per_device_train_batch_size=16, gradient_accumulation_steps=4, num_generations=8,
                                max_completion_length=8, max_prompt_length=None, output_dir=tempfile.mkdtemp(), eval_dataset=None,
                                learning_rate=1e-3, beta=0.04, seed=3), **kw})
    sevens = lambda completions, **k: [float(c.count("7")) - 0.3 * len(c) for c in completions]   # varied lengths pay off
    return GRPOTrainer(model, sevens, args, addition_dataset(64, seed=0), processing_class=tok)


def grads_of_update(tr, batch):
    "The step's loss, metrics and clipped gradients, with the optimizer step and zero_grad switched off."
    model = tr.accelerator.unwrap_model(tr.model)
    model.zero_grad(set_to_none=True)
    tr.optimizer.step, tr.optimizer.zero_grad = (lambda *a, **k: None), (lambda *a, **k: None)
    out = tr.update(batch)
    return out, {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


@pytest.mark.parametrize("loss_type,checkpointing", [("grpo", False), ("dapo", False), ("dr_grpo", False), ("bnpo", False),
                                                     ("dapo", True)])
def test_bucketing_and_chunked_head_do_not_change_the_step(loss_type, checkpointing):
    tr = make_trainer(loss_type=loss_type, gradient_checkpointing=checkpointing)
    batch, _, _ = tr.generate_and_score(tr.prompt_rows(0))
    lengths = batch.attention_mask[:, -batch.logits_to_keep:].sum(1)
    assert lengths.unique().numel() > 1, "the test needs completions of different lengths"
    tr.args.bucket_by_length, tr.args.lm_head_chunk_size = False, 0
    ref, g_ref = grads_of_update(tr, batch)
    tr.args.bucket_by_length, tr.args.lm_head_chunk_size = True, 7
    new, g_new = grads_of_update(tr, batch)
    assert abs(new["loss"] - ref["loss"]) < 1e-6 and abs(new["grad_norm"] - ref["grad_norm"]) < 1e-5
    for k in ("kl", "entropy", "clip_ratio/region_mean"):
        assert abs(new[k] - ref[k]) < 1e-5, k
    for n in g_ref: torch.testing.assert_close(g_new[n], g_ref[n], rtol=1e-4, atol=1e-6)


def test_adamw_8bit():
    "optim=adamw_8bit: bitsandbytes' AdamW8bit with uint8 states for the big matrices; the run trains."
    pytest.importorskip("bitsandbytes", reason="bitsandbytes is not installed (pip install bitsandbytes)")
    tr = make_trainer(optim="adamw_8bit", beta=0.0)
    assert type(tr.optimizer.optimizer).__name__ == "AdamW8bit"
    model = tr.accelerator.unwrap_model(tr.model)
    before = copy.deepcopy(model.state_dict())
    tr.train()
    big = max(model.parameters(), key=lambda p: p.numel())
    st = tr.optimizer.optimizer.state[big]
    assert st["state1"].dtype == torch.uint8 and st["state2"].dtype == torch.uint8
    assert any(not torch.equal(before[k], v) for k, v in model.state_dict().items())


def test_unknown_optim_is_named():
    with pytest.raises(GRPOEduError, match="optim='adamw'.*adamw_torch"):
        GRPOConfig(optim="adamw").validate()


def test_adamw_8bit_without_bitsandbytes_says_how(monkeypatch):
    import importlib.util
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "bitsandbytes" else real(name, *a))
    with pytest.raises(GRPOEduError, match="pip install bitsandbytes"):
        from grpo_edu.preflight import check_config
        check_config(GRPOConfig(optim="adamw_8bit"))


@pytest.mark.parametrize("loss_type,extra", [("grpo", {}), ("dapo", {}), ("dr_grpo", {}), ("cispo", {"epsilon_high": 1.3}),
                                             ("sapo", {}), ("luspo", {"importance_sampling_level": "sequence"}),
                                             ("dapo", {"delta": 1.5}), ("grpo", {"use_bias_correction_kl": False}),
                                             ("vespo", {}), ("dapo", {"off_policy_mask_threshold": 0.05}),
                                             ("dapo", {"top_entropy_quantile": 0.3, "gradient_accumulation_steps": 1})])
def test_accumulated_update_equals_the_loss_on_the_whole_batch(loss_type, extra):
    "Four bucketed micro-batches give the gradient of grpo_loss on the whole batch at once: each loss type is normalised once."
    from grpo_edu.logprobs import per_token_logps
    from grpo_edu.loss import LossOptions, grpo_loss, high_entropy_mask
    tr = make_trainer(loss_type=loss_type, max_grad_norm=1e9, **extra)                 # no clipping of the total gradient
    a, model = tr.args, tr.accelerator.unwrap_model(tr.model)
    batch, _, _ = tr.generate_and_score(tr.prompt_rows(0))
    ids, attn, K = batch.input_ids, batch.attention_mask, batch.logits_to_keep
    assert attn[:, -K:].sum(1).unique().numel() > 1, "the test needs completions of different lengths"
    with torch.no_grad(): now = per_token_logps(model, ids, attn, K, a.temperature)
    batch.old_logps = now + 0.3 * torch.randn(now.shape, generator=torch.Generator().manual_seed(0))   # π_old ≠ π_θ
    out, grads = grads_of_update(tr, batch)
    model.zero_grad(set_to_none=True)
    logps, ent = per_token_logps(model, ids, attn, K, a.temperature, compute_entropy=True)
    keep = None                      # the entropy mask is per micro-batch (as TRL's): one micro-batch here, the whole batch
    if a.top_entropy_quantile < 1: keep = high_entropy_mask(ent.detach(), batch.mask, a.top_entropy_quantile)
    loss_kw = {k: v for k, v in extra.items() if k not in ("epsilon_high", "top_entropy_quantile", "gradient_accumulation_steps")}
    options = LossOptions(beta=a.beta, epsilon=a.epsilon, epsilon_high=a.epsilon_high, loss_type=loss_type,
                          max_completion_length=a.max_completion_length, **loss_kw)
    whole, _ = grpo_loss(logps, batch.old_logps, batch.ref_logps, batch.advantages, batch.mask, options,
                         entropy_mask=keep, num_items_in_batch=batch.round_tokens)
    whole.backward()
    assert out["loss"] == pytest.approx(whole.item(), rel=1e-5, abs=1e-7)
    for n, p in model.named_parameters(): torch.testing.assert_close(grads[n], p.grad, rtol=1e-4, atol=1e-6)
    assert max(p.grad.abs().max().item() for p in model.parameters()) > 1e-4


def test_transformers_options_reach_the_optimizer_scheduler_and_data():
    "warmup_steps (steps or a fraction), adam_epsilon, shuffle_dataset, max_grad_norm=0 and disable_dropout do what TRL's do."
    from grpo_edu.toy import addition_dataset
    tr = make_trainer(max_steps=4, warmup_steps=0.5, adam_epsilon=1e-5, shuffle_dataset=False, max_grad_norm=0, disable_dropout=True)
    test_lr = [tr.scheduler.get_last_lr()[0]]
    assert tr.optimizer.param_groups[0]["eps"] == 1e-5
    rows = tr.prompt_rows(0)
    assert [r["prompt"] for r in rows] == addition_dataset(64, seed=0)[:len(rows)]["prompt"]      # the dataset's own order
    batch, _, _ = tr.generate_and_score(rows)
    out, grads = grads_of_update(tr, batch)
    test_lr.append(tr.scheduler.get_last_lr()[0])
    assert test_lr == [0.0, pytest.approx(0.5e-3)]                          # 2 warmup steps of 4: 0, then half of 1e-3
    norm = torch.sqrt(sum((g.float() ** 2).sum() for g in grads.values())).item()
    assert norm == pytest.approx(out["grad_norm"], rel=1e-4) and norm > 1.0  # measured, not clipped to 1
    shuffled = make_trainer(max_steps=4).prompt_rows(0)
    assert [r["prompt"] for r in shuffled] != [r["prompt"] for r in rows]    # the default shuffles, as TRL's


def test_a_rollout_round_feeds_steps_per_generation_micro_batches():
    "steps_per_generation = 2 × accumulation: one rollout round every 2 steps, its rows split between them, each used once."
    tr = make_trainer(max_steps=4, per_device_train_batch_size=8, gradient_accumulation_steps=2, steps_per_generation=4)
    gens, steps = [], []
    generate, update = tr.generate_and_score, tr.update
    def generating(rows):
        out = generate(rows); gens.append((tr.step, out[0])); return out
    def updating(batch): steps.append(batch); return update(batch)
    tr.generate_and_score, tr.update = generating, updating
    tr.train()
    assert [s for s, _ in gens] == [0, 2]                               # steps 0-1 share one rollout round, 2-3 the next
    for g, (_, batch) in enumerate(gens):
        assert batch.input_ids.size(0) == 32 and batch.old_logps is not None
        a, b = steps[2 * g], steps[2 * g + 1]
        assert a.input_ids.size(0) == b.input_ids.size(0) == 16   # per_device_train_batch_size × accumulation each
        key = lambda ids, adv: sorted(map(tuple, torch.cat([ids, adv[:, None].double().mul(1e6).long()], 1).tolist()))
        both = key(torch.cat([a.input_ids, b.input_ids]), torch.cat([a.advantages, b.advantages]))
        assert both == key(batch.input_ids, batch.advantages)                                   # every row once
        assert a.round_tokens == b.round_tokens == batch.round_tokens   # the round's (TRL's)
    # an epoch is as many optimizer steps as before: each still takes per_device_train_batch_size × accumulation completions
    for kw, want in [({}, 32), ({"steps_per_generation": 4}, 32), ({"steps_per_generation": 4, "num_iterations": 2}, 64)]:
        t = make_trainer(max_steps=-1, num_train_epochs=1, per_device_train_batch_size=8, gradient_accumulation_steps=2,
                         **kw)
        assert t.max_steps == want, (kw, t.max_steps)


def test_sync_ref_model_is_refused_on_sharded_weights(monkeypatch):
    "FSDP / ZeRO-3 slice the policy across processes: sync_ref_model says so before any model loads, and what to use."
    from grpo_edu.distributed import Placement
    monkeypatch.setattr(Placement, "of", classmethod(lambda cls, accelerator: Placement(sharded_weights=True)))
    with pytest.raises(GRPOEduError, match="Use DDP or ZeRO-2"):
        GRPOTrainer("/no/such/model/never/loaded", lambda completions, **k: [0.0] * len(completions),
                    GRPOConfig(beta=0.04, sync_ref_model=True, eval_dataset=None))
