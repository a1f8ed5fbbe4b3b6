"""The sampler's log-probs through the trainer, and the importance-sampling correction in a run.

The formulas themselves are checked against TRL 1.16 in tests/test_trl_oracle.py (test_sampler_correction_equals_trl);
here: when the trainer turns the correction on, what it hands the loss, what it logs, and that a step with it equals
the step the loss computes by hand.
"""
import dataclasses, math
import pytest
import torch
from test_memory_paths import grads_of_update, make_trainer
from grpo_edu.logprobs import per_token_logps
from grpo_edu.loss import importance_sampling_ratio

SAMPLING = ["sampling/sampling_logp_difference/mean", "sampling/sampling_logp_difference/max",
            "sampling/importance_sampling_ratio/min", "sampling/importance_sampling_ratio/mean",
            "sampling/importance_sampling_ratio/max"]


def test_plain_fp32_sampling_needs_no_correction():
    "On a CPU in fp32 without filters the sampler is π_θ: auto leaves the correction off, and nothing extra is computed."
    tr = make_trainer(max_steps=1, beta=0.0, gradient_accumulation_steps=1, per_device_train_batch_size=64)
    assert tr.sampling.return_logprobs is False
    batch, metrics, _ = tr.generate_and_score(tr.prompt_rows(0))
    assert batch.sampler is None and batch.old_logps is None and not set(SAMPLING) & set(metrics)


def test_forced_on_in_fp32_the_weights_are_one():
    "Forced on without a filter, q = π_θ up to float rounding: |log π_old − log q| < 1e-4 and every weight ≈ 1."
    tr = make_trainer(max_steps=1, beta=0.0, vllm_importance_sampling_correction=True,
                      vllm_importance_sampling_mode="token_truncate")
    batch, metrics, _ = tr.generate_and_score(tr.prompt_rows(0))
    assert set(SAMPLING) <= set(metrics)
    assert metrics["sampling/sampling_logp_difference/max"] < 1e-4
    assert abs(metrics["sampling/importance_sampling_ratio/min"] - 1) < 1e-4
    assert abs(metrics["sampling/importance_sampling_ratio/max"] - 1) < 1e-4


def test_a_filter_alone_leaves_auto_off():
    "top_p cuts q's support: no weight restores what it never draws, and ∏ kept mass collapses with length; auto stays off."
    assert make_trainer(max_steps=1, top_p=0.8).sampling.return_logprobs is False
    assert make_trainer(max_steps=1, repetition_penalty=1.2).sampling.return_logprobs is True     # the same support, reshaped


@pytest.mark.parametrize("mode", ["token_truncate", "sequence_mask"])
def test_top_p_forced_on_the_step_uses_the_weights(mode):
    "Asked for with top_p: log q is the renormalised nucleus's, and the update weighs each token by π_old/q."
    tr = make_trainer(max_steps=1, beta=0.0, top_p=0.8, gradient_accumulation_steps=1, per_device_train_batch_size=64,
                      vllm_importance_sampling_mode=mode, loss_type="grpo", max_grad_norm=1e9,
                      vllm_importance_sampling_correction=True)
    assert tr.sampling.return_logprobs is True
    batch, metrics, _ = tr.generate_and_score(tr.prompt_rows(0))
    mask, logq, old = batch.mask, batch.sampler.logps, batch.old_logps
    # top-p keeps a nucleus and renormalises it, so q ≥ π_θ on every sampled token: π_old / q ≤ 1
    assert ((old - logq)[mask.bool()] <= 1e-4).all()                                  # (fp32 rounding: 1e-4)
    assert ((old - logq)[mask.bool()] < -1e-3).any()                                   # and the nucleus cut something
    torch.testing.assert_close(batch.sampler.ratio, importance_sampling_ratio(old, logq, mask, mode, None, 3.0))
    assert metrics["sampling/importance_sampling_ratio/max"] <= 1 + 1e-3
    assert 0 < metrics["sampling/importance_sampling_ratio/min"] < 1
    # the update's gradient is the corrected loss's; without the weights it differs
    out, with_weights = grads_of_update(tr, batch)
    batch_plain = dataclasses.replace(batch, sampler=None)
    _, without = grads_of_update(tr, batch_plain)
    assert max((with_weights[n] - without[n]).abs().max().item() for n in without) > 1e-6
    assert math.isfinite(out["loss"])


def test_a_corrected_toy_run_logs_trls_metrics(tmp_path):
    "Two optimizer steps with top_k, corrected: the sampling/* metrics land in metrics.jsonl under TRL's names."
    import json
    tr = make_trainer(max_steps=2, top_k=5, output_dir=str(tmp_path), logging_steps=1,
                      vllm_importance_sampling_correction=True)
    tr.train()
    rows = [json.loads(line) for line in open(tmp_path / "metrics.jsonl")]
    logged = [r for r in rows if "sampling/importance_sampling_ratio/mean" in r]
    assert len(logged) == 2
    assert all(0 < r["sampling/importance_sampling_ratio/mean"] <= 3.0 for r in logged)
