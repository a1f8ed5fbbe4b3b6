"""Checkpoints you can trust: a damaged one is named and skipped (or refused), a tampered one runs nothing.

A checkpoint is sealed by its manifest (every file's size and sha256, written last, inside the atomic save) and read as
data only (torch.load with weights_only=True, safetensors, JSON). These tests damage real checkpoints the ways a disk
or a copy does (cut short, other bytes, one bit), plant a pickle that would run code, and check what `train
--resume_from_checkpoint`, `eval` and `merge` do with them; and the same for a kept warm start."""
import json, os, pickle, shutil, warnings
from pathlib import Path
import pytest
import torch
from conftest import cli, run_cli
from test_faults import rows, same
from grpo_edu.checkpoint import save_checkpoint
from grpo_edu.integrity import (MANIFEST, checkpoint_problems, data_only_loads, load_trainer_state, pickle_globals,
                                pickle_problem, write_manifest)
from grpo_edu.errors import GRPOEduError

ROOT = Path(__file__).resolve().parents[1]
RUN = ["--max_steps", "6", "--toy_warm_start_steps", "20", "--per_device_train_batch_size", "16", "--eval_dataset",
       "none", "--logging_steps", "1", "--learning_rate", "1e-3", "--lr_scheduler_type", "linear", "--warmup_steps", "0",
       "--seed", "3"]


class Payload:
    "What a crafted checkpoint pickles: unpickling it runs a shell command that leaves `marker` behind."
    def __init__(self, marker): self.marker = str(marker)
    def __reduce__(self): return (os.system, (f"touch {self.marker}",))


def plant(ck: Path, marker: Path, reseal: bool = True) -> None:
    "Replace ck's trainer_state.pt by the real state with a payload inside; reseal its manifest as an attacker would."
    torch.save({**load_trainer_state(ck), "health": Payload(marker)}, ck / "trainer_state.pt")
    if reseal: write_manifest(ck)


def cut(f: Path, keep: float = 0.5) -> None:
    "Keep the first `keep` of a file's bytes: a copy that stopped (a full disk, an interrupted rsync)."
    data = f.read_bytes()
    f.write_bytes(data[:int(len(data) * keep)])


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    "A 6-step toy run with checkpoints at steps 2, 4 and 6."
    d = tmp_path_factory.mktemp("run")
    r = cli("train", *RUN, "--save_steps", "2", "--save_total_limit", "3", "--output_dir", d)
    assert r.returncode == 0, r.stderr[-2000:]
    return d


@pytest.fixture
def copy(run, tmp_path):
    "A copy of the run to damage."
    shutil.copytree(run, tmp_path / "run")
    return tmp_path / "run"


def test_checkpoint_is_sealed_and_data_only(run):
    "Each checkpoint lists every file's size and sha256, and its state loads with weights_only=True (numpy's RNG too)."
    ck = run / "checkpoint-4"
    files = json.loads((ck / MANIFEST).read_text())["files"]
    on_disk = {p.relative_to(ck).as_posix() for p in ck.rglob("*") if p.is_file()} - {MANIFEST}
    assert set(files) == on_disk and {"model.safetensors", "trainer_state.pt"} <= on_disk
    assert all(files[n]["size"] == (ck / n).stat().st_size for n in files)
    state = torch.load(ck / "trainer_state.pt", weights_only=True)
    assert state["step"] == 4 and state["rng"][0]["numpy"][0] == "MT19937" and len(state["rng"][0]["numpy"][1]) == 624
    assert checkpoint_problems(ck) == []


def test_no_pickle_of_code_is_loaded_anywhere_in_the_package():
    "No weights_only=False left in grpo_edu: every torch.load reads data only."
    hits = [f.name for f in (ROOT / "grpo_edu").glob("*.py") if "weights_only=False" in f.read_text()]
    assert hits == []


