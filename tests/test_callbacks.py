"""transformers' TrainerCallback objects through GRPOTrainer(callbacks=...): the events transformers' Trainer calls,
with its TrainerState and TrainerControl, a callback that stops the run, and TR-DPO's reference sync as a callback."""
import json
import torch
from transformers import TrainerCallback
from grpo_edu.config import GRPOConfig
from grpo_edu.toy import addition_dataset, toy_model, toy_tokenizer
from grpo_edu.callbacks import SyncRefModelCallback
from grpo_edu.trainer import GRPOTrainer


class Recorder(TrainerCallback):
    "Every event with the step it came at; the logged rows; a stop once `stop_at` optimizer steps are done."
    def __init__(self, stop_at=None):
        self.stop_at, self.events, self.logs = stop_at, [], []

    def on_train_begin(self, args, state, control, **kw):
        self.events.append(("train_begin", state.global_step))

    def on_step_end(self, args, state, control, **kw):
        self.events.append(("step_end", state.global_step))
        if self.stop_at is not None and state.global_step >= self.stop_at:
            control.should_training_stop = True

    def on_log(self, args, state, control, logs=None, **kw):
        self.events.append(("log", state.global_step))
        self.logs.append(dict(logs))

    def on_evaluate(self, args, state, control, metrics=None, **kw):
        self.events.append(("evaluate", state.global_step, metrics["n"]))

    def on_save(self, args, state, control, **kw):
        self.events.append(("save", state.global_step))

    def on_train_end(self, args, state, control, **kw):
        self.events.append(("train_end", state.global_step))


def lengths(completions, **kw):
    "A reward that varies: the completion's length."
    return [float(len(c)) for c in completions]


def trainer(tmp_path, callbacks, **kw):
    "A tiny toy run on the CPU with these callbacks."
    tok = toy_tokenizer()
    args = GRPOConfig(output_dir=str(tmp_path), num_generations=4, per_device_train_batch_size=16,
                      max_completion_length=5, report_to="none", bf16=False, **kw)
    return GRPOTrainer(toy_model(tok, seed=0), lengths, args, addition_dataset(64, seed=1),
                       addition_dataset(8, seed=2), processing_class=tok, callbacks=callbacks)


def test_a_callback_stops_the_run_and_sees_the_logged_rows(tmp_path):
    rec = Recorder(stop_at=3)
    tr = trainer(tmp_path, [rec], max_steps=10, logging_steps=2)
    summary = tr.train()
    assert summary["steps"] == 3 and tr.step == 3 and "eval_after" in summary   # ended as a finished run
    written = [json.loads(line) for line in open(tmp_path / "metrics.jsonl")]
    assert [r["step"] for r in written] == [2, 3]                 # step 3 is the last: its window is logged
    # and then transformers' end-of-training row (train_loss, train_runtime, ...)
    assert rec.logs[:-1] == written and tr.state.log_history[:-1] == written
    assert "train_loss" in rec.logs[-1] and {**rec.logs[-1], "step": 3} == tr.state.log_history[-1]
    assert all("loss" in r and "reward" in r for r in rec.logs[:-1])
    assert rec.events[0] == ("train_begin", 0) and rec.events[-1] == ("train_end", 3)
    assert [e for e in rec.events if e[0] == "step_end"] == [("step_end", s) for s in (1, 2, 3)]
    assert [e for e in rec.events if e[0] == "save"] == [("save", 3)]   # the final checkpoint


def test_evaluate_and_save_events_follow_eval_steps_and_save_steps(tmp_path):
    rec = Recorder()
    trainer(tmp_path, [rec], max_steps=4, logging_steps=1, eval_steps=2, save_steps=2).train()
    assert [e for e in rec.events if e[0] in ("evaluate", "save")] == [
        ("evaluate", 2, 8), ("save", 2), ("save", 4)]               # the last step's is eval_after
    assert [e[1] for e in rec.events if e[0] == "log"] == [1, 2, 3, 4, 4]   # the last: the end-of-training row


