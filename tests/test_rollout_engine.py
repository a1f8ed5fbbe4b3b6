"""The static-cache rollout engine against HF generate: real tokenizer and GSM8K prompts, the trainer's use of it,
the sampler's own log-probabilities, and (on a GPU) the captured CUDA graph in bf16 autocast."""
import tempfile
import torch
import pytest
from transformers import AutoTokenizer, Qwen2Config, Qwen2ForCausalLM
from grpo_edu.config import GRPOConfig
from grpo_edu.errors import GRPOEduError
from grpo_edu.logprobs import per_token_logps
from grpo_edu.engine import StaticRollout, sample_token
from grpo_edu.rollout import _ENGINES, encode_prompts, generate_completions, pick_engine


class Tok:
    "The two ids generate_completions reads from a tokenizer."
    pad_token_id, eos_token_id = 0, 1


def qwen_like(vocab, device="cpu", seed=0):
    "A 2-layer Qwen2 with the real vocabulary size and varied greedy outputs."
    torch.manual_seed(seed)
    bos, eos = (151643, 151645) if vocab > 151645 else (0, 1)
    config = Qwen2Config(vocab_size=vocab, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, initializer_range=0.3,
                         tie_word_embeddings=True, rope_theta=1e6, bos_token_id=bos, eos_token_id=eos,
                         pad_token_id=bos)
    return Qwen2ForCausalLM(config).to(device).eval()


def gsm8k_batch(shared, n=6):
    from grpo_edu.data import gsm8k_dataset
    tok = AutoTokenizer.from_pretrained(str(shared / "qwen2.5-tokenizer"))
    tok.padding_side = "left"
    ds = gsm8k_dataset("test", shared / "gsm8k")
    return tok, [ds[i]["prompt"] for i in range(n)]


def padded_prompts(rows=4, width=9, vocab=300):
    "Random prompts, the second row left-padded by 3."
    ids = torch.randint(2, vocab, (rows, width))
    mask = torch.ones_like(ids)
    ids[1, :3], mask[1, :3] = 0, 0
    return ids, mask


def nudge(model, scale=0.05):
    "An in-place change of every weight, as an optimizer step makes."
    with torch.no_grad():
        for p in model.parameters(): p.add_(torch.randn_like(p) * scale)


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


def test_sampler_logprobs_are_the_trainers_in_fp32(shared):
    """with_logprobs: the engine's log q of each sampled token, on real left-padded GSM8K prompts and Qwen2.5's
    vocabulary, equals the trainer's log π of the same tokens (fp32 weights: one distribution); with a top-p filter
    q is renormalised over the kept tokens, so log q - log π is log(1 / kept mass) > 0."""
    tok, prompts = gsm8k_batch(shared, 4)
    model = qwen_like(len(tok))
    ids, pm = encode_prompts(tok, prompts, 512)
    engine = StaticRollout(model, 4, ids.size(1) + 16)
    torch.manual_seed(0)
    tokens, logq = engine.generate(ids, pm, 16, [], tok.pad_token_id, with_logprobs=True)       # (4, 16) each
    full = torch.cat([ids, tokens], 1), torch.cat([pm, torch.ones_like(tokens)], 1)
    torch.testing.assert_close(logq, per_token_logps(model, *full, 16), rtol=0, atol=1e-4)
    tokens, logq = engine.generate(ids, pm, 16, [], tok.pad_token_id, top_p=0.5, with_logprobs=True)
    full = torch.cat([ids, tokens], 1), torch.cat([pm, torch.ones_like(tokens)], 1)
    minus_log_kept_mass = logq - per_token_logps(model, *full, 16)                                # (4, 16)
    assert minus_log_kept_mass.min() > -1e-4 and minus_log_kept_mass.mean() > 0.05


def test_engine_reused_and_regrown():
    "One engine per (model, batch size); a longer request rebuilds it with a bigger cache, shorter ones reuse it."
    model = qwen_like(300)
    ids = torch.randint(2, 300, (4, 10))
    pm = torch.ones_like(ids)
    generate_completions(model, Tok, ids, pm, 8, engine="static")
    engine = _ENGINES[model][4]
    assert engine.L == 64
    generate_completions(model, Tok, ids[:, :5], pm[:, :5], 8, engine="static")
    assert _ENGINES[model][4] is engine                                      # reused
    generate_completions(model, Tok, ids, pm, 60, engine="static")
    assert _ENGINES[model][4] is not engine and _ENGINES[model][4].L == 128  # grown to the next multiple of 64
    with pytest.raises(GRPOEduError, match="rows"):
        _ENGINES[model][4].generate(ids[:2], pm[:2], 4, 1, 0)
    # a smaller batch (eval's last one) borrows the 4-row engine: no new cache, and the same greedy tokens as HF
    a = generate_completions(model, Tok, ids[:3], pm[:3], 8, do_sample=False, engine="static")
    b = generate_completions(model, Tok, ids[:3], pm[:3], 8, do_sample=False, engine="hf")
    assert list(_ENGINES[model]) == [4] and torch.equal(a[0][:, :b[0].size(1)], b[0]) and a[0].size(0) == 3