def test_latest_skips_damaged_and_tampered_checkpoints(run, copy):
    """checkpoint-6 cut in half, checkpoint-4's state replaced by one that would run code (manifest resealed), and
    checkpoint-2 without a manifest (written before manifests): `latest` names the first two with what is wrong, resumes
    from checkpoint-2 (checked by loading) exactly, and the payload never runs; a cut last line of metrics.jsonl is
    dropped as before."""
    marker = copy / "payload-ran"
    cut(copy / "checkpoint-6" / "model.safetensors")
    plant(copy / "checkpoint-4", marker)
    (copy / "checkpoint-2" / MANIFEST).unlink()
    log = copy / "metrics.jsonl"
    log.write_text(log.read_text()[:-20])                              # a crash mid-write cut the last line
    r = cli("train", *RUN, "--save_steps", "2", "--save_total_limit", "3", "--output_dir", copy,
                "--resume_from_checkpoint", "latest")
    assert r.returncode == 0, r.stderr[-3000:]
    said = r.stderr.replace("\n", " ")
    assert "warning: resume_from_checkpoint='latest' skipped 2 damaged checkpoint(s)" in said, said[-3000:]
    assert f"{copy / 'checkpoint-6'} (model.safetensors holds " in said and "(cut short)" in said
    assert f"{copy / 'checkpoint-4'} (trainer_state.pt is not plain data: unpickling it would call posix.system" in said
    assert f"Resuming from {copy / 'checkpoint-2'}, the newest intact one" in said
    assert not marker.exists()
    same(rows(copy), rows(run))                                        # steps 3-6 again, as the first run logged them


def test_explicit_damaged_checkpoint_is_refused_naming_the_intact_one(copy):
    "An explicit path to a damaged checkpoint: one paragraph naming the file and the newest intact checkpoint, exit 2."
    ck = copy / "checkpoint-6"
    cut(ck / "model.safetensors")
    r = cli("train", *RUN, "--output_dir", copy, "--resume_from_checkpoint", ck)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr[-3000:]
    assert "model.safetensors holds" in r.stderr and "(cut short)" in r.stderr and "nothing was loaded" in r.stderr
    assert f"newest intact checkpoint beside it instead: --resume_from_checkpoint {copy / 'checkpoint-4'}" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1                     # one paragraph


@pytest.mark.parametrize("sealed", [True, False])
def test_garbage_state_is_refused(copy, sealed):
    "trainer_state.pt replaced by other bytes: named (against the manifest, or by opening it when there is none)."
    ck = copy / "checkpoint-6"
    (ck / "trainer_state.pt").write_bytes(os.urandom(5000))
    if not sealed: (ck / MANIFEST).unlink()
    r = cli("train", *RUN, "--output_dir", copy, "--resume_from_checkpoint", ck)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr[-3000:]
    expected = "trainer_state.pt holds 5,000 bytes where" if sealed else "trainer_state.pt is not a file torch.save wrote"
    assert expected in r.stderr and f"--resume_from_checkpoint {copy / 'checkpoint-4'}" in r.stderr, r.stderr


def test_one_flipped_bit_is_found_by_the_manifest(copy):
    "A single bit of the weights changed (a bad sector) still parses as safetensors: only the sha256 finds it."
    f = copy / "checkpoint-6" / "model.safetensors"
    data = bytearray(f.read_bytes())
    data[-3] ^= 0x01                                                   # inside the last tensor's bytes
    f.write_bytes(data)
    from safetensors.torch import load_file
    load_file(str(f))                                                  # loads without complaint...
    assert checkpoint_problems(f.parent) == ["model.safetensors holds other bytes than were saved "
                                             f"(its sha256 differs from {MANIFEST}'s)"]   # ...but is refused


