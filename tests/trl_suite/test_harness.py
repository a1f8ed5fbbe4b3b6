"""The harness itself: the swap reached TRL's test module and nothing else; the Hub ids resolve offline."""

import sys

import pytest

from .conftest import PACKAGE, TARGET, import_trl_tests, target_classes


def test_trl_tests_use_the_target_classes():
    module = import_trl_tests()
    for name, cls in target_classes().items():
        assert getattr(module, name) is cls
    if TARGET == "grpo_edu":
        assert module.GRPOTrainer.__module__.startswith("grpo_edu.")


def test_the_rest_of_trl_is_trl():
    "Only the test module's two names are swapped: `trl` itself keeps its own classes."
    import trl
    from trl.trainer.grpo_trainer import GRPOTrainer

    import_trl_tests()
    assert trl.GRPOTrainer is GRPOTrainer
    assert sys.modules[f"{PACKAGE}.testing_utils"].TrlTestCase.__module__ == f"{PACKAGE}.testing_utils"


def test_hub_ids_resolve_offline():
    from datasets import load_dataset
    from transformers import AutoConfig

    assert AutoConfig.from_pretrained("trl-internal-testing/tiny-Qwen2ForCausalLM-2.5").model_type == "qwen2"
    train = load_dataset("trl-internal-testing/zen", "standard_prompt_only", split="train")
    assert len(train) == 17 and train[0] == {"prompt": "Beautiful is better than"}


def test_unknown_hub_ids_fail_fast():
    "An id the fixtures lack is refused at once (offline), never fetched."
    from transformers import AutoConfig

    with pytest.raises(OSError):
        AutoConfig.from_pretrained("trl-internal-testing/not-built-here")
