"""Two runs meeting in one folder: the second is one paragraph and exit 2, before it reads or moves anything.
(A completion budget no memory holds: tests/test_hostile_rewards.py.)"""
import os
import subprocess
import sys
import time

CLI = os.path.join(os.path.dirname(sys.executable), "grpo-edu")


def train(tmp_path, *options, **popen) -> subprocess.Popen:
    return subprocess.Popen([CLI, "train", "--save_steps", "0", *options], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=tmp_path, **popen)


def test_a_second_run_into_a_live_runs_folder_is_refused(tmp_path):
    "Was: both ran, interleaving rows in one metrics.jsonl and rotating each other's checkpoints."
    folder = tmp_path / "run"
    first = train(tmp_path, "--max_steps", "100000", "--output_dir", str(folder))
    try:
        deadline = time.monotonic() + 600
        while not (folder / "metrics.jsonl").exists() and first.poll() is None and time.monotonic() < deadline:
            time.sleep(0.5)
        assert first.poll() is None, first.stderr.read()[-2000:]
        second = train(tmp_path, "--max_steps", "1", "--output_dir", str(folder))
        _, err = second.communicate(timeout=900)
        assert second.returncode == 2, err[-2000:]
        assert f"is being written by another run (process {first.pid})" in err and "Traceback" not in err
    finally:
        first.kill()
        first.communicate()
    # Its process gone, however it ended, the folder is free again.
    again = train(tmp_path, "--max_steps", "1", "--output_dir", str(folder), "--overwrite_output_dir", "true")
    _, err = again.communicate(timeout=900)
    assert again.returncode == 0, err[-2000:]
