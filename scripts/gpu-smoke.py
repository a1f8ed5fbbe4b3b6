"""The first step of a GPU run, in 90 seconds or less: whatever could hang or fail shows itself, line by line.

usage: python scripts/gpu-smoke.py [--cpu] [--results FILE] [--budget SECONDS]

Checks, in order, each printed as it starts and as it ends (every line flushed), each appending one JSON line
to the results file as soon as it ends, so a run cut short still returns what it measured:
1. each package imported on its own, in a fresh interpreter under a 30 s timeout, its name printed before the
   import and its version after: an import that waits on the network is seen as a timeout naming the package,
   not as silence. bitsandbytes comes last and is optional (only 8-bit AdamW and 4-bit bases need it).
2. CUDA visible, with the GPU's name (skipped with --cpu).
3. one forward and backward of a tiny Qwen2 on the device.
4. 2 steps of the 0.5B recipe (configs/qwen2.5-0.5b-gsm8k-1x4090.yaml) on random weights of its shape, with
   64-token completions so that it fits the budget (the `recipes` step runs it in full). With --cpu, the same
   recipe on the `tiny` shape, 16-token completions, one micro-batch of 8 (a 0.5B update on a laptop CPU
   takes minutes): a rehearsal of the code path.
Everything runs offline (HF_HUB_OFFLINE and the other switches below are set for the child processes too).
Exit 0 when every required check passed, 1 otherwise (the results file says which).
"""
import argparse, json, os, subprocess, sys, tempfile, time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OFFLINE = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
           "HF_HUB_DISABLE_TELEMETRY": "1", "DISABLE_TELEMETRY": "1", "DO_NOT_TRACK": "1",
           "TOKENIZERS_PARALLELISM": "false", "PYTHONUNBUFFERED": "1"}
PACKAGES = ["torch", "transformers", "accelerate", "peft", "datasets", "trl", "fastcore", "matplotlib",
            "grpo_edu.trainer"]
OPTIONAL = ["bitsandbytes"]                      # last: only 8-bit AdamW and 4-bit bases need it


def say(text: str) -> None:
    "One line on stdout, flushed at once."
    print(f"smoke: {text}", flush=True)


class Results:
    "The results file: one JSON line per check, written and flushed as the check ends."
    def __init__(self, path: Path):
        self.path, self.failed = path, []
        path.parent.mkdir(parents=True, exist_ok=True)
    def add(self, check: str, ok: bool, required: bool = True, **facts) -> None:
        row = {"step": "smoke", "check": check, "ok": ok, **facts}
        with self.path.open("a") as f:
            f.write(json.dumps(row) + "\n")
        if required and not ok: self.failed.append(check)
        say(f"{check}: {'ok' if ok else 'FAILED'} {json.dumps(facts)[:300]}")


def import_one(name: str, env: dict) -> dict:
    "Import `name` in a fresh interpreter under a 30 s timeout: its version, or why it failed."
    top = name.split(".")[0]
    code = f"import sys, {name}; print(getattr(sys.modules['{top}'], '__version__', '?'))"
    started = time.time()
    try:
        done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                              timeout=30)
    except subprocess.TimeoutExpired:
        return {"ok": False, "seconds": 30.0, "error": "no answer in 30 s (a network wait?)"}
    seconds = round(time.time() - started, 1)
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["?"])[-1]
        return {"ok": False, "seconds": seconds, "error": last[:300]}
    return {"ok": True, "seconds": seconds, "version": done.stdout.strip()}


def check_imports(results: Results, env: dict) -> bool:
    "Every package on its own; True when the required ones all import."
    for name in PACKAGES + OPTIONAL:
        say(f"import {name} ...")
        facts = import_one(name, env)
        results.add(f"import {name}", facts.pop("ok"), required=name not in OPTIONAL, **facts)
    return not any(check.startswith("import ") for check in results.failed)


def check_device(results: Results, cpu: bool) -> str:
    "The device the next checks use: CUDA's, or the CPU's with --cpu."
    import torch
    if cpu:
        results.add("device", True, device="cpu", torch=torch.__version__)
        return "cpu"
    visible = torch.cuda.is_available()
    name = torch.cuda.get_device_name(0) if visible else None
    results.add("cuda visible", visible, gpu=name, torch=torch.__version__, cuda=torch.version.cuda)
    return "cuda" if visible else ""


