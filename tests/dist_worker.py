"""One GRPO update on a fixed global batch, for each loss type named, run by 1 process or by `torchrun
--nproc_per_node 2` (gloo, CPU).

Writes each loss type's reported loss and all-reduced gradients; tests/test_distributed.py compares the two runs. One
process start serves every loss type: each gets a fresh model and trainer, so the updates do not see each other."""
import json, os, sys
import torch
from datasets import Dataset
from grpo_edu.cli import leave_without_teardown
from grpo_edu.config import GRPOConfig
from grpo_edu.toy import toy_model, toy_tokenizer
from grpo_edu.step import RolloutBatch
from grpo_edu.trainer import GRPOTrainer

G, N, K = 4, 16, 5                                            # global batch: 4 prompts x 4 completions


def global_batch(vocab_size: int) -> tuple:
    "The same global batch on every process: ids (N, 4 + K), attention, completion mask (N, K), advantages, ref logps."
    g = torch.Generator().manual_seed(123)
    ids = torch.randint(2, vocab_size, (N, 4 + K), generator=g)
    attn = torch.ones_like(ids)
    mask = torch.ones(N, K, dtype=torch.long)
    for i in range(N):                                        # completions of 1 to K tokens
        mask[i, 1 + i % K:] = 0
        attn[i, 4 + 1 + i % K:] = 0
    adv = torch.randn(N, generator=g)
    ref = -torch.rand(N, K, generator=g) * 3
    return ids, attn, mask, adv, ref


def one_update(name: str, tok, ds) -> dict:
    "A fresh toy model's trainer takes one update on this process's share of the batch: its metrics and gradients."
    loss_type, _, extra = name.partition("+")                 # "dapo+entropy": top 30% of tokens only
    entropy, adaptive = extra == "entropy", extra == "adaptive"   # "dapo+adaptive": Skywork-OR1's entropy controller
    world = int(os.environ.get("WORLD_SIZE", 1))
    args = GRPOConfig(output_dir="/tmp/dist_unused", num_generations=G, per_device_train_batch_size=N // world,
                      max_completion_length=K, learning_rate=1e-3, beta=0.04, loss_type=loss_type,
                      eval_dataset=None, max_steps=1, top_entropy_quantile=0.3 if entropy else 1.0,
                      use_adaptive_entropy=adaptive, entropy_target=100.0)
    tr = GRPOTrainer(toy_model(tok, hidden_size=32, num_layers=2, seed=0), "accuracy", args, ds, None, tok)
    acc = tr.accelerator
    ids, attn, mask, adv, ref = global_batch(len(tok))
    n = N // acc.num_processes
    sl = slice(acc.process_index * n, (acc.process_index + 1) * n)
    batch = RolloutBatch(input_ids=ids[sl], attention_mask=attn[sl], mask=mask[sl], logits_to_keep=K,
                         advantages=adv[sl], round_tokens=mask.sum().float(), old_logps=None, ref_logps=ref[sl])
    grads = {}
    def capture():                                            # replace the optimizer step: keep the synced gradients
        for param_name, p in acc.unwrap_model(tr.model).named_parameters():
            if p.grad is not None: grads[param_name] = p.grad.detach().clone()
    tr.optimizer.step = capture
    metrics = tr.update(batch)
    return {"world": acc.num_processes, "loss": metrics["loss"], "kl": metrics["kl"], "entropy": metrics["entropy"],
            "entropy_coef": tr.entropy_control.entropy_coef,
            "last_world_entropy": tr.entropy_control.last_world_entropy,
            "grads": {k: v.flatten().tolist() for k, v in grads.items()}}


out_path, names = sys.argv[1], sys.argv[2].split(",")
tok = toy_tokenizer()
ds = Dataset.from_list([{"prompt": f"{i}+{i}=", "answer": str(2 * i)} for i in range(8)])
results = {name: one_update(name, tok, ds) for name in names}
if int(os.environ.get("RANK", 0)) == 0: json.dump(results, open(out_path, "w"))
if torch.distributed.is_initialized():
    torch.distributed.barrier()
    torch.distributed.destroy_process_group()                 # a clean gloo shutdown on every rank
leave_without_teardown(0)   # as `grpo-edu train` leaves a multi-process run: gloo's threads can abort the teardown