@pytest.mark.parametrize("reseal", [True, False])
def test_state_that_would_run_code_never_runs(copy, tmp_path, reseal):
    """A trainer_state.pt whose unpickling runs a shell command (the real state with a payload inside). Unpickled as
    before (weights_only=False) it runs; resuming from it refuses it and nothing runs, resealed manifest or not."""
    control, marker = tmp_path / "control-ran", tmp_path / "payload-ran"
    torch.save(Payload(control), tmp_path / "control.pt")
    torch.load(tmp_path / "control.pt", weights_only=False)
    assert control.exists()                                            # the payload is live
    ck = copy / "checkpoint-6"
    plant(ck, marker, reseal)
    r = cli("train", *RUN, "--output_dir", copy, "--resume_from_checkpoint", ck)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr[-3000:]
    expected = "would call posix.system" if reseal else "trainer_state.pt holds"
    assert expected in r.stderr and f"--resume_from_checkpoint {copy / 'checkpoint-4'}" in r.stderr, r.stderr
    with pytest.raises(GRPOEduError, match="would call posix.system"):
        load_trainer_state(ck)                                         # the library's own reader, called directly
    assert not marker.exists()


def test_raw_pickle_as_state_never_runs(copy, tmp_path):
    "A plain pickle (no torch zip) in place of trainer_state.pt, in a checkpoint without a manifest: refused, not run."
    marker = tmp_path / "payload-ran"
    ck = copy / "checkpoint-6"
    (ck / "trainer_state.pt").write_bytes(pickle.dumps(Payload(marker)))
    (ck / MANIFEST).unlink()
    with pytest.raises(GRPOEduError, match="trainer_state.pt is not a file torch.save wrote"):
        load_trainer_state(ck)
    r = cli("train", *RUN, "--output_dir", copy, "--resume_from_checkpoint", ck)
    assert r.returncode == 2 and "trainer_state.pt is not a file torch.save wrote" in r.stderr, r.stderr
    assert not marker.exists()


def test_shards_load_as_data_only(tmp_path):
    """FSDP / DeepSpeed shards are read by accelerate and DeepSpeed (DeepSpeed passes weights_only=False): inside
    data_only_loads that call reads data only, the numpy RNG state accelerate pickles is allowed by name, and a planted
    shard is named before any load."""
    marker = tmp_path / "payload-ran"
    import numpy as np
    torch.save({"random_state": np.random.get_state()}, tmp_path / "random_states_0.pkl")   # as accelerate writes it
    torch.save({"state": Payload(marker)}, tmp_path / "optim_states.pt")
    with data_only_loads():
        assert torch.load(tmp_path / "random_states_0.pkl", weights_only=False)["random_state"][0] == "MT19937"
        with pytest.raises(pickle.UnpicklingError, match="posix.system"):
            torch.load(tmp_path / "optim_states.pt", weights_only=False)       # as DeepSpeed calls it
    assert "TORCH_FORCE_WEIGHTS_ONLY_LOAD" not in os.environ                    # put back afterwards
    assert not marker.exists()
    assert pickle_problem(tmp_path / "random_states_0.pkl", "sharded/random_states_0.pkl") is None
    assert "would call numpy" in pickle_problem(tmp_path / "random_states_0.pkl", "trainer_state.pt")  # only shards
    assert "would call posix.system" in pickle_problem(tmp_path / "optim_states.pt", "sharded/optim_states.pt")


def test_distributed_checkpoint_metadata_is_read_without_running_it(tmp_path):
    """torch.distributed.checkpoint (FSDP's sharded state dicts) reads its .metadata with plain pickle.load: its globals
    are read from the opcodes and only DCP's own dataclasses, dtypes, sizes and paths are accepted."""
    import torch.distributed.checkpoint as dcp
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        dcp.save({"w": torch.randn(3, 3)}, storage_writer=dcp.FileSystemWriter(tmp_path / "dcp"), no_dist=True)
    assert pickle_problem(tmp_path / "dcp" / ".metadata", "sharded/pytorch_model_fsdp_0/.metadata") is None
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / ".metadata").write_bytes(pickle.dumps(Payload(tmp_path / "x"), protocol=4))
    assert "would call posix.system" in pickle_problem(tmp_path / "bad" / ".metadata", "sharded/x/.metadata")
    assert pickle_globals(pickle.dumps(Payload(tmp_path / "x"), protocol=4)) == {"posix.system"}
    assert pickle_globals(pickle.dumps({"a": [1, 2.0, "s"]}, protocol=4)) == set()     # plain data: nothing to call


