"""Recreate, offline, the Hub models and datasets that TRL's GRPO test file loads by id.

    python scripts/trl-suite-fixtures.py OUT_DIR

TRL's tests (../shared/trl-tests/test_grpo_trainer.py) name tiny random models and small datasets on the
Hugging Face Hub (`trl-internal-testing/tiny-Qwen2ForCausalLM-2.5`, `trl-internal-testing/zen`, ...). With no
Hub, this script builds stand-ins under the same ids:

- OUT_DIR/hub: a Hub cache (the layout of HF_HUB_CACHE: models--org--name/snapshots/REV/ and refs/main), so
  that `from_pretrained(id)` finds each model with HF_HUB_OFFLINE=1 and nothing else changed. Each model is a
  tiny random network (hidden size 16, 2 layers) of the named architecture, with the real Qwen2.5 tokenizer
  from ../shared/data/qwen2.5-tokenizer (read from there, never copied into the repository).
- OUT_DIR/datasets/trl-internal-testing/zen: a dataset folder whose README declares the configs the tests read
  (`standard_prompt_only`, `conversational_prompt_only`, ...), so that `load_dataset(folder, config)` loads
  them. The rows are the Zen of Python, cut as in the Hub's dataset.

Deterministic (fixed seeds, no timestamps) and quick: the ids and the weights are the same on every run, so
the harness can keep one build per version of this script. Only the families that transformers can build from
a config are made; the vision models and the MoE/remote ids not listed in MODELS are absent, and their tests
skip.
"""

import hashlib
import json
import os
import shutil
import sys
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # nothing here may reach a network
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
import torch
import transformers
from transformers import AutoTokenizer

ROOT = Path(__file__).resolve().parents[1]
ORG = "trl-internal-testing"
# The hidden sizes of TRL's own tiny models: as small as the architectures allow, so that each test's few
# training steps take a fraction of a second on a CPU.
SMALL = dict(
    hidden_size=16,
    intermediate_size=32,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=4,
    max_position_embeddings=512,
    vocab_size=151936,
)

def qwen3_template() -> str:
    """Qwen3's own chat template, as TRL ships it (trl/chat_templates/qwen3.jinja): the one the Hub's tiny
    Qwen3 models carry. It is not prefix-preserving (a think block is dropped once a tool turn follows), which
    the tool tests rely on: the trainer must swap in a training template."""
    from importlib.resources import files

    return files("trl").joinpath("chat_templates", "qwen3.jinja").read_text()

# RemoteForCausalLM: a model whose class lives in the repository itself (config.json's auto_map), for the test
# of `trust_remote_code`. It is Qwen2 under another name.
REMOTE_CONFIG = '''from transformers import Qwen2Config


class RemoteConfig(Qwen2Config):
    model_type = "remote"
'''
REMOTE_MODELING = '''from transformers import Qwen2ForCausalLM

from .configuration_remote import RemoteConfig


class RemoteForCausalLM(Qwen2ForCausalLM):
    config_class = RemoteConfig
'''


def shared_data() -> Path:
    "../shared/data beside the checkout, or the folder $GRPO_EDU_DATA names (the notebooks' lookup)."
    env = os.environ.get("GRPO_EDU_DATA")
    for p in ([Path(env)] if env else []) + [ROOT.parent / "shared" / "data", ROOT / "shared" / "data"]:
        if (p / "qwen2.5-tokenizer" / "vocab.json").exists():
            return p
    sys.exit("the Qwen2.5 tokenizer is missing: ../shared/data/qwen2.5-tokenizer (or $GRPO_EDU_DATA)")


def revision(model_id: str) -> str:
    "A fixed 40-hex commit per id: the Hub cache wants one, and a stable one keeps the build deterministic."
    return hashlib.sha1(f"grpo_edu-trl-suite:{model_id}".encode()).hexdigest()


