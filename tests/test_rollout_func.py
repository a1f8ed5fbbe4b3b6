"""TRL's `rollout_func`: a user's own rollout (an environment, an agent) feeds grpo_edu's step."""
import tempfile
import pytest
import torch
from datasets import Dataset
from grpo_edu import GRPOConfig, GRPOTrainer
from grpo_edu.toy import toy_model, toy_tokenizer


def environment_rollout(tokenizer):
    "A rollout_func whose completions hold one environment token (masked out of the loss)."
    calls = []

    def rollout_func(prompts, trainer):
        calls.append(len(prompts))
        prompt_ids = [tokenizer(p, add_special_tokens=False)["input_ids"] for p in prompts]
        completion_ids = [[5 + i % 3, 9, tokenizer.eos_token_id] for i in range(len(prompts))]
        return {"prompt_ids": prompt_ids, "completion_ids": completion_ids,
                "logprobs": [[-1.0, 0.0, -1.0]] * len(prompts), "env_mask": [[1, 0, 1]] * len(prompts),
                "source": ["env"] * len(prompts)}
    return rollout_func, calls


def run(tmp_path, reward, rollout_func, **fields):
    tok = toy_tokenizer()
    model = toy_model(tok, hidden_size=16, num_layers=1, seed=0)
    args = GRPOConfig(output_dir=str(tmp_path), num_generations=4, per_device_train_batch_size=8, max_steps=2,
                      learning_rate=0.1, bf16=False, logging_steps=1, save_steps=0, **fields)
    rows = Dataset.from_list([{"prompt": f"{i}+{i}="} for i in range(8)])
    return GRPOTrainer(model, reward, args, rows, processing_class=tok, rollout_func=rollout_func), model


def test_rollout_func_feeds_the_step(tmp_path):
    tok = toy_tokenizer()
    rollout_func, calls = environment_rollout(tok)
    seen = []

    def first_token(completion_ids, source, **kw):        # rollout_func's own column reaches the rewards
        seen.append(list(source))
        return [float(ids[0]) for ids in completion_ids]
    trainer, model = run(tmp_path, first_token, rollout_func)
    before = [p.detach().clone() for p in model.parameters()]
    trainer.train()
    assert calls == [8, 8]                                   # 2 prompts × G = 4, each round
    assert seen[0] == ["env"] * 8
    assert any(not torch.equal(a, b) for a, b in zip(before, model.parameters()))
    first = trainer.state.log_history[0]
    assert first["completions/mean_length"] == 2.0           # the environment's token is not the model's
    assert first["reward_std"] > 0


def test_rollout_func_missing_keys_is_refused(tmp_path):
    broken = lambda prompts, trainer: {"prompt_ids": [[1]] * len(prompts), "completion_ids": [[2]] * len(prompts)}
    trainer, _ = run(tmp_path, lambda completions, **kw: [0.0] * len(completions), broken)
    with pytest.raises(ValueError, match=r"rollout_func must return keys \['logprobs'\]"):
        trainer.train()
