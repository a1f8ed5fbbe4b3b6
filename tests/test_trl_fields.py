"GRPOConfig takes every TrainingArguments and TRL GRPOConfig setting: read, kept, or refused in one paragraph, never a TypeError."
import dataclasses
import importlib.util
import warnings

import pytest
import transformers

from grpo_edu.config import FIELD_NAMES, GRPOConfig
from grpo_edu.errors import GRPOEduError
from grpo_edu.recipe import SETTINGS_HONOURED, SETTINGS_KEPT, TRL_GRPO_DEFAULTS, config_from_dict, trainer_defaults
from grpo_edu.recipe import _wildcard


def _default(f):
    return f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default


TA_FIELDS = [f for f in dataclasses.fields(transformers.TrainingArguments) if f.init]


@pytest.mark.parametrize("f", TA_FIELDS, ids=lambda f: f.name)
def test_every_training_arguments_field_at_its_default_is_accepted(f):
    if f.name in FIELD_NAMES: return   # a field here: GRPOConfig's own default and meaning
    c = GRPOConfig(**{f.name: _default(f)})
    assert c == GRPOConfig()                                  # nothing changes
    assert getattr(c, f.name) == _default(f)                  # read back as on TrainingArguments


def test_all_training_arguments_and_trl_defaults_at_once():
    at_default = {f.name: _default(f) for f in TA_FIELDS if f.name not in FIELD_NAMES} | TRL_GRPO_DEFAULTS
    assert GRPOConfig(**at_default) == GRPOConfig()
    assert config_from_dict(at_default) == GRPOConfig()


@pytest.mark.skipif(importlib.util.find_spec("trl") is None, reason="TRL is a dev dependency")
def test_trl_table_matches_the_installed_trl():
    import trl
    base = {f.name for f in TA_FIELDS}
    theirs = {f.name: _default(f) for f in dataclasses.fields(trl.GRPOConfig)
              if f.name not in base and f.name not in FIELD_NAMES}
    if trl.__version__ == "1.16.0": assert theirs == TRL_GRPO_DEFAULTS
    for name, value in theirs.items():
        GRPOConfig(**{name: value})                           # each accepted at its default


@pytest.mark.parametrize("kw,says", [
    (dict(use_liger_kernel=True), "lm_head_chunk_size"),
    (dict(ddp_timeout=60), "`ddp_timeout` is not a GRPOConfig field (a transformers TrainingArguments one"),
    (dict(fp16=True), "set torch_dtype: float16"),
    (dict(trust_remote_code=True), "models load without remote code"),
    (dict(eval_strategy="epoch"), "counts optimizer steps, not epochs"),
    (dict(save_strategy="best"), "keeps the last save_total_limit"),
    (dict(logging_strategy="no"), "raise logging_steps to log less"),
    (dict(generation_kwargs={"num_beams": 2, "length_penalty": -0.1}), "generation_kwargs' num_beams, length_penalty"),
    (dict(generation_kwargs="top_k=5"), "must map generate()'s arguments"),
    (dict(num_generation=4), "Did you mean `num_generations`?"),
])
def test_refused_settings_are_one_paragraph(kw, says):
    with pytest.raises(GRPOEduError) as e:
        GRPOConfig(**kw)
    assert says in str(e.value) and "\n" not in str(e.value)
    assert not isinstance(e.value, TypeError)


def test_refusals_are_gathered_with_the_source():
    with pytest.raises(GRPOEduError) as e:
        config_from_dict({"use_vllm": True, "ddp_timeout": 60, "num_generation": 4}, "r.yaml")
    text = str(e.value)
    assert text.startswith("r.yaml: `use_vllm`") and "ddp_timeout" in text and "Remove, rename or change them" in text