def snapshot(hub: Path, repo_id: str, kind: str = "models") -> Path:
    "The snapshot folder of `repo_id` in the Hub cache at `hub`, with refs/main naming it."
    repo = hub / f"{kind}--{repo_id.replace('/', '--')}"
    rev = revision(repo_id)
    (repo / "refs").mkdir(parents=True, exist_ok=True)
    (repo / "refs" / "main").write_text(rev)
    folder = repo / "snapshots" / rev
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def configs():
    "Each id, with the class that builds it and its tiny config (None where the class is absent here)."
    t = transformers
    base = json.loads((shared_data() / "qwen2.5-0.5b-config" / "config.json").read_text())
    qwen2 = {
        k: v
        for k, v in base.items()
        if k not in ("_name_or_path", "architectures", "transformers_version", "torch_dtype", "model_type")
    }
    qwen2.update(SMALL, max_window_layers=2, pad_token_id=151643)
    ids = dict(bos_token_id=151643, eos_token_id=151645, pad_token_id=151643)
    moe = dict(num_experts=4, num_experts_per_tok=2, moe_intermediate_size=16)
    out = {
        "tiny-Qwen2ForCausalLM-2.5": ("Qwen2ForCausalLM", lambda: t.Qwen2Config(**qwen2)),
        "tiny-Qwen2ForSequenceClassification-2.5": (
            "Qwen2ForSequenceClassification",
            lambda: t.Qwen2Config(**qwen2, num_labels=1),
        ),
        "tiny-Qwen3ForCausalLM": (
            "Qwen3ForCausalLM",
            lambda: t.Qwen3Config(**SMALL, **ids, tie_word_embeddings=False),
        ),
        "tiny-Qwen3ForSequenceClassification": (
            "Qwen3ForSequenceClassification",
            lambda: t.Qwen3Config(**SMALL, **ids, num_labels=1),
        ),
        "tiny-Qwen3MoeForCausalLM": ("Qwen3MoeForCausalLM", lambda: t.Qwen3MoeConfig(**SMALL, **ids, **moe)),
        "tiny-LlamaForSequenceClassification-3.2": (
            "LlamaForSequenceClassification",
            lambda: t.LlamaConfig(**SMALL, **ids, num_labels=1),
        ),
        "tiny-Gemma2ForCausalLM": ("Gemma2ForCausalLM", lambda: t.Gemma2Config(**SMALL, **ids)),
        "tiny-Cohere2ForCausalLM": (
            "Cohere2ForCausalLM",
            lambda: t.Cohere2Config(**{k: v for k, v in SMALL.items() if k != "head_dim"}, **ids),
        ),
        "tiny-GptOssForCausalLM": (
            "GptOssForCausalLM",
            lambda: t.GptOssConfig(**SMALL, **ids, num_local_experts=4, num_experts_per_tok=2),
        ),
        "tiny-Glm4MoeForCausalLM": (
            "Glm4MoeForCausalLM",
            lambda: t.Glm4MoeConfig(
                **SMALL,
                **ids,
                n_routed_experts=4,
                num_experts_per_tok=2,
                n_shared_experts=1,
                moe_intermediate_size=16,
                first_k_dense_replace=1,
                n_group=1,
                topk_group=1,
            ),
        ),
        "tiny-NemotronHForCausalLM-nano": (
            "NemotronHForCausalLM",
            lambda: t.NemotronHConfig(
                **{k: v for k, v in SMALL.items() if k != "num_hidden_layers"},
                **ids,
                hybrid_override_pattern="M*",
                num_hidden_layers=2,
                mamba_num_heads=4,
                mamba_head_dim=8,
                ssm_state_size=8,
                n_groups=1,
                mamba_d_conv=4,
                chunk_size=16,
            ),
        ),
    }
    return out


def build_tokenizer(folder: Path) -> Path:
    "The Qwen2.5 tokenizer, saved once in its fast form (tokenizer.json): each model's folder gets a copy."
    tok = AutoTokenizer.from_pretrained(shared_data() / "qwen2.5-tokenizer")
    tok.save_pretrained(folder)
    return folder