def check_tiny_step(results: Results, device: str) -> None:
    "One forward and backward of a tiny Qwen2 on `device`."
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM
    started = time.time()
    try:
        config = Qwen2Config(vocab_size=512, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                             num_attention_heads=4, num_key_value_heads=2)
        model = Qwen2ForCausalLM(config).to(device)
        ids = torch.randint(0, 512, (4, 32), device=device)
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        grad = sum(p.grad.norm() ** 2 for p in model.parameters() if p.grad is not None) ** 0.5
        ok = bool(torch.isfinite(loss) and torch.isfinite(grad))
        results.add("tiny forward and backward", ok, seconds=round(time.time() - started, 1),
                    loss=round(loss.item(), 3), grad_norm=round(grad.item(), 3))
    except Exception as e:                      # reported, and the next check still runs
        results.add("tiny forward and backward", False, error=f"{type(e).__name__}: {e}"[:300])


def check_recipe_steps(results: Results, cpu: bool, env: dict, seconds: float) -> None:
    "2 steps of the 0.5B recipe on random weights (the tiny shape with --cpu), in a child under a timeout."
    from grpo_edu.data import find_shared_data
    data = find_shared_data(ROOT)
    if data is None:
        results.add("recipe steps", False, error="no data folder (GRPO_EDU_DATA, or shared/data)")
        return
    shape, out = ("tiny" if cpu else "0.5b"), Path(tempfile.mkdtemp(prefix="smoke-"))
    make = (f"import torch; from grpo_edu.bench import random_model_dir; "
            f"random_model_dir('{shape}', '{data}/qwen2.5-tokenizer', '{out}/model', torch.float32)")
    on_cpu = ["--use_cpu", "true", "--bf16", "false", "--per_device_train_batch_size", "8",
              "--gradient_accumulation_steps", "1", "--max_completion_length", "16"]
    train = [sys.executable, "-m", "grpo_edu.cli", "train",
             "--config", "configs/qwen2.5-0.5b-gsm8k-1x4090.yaml", "--model_name_or_path", str(out / "model"),
             "--dataset_path", f"{data}/gsm8k", "--max_steps", "2", "--eval_dataset", "none",
             "--save_steps", "0", "--output_dir", str(out / "run"),
             *(on_cpu if cpu else ["--max_completion_length", "64"])]
    started = time.time()
    try:
        subprocess.run([sys.executable, "-c", make], env=env, cwd=ROOT, check=True, timeout=seconds / 3,
                       capture_output=True, text=True)
        done = subprocess.run(train, env=env, cwd=ROOT, capture_output=True, text=True,
                              timeout=max(10.0, seconds - (time.time() - started)))
    except subprocess.TimeoutExpired as e:
        results.add("recipe steps", False, shape=shape, error=f"no end within {e.timeout:.0f} s")
        return
    except subprocess.CalledProcessError as e:
        results.add("recipe steps", False, shape=shape, error=(e.stderr or "").strip()[-300:])
        return
    logged = out / "run" / "metrics.jsonl"
    rows = [json.loads(line) for line in logged.open()] if done.returncode == 0 else []
    error = done.stderr.strip()[-300:] if done.returncode else None
    results.add("recipe steps", done.returncode == 0 and len(rows) > 0, shape=shape,
                seconds=round(time.time() - started, 1), exit=done.returncode,
                step_s=[round(r.get("step_time", 0), 2) for r in rows], error=error)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cpu", action="store_true", help="the same checks on the CPU (a rehearsal)")
    p.add_argument("--results", default=os.environ.get("RESULTS", "gpu-out/results.jsonl"))
    p.add_argument("--budget", type=float, default=90.0, help="seconds for all the checks")
    a = p.parse_args()
    started = time.time()
    os.environ.update(OFFLINE)
    paths = [str(ROOT), os.environ.get("PYTHONPATH")]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in paths if p)}
    sys.path.insert(0, str(ROOT))
    results = Results(Path(a.results))
    say(f"python {sys.version.split()[0]} at {sys.executable}; results in {a.results}")
    if check_imports(results, env):
        device = check_device(results, a.cpu)
        if device:
            check_tiny_step(results, device)
            left = a.budget - (time.time() - started)
            check_recipe_steps(results, a.cpu, env, left)
    ok = not results.failed
    results.add("smoke", ok, required=False, seconds=round(time.time() - started, 1), failed=results.failed)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
