"""Offline means no request at all: grpo_edu's imports and its reading of a local dataset file ask no
host, so they neither fail nor wait on a network that takes a connection and never answers (a stalled
proxy or firewall), where a request without a timeout waits forever. The libraries' one request at
import time is bitsandbytes' (through peft, on a CPU with AVX512-BF16): grpo_edu/__init__.py imports
that module with the Hub offline, and the second test checks that hook on any CPU."""
import importlib, os, socket, subprocess, sys, threading
import pytest


@pytest.fixture
def black_hole():
    "A local proxy that takes every connection and never answers: its address, and the connections it took."
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(64)
    taken = []
    def take():
        while True:
            try: taken.append(server.accept()[0])
            except OSError: return                                   # the server was shut down
    taker = threading.Thread(target=take, daemon=True)
    taker.start()
    yield f"http://127.0.0.1:{server.getsockname()[1]}", taken
    server.shutdown(socket.SHUT_RDWR)                         # wakes accept(), which close() alone does not
    taker.join(timeout=10)
    server.close()
    for connection in taken: connection.close()


def test_imports_and_a_local_dataset_file_ask_no_host(black_hole, tmp_path):
    "Every request goes through the black hole (the proxy variables): any request is counted, or hangs."
    address, taken = black_hole
    offline_switches = ("HF_", "NO_PROXY", "TRANSFORMERS_OFFLINE")
    online = {k: v for k, v in os.environ.items() if not k.upper().startswith(offline_switches)}
    env = {**online, "HTTP_PROXY": address, "HTTPS_PROXY": address, "ALL_PROXY": address,
           "http_proxy": address, "https_proxy": address, "all_proxy": address,
           "HF_HOME": str(tmp_path / "hf")}                  # an empty cache of the Hub's and datasets'
    (tmp_path / "prompts.jsonl").write_text('{"prompt": "1+1="}\n')
    # A client that ignores the proxy variables is seen by Python's audit events: every name looked up.
    program = """import sys
asked = []
def audit(event, args):
    if event == "socket.getaddrinfo" and args[0] not in ("localhost", "127.0.0.1", "::1", None):
        asked.append(args[0])
sys.addaudithook(audit)
import grpo_edu.trainer, grpo_edu.cli          # peft, and bitsandbytes where it is installed
from grpo_edu.data import read_file
print(len(read_file("prompts.jsonl")), "row", asked)"""
    r = subprocess.run([sys.executable, "-c", program], cwd=tmp_path, env=env, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "1 row []", (r.stdout[-500:], r.stderr[-3000:])
    assert taken == [], f"{len(taken)} request(s) reached the network"
    assert "gemm_4bit_forward" not in r.stderr and "publisher trust" not in r.stderr, r.stderr


def test_the_hook_imports_its_module_with_the_hub_offline(tmp_path, monkeypatch):
    "The module named is executed with huggingface_hub's HF_HUB_OFFLINE set, then restored; others are not."
    import grpo_edu
    from huggingface_hub import constants
    hooks = [f for f in sys.meta_path if isinstance(f, grpo_edu._HubOfflineWhileImporting)]
    assert len(hooks) == 1 and hooks[0].names == {"bitsandbytes.backends.cpu.ops"}
    source = "from huggingface_hub import constants\nOFFLINE = constants.HF_HUB_OFFLINE\n"
    for name in ("probe_offline", "probe_online"): (tmp_path / f"{name}.py").write_text(source)
    (tmp_path / "probe_raises.py").write_text("raise RuntimeError('a module that fails to import')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    hook = grpo_edu._HubOfflineWhileImporting("probe_offline", "probe_raises")
    monkeypatch.setattr(sys, "meta_path", [hook, *sys.meta_path])
    try:
        assert importlib.import_module("probe_offline").OFFLINE is True
        assert importlib.import_module("probe_online").OFFLINE is False
        assert constants.HF_HUB_OFFLINE is False
        with pytest.raises(RuntimeError, match="fails to import"): importlib.import_module("probe_raises")
        assert constants.HF_HUB_OFFLINE is False                         # restored after a failed import too
    finally:
        for name in ("probe_offline", "probe_online", "probe_raises"): sys.modules.pop(name, None)