def save_tokenizer(src: Path, dst: Path, chat_template: str | None = None, extra_special: list[str] = ()):
    "Copy the saved tokenizer into a model folder; another chat template or special tokens by a reload."
    if chat_template is None and not extra_special:
        for f in src.iterdir():  # hard links where the file system has them: a dozen 11 MB copies otherwise
            try:
                os.link(f, dst / f.name)
            except OSError:
                shutil.copy(f, dst / f.name)
        return
    tok = AutoTokenizer.from_pretrained(src)
    if chat_template is not None:
        tok.chat_template = chat_template
    if extra_special:
        tok.add_special_tokens({"additional_special_tokens": list(extra_special)})
    tok.save_pretrained(dst)


def build_models(hub: Path, tok_dir: Path) -> list[str]:
    made = []
    for name, (cls_name, make_config) in configs().items():
        cls = getattr(transformers, cls_name, None)
        if cls is None:  # a family this transformers lacks: its tests fail to load it, as on a Hub without it
            print(
                f"skip {ORG}/{name}: transformers {transformers.__version__} has no {cls_name}",
                file=sys.stderr,
            )
            continue
        try:
            config = make_config()
            torch.manual_seed(0)
            model = cls(config).eval()
        except Exception as e:  # a config this version's class refuses: the id stays absent
            print(f"skip {ORG}/{name}: {type(e).__name__}: {e}", file=sys.stderr)
            continue
        folder = snapshot(hub, f"{ORG}/{name}")
        model.save_pretrained(folder)
        template = qwen3_template() if name.startswith("tiny-Qwen3") else None
        # Llama 3.2's pad token: the test of a different reward model sets it by name.
        extra = ["<|finetune_right_pad_id|>"] if "Llama" in name else []
        save_tokenizer(tok_dir, folder, template, extra)
        made.append(f"{ORG}/{name}")
    folder = snapshot(hub, f"{ORG}/tiny-RemoteForCausalLM")
    config = transformers.Qwen2Config(
        **json.loads((snapshot(hub, f"{ORG}/tiny-Qwen2ForCausalLM-2.5") / "config.json").read_text())
    )
    torch.manual_seed(0)
    model = transformers.Qwen2ForCausalLM(config)
    model.save_pretrained(folder)
    cfg = json.loads((folder / "config.json").read_text())
    cfg.update(
        model_type="remote",
        architectures=["RemoteForCausalLM"],
        auto_map={
            "AutoConfig": "configuration_remote.RemoteConfig",
            "AutoModelForCausalLM": "modeling_remote.RemoteForCausalLM",
        },
    )
    (folder / "config.json").write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n")
    (folder / "configuration_remote.py").write_text(REMOTE_CONFIG)
    (folder / "modeling_remote.py").write_text(REMOTE_MODELING)
    save_tokenizer(tok_dir, folder)
    made.append(f"{ORG}/tiny-RemoteForCausalLM")
    return made