def test_cpu_bf16_autocast_runs():
    "Under bf16 autocast (the trainer's mixed precision) the cache is bf16 and the tokens are valid ids."
    model = qwen_like(300)
    ids, pm = padded_prompts(width=10)
    engine = StaticRollout(model, 4, 32)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = engine.generate(ids, pm, 12, 1, 0)
    assert engine.kv[0][0].dtype == torch.bfloat16 and out.shape == (4, 12) and int(out.max()) < 300
    assert engine.src is not model and next(engine.src.parameters()).dtype == torch.bfloat16   # the bf16 copy


def test_trainer_uses_static_engine_and_it_follows_training():
    """A toy run with rollout_engine=static: the engine is built for the policy, and after the updates its greedy
    tokens still equal HF generate's on the trained weights (it reads the live parameters)."""
    from grpo_edu.toy import toy_tokenizer, toy_model, addition_dataset
    from grpo_edu.trainer import GRPOTrainer
    tok = toy_tokenizer()
    model = toy_model(tok, seed=0)
    args = GRPOConfig(max_steps=3, per_device_train_batch_size=32, num_generations=8, max_completion_length=6,
                      max_prompt_length=None, output_dir=tempfile.mkdtemp(), eval_dataset=None,
                      rollout_engine="static", learning_rate=1e-3, beta=0.0)
    sevens = lambda completions, **kw: [float(c.count("7")) for c in completions]     # a reward with signal
    trainer = GRPOTrainer(model, sevens, args, addition_dataset(64, seed=0), processing_class=tok)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    trainer.train()
    assert model in _ENGINES and 32 in _ENGINES[model]                        # 4 prompts × 8 completions
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
        nudge(model)
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
    ids, pm = padded_prompts()
    dynamo.reset()
    dynamo.utils.counters.clear()
    a = generate_completions(model, Tok, ids, pm, 20, do_sample=False, engine="static", compile=True)
    b = generate_completions(model, Tok, ids, pm, 20, do_sample=False, engine="hf")
    assert torch.equal(a[0][:, :b[0].size(1)], b[0])
    assert not dynamo.utils.counters["graph_break"], dict(dynamo.utils.counters["graph_break"])
    assert dynamo.utils.counters["stats"]["unique_graphs"] >= 1


def test_release_memory_frees_the_cache_between_rollouts():
    "rollout_release_memory=True: after each rollout the engine holds no KV cache (the update gets that memory back)."
    from grpo_edu.toy import toy_tokenizer, toy_model, addition_dataset
    from grpo_edu.trainer import GRPOTrainer
    tok = toy_tokenizer()
    model = toy_model(tok, seed=0)
    args = GRPOConfig(max_steps=2, per_device_train_batch_size=16, num_generations=8, max_completion_length=6,
                      max_prompt_length=None, output_dir=tempfile.mkdtemp(), eval_dataset=None,
                      rollout_engine="static", rollout_release_memory=True)
    GRPOTrainer(model, "accuracy", args, addition_dataset(32, seed=0), processing_class=tok).train()
    engine = _ENGINES[model][16]
    assert engine.kv is None and engine.graphs == {} and engine.out.numel() == 0


def rebinding_step(self, n_cols):
    "The decode step with a bug a CUDA graph exposes: it rebinds its token tensor instead of writing into it."
    self.valid.index_fill_(1, self.col, True)
    mask = self.valid[:, None, None, :n_cols]
    logits = self._forward(self.tok[:, None], self.col.view(1, 1) - self.offset, self.col, mask)
    token = sample_token(logits, *self._sampling).masked_fill(self.done, self._pad)
    self.out.index_copy_(1, self.step, token[:, None])
    self.done |= (token[:, None] == self._eos).any(-1)
    self.tok = token                              # a new tensor: the captured graph keeps reading the old one
    self.col.add_(1)
    self.step.add_(1)


