"""Bad input: each case exits non-zero with one clear paragraph that names the field, and no traceback."""
import json
import pytest
import torch
from conftest import cli, run_cli
from datasets import Dataset
from grpo_edu.config import GRPOConfig
from grpo_edu.errors import GRPOEduError
from grpo_edu.toy import toy_model, toy_tokenizer
from grpo_edu.trainer import GRPOTrainer

FAST = ["--max_steps", "1", "--toy_warm_start_steps", "1", "--per_device_train_batch_size", "16", "--eval_dataset", "none"]


def _write(path, text):
    path.write_text(text); return path


@pytest.mark.parametrize("args,expected", [
    (["--num_generations", "1"], "num_generations=1"),
    (["--per_device_train_batch_size", "12", "--num_generations", "8"], "12 × 1 = 12 completions per process and rollout round is not a multiple of num_generations=8"),
    (["--max_completion_length", "0"], "max_completion_length=0"),
    (["--learning_rate", "0"], "learning_rate=0"),
    (["--learning_rate", "-1e-5"], "learning_rate=-1e-05"),
    (["--loss_type", "ppo"], "Valid values: grpo, bnpo, dr_grpo, dapo"),
    (["--scale_rewards", "global"], "Valid values: group, batch, none"),
    (["--dataset", "no/such/prompts.jsonl"], "neither a built-in task"),
    (["--num_generation", "8"], "Did you mean `--num_generations`?"),
    (["--rollout_engine", "vllm"], "rollout_engine='vllm' is not supported. Valid values: auto"),
    (["--optim", "adamw8bit"], "Did you mean `adamw_8bit`?"),
    (["--lm_head_chunk_size", "-1"], "lm_head_chunk_size=-1 must be a whole number"),
    (["--reward_funcs", "acurracy"], "Did you mean `accuracy`?"),
    (["--reward_funcs", "accuracy,format", "--reward_weights", "1,x"], "reward_weights='1,x': expected a list of numbers"),
    (["--max_steps", "1.5"], "max_steps='1.5': expected an integer"),
    (["--model_name_or_path", "./no-such-model"], "model_name_or_path='./no-such-model': no such file or folder"),
    (["--reward_funcs", "accuracy,./no-such-rm"], "reward_funcs='./no-such-rm': no such file or folder"),
    (["--resume_from_checkpoint", "latest"], "holds no complete checkpoint"),
    (["--save_steps", "-1"], "save_steps=-1 must be ≥ 0"),                  # not a checkpoint at every step
    (["--adam_beta1", "1.5"], "adam_beta1=1.5 must be in [0, 1)"),          # before the model loads, not torch's error
    (["--top_k", "-3"], "top_k=-3 must be ≥ 0"),                            # not transformers' error mid-rollout
    (["--seed", "-1"], "seed=-1 must be in [0, 2**32)"),                      # not numpy's error after the warm start
    (["--model_init_kwargs", '{"device_map": "auto"}'], "model_init_kwargs.device_map='auto' is not passed: accelerate"),
    (["--model_init_kwargs", '{"attn_implementation": "eager"}'], "model_name_or_path=toy is built in code, not loaded"),
    (["--num_train_epochs", "nan", "--max_steps", "-1"], "num_train_epochs=nan must be a finite number"),
    (["--num_train_epochs", "inf", "--max_steps", "-1"], "num_train_epochs=inf must be a finite number"),
    (["--delta", "nan"], "delta=nan must be a finite number"),        # not a nan loss with the monitor saying ok
    (["--max_grad_norm", "inf"], "max_grad_norm=inf must be a finite number: ≥ 0 (1.0 is typical; 0 turns"),
    (["--reward_weights", "1,nan", "--reward_funcs", "accuracy,format"], "reward_weights=[1.0, nan] must be a finite"),
])
def test_config_errors(args, expected, tmp_path):
    r = cli("train", *args, "--output_dir", tmp_path)
    assert r.returncode == 2, r.stderr
    assert expected in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert not (tmp_path / "metrics.jsonl").exists()          # rejected before any training


def test_yaml_unknown_key_suggests(tmp_path):
    cfg = _write(tmp_path / "r.yaml", "num_generation: 4\nlearning_rate: 1e-6\n")
    r = cli("train", "--config", cfg)
    assert r.returncode == 2 and "`num_generation` is not a GRPOConfig field" in r.stderr and "num_generations" in r.stderr