# The Zen of Python as the Hub's zen dataset cuts it: (prompt, completion, question, answer) per line, in the
# dataset's order. The tests name some prompts verbatim (the rows of a generation batch), so the cuts are the
# Hub's.
ZEN = [
    ("Beautiful is better than", " ugly.", "What is better than ugly?", "Beautiful."),
    ("Explicit is", " better than implicit.", "What is better than implicit?", "Explicit."),
    ("Simple is better", " than complex.", "What is better than complex?", "Simple."),
    ("Complex", " is better than complicated.", "What is better than complicated?", "Complex."),
    ("Flat is better than", " nested.", "What is better than nested?", "Flat."),
    ("Sparse is better", " than dense.", "What is better than dense?", "Sparse."),
    ("Readability", " counts.", "What counts?", "Readability."),
    (
        "Special cases aren't special",
        " enough to break the rules.",
        "Are special cases enough to break the rules?",
        "No, special cases aren't special enough to break the rules.",
    ),
    ("Although practicality beats", " purity.", "What beats purity?", "Practicality."),
    ("Errors should never", " pass silently.", "What should never pass silently?", "Errors."),
    ("Unless explicitly", " silenced.", "When can errors pass silently?", "When explicitly silenced."),
    (
        "In the face of ambiguity, refuse",
        " the temptation to guess.",
        "What should you do in the face of ambiguity?",
        "Refuse the temptation to guess.",
    ),
    (
        "There should be one-- and preferably",
        " only one --obvious way to do it.",
        "How many ways should there be to do it?",
        "One, and preferably only one.",
    ),
    (
        "Although that way may not be obvious at first unless you're",
        " Dutch.",
        "For whom may the way not be obvious at first?",
        "You're Dutch.",
    ),
    ("Now is", " better than never.", "What is better than never?", "Now is better than never."),
    (
        "Although never is often",
        " better than *right* now.",
        "Is never better than *right* now?",
        "Yes, often.",
    ),
    (
        "If the implementation is hard to explain,",
        " it's a bad idea.",
        "What does it mean if the implementation is hard to explain?",
        "It means it's a bad idea.",
    ),
    (
        "If the implementation is easy",
        " to explain, it may be a good idea.",
        "What does it mean if the implementation is easy to explain?",
        "It means it may be a good idea.",
    ),
    (
        "Namespaces are one honking great",
        " idea -- let's do more of those!",
        "Any great ideas?",
        "Namespaces are one honking great idea.",
    ),
]


def build_zen(folder: Path) -> None:
    # 17 rows for training and the last 2 for evaluation, the Hub dataset's sizes (its unshuffled 10% test
    # split): the tests' batch arithmetic (the steps of an epoch, the rows of each generation batch) depends
    # on them.
    splits = {"train": ZEN[:17], "test": ZEN[17:]}
    rows = {}
    for split, part in splits.items():
        user = [[{"role": "user", "content": q}] for _, _, q, _ in part]
        assistant = [[{"role": "assistant", "content": a}] for _, _, _, a in part]
        rows[("standard_language_modeling", split)] = [{"text": p + c} for p, c, _, _ in part]
        rows[("standard_prompt_only", split)] = [{"prompt": p} for p, _, _, _ in part]
        rows[("standard_prompt_completion", split)] = [{"prompt": p, "completion": c} for p, c, _, _ in part]
        rows[("conversational_language_modeling", split)] = [
            {"messages": u + a} for u, a in zip(user, assistant)
        ]
        rows[("conversational_prompt_only", split)] = [{"prompt": u} for u in user]
        rows[("conversational_prompt_completion", split)] = [
            {"prompt": u, "completion": a} for u, a in zip(user, assistant)
        ]
    folder.mkdir(parents=True, exist_ok=True)
    card = ["---", "configs:"]
    for name in sorted({n for n, _ in rows}):
        card += [f"- config_name: {name}", "  data_files:"]
        for split in splits:
            (folder / name).mkdir(exist_ok=True)
            path = folder / name / f"{split}.jsonl"
            path.write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in rows[(name, split)]))
            card += [f"  - split: {split}", f"    path: {name}/{split}.jsonl"]
    card += [
        "---",
        "",
        "The Zen of Python in the formats of TRL's tests, built by scripts/trl-suite-fixtures.py.",
        "",
    ]
    (folder / "README.md").write_text("\n".join(card))


def main(argv: list[str]) -> int:
    transformers.utils.logging.disable_progress_bar()
    if len(argv) != 1:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    out = Path(argv[0]).resolve()
    if out.exists():
        shutil.rmtree(out)
    (out / "hub").mkdir(parents=True)
    tok_dir = build_tokenizer(out / "qwen2.5-tokenizer")
    made = build_models(out / "hub", tok_dir)
    build_zen(out / "datasets" / ORG / "zen")
    made.append(f"{ORG}/zen (dataset)")
    (out / "MANIFEST.json").write_text(
        json.dumps({"ids": made, "transformers": transformers.__version__}, indent=2) + "\n"
    )
    print("\n".join(made))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
