"""`grpo-edu` under accelerate's DeepSpeed integration on CPU (gloo), for tests/test_deepspeed.py; run it with torchrun.

accelerate only turns DeepSpeed on for accelerators (with ACCELERATE_USE_CPU it stays MULTI_CPU, and without it a CPU
run counts one process), so this shim builds the DeepSpeedPlugin from the same ACCELERATE_DEEPSPEED_* variables
`accelerate launch --config_file configs/accelerate/zero2.yaml` sets, right after the trainer's Accelerator. From there
accelerate's and DeepSpeed's own code runs for real (DS_ACCELERATOR=cpu): `prepare` builds the engine and its ZeRO
optimizer, `backward` steps the engine at the accumulation boundary, `save_state`/`load_state` write and read its shards."""
import sys
import grpo_edu.trainer as T
from accelerate.state import PartialState
from accelerate.utils import DeepSpeedPlugin, DistributedType

_Accelerator = T.Accelerator


def deepspeed_accelerator(**kw):
    acc = _Accelerator(**kw)
    plugin = DeepSpeedPlugin()                          # reads ACCELERATE_DEEPSPEED_ZERO_STAGE etc. from the environment
    plugin.set_mixed_precision("no")
    acc.state.deepspeed_plugins = plugin
    PartialState().distributed_type = acc.state.distributed_type = DistributedType.DEEPSPEED
    plugin.select(_from_accelerator_state=True)
    if acc.state.deepspeed_plugin is not plugin or acc.num_processes < 2 or not hasattr(acc, "deepspeed_engine_wrapped"):
        print("[deepspeed-shim] accelerate did not take the DeepSpeed state", file=sys.stderr); sys.exit(3)
    print(f"[deepspeed-shim] ZeRO-{plugin.zero_stage} on {acc.num_processes} processes", flush=True)
    return acc


_reference_model = T.reference_model


def reference_model(model, *a, **kw):      # says whether the policy arrived as ZeRO-3 shards (zero3_init_flag)
    print(f"[deepspeed-shim] policy loaded as shards: {any(hasattr(p, 'ds_id') for p in model.parameters())}", flush=True)
    return _reference_model(model, *a, **kw)


T.Accelerator, T.reference_model = deepspeed_accelerator, reference_model
from grpo_edu.cli import main  # noqa: E402
sys.exit(main(sys.argv[1:]))