@pytest.mark.parametrize("content,expected", [
    ('{"prompt": "1+1=", "answer": "2"}\n{"prompt": broken}\n', "line 2, is not valid JSON"),
    ('{"question": "1+1="}\n', "has no `prompt` column"),
    ("", "has no rows"),
    ('{"prompt": "1+1="}\n', "reward function `accuracy_reward` needs the dataset column `answer`"),   # toy's default reward
    ('{"prompt": [{"content": "1+1="}], "answer": "2"}\n', "row 1's `prompt` is [{'content': '1+1='}]: a prompt is a string"),
    ('{"prompt": "1+1=", "answer": 2}\n{"prompt": "2+2=", "answer": "4"}\n', "a column holds values of different kinds"),
])
def test_data_file_errors(tmp_path, content, expected):
    f = _write(tmp_path / "p.jsonl", content)
    r = cli("train", "--dataset", f, *FAST, "--output_dir", tmp_path / "out")
    assert r.returncode == 2 and expected in r.stderr and "Traceback" not in r.stderr, r.stderr


def no_hub(tmp_path) -> dict:
    "No Hub and an empty cache: a user who has trained the real recipes has Qwen and GSM8K in their own cache."
    cache = tmp_path / "hf-cache"
    return {"HF_HUB_OFFLINE": "1", "HF_HOME": str(cache), "HF_HUB_CACHE": str(cache / "hub"),
            "HF_DATASETS_CACHE": str(cache / "datasets")}


def test_model_offline_error(tmp_path):
    r = run_cli("train", "--model_name_or_path", "Qwen/Qwen2.5-0.5B-Instruct", "--dataset", "toy", *FAST,
                "--output_dir", tmp_path, env=no_hub(tmp_path), timeout=180)
    assert r.returncode == 2 and "could not load model 'Qwen/Qwen2.5-0.5B-Instruct'" in r.stderr and "local folder" in r.stderr, r.stderr


def test_gsm8k_offline_error(tmp_path):
    "GSM8K from the Hub with no network and no cache: one paragraph that names the local alternative (datasets' own error)."
    (tmp_path / "config.json").write_text("{}")                      # a model folder (it is not loaded before the data)
    r = run_cli("eval", "--model", tmp_path, "--dataset", "gsm8k", env=no_hub(tmp_path), timeout=180)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr[-2000:]
    assert "could not load the dataset openai/gsm8k" in r.stderr and "--dataset_path DIR" in r.stderr


@pytest.mark.parametrize("command,expected", [
    (["eval", "--model", "m", "--max_samples", "0"], "max_samples=0 must be ≥ 1"),
    (["eval", "--model", "m", "--batch_size", "0"], "batch_size=0 must be ≥ 1"),
    (["eval", "--model", "m", "--pass_k", "two"], "pass_k='two': expected an integer"),
    (["memory", "--model", "qwen2.5-0.5b", "--gpus", "0"], "argument --gpus: '0' must be greater than 0"),
    (["bench", "--shapes", "7b", "--data_dir", "{data}"], "the benchmark knows the shapes 0.5b, 1.5b, tiny"),
    (["eval", "--model", "runs/typo/checkpoint-9"], "--model='runs/typo/checkpoint-9': no such file or folder"),
    (["eval", "--model", "{data}", "--dataset", "toy", "--split", "validation"], "the toy task has the splits train, test"),
    (["eval", "--model", "m", "--chat_template_kwargs", "{{enable_thinking: false}}"], "JSON on the command line"),
    (["train", "--use_vllm", "true"], "--use_vllm is not a GRPOConfig field (a TRL one: generation runs on grpo_edu's own"),
])
def test_command_argument_errors(command, expected, tmp_path):
    for d in ("gsm8k", "qwen2.5-tokenizer"): (tmp_path / d).mkdir()      # what bench's --data_dir must hold
    (tmp_path / "config.json").write_text("{}")                          # and a model folder, for eval's --model
    r = cli(*[a.format(data=tmp_path) for a in command])
    assert r.returncode == 2 and expected in r.stderr and "Traceback" not in r.stderr, r.stderr[-2000:]


