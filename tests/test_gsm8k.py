"""GSM8K on the real files in ../shared (skipped with a reason when absent): data, rewards, chat template."""
import json
import pytest
from grpo_edu.data import gsm8k_dataset, SYSTEM_PROMPT
from grpo_edu.rewards import accuracy_reward, extract_gsm8k_answer, format_reward
from grpo_edu.rollout import encode_prompts


def test_gsm8k_local_train_and_test(shared):
    tr, te = gsm8k_dataset("train", shared / "gsm8k"), gsm8k_dataset("test", shared / "gsm8k")
    assert (len(tr), len(te)) == (7473, 1319)
    row = te[0]
    assert row["prompt"][0] == {"role": "system", "content": SYSTEM_PROMPT} and row["prompt"][1]["role"] == "user"
    assert row["answer"] == "18" and "####" not in row["prompt"][1]["content"]
    assert all(a is not None and float(a) == float(a) for a in te["answer"])      # every answer parses as a number


def test_rewards_on_real_solutions(shared):
    rows = [json.loads(l) for l in (shared / "gsm8k" / "test.jsonl").open()]
    gold = [extract_gsm8k_answer(r["answer"]) for r in rows]
    assert accuracy_reward([r["answer"] for r in rows], answer=gold) == [1.0] * len(rows)
    tagged = [f"<think>{r['answer'].split('####')[0]}</think><answer>{g}</answer>" for r, g in zip(rows, gold)]
    assert accuracy_reward(tagged, answer=gold) == [1.0] * len(rows)
    assert format_reward(tagged) == [1.0] * len(rows)
    assert sum(accuracy_reward([f"<answer>{float(g) + 1}</answer>" for g in gold], answer=gold)) == 0
    # commas and dollar signs in the model's answer
    assert accuracy_reward(["<answer>$1,234</answer>"], answer=["1234"]) == [1.0]


def test_qwen_chat_template_prompts(shared):
    from transformers import AutoTokenizer
    tok = AutoTokenizer.from_pretrained(str(shared / "qwen2.5-tokenizer"))
    assert len(tok) == 151665
    tok.padding_side = "left"
    ds = gsm8k_dataset("test", shared / "gsm8k")
    ids, mask = encode_prompts(tok, [ds[0]["prompt"], ds[1]["prompt"]], max_prompt_length=512)
    text = tok.decode(ids[0][mask[0].bool()])
    assert text.startswith("<|im_start|>system") and text.rstrip().endswith("<|im_start|>assistant")
    assert mask.sum(1).min() > 50


def test_trainer_on_gsm8k_with_tiny_qwen(shared, tmp_path):
    "Two GRPO steps on real GSM8K prompts, the real tokenizer and a tiny random Qwen2 (no Hub)."
    import torch
    from transformers import AutoTokenizer, Qwen2Config, Qwen2ForCausalLM
    from grpo_edu.config import GRPOConfig
    from grpo_edu.trainer import GRPOTrainer
    tok = AutoTokenizer.from_pretrained(str(shared / "qwen2.5-tokenizer")); tok.padding_side = "left"
    cfg = Qwen2Config(vocab_size=151936, hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=4,
                      num_key_value_heads=2, tie_word_embeddings=True, eos_token_id=151645, pad_token_id=151643)
    torch.manual_seed(0)
    model = Qwen2ForCausalLM(cfg)
    ds = gsm8k_dataset("train", shared / "gsm8k").select(range(16))
    args = GRPOConfig(output_dir=str(tmp_path), num_generations=4, per_device_train_batch_size=8, max_completion_length=8,
                      max_steps=2, learning_rate=1e-3, beta=0.04, reward_funcs=["accuracy", "format"], eval_dataset=None,
                      log_completions=True)
    s = GRPOTrainer(model, args.reward_funcs, args, ds, None, tok).train()
    rows = [json.loads(l) for l in (tmp_path / "metrics.jsonl").open()]
    assert [r["step"] for r in rows] == [1, 2] and "kl" in rows[0] and "rewards/format_reward/mean" in rows[0]
    assert s["steps"] == 2 and (tmp_path / "completions.jsonl").exists()