def test_tr_dpo_is_trls_sync_ref_model_callback(tmp_path):
    tr = trainer(tmp_path, [], max_steps=2, beta=0.04, sync_ref_model=True, ref_model_sync_steps=2,
                 ref_model_mixup_alpha=0.5, learning_rate=1e-2)
    assert [type(c).__name__ for c in tr.callback_handler.callbacks] == ["GRPOFlowCallback",
                                                                         "SyncRefModelCallback",
                                                                         "CPUThreadsCallback"]
    ref_before = [p.detach().clone() for p in tr.ref_model.parameters()]
    moved = []
    sync = tr.callback_handler.callbacks[1]
    on_step_end = sync.on_step_end
    def watched(args, state, control, **kw):
        before = [p.detach().clone() for p in tr.ref_model.parameters()]
        on_step_end(args, state, control, **kw)
        moved.append(any(not torch.equal(a, b) for a, b in zip(before, tr.ref_model.parameters())))
    sync.on_step_end = watched
    tr.train()
    assert moved == [False, True]                                  # every ref_model_sync_steps = 2 steps
    policy = tr.accelerator.unwrap_model(tr.model)
    for p0, ref, pol in zip(ref_before, tr.ref_model.parameters(), policy.parameters()):
        # π_ref ← α·π_θ + (1 − α)·π_ref with the weights π_θ had after step 2 (its last step)
        torch.testing.assert_close(ref, 0.5 * pol.detach() + 0.5 * p0, rtol=1e-5, atol=1e-6)
    assert isinstance(sync, SyncRefModelCallback)


class AllEvents(TrainerCallback):
    "The name of every event a callback is called with, in order."
    def __init__(self):
        self.seen = []


for _name in [n for n in dir(TrainerCallback) if n.startswith("on_")]:
    setattr(AllEvents, _name, lambda self, args, state, control, _n=_name, **kw: self.seen.append(_n))

# the events of the loop itself; logging, evaluating and saving follow each trainer's own settings
LOOP_EVENTS = {"on_init_end", "on_train_begin", "on_epoch_begin", "on_step_begin", "on_substep_end",
               "on_pre_optimizer_step", "on_optimizer_step", "on_step_end", "on_epoch_end", "on_train_end"}


def transformers_events(tmp_path, max_steps, accumulation):
    "The loop events transformers' own Trainer fires on a tiny causal LM: one epoch of `max_steps` steps."
    from datasets import Dataset
    from transformers import Trainer, TrainingArguments
    tok, rec = toy_tokenizer(), AllEvents()
    ids = tok("1+2=3")["input_ids"]
    rows = Dataset.from_list([{"input_ids": ids, "labels": ids}] * (max_steps * accumulation))
    args = TrainingArguments(output_dir=str(tmp_path / "hf"), max_steps=max_steps, per_device_train_batch_size=1,
                             gradient_accumulation_steps=accumulation, save_strategy="no", report_to="none",
                             use_cpu=True, disable_tqdm=True, logging_steps=1)
    Trainer(toy_model(tok, seed=0), args, train_dataset=rows, callbacks=[rec]).train()
    return [e for e in rec.seen if e in LOOP_EVENTS]


def test_every_event_fires_in_transformers_order(tmp_path):
    rec = AllEvents()
    trainer(tmp_path, [rec], max_steps=2, gradient_accumulation_steps=2).train()
    ours = [e for e in rec.seen if e in LOOP_EVENTS]
    assert ours == transformers_events(tmp_path, max_steps=2, accumulation=2)
    assert ours.count("on_substep_end") == 2 and ours[0] == "on_init_end" and ours[-1] == "on_train_end"


def test_transformers_printer_and_progress_callbacks_work_unchanged(tmp_path, capsys):
    from transformers import PrinterCallback, ProgressCallback
    trainer(tmp_path, [PrinterCallback(), ProgressCallback()], max_steps=2, logging_steps=1).train()
    printed = capsys.readouterr().out
    # each logged row, printed by PrinterCallback and written under ProgressCallback's bar
    assert printed.count("{'step': 1, 'reward'") == printed.count("{'step': 2, 'reward'") == 2


def test_transformers_tensorboard_callback_works_unchanged(tmp_path):
    import pytest
    pytest.importorskip("tensorboard")
    from transformers.integrations import TensorBoardCallback
    trainer(tmp_path, [TensorBoardCallback()], max_steps=2, logging_steps=1).train()
    assert list((tmp_path / "runs").rglob("events.out.tfevents.*"))


def test_early_stopping_on_eval_accuracy_works_unchanged(tmp_path):
    from transformers import EarlyStoppingCallback
    rec = Recorder()
    tr = trainer(tmp_path, [EarlyStoppingCallback(early_stopping_patience=1), rec], max_steps=8, eval_steps=1,
                 metric_for_best_model="eval_accuracy")
    summary = tr.train()
    accuracy = {json.loads(line)["step"]: json.loads(line).get("eval_accuracy") for line in open(tmp_path / "metrics.jsonl")}
    evaluated = [e[1] for e in rec.events if e[0] == "evaluate"]
    # patience 1: it stops at the first evaluation that does not beat the best before it
    stop = next(s for i, s in enumerate(evaluated) if i and accuracy[s] <= max(accuracy[t] for t in evaluated[:i]))
    assert summary["steps"] == stop < 8
    assert tr.state.best_metric == max(accuracy[t] for t in evaluated)