def test_paths_of_the_wrong_kind(tmp_path):
    "A file where a folder goes (output_dir), a folder where a file goes (--config, eval's --output): refused up front."
    f = _write(tmp_path / "a_file", "x")
    r = cli("train", *FAST, "--output_dir", f)
    assert r.returncode == 2 and "output_dir=" in r.stderr and "is a file" in r.stderr and "Traceback" not in r.stderr, r.stderr[-2000:]
    r = cli("train", "--config", tmp_path)
    assert r.returncode == 2 and "is a folder: give a YAML recipe" in r.stderr and "Traceback" not in r.stderr, r.stderr[-2000:]
    r = cli("eval", "--model", "m", "--output", f / "eval.json")       # before any model or data loads
    assert r.returncode == 2 and "cannot create its folder" in r.stderr and "Traceback" not in r.stderr, r.stderr[-2000:]
    r = cli("eval", "--model", "m", "--output", "/proc/grpo-edu-eval.json")  # a folder that takes no files
    assert r.returncode == 2 and "cannot write a file in /proc" in r.stderr and "Traceback" not in r.stderr, r.stderr[-2000:]
    r = cli("train", *FAST, "--output_dir", "/proc/grpo-edu-nope")    # a folder nobody can make there
    assert r.returncode == 2 and "output_dir='/proc/grpo-edu-nope' cannot be" in r.stderr and "Traceback" not in r.stderr, r.stderr[-2000:]


def test_prompts_the_rollout_would_cut_are_named(tmp_path):
    "Prompts longer than max_prompt_length lose their start: one warning line before training, no traceback, exit 0."
    r = cli("train", *FAST, "--max_prompt_length", "3", "--output_dir", tmp_path, timeout=300)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr[-2000:]
    assert "grpo-edu: warning: 512 of the first 512 prompts of train_dataset are longer than max_prompt_length=3" in r.stderr


def test_new_run_over_an_old_one_is_refused(tmp_path):
    "A new run in a folder that holds a run's checkpoints is refused, the old run untouched; --overwrite_output_dir replaces it."
    assert cli("train", *FAST, "--max_steps", "2", "--save_steps", "1", "--output_dir", tmp_path, timeout=300).returncode == 0
    before = {str(p): p.stat().st_mtime_ns for p in tmp_path.rglob("*") if p.is_file()}
    assert "checkpoint-2/trainer_state.pt" in {str(p.relative_to(tmp_path)) for p in tmp_path.rglob("trainer_state.pt")}
    r = cli("train", *FAST, "--output_dir", tmp_path)
    assert r.returncode == 2 and "already holds a run (checkpoint-2 is its newest checkpoint)" in r.stderr, r.stderr[-2000:]
    assert "--resume_from_checkpoint latest" in r.stderr and "--overwrite_output_dir true" in r.stderr and "Traceback" not in r.stderr
    assert {str(p): p.stat().st_mtime_ns for p in tmp_path.rglob("*") if p.is_file()} == before         # nothing touched
    r = cli("eval", "--model", tmp_path)                                 # the run's folder where its checkpoint goes
    assert r.returncode == 2 and "is a training run's folder" in r.stderr and f"--model={tmp_path / 'checkpoint-2'}" in r.stderr, r.stderr[-2000:]
    r = cli("train", *FAST, "--output_dir", tmp_path, "--overwrite_output_dir", "true", timeout=300)
    assert r.returncode == 0 and "deleted 2 checkpoint(s) of the previous run" in r.stdout, r.stderr[-2000:]
    assert sorted(p.name for p in tmp_path.glob("checkpoint-*")) == ["checkpoint-1"]                   # the new run's own
    assert [json.loads(l)["step"] for l in (tmp_path / "metrics.jsonl").read_text().splitlines()] == [1]
    r = cli("train", *FAST, "--output_dir", tmp_path, "--overwrite_output_dir", "true", "--resume_from_checkpoint", "latest")
    assert r.returncode == 2 and "Drop one of the two" in r.stderr and "Traceback" not in r.stderr, r.stderr[-2000:]


def test_reward_model_offline_error(tmp_path):
    "A reward model that cannot be loaded (offline, not in the cache) is one paragraph, exit 2, no traceback."
    r = run_cli("train", "--reward_funcs", "accuracy,OpenAssistant/reward-model-deberta-v3-base", *FAST,
                "--output_dir", tmp_path, env=no_hub(tmp_path), timeout=180)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr[-2000:]
    assert "could not load reward model 'OpenAssistant/reward-model-deberta-v3-base'" in r.stderr


def test_yaml_typed_values_are_checked(tmp_path):
    "YAML gives numbers and booleans their own types: a wrong one is named like a wrong command-line string."
    cfg = _write(tmp_path / "r.yaml", "max_steps: 2.5\n")
    r = cli("train", "--config", cfg, "--output_dir", tmp_path, timeout=120)
    assert r.returncode == 2 and "max_steps=2.5: expected an integer (the default is -1)" in r.stderr, r.stderr


