"""Under sharded weights (FSDP / ZeRO-3) the static rollout engine and the chunked lm_head step aside: checked on a
real FSDP2 model (fully_shard, one gloo process on CPU), and the trainer's engine choice per distributed type."""
import subprocess, sys, textwrap
from types import SimpleNamespace
import pytest
from grpo_edu.config import GRPOConfig
from grpo_edu.errors import GRPOEduError
from grpo_edu.distributed import Placement

FSDP2 = textwrap.dedent("""
    import os, torch, torch.distributed as dist
    os.environ["MASTER_ADDR"] = "127.0.0.1"; os.environ["MASTER_PORT"] = str(29400 + os.getpid() % 500)
    dist.init_process_group("gloo", rank=0, world_size=1)
    from torch.distributed.fsdp import fully_shard
    from grpo_edu.toy import toy_model, toy_tokenizer
    from grpo_edu.engine import static_engine_unsupported
    from grpo_edu.rollout import pick_engine, generate_completions, encode_prompts
    from types import SimpleNamespace
    from grpo_edu.config import GRPOConfig
    from grpo_edu.distributed import Placement
    from grpo_edu.logprobs import _chunkable_head, per_token_logps
    from grpo_edu.step import lm_head_chunk
    tok = toy_tokenizer(); m = toy_model(tok, hidden_size=32, num_layers=2, seed=0)
    for layer in m.model.layers: fully_shard(layer)
    fully_shard(m)
    assert type(next(m.parameters())).__name__ == "DTensor"
    assert "sharded" in static_engine_unsupported(m) and pick_engine(m) == "hf"
    assert _chunkable_head(m) is not None          # the head is a plain Linear: only the placement rules it out
    fsdp = SimpleNamespace(distributed_type=SimpleNamespace(name="FSDP"), num_processes=1,
                           state=SimpleNamespace(deepspeed_plugin=None))
    placement = Placement.of(fsdp)                                   # what GRPOTrainer reads under FSDP
    chunk = lm_head_chunk(GRPOConfig(lm_head_chunk_size=4), placement)
    assert not placement.whole_lm_head and chunk is None             # the trainer asks for whole logits
    ids, pm = encode_prompts(tok, ["1+2=", "33+4="], None)
    c, k, t = generate_completions(m, tok, ids, pm, 5, do_sample=False)          # auto -> HF generate
    lp = per_token_logps(m, torch.cat([ids, c], 1), torch.cat([pm, k], 1), c.size(1), chunk_size=chunk)
    lp.sum().backward()
    assert all(p.grad is not None for p in m.parameters())
    dist.destroy_process_group()
    print("ok")
""")


def test_fsdp2_model_uses_hf_generate_and_full_logits():
    r = subprocess.run([sys.executable, "-c", FSDP2], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stderr[-3000:]


def _acc(dist_type, zero=None, processes=2):
    "An accelerator stand-in: its distributed type, its processes and, for DeepSpeed, the ZeRO stage."
    return SimpleNamespace(distributed_type=SimpleNamespace(name=dist_type), num_processes=processes,
                           state=SimpleNamespace(deepspeed_plugin=SimpleNamespace(zero_stage=zero) if zero else None))


def _engine(dist_type, want="auto", zero=None):
    "The engine the trainer picks (GRPOTrainer.__init__: Placement.of, check, rollout_engine)."
    placement = Placement.of(_acc(dist_type, zero))
    placement.check(GRPOConfig(rollout_engine=want))
    return placement.resolve_engine(want)


def test_sharded_weights_and_optimizer_per_distributed_type():
    "Weights are sliced under FSDP and ZeRO-3; optimizer states under FSDP and every DeepSpeed stage (checkpoints)."
    for kind, zero, weights, opt in [("NO", None, False, False), ("MULTI_GPU", None, False, False), ("FSDP", None, True, True),
                                     ("DEEPSPEED", 2, False, True), ("DEEPSPEED", 3, True, True)]:
        placement = Placement.of(_acc(kind, zero))
        assert (placement.sharded_weights, placement.sharded_optimizer) == (weights, opt), kind
        assert placement.synced_generate == weights and placement.deepspeed == (kind == "DEEPSPEED"), kind
        assert placement.whole_lm_head == (not weights), kind   # chunked lm_head: whole weights only
        assert not Placement.of(_acc(kind, zero, processes=1)).synced_generate, kind   # one process: nothing to sync


def test_trainer_engine_choice_per_distributed_type():
    assert _engine("NO") == "auto" and _engine("MULTI_GPU") == "auto"
    assert _engine("FSDP") == "hf" and _engine("DEEPSPEED", zero=3) == "hf"
    assert _engine("DEEPSPEED", zero=2) == "auto"                    # ZeRO-2 shards states and gradients, not weights
    assert _engine("NO", "hf") == "hf"
    with pytest.raises(GRPOEduError, match="sharded weights"):
        _engine("FSDP", "static")


@pytest.mark.parametrize("kind, zero, policy_chunk, ref_chunk", [
    ("NO", None, 4, 4), ("FSDP", None, None, 4), ("DEEPSPEED", 2, 4, 4), ("DEEPSPEED", 3, None, None)])
def test_reference_log_probs_chunk_the_lm_head_where_its_weights_are_whole(kind, zero, policy_chunk, ref_chunk):
    "π_ref is whole on every process except under ZeRO-3 (place_reference_model), so only there does it score whole logits."
    import contextlib
    from unittest import mock
    import torch
    from grpo_edu.step import old_and_ref_logps
    policy, ref, seen = object(), object(), []
    def scored(model, *args, chunk_size=None, **kwargs):
        seen.append((model, chunk_size))
        return torch.zeros(2, 3)
    accelerator = SimpleNamespace(autocast=contextlib.nullcontext, unwrap_model=lambda m: m)
    args, placement = GRPOConfig(beta=0.04, lm_head_chunk_size=4), Placement.of(_acc(kind, zero))
    with mock.patch("grpo_edu.step.per_token_logps", scored):
        old, ref_logps = old_and_ref_logps(policy, ref, None, None, 3, args, True, accelerator, placement)
    assert old.shape == ref_logps.shape == (2, 3)
    assert seen == [(policy, policy_chunk), (ref, ref_chunk)], kind
