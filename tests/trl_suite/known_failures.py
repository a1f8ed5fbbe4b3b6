"""TRL's GRPO tests that fail against grpo_edu today, by cause (scripts/trl-suite-known-failures.py)."""

CAUSES = {
    1: 'a TRL / TrainingArguments field grpo_edu does not take',
    2: "a TRL warning, on TRL's logger, that grpo_edu does not emit",
    3: 'a TRL trainer internal the test reaches for (a private method or attribute)',
    4: 'input TRL accepts that grpo_edu refuses, or another error contract',
    5: 'another check of the test: see its assertion',
}

KNOWN = {
    'TestGRPORolloutDispatch::test_generate_rollout_func_syncs_vllm_weights_when_needed': 5,
    'TestGRPOTrainer::test_liger_kernel_with_peft_lm_head_raises': 4,
    'TestGRPOTrainer::test_liger_kernel_with_peft_modules_to_save_lm_head_allowed': 4,
    'TestGRPOTrainer::test_liger_kernel_with_peft_non_lm_head_target_allowed': 4,
    'TestGRPOTrainer::test_liger_kernel_with_peft_prompt_learning_raises': 4,
    'TestGRPOTrainer::test_prepare_input_called_with_correct_data': 4,
    'TestGRPOTrainer::test_train_moe_peft_model': 5,
    'TestGRPOTrainer::test_train_with_additional_generation_kwargs': 5,
    'TestGRPOTrainer::test_train_with_generation_kwargs': 4,
    'TestGRPOTrainer::test_train_with_malformed_tool_calls': 5,
    'TestGRPOTrainer::test_train_with_mask_truncated_completions': 5,
    'TestGRPOTrainer::test_trust_remote_code': 4,
}