def _trainer(tmp_path, reward, rows=None, **kw):
    tok = toy_tokenizer(); model = toy_model(tok, 32, 1)
    ds = Dataset.from_list(rows or [{"prompt": f"{i}+1=", "answer": str(i + 1)} for i in range(8)])
    args = GRPOConfig(output_dir=str(tmp_path), num_generations=4, per_device_train_batch_size=8, max_completion_length=3,
                      max_steps=1, learning_rate=1e-4, eval_dataset=None, **kw)
    return GRPOTrainer(model, reward, args, ds, None, tok)


@pytest.mark.parametrize("reward,expected", [
    (lambda completions, **k: [1 / 0 for _ in completions], "raised ZeroDivisionError"),
    (lambda completions, **k: [1.0], "returned 1 values for 8 completions"),
    (lambda completions, **k: ["good"] * len(completions), "must be numbers"),
    (lambda completions, **k: {"reward": 1.0}, "returned dict values for 8 completions"),   # (NaN is "unscored", as in TRL)
    (lambda completions, **k: [float("inf")] * len(completions), "must be finite"),
])
def test_reward_function_errors(tmp_path, reward, expected):
    with pytest.raises(GRPOEduError, match=expected.replace("(", r"\(")):
        _trainer(tmp_path, reward).train()
    assert not list(tmp_path.glob("checkpoint-*"))


def test_reward_error_names_function_and_row(tmp_path):
    def picky(completions, answer, **kw):
        return [float(len(c) + 1 / (int(a) - 3)) for c, a in zip(completions, answer)]   # fails where answer == 3
    rows = [{"prompt": "0+1=", "answer": "1"}, {"prompt": "2+1=", "answer": "3"}]     # both drawn in step 1
    with pytest.raises(GRPOEduError, match=r"`picky` raised ZeroDivisionError.*on row [0-7] \(completion"):
        _trainer(tmp_path, picky, rows=rows).train()


def test_chat_prompts_without_template(tmp_path):
    rows = [{"prompt": [{"role": "user", "content": "1+1="}], "answer": "2"}] * 2
    with pytest.raises(GRPOEduError, match="no chat template"):
        _trainer(tmp_path, "accuracy", rows=rows).train()


def test_dataset_without_prompt_and_empty(tmp_path):
    tok = toy_tokenizer(); m = toy_model(tok, 16, 1); args = GRPOConfig(output_dir=str(tmp_path), eval_dataset=None)
    with pytest.raises(GRPOEduError, match="no `prompt` column"):
        GRPOTrainer(m, "accuracy", args, Dataset.from_list([{"question": "x"}]), None, tok)
    with pytest.raises(GRPOEduError, match="is empty"):
        GRPOTrainer(m, "accuracy", args, Dataset.from_list([{"prompt": "x"}]).select([]), None, tok)


def test_batch_not_multiple_with_accumulation_names_numbers():
    "TRL's rule, per process: a rollout round's completions (not each micro-batch) hold whole groups."
    GRPOConfig(per_device_train_batch_size=10, num_generations=4, gradient_accumulation_steps=2).validate()  # 20 = 5 groups
    GRPOConfig(per_device_train_batch_size=3, num_generations=3, gradient_accumulation_steps=2).validate()
    with pytest.raises(GRPOEduError, match=r"10 × 1 = 10 completions per process and rollout round is not a multiple of "
                                           r"num_generations=4.*a multiple of 4\."):
        GRPOConfig(per_device_train_batch_size=10, num_generations=4).validate()
    with pytest.raises(GRPOEduError, match=r"6 × 3 = 18 .* multiple of num_generations=4.*a multiple of 4\."):
        GRPOConfig(per_device_train_batch_size=6, num_generations=4, steps_per_generation=3).validate()
    GRPOConfig(per_device_train_batch_size=6, num_generations=4, steps_per_generation=2).validate()   # 12 = 3 groups