def test_eval_on_a_damaged_checkpoint_is_refused(copy):
    "grpo-edu eval --model CKPT: the damaged file named, the newest intact checkpoint offered, exit 2, nothing loaded."
    ck = copy / "checkpoint-6"
    cut(ck / "model.safetensors", 0.9)
    r = cli("eval", "--model", ck, "--dataset", "toy", "--max_samples", "8", "--max_new_tokens", "4")
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr[-3000:]
    assert "model.safetensors holds" in r.stderr and f"--model={copy / 'checkpoint-4'}" in r.stderr, r.stderr
    (ck / MANIFEST).unlink()                                           # a folder without a manifest: by opening it
    r = cli("eval", "--model", ck, "--dataset", "toy", "--max_samples", "8", "--max_new_tokens", "4")
    assert r.returncode == 2 and "model.safetensors is not a whole safetensors file" in r.stderr, r.stderr
    (copy / "checkpoint-4" / "trainer_state.pt").write_bytes(b"x")    # eval reads no trainer state: still usable
    r = cli("eval", "--model", copy / "checkpoint-4", "--dataset", "toy", "--max_samples", "8", "--max_new_tokens", "4")
    assert r.returncode == 0, r.stderr[-3000:]


def lora_checkpoint(folder: Path) -> Path:
    "A LoRA checkpoint of the toy, as a run saves it (adapters, the base beside them, the manifest), without training."
    from peft import LoraConfig, get_peft_model
    from grpo_edu.toy import toy_model, toy_tokenizer
    tok = toy_tokenizer()
    model = get_peft_model(toy_model(tok, seed=0), LoraConfig(r=2, target_modules=["q_proj", "v_proj"]))
    return save_checkpoint(folder, 1, model, tok, {"step": 1})


@pytest.mark.parametrize("damage", ["adapters cut", "base bit"])
def test_merge_of_a_damaged_checkpoint_is_refused(tmp_path, damage):
    "grpo-edu merge: a damaged adapter file or base model is named, exit 2, and no merged folder is written."
    ck = lora_checkpoint(tmp_path / "run")
    r = cli("merge", ck, "--output", tmp_path / "ok")
    assert r.returncode == 0 and (tmp_path / "ok" / "config.json").exists(), r.stderr[-3000:]
    if damage == "adapters cut": cut(ck / "adapter_model.safetensors", 0.8)
    else:
        f = ck / "base_model" / "model.safetensors"
        data = bytearray(f.read_bytes()); data[-2] ^= 0x10; f.write_bytes(data)
    r = cli("merge", ck, "--output", tmp_path / "merged")
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr[-3000:]
    named = "adapter_model.safetensors holds" if damage == "adapters cut" else "base_model/model.safetensors holds other"
    assert named in r.stderr and "No intact checkpoint is left beside it" in r.stderr, r.stderr
    assert not (tmp_path / "merged").exists()


def test_damaged_warm_start_cache_entry_is_recomputed(tmp_path):
    """A kept warm start with one bit of its weights flipped loads without error (torch's zip has no checksum), so it
    carries a sha256 of its weights: the entry is recomputed, with a note, and gives the fresh weights."""
    from grpo_edu.toy import addition_dataset, cached_warm_start, sft_warm_start, toy_model, toy_tokenizer
    tok, data = toy_tokenizer(), addition_dataset(64, seed=0)
    kw = dict(steps=3, seed=0, batch_size=16)
    fresh = lambda: toy_model(tok, seed=0)
    cached_warm_start(fresh(), tok, data, cache_dir=tmp_path, **kw)
    f = next(tmp_path.glob("toy-warm-start-*.pt"))
    name, weight = next(iter(torch.load(f, weights_only=True)["state_dict"].items()))
    raw = bytearray(f.read_bytes())
    at = raw.find(weight.contiguous().numpy().tobytes())
    assert at > 0, name
    raw[at + 5] ^= 0x40                                                # one bit of the first weight's bytes
    f.write_bytes(raw)
    silently = torch.load(f, weights_only=True)["state_dict"][name]   # torch reads it without complaint
    assert not torch.equal(silently, weight)
    model = fresh()
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        _, kept = cached_warm_start(model, tok, data, cache_dir=tmp_path, **kw)
    assert kept is None and any("could not be read" in str(w.message) and "sha256" in str(w.message) for w in said)
    reference = fresh()
    sft_warm_start(reference, tok, data, **kw)
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), reference.state_dict().values()))
    assert cached_warm_start(fresh(), tok, data, cache_dir=tmp_path, **kw)[1] == f   # replaced by a whole one


