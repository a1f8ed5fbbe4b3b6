"""A CPU stand-in for CUDA graph capture, so that StaticRollout's capture path (grpo_edu.engine) runs in CI.

Capture records every aten op the step runs, with the very tensors it reads and writes (a CUDA graph records kernels on
fixed addresses); replay runs the same ops again on the same tensors and writes each result into the tensor the capture
produced. So, as with a real graph, a replay sees in-place changes to what it read (the live weights, the rollout state)
and never sees a tensor that Python rebound after capture; and a host sync during capture (`.item()`, `bool(t)`,
boolean-mask indexing) raises, as it does on a GPU. It cannot find CUDA-only failures (allocator pools, streams, kernels
that refuse capture): those need the `cuda` test on a real GPU."""
import contextlib
import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

HOST_SYNCS = {"_local_scalar_dense", "nonzero", "equal", "is_nonzero"}


class _Recorder(TorchDispatchMode):
    def __init__(self, ops): super().__init__(); self.ops = ops

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func.overloadpacket.__name__ in HOST_SYNCS:
            raise RuntimeError(f"host sync during CUDA graph capture: {func}")
        out = func(*args, **(kwargs or {}))
        self.ops.append((func, args, kwargs or {}, out))
        return out


def _same_memory(a, b) -> bool:
    return (a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr() and a.storage_offset() == b.storage_offset()
            and a.stride() == b.stride() and a.shape == b.shape)


class FakeCUDAGraph:
    "torch.cuda.CUDAGraph's replay() on CPU: the captured ops again, results written into the captured outputs."
    captures = 0

    def __init__(self): self.ops = []

    def replay(self):
        # The recorded ops are what ran below autocast (its casts are recorded as ops of their own), and a real graph
        # replays kernels, not ops: so replay with autocast off, or an op that ran in float32 inside an autocast-disabled
        # region at capture (transformers 5.17's RoPE matmul) would be cast to bf16 again here.
        with torch.autocast("cpu", enabled=False):                 # (the stand-in runs on CPU only)
            self._replay()

    def _replay(self):
        for func, args, kwargs, out in self.ops:
            new = func(*args, **kwargs)
            for o, n in zip(tree_flatten(out)[0], tree_flatten(new)[0]):
                if isinstance(o, torch.Tensor) and not _same_memory(o, n): o.copy_(n)


@contextlib.contextmanager
def _graph(g, pool=None, **kw):
    FakeCUDAGraph.captures += 1
    with _Recorder(g.ops): yield


class _Stream:
    def wait_stream(self, other): pass


def install(monkeypatch):
    "Swap torch.cuda's graph and stream API for the CPU stand-ins (undone by pytest's monkeypatch)."
    FakeCUDAGraph.captures = 0
    for name, value in dict(CUDAGraph=FakeCUDAGraph, graph=_graph, graph_pool_handle=lambda: object(), Stream=_Stream,
                            current_stream=lambda *a: _Stream(), stream=lambda s: contextlib.nullcontext()).items():
        monkeypatch.setattr(torch.cuda, name, value)
