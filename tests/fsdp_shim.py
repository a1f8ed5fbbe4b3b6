"""`grpo-edu` under accelerate's FSDP2 on CPU (gloo), for tests/test_fsdp.py; run it with torchrun.

accelerate only turns FSDP on for accelerators (on CPU it stays MULTI_CPU), so this shim sets the FSDP2 state right after
the trainer builds its Accelerator, with the plugin built from the FSDP_* variables that `accelerate launch --config_file
configs/accelerate/fsdp.yaml` sets (the test passes them). From there accelerate's own FSDP2 code runs for real:
`prepare` shards the model with `fully_shard`, `get_state_dict` gathers full weights, `save_state`/`load_state` write
and read the optimizer shards.

With fsdp.yaml's `cpu_ram_efficient_loading`, processes other than 0 get zeros from `from_pretrained` (transformers
5.17; 5.23 happens to load the file everywhere) and accelerate's `prepare` broadcasts process 0's weights into the
policy. The shim makes every transformers version behave like 5.17 here, so that the tests see what a process other
than 0 really starts from."""
import os, sys
import torch
import grpo_edu.policy as policy
import grpo_edu.trainer as T
from accelerate.state import PartialState
from accelerate.utils import DistributedType, FullyShardedDataParallelPlugin

_Accelerator = T.Accelerator


def fsdp2_accelerator(**kw):
    acc = _Accelerator(**kw)
    acc.state.fsdp_plugin = FullyShardedDataParallelPlugin()    # reads FSDP_VERSION, FSDP_AUTO_WRAP_POLICY, ... from the env
    PartialState().distributed_type = acc.state.distributed_type = DistributedType.FSDP
    if not acc.is_fsdp2 or acc.num_processes < 2:
        print("[fsdp-shim] accelerate did not take the FSDP2 state", file=sys.stderr); sys.exit(3)
    print(f"[fsdp-shim] FSDP2 on {acc.num_processes} processes", flush=True)
    return acc


_load_policy = policy.load_policy


def load_policy_rank0_only(name, torch_dtype="float32", *args, **kwargs):
    model, tok = _load_policy(name, torch_dtype, *args, **kwargs)
    if os.environ.get("FSDP_CPU_RAM_EFFICIENT_LOADING", "").lower() in ("1", "true") and int(os.environ["RANK"]) != 0:
        with torch.no_grad():
            for p in model.parameters(): p.zero_()              # (buffers: non-persistent, rebuilt on load)
    return model, tok


T.Accelerator, policy.load_policy = fsdp2_accelerator, load_policy_rank0_only   # build_policy loads through it
from grpo_edu.cli import main  # noqa: E402
sys.exit(main(sys.argv[1:]))