# A checkpoint folder is untrusted input: which one is `latest`, what is in it, and what its fields hold.

def toy_checkpoints(folder: Path, steps, limit=None) -> list:
    "Real checkpoints of the toy model at `steps`, as save_checkpoint writes them (no training)."
    from grpo_edu.toy import toy_model, toy_tokenizer
    tok = toy_tokenizer()
    model = toy_model(tok, 16, 1)
    return [save_checkpoint(folder, s, model, tok, {"note": s}, save_total_limit=limit) for s in steps]


def test_latest_refuses_a_folder_whose_step_is_not_its_name(copy):
    """checkpoint-999999999999 holding step 2 (a copy renamed by hand) is not taken for the newest: `latest` refuses it,
    naming the folder, before anything loads, and the run's own checkpoints are untouched."""
    shutil.copytree(copy / "checkpoint-2", copy / "checkpoint-999999999999")
    before = sorted(p.name for p in copy.glob("checkpoint-*"))
    r = cli("train", *RUN, "--save_steps", "2", "--save_total_limit", "3", "--output_dir", copy,
            "--resume_from_checkpoint", "latest")
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr[-3000:]
    assert f"{copy / 'checkpoint-999999999999'} holds the state of step 2, not of step 999999999999" in r.stderr
    assert sorted(p.name for p in copy.glob("checkpoint-*")) == before


def test_rotation_never_deletes_a_later_step(tmp_path):
    """save_total_limit=2 with a stray checkpoint of a later step beside the run: the run's own older checkpoints rotate
    as usual, and the later one is never deleted (nor does it push the run's own newest out)."""
    toy_checkpoints(tmp_path, [999999999999])
    toy_checkpoints(tmp_path, [1, 2, 3], limit=2)
    assert sorted(p.name for p in tmp_path.glob("checkpoint-*")) == ["checkpoint-2", "checkpoint-3",
                                                                      "checkpoint-999999999999"]


def test_names_that_are_not_checkpoints_are_ignored_with_a_warning(tmp_path):
    "checkpoint-best, checkpoint-0007, checkpoint-5.bak: never resumed from or rotated, and named in one warning."
    toy_checkpoints(tmp_path, [1, 2])
    for name in ("checkpoint-best", "checkpoint-0007", "checkpoint-5.bak"):
        shutil.copytree(tmp_path / "checkpoint-1", tmp_path / name)
    from grpo_edu.integrity import checkpoints, resolve_checkpoint
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        assert [p.name for p in checkpoints(tmp_path)] == ["checkpoint-1", "checkpoint-2"]
        assert resolve_checkpoint("latest", tmp_path) == tmp_path / "checkpoint-2"
        toy_checkpoints(tmp_path, [3], limit=1)
    assert "checkpoint-0007, checkpoint-5.bak, checkpoint-best: not checkpoint-<step> folders" in str(said[0].message)
    assert all((tmp_path / n).is_dir() for n in ("checkpoint-best", "checkpoint-0007", "checkpoint-5.bak"))