def test_settings_with_a_meaning_here():
    c = GRPOConfig(eval_strategy="steps", eval_steps=5, per_device_eval_batch_size=3, save_strategy="no",
                   generation_kwargs={"temperature": 0.7, "top_k": 50, "do_sample": True},
                   activation_checkpointing=True, vllm_importance_sampling_cap=2.0)
    assert (c.eval_steps, c.per_device_eval_batch_size, c.save_steps) == (5, 3, 0)
    assert (c.temperature, c.top_k, c.gradient_checkpointing, c.vllm_importance_sampling_clip_max) == (0.7, 50, True, 2.0)
    assert GRPOConfig(eval_strategy="steps", logging_steps=4).eval_steps == 4      # transformers: eval_steps ← logging_steps
    assert GRPOConfig(use_liger_kernel=False, cast_lm_head_to_fp32=False, pad_to_multiple_of=None) == GRPOConfig()
    assert GRPOConfig(per_device_eval_batch_size=8).per_device_eval_batch_size == 8
    with pytest.raises(GRPOEduError, match="per_device_eval_batch_size=0 must be a positive integer"):
        GRPOConfig(per_device_eval_batch_size=0).validate()


@pytest.mark.parametrize("name,value", [
    ("dataloader_num_workers", 4), ("dataloader_pin_memory", False), ("dataloader_persistent_workers", True),
    ("dataloader_prefetch_factor", 2), ("dataloader_drop_last", True), ("remove_unused_columns", True),
    ("disable_tqdm", True), ("logging_dir", "logs"), ("logging_first_step", True), ("label_names", ["x"]),
    ("include_num_input_tokens_seen", "all"), ("do_eval", True), ("log_multimodal", False),
    ("accelerator_config", {"split_batches": True}),
])
def test_settings_that_change_nothing_are_kept_at_any_value(name, value):
    assert _wildcard(SETTINGS_KEPT, name)
    c = GRPOConfig(**{name: value})
    assert c == GRPOConfig() and getattr(c, name) == value


@pytest.mark.parametrize("name,value", [
    ("eval_on_start", True), ("num_generations_eval", 2), ("cast_lm_head_to_fp32", True), ("pad_to_multiple_of", 8),
])
def test_trl_settings_grpo_edu_reads_are_kept(name, value):
    assert name in SETTINGS_HONOURED
    assert getattr(GRPOConfig(**{name: value}), name) == value


def test_scale_rewards_takes_trl_booleans():
    assert GRPOConfig(scale_rewards=True).validate().scale_rewards == "group"
    assert GRPOConfig(scale_rewards=False).validate().scale_rewards == "none"
    assert config_from_dict({"scale_rewards": False}).scale_rewards == "none"      # a YAML recipe's `false`


def test_cispo_without_epsilon_high_is_trls_cap_with_a_warning():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        GRPOConfig(loss_type="cispo").validate()
        GRPOConfig(loss_type="cispo", epsilon_high=5.0).validate()
    said = [str(w.message) for w in caught if "cispo" in str(w.message)]
    assert len(said) == 1 and "Set --epsilon_high 5.0" in said[0]


def test_trainer_defaults_is_transformers_own():
    assert trainer_defaults()["per_device_eval_batch_size"] == 8
    # ours batches the greedy evaluation more: 64 rows a forward
    assert GRPOConfig.__dataclass_fields__["per_device_eval_batch_size"].default == 64


def test_a_trl_yaml_recipe_with_trainer_settings(tmp_path):
    from grpo_edu.recipe import load_config
    recipe = tmp_path / "trl.yaml"
    recipe.write_text("per_device_eval_batch_size: 4\neval_strategy: steps\neval_steps: 10\n"
                      "dataloader_num_workers: 2\nuse_vllm: false\nscale_rewards: false\n")
    c = load_config(str(recipe))
    assert (c.per_device_eval_batch_size, c.eval_steps, c.scale_rewards, c.dataloader_num_workers) == (4, 10, "none", 2)
    recipe.write_text("use_vllm: true\n")
    with pytest.raises(GRPOEduError, match="trl.yaml: `use_vllm` is not a GRPOConfig field .a TRL one"):
        load_config(str(recipe))