def test_own_reward_function_by_import_path(tmp_path):
    "A TRL reward function in the user's own file, named as in TRL's CLI (module.function), trains; a typo is one paragraph."
    _write(tmp_path / "my_rewards.py", "def exact(completions, answer, trainer_state, log_metric, **kwargs):\n"
                                       "    log_metric('my/step', trainer_state.global_step)\n"
                                       "    return [c.strip() == a for c, a in zip(completions, answer)]   # bools, as TRL allows\n")
    r = run_cli("train", "--reward_funcs", "accuracy,my_rewards.exact", *FAST, "--output_dir", tmp_path / "out",
                cwd=tmp_path, timeout=180)
    assert r.returncode == 0, r.stderr[-2000:]
    row = json.loads((tmp_path / "out" / "metrics.jsonl").read_text().splitlines()[-1])
    assert "rewards/exact/mean" in row and row["my/step"] == 0, row
    for name, expected in [("my_reward.exact", "there is no module `my_reward`"), ("my_rewards.exakt", "Did you mean `exact`?")]:
        r = run_cli("train", "--reward_funcs", name, *FAST, "--output_dir", tmp_path / "bad", cwd=tmp_path, timeout=120)
        assert r.returncode == 2 and expected in r.stderr and "Traceback" not in r.stderr, r.stderr
        assert not (tmp_path / "bad").exists()


MY_CODE = '''
import helper                       # a second file in the working folder: found while this module is imported

def multiply(a: int, b: int) -> int:
    """Multiply two integers.

    Args:
        a: the first factor
        b: the second factor
    """
    return helper.times(a, b)

def exact(completions, **kwargs):
    return [1.0 for _ in completions]
'''


@pytest.mark.parametrize("load", ["from grpo_edu.tools import import_tool; import_tool('my_code:multiply')",
                                  "from grpo_edu.rewards import import_reward_func; import_reward_func('my_code.exact')"])
def test_the_working_folder_never_shadows_an_installed_package(tmp_path, load):
    "A user's tool or reward module is found in the working folder; a ./pygments.py there never replaces the library."
    import os, subprocess, sys
    from pathlib import Path
    work, driver = tmp_path / "work", tmp_path / "driver"
    work.mkdir(), driver.mkdir()
    (work / "my_code.py").write_text(MY_CODE)
    (work / "helper.py").write_text("def times(a, b): return a * b\n")
    (work / "pygments.py").write_text("raise SystemExit('./pygments.py was imported in place of the library')\n")
    (driver / "run.py").write_text(f"import os, sys\nassert 'pygments' not in sys.modules\n{load}\n"
                                   "assert os.getcwd() not in sys.path\nimport pygments\nprint(pygments.__file__)\n")
    root = str(Path(__file__).resolve().parents[1])             # this checkout's grpo_edu
    r = subprocess.run([sys.executable, str(driver / "run.py")], cwd=work, capture_output=True, text=True,
                       timeout=300, env={**os.environ, "PYTHONPATH": root})
    assert r.returncode == 0, r.stderr[-2000:]
    assert str(work) not in r.stdout and "site-packages" in r.stdout


@pytest.mark.parametrize("command", [["train", "--tools", "my_tools:multiply"], ["eval", "--model", "m", "--tools", "my_tools:f"]])
@pytest.mark.parametrize("value", ["inf", "nan", "0", "-1"])
def test_tool_timeout_must_be_a_finite_positive_number(command, value, tmp_path):
    "`--tool_timeout inf` made every call fail (and eval had no timeout at all): train and eval refuse it alike."
    r = cli(*command, "--tool_timeout", value, "--output_dir" if command[0] == "train" else "--output",
            tmp_path / "out")
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr[-2000:]
    says = "must be a finite number" if value in ("inf", "nan") else "must be finite seconds > 0"
    assert f"tool_timeout={float(value)} {says}" in r.stderr and "finite seconds > 0" in r.stderr, r.stderr

def test_every_float_field_refuses_nan_and_inf():
    "Each float field of GRPOConfig (and a list of them): nan and inf refused, naming the field, before any file is read."
    from grpo_edu.config import FIELD_TYPES
    floats = [name for name, hint in FIELD_TYPES.items() if "float" in str(hint)]
    assert {"delta", "num_train_epochs", "learning_rate", "tool_timeout", "reward_weights"} <= set(floats)
    for name in floats:
        for bad in (float("nan"), float("inf"), float("-inf")):
            value = [1.0, bad] if str(FIELD_TYPES[name]).startswith("list") else bad
            with pytest.raises(GRPOEduError, match=f"^{name}=.* must be a finite number"):
                GRPOConfig(**{name: value}).validate()


def test_recipe_with_a_key_given_twice(tmp_path):
    "A YAML key given twice: refused with both lines, where YAML alone lets the last one win."
    cfg = _write(tmp_path / "r.yaml", "max_steps: 1\nbeta: 0.0\nmax_steps: 500\n")
    r = cli("train", "--config", cfg, "--output_dir", tmp_path / "out")
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr[-2000:]
    assert "`max_steps` is given twice (lines 1 and 3), and only the last would count" in r.stderr, r.stderr
    assert not (tmp_path / "out").exists()