@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "outside-file"])
@pytest.mark.parametrize("sealed", [True, False])
def test_files_that_are_not_regular_are_never_opened(copy, tmp_path, kind, sealed):
    """A FIFO named like a weights shard (a real os.mkfifo: opening it would block for ever), a symbolic link to
    /dev/zero, or one to a file outside: named from the directory entry alone, exit 2, no traceback, within a short
    timeout; with the manifest listing it (resealed by hand) or not."""
    ck = copy / "checkpoint-6"
    shard = ck / "model-00002-of-00002.safetensors"
    if kind == "fifo": os.mkfifo(shard)
    elif kind == "dev-zero": shard.symlink_to("/dev/zero")
    else:
        (tmp_path / "elsewhere.safetensors").write_bytes((ck / "model.safetensors").read_bytes())
        shard.symlink_to(tmp_path / "elsewhere.safetensors")
    if sealed:
        listed = json.loads((ck / MANIFEST).read_text())
        listed["files"][shard.name] = {"size": 0, "sha256": "0" * 64}
        (ck / MANIFEST).write_text(json.dumps(listed))
    else: (ck / MANIFEST).unlink()
    r = run_cli("train", *RUN, "--output_dir", copy, "--resume_from_checkpoint", ck, timeout=90)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr[-3000:]
    what = "a FIFO" if kind == "fifo" else "a symbolic link"
    assert f"{shard.name} is {what}, not a regular file" in r.stderr, r.stderr[-3000:]
    assert f"--resume_from_checkpoint {copy / 'checkpoint-4'}" in r.stderr
    r = run_cli("eval", "--model", ck, "--dataset", "toy", "--max_samples", "8", timeout=90)
    assert r.returncode == 2 and f"{shard.name} is {what}" in r.stderr and "Traceback" not in r.stderr, r.stderr[-3000:]


def test_sizes_and_headers_are_compared_before_any_hashing(tmp_path):
    """A weights file grown to a sparse terabyte, its manifest entry rewritten to match: refused from its header,
    without one byte hashed; a terabyte-sized tokenizer file is refused from its size alone."""
    from unittest import mock
    ck, = toy_checkpoints(tmp_path, [1])
    with open(ck / "model.safetensors", "r+b") as f: f.truncate(1 << 40)
    listed = json.loads((ck / MANIFEST).read_text())
    listed["files"]["model.safetensors"]["size"] = 1 << 40
    with open(ck / "tokenizer.json", "r+b") as f: f.truncate(1 << 40)
    listed["files"]["tokenizer.json"]["size"] = 1 << 40
    (ck / MANIFEST).write_text(json.dumps(listed))
    with mock.patch("grpo_edu.integrity.file_sha256", side_effect=AssertionError("hashed")):
        said = checkpoint_problems(ck)
    assert said == [f"tokenizer.json holds {1 << 40:,} bytes: no file of its kind in a checkpoint is that large "
                    "(a tokenizer or config file is megabytes)"], said
    listed["files"]["tokenizer.json"]["size"] = (ck / "tokenizer.json").stat().st_size
    with open(ck / "tokenizer.json", "r+b") as f: f.truncate(1000)
    listed["files"]["tokenizer.json"]["size"] = 1000
    (ck / MANIFEST).write_text(json.dumps(listed))
    with mock.patch("grpo_edu.integrity.file_sha256", side_effect=AssertionError("hashed")):
        said = checkpoint_problems(ck)
    assert len(said) == 1 and said[0].startswith("model.safetensors is not a whole safetensors file"), said


def test_a_linked_checkpoint_folder_is_refused_before_anything_is_deleted(run, tmp_path):
    """A checkpoint-N that is a symbolic link to another folder: a new run over it (--overwrite_output_dir), a resume
    and a save with rotation are refused naming it, and neither the link nor what it points to is touched."""
    out, target = tmp_path / "out", tmp_path / "precious"
    shutil.copytree(run / "checkpoint-6", target)
    toy_checkpoints(out, [1, 2])
    (out / "checkpoint-9").symlink_to(target, target_is_directory=True)
    for extra in (["--overwrite_output_dir", "true"], ["--resume_from_checkpoint", "latest"]):
        r = cli("train", *RUN, "--output_dir", out, *extra)
        assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr[-3000:]
        assert f"{out / 'checkpoint-9'} is a symbolic link (to {target})" in r.stderr, r.stderr[-3000:]
        assert "Nothing was saved or deleted" in r.stderr
    with pytest.raises(GRPOEduError, match="is a symbolic link"):
        toy_checkpoints(out, [3], limit=1)
    assert sorted(p.name for p in out.glob("checkpoint-*")) == ["checkpoint-1", "checkpoint-2", "checkpoint-9"]
    assert (out / "checkpoint-9").is_symlink() and checkpoint_problems(target) == []


