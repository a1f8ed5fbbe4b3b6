"""The static-cache rollout engine against HF generate: real tokenizer and GSM8K prompts, the trainer's use of it,
and (on a GPU) the captured CUDA graph in bf16 autocast."""
import tempfile
import torch
import pytest
from transformers import AutoTokenizer, GenerationConfig, Qwen2Config, Qwen2ForCausalLM
from grpo_edu.config import GRPOConfig, load_config, TOY_RECIPE
from grpo_edu.errors import GRPOEduError
from grpo_edu.rollout import (StaticRollout, _ENGINES, completion_mask, encode_prompts, generate_completions,
                              pick_engine, sample_token)


def qwen_like(vocab, device="cpu", seed=0):
    "A 2-layer Qwen2 with the real vocabulary size and varied greedy outputs."
    torch.manual_seed(seed)
    bos, eos = (151643, 151645) if vocab > 151645 else (0, 1)
    cfg = Qwen2Config(vocab_size=vocab, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                      num_key_value_heads=2, initializer_range=0.3, tie_word_embeddings=True, rope_theta=1e6,
                      bos_token_id=bos, eos_token_id=eos, pad_token_id=bos)
    return Qwen2ForCausalLM(cfg).to(device).eval()


def gsm8k_batch(shared, n=6):
    from grpo_edu.data import gsm8k_dataset
    tok = AutoTokenizer.from_pretrained(str(shared / "qwen2.5-tokenizer")); tok.padding_side = "left"
    ds = gsm8k_dataset("test", shared / "gsm8k")
    return tok, [ds[i]["prompt"] for i in range(n)]


def test_greedy_equals_hf_on_gsm8k_prompts(shared):
    "Real chat-templated GSM8K prompts of different lengths (left padding up to ~40 tokens): identical greedy tokens."
    tok, prompts = gsm8k_batch(shared)
    model = qwen_like(len(tok))
    ids, pm = encode_prompts(tok, prompts, 512)
    assert (pm == 0).any(), "the prompts should have different lengths"
    c_hf, m_hf, t_hf = generate_completions(model, tok, ids, pm, 24, do_sample=False, engine="hf")
    c_st, m_st, t_st = generate_completions(model, tok, ids, pm, 24, do_sample=False, engine="static")
    K = c_hf.size(1)
    assert torch.equal(c_st[:, :K], c_hf) and torch.equal(m_st[:, :K], m_hf) and torch.equal(t_st, t_hf)
    assert m_st[:, K:].sum() == 0


def test_engine_reused_and_regrown():
    "One engine per (model, batch size); a longer request rebuilds it with a bigger cache, shorter ones reuse it."
    model = qwen_like(300)
    class Tok: pad_token_id, eos_token_id = 0, 1
    ids = torch.randint(2, 300, (4, 10)); pm = torch.ones_like(ids)
    generate_completions(model, Tok, ids, pm, 8, engine="static")
    e = _ENGINES[model][4]; assert e.L == 64
    generate_completions(model, Tok, ids[:, :5], pm[:, :5], 8, engine="static")
    assert _ENGINES[model][4] is e                                           # reused
    generate_completions(model, Tok, ids, pm, 60, engine="static")
    assert _ENGINES[model][4] is not e and _ENGINES[model][4].L == 128      # grown to the next multiple of 64
    with pytest.raises(GRPOEduError, match="rows"):
        _ENGINES[model][4].generate(ids[:2], pm[:2], 4, 1, 0)
    # a smaller batch (eval's last one) borrows the 4-row engine: no new cache, and the same greedy tokens as HF
    a = generate_completions(model, Tok, ids[:3], pm[:3], 8, do_sample=False, engine="static")
    b = generate_completions(model, Tok, ids[:3], pm[:3], 8, do_sample=False, engine="hf")
    assert list(_ENGINES[model]) == [4] and torch.equal(a[0][:, :b[0].size(1)], b[0]) and a[0].size(0) == 3


def test_cpu_bf16_autocast_runs():
    "Under bf16 autocast (the trainer's mixed precision) the cache is bf16 and the tokens are valid ids."
    model = qwen_like(300)
    ids = torch.randint(2, 300, (4, 10)); pm = torch.ones_like(ids); pm[0, :3] = 0
    e = StaticRollout(model, 4, 32)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = e.generate(ids, pm, 12, 1, 0)
    assert e.kv[0][0].dtype == torch.bfloat16 and out.shape == (4, 12) and int(out.max()) < 300
    assert e.src is not model and next(e.src.parameters()).dtype == torch.bfloat16    # fp32 masters: a bf16 copy