def test_recipe_alias_bomb_is_refused_quickly(tmp_path):
    "Nine levels of nine aliases (9**9 values once expanded, 500 bytes): refused in one short paragraph, never expanded."
    levels = ['a: &a ["x","x","x","x","x","x","x","x","x"]']
    levels += [f"{c}: &{c} [{', '.join([f'*{p}'] * 9)}]" for p, c in zip("abcdefgh", "bcdefghi")]
    cfg = _write(tmp_path / "bomb.yaml", "\n".join(levels) + "\nmax_steps: 1\n")
    r = cli("train", "--config", cfg, "--output_dir", tmp_path / "out", timeout=60)
    assert r.returncode == 2 and "expand to more than 100,000 values" in r.stderr, r.stderr[-2000:]
    assert len(r.stderr) < 1000 and "Traceback" not in r.stderr                      # the expansion is never shown


@pytest.mark.parametrize("command", [
    ["train", "--output_dir", "{long}"],
    ["train", "--config", "{long}.yaml"],
    ["train", "--dataset", "{long}.jsonl", "--output_dir", "{tmp}/out"],
    ["train", "--resume_from_checkpoint", "{long}", "--output_dir", "{tmp}/out"],
    ["train", "--model_name_or_path", "{long}", "--output_dir", "{tmp}/out"],
    ["eval", "--model", "{long}"],
    ["eval", "--model", "{tmp}", "--output", "{long}.json"],
])
def test_a_path_longer_than_the_file_system_allows(tmp_path, command):
    "A file name of 300 bytes (the limit is 255): one paragraph naming the option, shortened, not an OSError traceback."
    (tmp_path / "config.json").write_text("{}")                           # a model folder, for eval's --output
    long = str(tmp_path / ("a" * 300))
    r = cli(*[a.format(long=long, tmp=tmp_path) for a in command])
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr[-2000:]
    assert "is too long for a path: a name of 30" in r.stderr and "where the file system allows 255" in r.stderr, r.stderr
    assert "a" * 100 not in r.stderr                                       # the value is shortened


def test_an_output_dir_that_cannot_be_encoded(tmp_path):
    "A lone surrogate in output_dir (a YAML escape): refused before anything loads, not at the first save after training."
    cfg = _write(tmp_path / "r.yaml", f'output_dir: "{tmp_path}/run-\\ud800"\nmax_steps: 1\n')
    r = cli("train", "--config", cfg, timeout=60)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr[-2000:]
    assert "output_dir=" in r.stderr and "cannot be a file name: it holds '\\ud800'" in r.stderr, r.stderr
    assert list(tmp_path.iterdir()) == [cfg]                               # nothing written


def test_overwrite_keeps_the_old_run_until_the_new_one_has_a_checkpoint(tmp_path):
    """--overwrite_output_dir: the old run is moved aside (.replaced-run), not deleted, so a new run that fails in its
    first step leaves it whole and recoverable; it is deleted once a new run's first checkpoint is complete."""
    from grpo_edu.checkpoint import save_checkpoint
    from grpo_edu.integrity import checkpoints, checkpoint_problems
    tok = toy_tokenizer()
    for step in (1, 2): save_checkpoint(tmp_path, step, toy_model(tok, 32, 1), tok, {"note": step})
    _write(tmp_path / "metrics.jsonl", '{"step": 2}\n')
    def broken(completions, **kw): raise RuntimeError("a bug in a new reward")
    with pytest.raises(GRPOEduError, match="raised RuntimeError"):
        _trainer(tmp_path, broken, overwrite_output_dir=True).train()
    aside = tmp_path / ".replaced-run"
    assert checkpoints(tmp_path) == [] and sorted(p.name for p in aside.iterdir()) == [
        "checkpoint-1", "checkpoint-2", "metrics.jsonl"]
    assert all(checkpoint_problems(aside / f"checkpoint-{s}") == [] for s in (1, 2))   # recoverable: move it back
    with pytest.raises(GRPOEduError, match="raised RuntimeError"):                  # a second failed try: still kept
        _trainer(tmp_path, broken, overwrite_output_dir=True).train()
    assert len(list(aside.glob("checkpoint-*"))) == 2
    _trainer(tmp_path, lambda completions, **kw: [1.0] * len(completions), overwrite_output_dir=True).train()
    assert not aside.exists() and [p.name for p in checkpoints(tmp_path)] == ["checkpoint-1"]