@pytest.mark.parametrize("field,value,said", [
    ("rng", "abc", "`rng` is str 'abc', where a save writes the RNG states"),
    ("optimizer", {}, "`optimizer` is dict {}, where a save writes an optimizer's state_dict"),
    ("step", "6", "`step` is str '6', where a save writes a whole number"),
    ("scheduler", [1, 2], "`scheduler` is list [1, 2]"),
])
def test_resealed_state_of_the_wrong_kinds_is_refused(copy, field, value, said):
    """trainer_state.pt rewritten as data of the wrong kinds, its manifest resealed: one paragraph naming the field,
    exit 2, before any weights load (not a TypeError from deep inside the resume)."""
    ck = copy / "checkpoint-6"
    torch.save({**load_trainer_state(ck), field: value}, ck / "trainer_state.pt")
    write_manifest(ck)
    r = cli("train", *RUN, "--output_dir", copy, "--resume_from_checkpoint", ck)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr[-3000:]
    assert said in r.stderr and "nothing was loaded from it" in r.stderr, r.stderr[-3000:]
    assert len(r.stderr.strip().splitlines()) == 1                     # one paragraph


def test_eval_refuses_a_crafted_pytorch_model_bin(run, tmp_path):
    """A model folder (config.json, no manifest) whose weights are a pytorch_model.bin that would run code: eval names
    the file and runs nothing, without torch's traceback that suggests weights_only=False."""
    folder, marker = tmp_path / "model", tmp_path / "payload-ran"
    folder.mkdir()
    for name in ("config.json", "tokenizer.json", "tokenizer_config.json"):
        if (run / "checkpoint-6" / name).exists(): shutil.copy(run / "checkpoint-6" / name, folder / name)
    torch.save({"model.embed_tokens.weight": Payload(marker)}, folder / "pytorch_model.bin")
    r = run_cli("eval", "--model", folder, "--dataset", "toy", "--max_samples", "8", timeout=120)
    assert r.returncode == 2 and "Traceback" not in r.stderr and "weights_only" not in r.stderr, r.stderr[-3000:]
    assert "pytorch_model.bin is not plain data: unpickling it would call posix.system" in r.stderr, r.stderr[-3000:]
    assert not marker.exists()


def test_a_full_disk_at_save_names_the_folder_and_keeps_the_older_checkpoints(tmp_path):
    """No space left while a checkpoint is written (an OSError(ENOSPC), as the write would raise it): one paragraph naming
    the checkpoint, its partial copy removed, and the older checkpoints intact and not rotated away."""
    import errno
    from unittest import mock
    toy_checkpoints(tmp_path, [1, 2], limit=2)
    full = OSError(errno.ENOSPC, "No space left on device")
    for target in ("torch.save", "grpo_edu.checkpoint.write_manifest"):
        with mock.patch(target, side_effect=full), pytest.raises(GRPOEduError) as e:
            toy_checkpoints(tmp_path, [3], limit=2)
        assert f"could not save {tmp_path / 'checkpoint-3'}: the disk is full" in str(e.value)
        assert "older checkpoints in" in str(e.value) and "--resume_from_checkpoint latest" in str(e.value)
        assert sorted(p.name for p in tmp_path.glob("*checkpoint-*")) == ["checkpoint-1", "checkpoint-2"]
        assert all(checkpoint_problems(tmp_path / f"checkpoint-{s}") == [] for s in (1, 2))
    torch_full = RuntimeError("[enforce fail at inline_container.cc:595] . PytorchStreamWriter failed writing file "
                              "data/0: file write failed")                          # what torch.save raises
    with mock.patch("torch.save", side_effect=torch_full):
        with pytest.raises(GRPOEduError, match="the disk is full"): toy_checkpoints(tmp_path, [3], limit=2)