def test_cuda_graph_path_on_cpu_with_a_recording_stand_in(monkeypatch):
    """StaticRollout's capture path (one graph per length bucket, warm-ups, replay) run on CPU with
    tests/fake_cuda_graph.py, which replays the captured ops on the captured tensors as a CUDA graph does: HF's
    greedy tokens, again after in-place weight updates (the graphs read the live weights, no recapture), the same
    bf16 tokens as the eager engine through the refreshed bf16 copy, and the same sampler log-probs. Two seeded bugs
    show the stand-in can fail: a rebound state tensor, and a host sync in the step."""
    import fake_cuda_graph
    from grpo_edu import engine as E
    fake_cuda_graph.install(monkeypatch)
    model = qwen_like(300)
    ids, pm = padded_prompts()
    hf = lambda: generate_completions(model, Tok, ids, pm, 40, do_sample=False, engine="hf")[0]
    engine = StaticRollout(model, 4, 64, cuda_graph=True)
    graphed = lambda e=engine, **kw: e.generate(ids, pm, 40, Tok.eos_token_id, Tok.pad_token_id, **kw)
    for _ in range(2):
        a, b = graphed(do_sample=False), hf()
        assert torch.equal(a[:, :b.size(1)], b) and b.size(1) > 30           # long enough to cross length buckets
        nudge(model)
    assert fake_cuda_graph.FakeCUDAGraph.captures == len(engine._buckets()) == 4   # captured once, replayed since
    eager = StaticRollout(model, 4, 64, cuda_graph=False)
    with torch.autocast("cpu", dtype=torch.bfloat16):                         # bf16: the engine reads a bf16 copy
        for _ in range(2):
            assert torch.equal(graphed(do_sample=False), eager.generate(ids, pm, 40, 1, 0, do_sample=False))
            nudge(model)
    sampled = dict(top_k=50, top_p=0.9, min_p=0.01, with_logprobs=True)     # HF's warpers inside the graph
    run = lambda e: e.generate(ids, pm, 40, [], 0, **sampled)                 # no EOS: 40 real tokens a row
    run(engine)                                                               # captures these settings' graphs
    torch.manual_seed(0)
    tokens, logq = run(engine)
    torch.manual_seed(0)
    eager_tokens, eager_logq = run(eager)
    assert torch.equal(tokens, eager_tokens) and torch.equal(logq, eager_logq)
    full = torch.cat([ids, tokens], 1), torch.cat([pm, torch.ones_like(tokens)], 1)
    assert (logq - per_token_logps(model, *full, 40)).min() > -1e-4         # q ≥ π on what the filters keep
    decode_step = E.StaticRollout._decode_step
    monkeypatch.setattr(E.StaticRollout, "_decode_step", rebinding_step)
    b = hf()
    fresh = lambda graph: StaticRollout(model, 4, 64, cuda_graph=graph).generate(ids, pm, 40, 1, 0, do_sample=False)
    assert torch.equal(fresh(False)[:, :b.size(1)], b)                       # eager: the bug does no harm
    assert not torch.equal(fresh(True)[:, :b.size(1)], b)                    # graphed: stale tokens
    def syncing_step(self, n_cols):                                          # a host sync cannot be captured
        if bool(self.done.all()): return
        decode_step(self, n_cols)
    monkeypatch.setattr(E.StaticRollout, "_decode_step", syncing_step)
    with pytest.raises(RuntimeError, match="host sync during CUDA graph capture"):
        fresh(True)


def test_compiled_engine_never_falls_back_to_eager(monkeypatch):
    """rollout_compile=True over a run: sampled rollouts (HF's top-k/top-p/min-p warpers inside the step), greedy
    evals and a second engine size each compile the length buckets they reach (3 of 4 here: 9 compiles of one
    function, more than dynamo's default limit of 8, past which it would silently run the step eager). Traced with
    dynamo's eager backend: the test checks compiles, not inductor."""
    import torch._dynamo as dynamo
    real_compile = torch.compile
    monkeypatch.setattr(torch, "compile", lambda fn, **kw: real_compile(fn, backend="eager", **kw))
    monkeypatch.setattr(dynamo.config, "recompile_limit", 8)                 # the default, whatever ran before
    model = qwen_like(300)
    ids = torch.randint(2, 300, (8, 9))
    pm = torch.ones_like(ids)
    dynamo.reset()
    dynamo.utils.counters.clear()
    filters = dict(top_k=50, top_p=0.9, min_p=0.01)
    for do_sample in (True, False):                                          # training rollouts, then a greedy eval
        generate_completions(model, Tok, ids, pm, 40, do_sample=do_sample, engine="static", compile=True, **filters)
    ids16, pm16 = ids.repeat(2, 1), pm.repeat(2, 1)                          # a second engine (16 rows)
    a = generate_completions(model, Tok, ids16, pm16, 40, do_sample=False, engine="static", compile=True)
    b = generate_completions(model, Tok, ids16, pm16, 40, do_sample=False, engine="hf")
    assert torch.equal(a[0][:, :b[0].size(1)], b[0])
    assert dynamo.utils.counters["stats"]["unique_graphs"] == 9              # 3 settings × 3 buckets, each once
    assert not dynamo.utils.counters["graph_break"], dict(dynamo.utils.counters["graph_break"])
    assert not dynamo.utils.counters["unimplemented"], list(dynamo.utils.counters["unimplemented"])[:1]