def test_trainer_uses_static_engine_and_it_follows_training():
    """A toy run with rollout_engine=static: the engine is built for the policy, and after the updates its greedy
    tokens still equal HF generate's on the trained weights (it reads the live parameters)."""
    from grpo_edu.toy import toy_tokenizer, toy_model, addition_dataset
    from grpo_edu.trainer import GRPOTrainer
    tok = toy_tokenizer(); model = toy_model(tok, seed=0)
    args = GRPOConfig(max_steps=3, per_device_train_batch_size=32, num_generations=8, max_completion_length=6,
                      max_prompt_length=None, output_dir=tempfile.mkdtemp(), eval_dataset=None, rollout_engine="static",
                      learning_rate=1e-3, beta=0.0)
    sevens = lambda completions, **kw: [float(c.count("7")) for c in completions]     # a reward with signal
    tr = GRPOTrainer(model, sevens, args, addition_dataset(64, seed=0), processing_class=tok)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    tr.train()
    assert model in _ENGINES and 32 in _ENGINES[model]                        # 4 prompts × 8 completions per rollout
    assert any(not torch.equal(before[k], v) for k, v in model.state_dict().items())
    ids, pm = encode_prompts(tok, ["12+34=", "5+6=", "999+1=", "7+70="], None)
    ids, pm = ids.repeat(8, 1), pm.repeat(8, 1)                               # batch 32: the training engine itself
    a = generate_completions(model, tok, ids, pm, 6, do_sample=False, engine="static")
    b = generate_completions(model, tok, ids, pm, 6, do_sample=False, engine="hf")
    assert torch.equal(a[0][:, :b[0].size(1)], b[0])


def test_config_rejects_unknown_engine():
    with pytest.raises(GRPOEduError, match="rollout_engine='vllm'"):
        GRPOConfig(rollout_engine="vllm").validate()


@pytest.mark.cuda
def test_cuda_graph_greedy_equals_hf_after_updates(shared):
    "On a GPU: the captured graph gives HF's greedy tokens (fp32), also after in-place weight updates; bf16 runs."
    tok, prompts = gsm8k_batch(shared, 8)
    model = qwen_like(len(tok), "cuda")
    ids, pm = (t.cuda() for t in encode_prompts(tok, prompts, 512))
    assert pick_engine(model) == "static"
    for _ in range(2):
        a = generate_completions(model, tok, ids, pm, 32, do_sample=False)
        b = generate_completions(model, tok, ids, pm, 32, do_sample=False, engine="hf")
        assert torch.equal(a[0][:, :b[0].size(1)], b[0])
        with torch.no_grad():
            for p in model.parameters(): p.add_(torch.randn_like(p) * 0.05)
    with torch.autocast("cuda", dtype=torch.bfloat16):
        c, m, t = generate_completions(model, tok, ids, pm, 32)
    assert c.shape[0] == 8 and int(c.max()) < len(tok)


@pytest.mark.skipif(not (__import__("shutil").which("g++") or __import__("shutil").which("c++")),
                    reason="torch.compile on CPU (inductor) needs a C++ compiler")
def test_compiled_decode_step_has_no_graph_breaks():
    """rollout_compile=True: torch.compile traces the whole decode step as one graph per length bucket (no graph
    breaks, so on a GPU the compiled step is captured whole) and gives HF's greedy tokens. Runs inductor on CPU."""
    import torch._dynamo as dynamo
    model = qwen_like(300)
    ids = torch.randint(2, 300, (4, 9)); pm = torch.ones_like(ids); ids[1, :3] = 0; pm[1, :3] = 0
    class Tok: pad_token_id, eos_token_id = 0, 1
    dynamo.reset(); dynamo.utils.counters.clear()
    a = generate_completions(model, Tok, ids, pm, 20, do_sample=False, engine="static", compile=True)
    b = generate_completions(model, Tok, ids, pm, 20, do_sample=False, engine="hf")
    assert torch.equal(a[0][:, :b[0].size(1)], b[0])
    assert not dynamo.utils.counters["graph_break"], dict(dynamo.utils.counters["graph_break"])
    assert dynamo.utils.counters["stats"]["unique_graphs"] >= 1


def test_release_memory_frees_the_cache_between_rollouts():
    "rollout_release_memory=True: after each rollout the engine holds no KV cache (the update gets that memory back)."
    from grpo_edu.toy import toy_tokenizer, toy_model, addition_dataset
    from grpo_edu.trainer import GRPOTrainer
    tok = toy_tokenizer(); model = toy_model(tok, seed=0)
    args = GRPOConfig(max_steps=2, per_device_train_batch_size=16, num_generations=8, max_completion_length=6,
                      max_prompt_length=None, output_dir=tempfile.mkdtemp(), eval_dataset=None, rollout_engine="static",
                      rollout_release_memory=True)
    tr = GRPOTrainer(model, "accuracy", args, addition_dataset(32, seed=0), processing_class=tok)
    tr.train()
    e = _ENGINES[model][16]
    assert e.kv is None and e.graphs == {}


