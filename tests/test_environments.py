"""TRL's `environment_factory` on grpo_edu's own path: `reset` writes each prompt, `get_reward` scores it, the
reward functions get the environments, and evaluation runs them too. (TRL's own environment tests, tool calls
included, run in tests/trl_suite.)"""
import pytest
import torch
from datasets import Dataset
from grpo_edu import GRPOConfig, GRPOTrainer
from grpo_edu.toy import toy_model, toy_tokenizer


class Addition:
    "An environment that writes its own question: a + 2 for the next a."
    made = 0

    def __init__(self):
        Addition.made += 1
        self.index = Addition.made

    def reset(self, **row):
        self.a = (self.index + len(row)) % 7
        return f"{self.a}+2="

    def get_reward(self) -> float:
        return float(self.a)


def trainer_for(tmp_path, reward_funcs, rollout_func=None, **fields):
    tok = toy_tokenizer()
    model = toy_model(tok, hidden_size=16, num_layers=1, seed=0)
    args = GRPOConfig(output_dir=str(tmp_path), num_generations=4, per_device_train_batch_size=8, max_steps=2,
                      learning_rate=0.1, bf16=False, logging_steps=1, save_steps=0, max_completion_length=4,
                      **fields)
    rows = Dataset.from_list([{"prompt": ""}] * 4)
    return GRPOTrainer(model, reward_funcs, args, rows, processing_class=tok, environment_factory=Addition,
                       rollout_func=rollout_func)


def test_environments_write_prompts_and_score(tmp_path):
    seen = []

    def digits(prompts, completions, environments, **kw):
        seen.append((list(prompts), list(environments)))
        return [float(sum(ch.isdigit() for ch in c)) for c in completions]

    trainer = trainer_for(tmp_path, digits, reward_weights=[0.5])
    assert trainer.reward_func_names == ["digits", "Addition"]
    assert trainer.reward_weights.tolist() == [0.5, 1.0]
    before = [p.detach().clone() for p in trainer.model.parameters()]
    trainer.train()
    prompts, environments = seen[-1]
    assert len(environments) == 8 and len({id(e) for e in environments}) == 8   # one per completion
    assert environments == trainer.environments
    assert prompts == [f"{e.a}+2=" for e in environments]                       # what reset() wrote
    logged = trainer.state.log_history[-1]
    expected = sum(e.a for e in environments) / 8                               # get_reward, the last round
    assert logged["rewards/Addition/mean"] == pytest.approx(expected)
    assert any(not torch.equal(a, b) for a, b in zip(before, trainer.model.parameters()))
    assert len(trainer._environment_pool[None]) == 8                            # grown once, then reused


def test_evaluation_runs_the_environments(tmp_path):
    trainer = trainer_for(tmp_path, lambda completions, **kw: [0.0] * len(completions))
    metrics = trainer.evaluate(Dataset.from_list([{"prompt": "", "answer": "5"}] * 2))
    assert "eval_rewards/Addition/mean" in metrics and "eval_accuracy" not in metrics
    assert len(trainer.environments) == 2 * 4


def test_rollout_func_gets_what_reset_wrote(tmp_path):
    tok, seen = toy_tokenizer(), []

    def rollout_func(prompts, trainer):
        seen.append(list(prompts))
        ids = [tok(p, add_special_tokens=False)["input_ids"] for p in prompts]
        completions = [[5 + i % 3, tok.eos_token_id] for i in range(len(prompts))]
        return {"prompt_ids": ids, "completion_ids": completions, "logprobs": [[-1.0, -1.0]] * len(prompts)}

    trainer = trainer_for(tmp_path, lambda completions, environments, **kw: [0.0] * len(environments),
                          rollout_func=rollout_func)
    trainer.train()
    assert seen[-1] == [f"{e.a}+2=" for e in trainer.environments]
    assert trainer.state.log_history[-1]["rewards/Addition/mean"] == pytest.approx(
        sum(e.a for e in trainer.environments) / 8)


def test_environment_without_reset_is_refused(tmp_path):
    with pytest.raises(ValueError, match="no `reset` method"):
        GRPOTrainer(toy_model(toy_tokenizer(), hidden_size=16, num_layers=1), lambda completions, **kw: [0.0],
                    GRPOConfig(output_dir=str(tmp_path), max_steps=1), [{"prompt": "1+1="}],
                    processing_class=toy_tokenizer(), environment_factory=object)