def test_cuda_graph_path_on_cpu_with_a_recording_stand_in(monkeypatch):
    """StaticRollout's capture path (one graph per length bucket, warm-ups, replay) run on CPU with tests/fake_cuda_graph.py,
    which replays the captured ops on the captured tensors as a CUDA graph does: HF's greedy tokens, again after in-place
    weight updates (the graphs read the live weights, no recapture), the same bf16 tokens as the eager engine through the
    refreshed bf16 copy. Two seeded bugs show the stand-in can fail: a rebound state tensor, and a host sync in the step."""
    import fake_cuda_graph
    from grpo_edu import rollout as R
    fake_cuda_graph.install(monkeypatch)
    model = qwen_like(300)
    ids = torch.randint(2, 300, (4, 9)); pm = torch.ones_like(ids); ids[1, :3] = 0; pm[1, :3] = 0
    class Tok: pad_token_id, eos_token_id = 0, 1
    hf = lambda: generate_completions(model, Tok, ids, pm, 40, do_sample=False, engine="hf")[0]
    eng = StaticRollout(model, 4, 64, cuda_graph=True)
    graphed = lambda e=eng: e.generate(ids, pm, 40, Tok.eos_token_id, Tok.pad_token_id, do_sample=False)
    for _ in range(2):
        a, b = graphed(), hf()
        assert torch.equal(a[:, :b.size(1)], b) and b.size(1) > 30           # long enough to cross length buckets
        with torch.no_grad():
            for p in model.parameters(): p.add_(torch.randn_like(p) * 0.05)
    assert fake_cuda_graph.FakeCUDAGraph.captures == len(eng._buckets()) == 4   # captured once, replayed after updates
    eager = StaticRollout(model, 4, 64, cuda_graph=False)
    with torch.autocast("cpu", dtype=torch.bfloat16):                         # bf16: the engine reads a bf16 copy
        for _ in range(2):
            assert torch.equal(graphed(), eager.generate(ids, pm, 40, 1, 0, do_sample=False))
            with torch.no_grad():
                for p in model.parameters(): p.add_(torch.randn_like(p) * 0.05)
    # seeded bug 1: the step rebinds its token tensor instead of writing into it: the graph keeps feeding a stale token
    def rebinding_step(self, Lk):
        self.valid.index_fill_(1, self.col, True)
        logits = self._forward(self.tok[:, None], self.col.view(1, 1) - self.offset, self.col, self.valid[:, None, None, :Lk])
        nxt = sample_token(logits, *self._sampling).masked_fill(self.done, self._pad)
        self.out.index_copy_(1, self.step, nxt[:, None]); self.done |= (nxt[:, None] == self._eos).any(-1)
        self.tok = nxt; self.col.add_(1); self.step.add_(1)
    monkeypatch.setattr(R.StaticRollout, "_decode_step", rebinding_step)
    b = hf()
    assert torch.equal(StaticRollout(model, 4, 64, cuda_graph=False).generate(ids, pm, 40, 1, 0, do_sample=False)[:, :b.size(1)], b)
    assert not torch.equal(graphed(StaticRollout(model, 4, 64, cuda_graph=True))[:, :b.size(1)], b)
    # seeded bug 2: a host sync inside the step cannot be captured
    def syncing_step(self, Lk):
        if bool(self.done.all()): return
        R._decode_step(self, Lk)
    monkeypatch.setattr(R.StaticRollout, "_decode_step", syncing_step)
    with pytest.raises(RuntimeError, match="host sync during CUDA graph capture"):
        graphed(StaticRollout(model, 4, 64, cuda_graph=True))


def test_compiled_engine_never_falls_back_to_eager(monkeypatch):
    """rollout_compile=True over a run: sampled rollouts, greedy evals and a second engine size each compile the length
    buckets they reach (3 of 4 here: 9 compiles of one function, more than dynamo's default limit of 8, past which it
    would silently run the step eager). Traced with dynamo's eager backend: the test checks compiles, not inductor."""
    import torch._dynamo as dynamo
    real_compile = torch.compile
    monkeypatch.setattr(torch, "compile", lambda fn, **kw: real_compile(fn, backend="eager", **kw))
    monkeypatch.setattr(dynamo.config, "recompile_limit", 8)                 # the default, whatever ran before
    model = qwen_like(300)
    class Tok: pad_token_id, eos_token_id = 0, 1
    ids = torch.randint(2, 300, (8, 9)); pm = torch.ones_like(ids)
    dynamo.reset(); dynamo.utils.counters.clear()
    for do_sample in (True, False):                                          # training rollouts, then a greedy eval
        generate_completions(model, Tok, ids, pm, 40, do_sample=do_sample, engine="static", compile=True)
    ids16, pm16 = ids.repeat(2, 1), pm.repeat(2, 1)                          # a second engine (16 rows)
    a = generate_completions(model, Tok, ids16, pm16, 40, do_sample=False, engine="static", compile=True)
    b = generate_completions(model, Tok, ids16, pm16, 40, do_sample=False, engine="hf")
    assert torch.equal(a[0][:, :b[0].size(1)], b[0])
    assert dynamo.utils.counters["stats"]["unique_graphs"] == 9              # 3 settings × 3 buckets, each compiled once
    assert not dynamo.utils.counters["unimplemented"], list(dynamo.utils.counters["unimplemented"])[:1]
