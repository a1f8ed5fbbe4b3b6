"""TRL's own GRPO tests, unmodified, against grpo_edu: `python -m pytest tests/trl_suite -q -n 2`.

The file is ../shared/trl-tests/test_grpo_trainer.py (TRL main at f2cd577), with its helpers beside it. It is
read where it lies, never copied or edited. Three things make it run here:

- The swap. At collection, test_trl_grpo_trainer.py (a placeholder) stands for TRL's module, which is imported
  as the package `trl_upstream_tests` from the shared folder. While that import runs, `trl.GRPOConfig` and
  `trl.GRPOTrainer` are grpo_edu's, so the file's `from trl import GRPOConfig, GRPOTrainer` binds grpo_edu's
  classes into the test module; the attributes are restored right after, and every other name the tests import
  (trl's helpers, `trl.import_utils`, transformers, peft) stays the library's own. The collector asserts that
  the classes the tests instantiate are the target's. GRPO_EDU_TRL_SUITE_TARGET=trl imports the file with no
  swap: TRL 1.16 against its own tests, which checks the harness (what fails there is drift between the file
  and 1.16).
- The Hub ids, offline. scripts/trl-suite-fixtures.py builds tiny random models under the ids the tests name,
  in the Hub cache's layout, and the zen dataset as a folder; the build is kept under
  $GRPO_EDU_CACHE/trl-suite (else ~/.cache/grpo_edu/trl-suite), one folder per version of the script and of
  transformers. Each test then runs with the Hub offline and HF_HUB_CACHE on that cache, so
  `from_pretrained(id)` needs no other change; `load_dataset(id)` takes the dataset's folder in place of its
  Hub id. Caches that libraries write (datasets' Arrow files, remote code's modules) go to a temporary folder,
  never to the user's.
- TRL's conftest (its autouse fixtures and report hook) is applied to these tests, as in TRL's own runs.

Tests that cannot apply here skip with their reason: vision-language models and Hub-only ids (not built
offline), and, by TRL's own markers, vLLM, liger-kernel, jmespath and accelerator-only tests. No assertion is
changed. The last lines of the run count the outcomes of TRL's tests alone.

Against grpo_edu, the tests that fail today are listed with their cause in known_failures.py and run as
expected failures (not strict: a test that starts to pass is counted as passed, and the list is regenerated
with scripts/trl-suite-known-failures.py); any other failure fails the run.
"""

import contextlib
import fcntl
import hashlib
import importlib
import importlib.util
import inspect
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "trl-suite-fixtures.py"
PLACEHOLDER = Path(__file__).resolve().with_name("test_trl_grpo_trainer.py")
PACKAGE = "trl_upstream_tests"  # the name TRL's test folder is imported under ("trl-tests" is no identifier)
SWAPPED = ("GRPOConfig", "GRPOTrainer")
TARGETS = ("grpo_edu", "trl")
TARGET = os.environ.get("GRPO_EDU_TRL_SUITE_TARGET", "").strip().lower() or "grpo_edu"
IGNORE_KNOWN = os.environ.get("GRPO_EDU_TRL_SUITE_IGNORE_KNOWN") == "1"   # regenerating the list
if TARGET not in TARGETS:
    raise pytest.UsageError(f"GRPO_EDU_TRL_SUITE_TARGET={TARGET!r}: use one of {', '.join(TARGETS)}")
# Read now: tests/conftest.py later points GRPO_EDU_CACHE at a folder of the run's own, and the fixtures are
# worth keeping across runs (they change only with the script and transformers).
USER_CACHE = os.environ.get("GRPO_EDU_CACHE")
# The Hub namespaces of the ids in TRL's file; a quoted "org/name" in another namespace is a metric's name.
HUB_ID = re.compile(r"""["']((?:trl-internal-testing|Qwen|HuggingFaceTB|kernels-community)/[\w.-]+)["']""")
VISION = (
    "vision-language model: the tiny VLM checkpoints and image datasets (zen-image) are Hub-only and are "
    "not built offline here"
)


def trl_tests_dir() -> Path:
    "../shared/trl-tests beside the checkout, or the folder $GRPO_EDU_TRL_TESTS names."
    env = os.environ.get("GRPO_EDU_TRL_TESTS")
    return Path(env) if env else ROOT.parent / "shared" / "trl-tests"


def is_ours(nodeid: str) -> bool:
    return f"{PLACEHOLDER.name}::" in nodeid


# -------------------- the fixtures
def fixtures_key() -> str:
    import transformers

    digest = hashlib.sha256(SCRIPT.read_bytes()).hexdigest()[:16]
    return f"{digest}-transformers{transformers.__version__}"


_built: dict[str, Path] = {}


def fixtures_dir() -> Path:
    """The built fixtures, built once per version of the script (under a lock: xdist's workers ask at once).

    GRPO_EDU_CACHE=off builds them into a temporary folder of this process's own."""
    if "dir" in _built:
        return _built["dir"]
    key = fixtures_key()
    if USER_CACHE == "off":
        out = Path(tempfile.mkdtemp(prefix="grpo_edu-trl-suite-")) / key
    else:
        base = Path(USER_CACHE) if USER_CACHE else Path.home() / ".cache" / "grpo_edu"
        out = base / "trl-suite" / key
    if not (out / "MANIFEST.json").exists():
        out.parent.mkdir(parents=True, exist_ok=True)
        with open(out.parent / f"{key}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not (out / "MANIFEST.json").exists():
                partial = out.parent / f"{key}.partial-{os.getpid()}"
                # A process of its own: the build seeds torch's generator, which the tests' processes keep as
                # is.
                env = {**os.environ, "HF_HUB_OFFLINE": "1", "CUDA_VISIBLE_DEVICES": ""}
                r = subprocess.run(
                    [sys.executable, str(SCRIPT), str(partial)],
                    capture_output=True,
                    text=True,
                    env=env,
                    timeout=900,
                )
                if r.returncode:
                    shutil.rmtree(partial, ignore_errors=True)
                    raise RuntimeError(f"{SCRIPT.name} failed (exit {r.returncode}):\n{r.stderr[-4000:]}")
                shutil.rmtree(out, ignore_errors=True)
                partial.rename(out)  # whole or absent: a build cut short is never taken for a finished one
    _built["dir"] = out
    return out


def available_ids() -> set[str]:
    manifest = json.loads((fixtures_dir() / "MANIFEST.json").read_text())
    return {i.split(" ")[0] for i in manifest["ids"]}


# -------------------- the swapped import
def provide_trl_shims() -> None:
    """What the file's helpers import from TRL main and TRL 1.16 lacks: `is_joblib_available`
    (testing_utils.py imports it for `require_sklearn`, which the GRPO tests do not use)."""
    import trl.import_utils as iu

    if not hasattr(iu, "is_joblib_available"):
        iu.is_joblib_available = lambda: importlib.util.find_spec("joblib") is not None


def import_package() -> None:
    "TRL's test folder as the package PACKAGE, so that the file's `from .testing_utils import ...` resolves."
    if PACKAGE in sys.modules:
        return
    folder = trl_tests_dir()
    spec = importlib.util.spec_from_file_location(
        PACKAGE, folder / "__init__.py", submodule_search_locations=[str(folder)]
    )
    package = importlib.util.module_from_spec(spec)
    sys.modules[PACKAGE] = package
    spec.loader.exec_module(package)


@contextlib.contextmanager
def no_bytecode():
    "The shared folder is read-only to us: no __pycache__ is written beside TRL's files."
    before = sys.dont_write_bytecode
    sys.dont_write_bytecode = True
    try:
        yield
    finally:
        sys.dont_write_bytecode = before


def target_classes() -> dict:
    "The classes `from trl import GRPOConfig, GRPOTrainer` must give the tests."
    if TARGET == "trl":
        from trl.trainer.grpo_config import GRPOConfig
        from trl.trainer.grpo_trainer import GRPOTrainer
    else:
        from grpo_edu.config import GRPOConfig
        from grpo_edu.trainer import GRPOTrainer
    return {"GRPOConfig": GRPOConfig, "GRPOTrainer": GRPOTrainer}


@contextlib.contextmanager
def trl_names_swapped():
    "`trl.GRPOConfig` and `trl.GRPOTrainer` are the target's for the duration, and TRL's own again after."
    import trl

    wanted = target_classes()
    saved = {name: getattr(trl, name) for name in SWAPPED}
    try:
        for name in SWAPPED:
            setattr(trl, name, wanted[name])
        yield
    finally:
        for name, value in saved.items():
            setattr(trl, name, value)


def import_trl_tests():
    "TRL's test module, its `from trl import GRPOConfig, GRPOTrainer` bound to the target's classes."
    name = f"{PACKAGE}.test_grpo_trainer"
    if name not in sys.modules:
        provide_trl_shims()
        with no_bytecode():
            import_package()
            with trl_names_swapped():
                importlib.import_module(name)
    module = sys.modules[name]
    for cls_name, cls in target_classes().items():
        got = getattr(module, cls_name)
        assert got is cls, f"TRL's tests got {got.__module__}.{got.__qualname__}, not {TARGET}'s {cls_name}"
    return module


class TrlSuiteModule(pytest.Module):
    "The placeholder's node: its object is TRL's test module (imported with the swap), not the file's own."

    def _getobj(self):
        if not (trl_tests_dir() / "test_grpo_trainer.py").exists():
            pytest.skip(
                f"TRL's tests are absent: {trl_tests_dir()} (set GRPO_EDU_TRL_TESTS to their folder)",
                allow_module_level=True,
            )
        return import_trl_tests()


def pytest_pycollect_makemodule(module_path, parent):
    if Path(module_path).resolve() == PLACEHOLDER:
        return TrlSuiteModule.from_parent(parent, path=Path(module_path))
    return None


# TRL's conftest: its autouse fixtures (CPU-only TRL configs, cleanup after each test) and its report hook,
# applied to this folder's tests by naming them here, as pytest would for a conftest beside the file.
if (trl_tests_dir() / "conftest.py").exists():
    with no_bytecode():
        import_package()
        _trl_conftest = importlib.import_module(f"{PACKAGE}.conftest")
    apply_model_revisions = _trl_conftest.apply_model_revisions
    force_use_cpu_without_accelerator = _trl_conftest.force_use_cpu_without_accelerator
    cleanup_gpu = _trl_conftest.cleanup_gpu
    cleanup_vllm_dist_env = _trl_conftest.cleanup_vllm_dist_env
    pytest_runtest_makereport = _trl_conftest.pytest_runtest_makereport


# -------------------- skipping
def hub_ids(item) -> set[str]:
    "The Hub ids a test names: in its body, its class's setup, and its parameters."
    sources = [item.function]
    if item.cls is not None and hasattr(item.cls, "setup_method"):
        sources.append(item.cls.setup_method)
    text = "".join(inspect.getsource(inspect.unwrap(f)) for f in sources)
    params = getattr(getattr(item, "callspec", None), "params", {})
    text += " ".join(repr(v) for v in params.values())
    return set(HUB_ID.findall(text))


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "trl_suite: TRL's own GRPO tests, run against grpo_edu (tests/trl_suite)"
    )


def pytest_collection_modifyitems(config, items):
    ours = [item for item in items if is_ours(item.nodeid)]
    if not ours:
        return
    have = available_ids()
    for item in ours:
        item.add_marker(pytest.mark.trl_suite)
        item.add_marker(pytest.mark.e2e)  # whole training runs: outside the fast tier (-m "not e2e")
        if item.cls is not None and item.cls.__name__ == "TestGRPOTrainerVLM":
            item.add_marker(pytest.mark.skip(reason=VISION))
            continue
        missing = sorted(hub_ids(item) - have)
        if missing:
            item.add_marker(pytest.mark.skip(reason=f"Hub-only, not built offline: {', '.join(missing)}"))
        elif TARGET == "grpo_edu" and not IGNORE_KNOWN and (cause := known_failure(item.nodeid)):
            item.add_marker(pytest.mark.xfail(reason=cause, strict=False))


def known_failure(nodeid: str) -> str | None:
    "Why TRL's test `nodeid` fails against grpo_edu today (known_failures.py), or None."
    from .known_failures import CAUSES, KNOWN
    cause = KNOWN.get(nodeid.split("::", 1)[-1])
    return None if cause is None else CAUSES[cause]


# -------------------- offline Hub ids
@pytest.fixture(scope="session")
def trl_suite_fixtures() -> Path:
    return fixtures_dir()


@pytest.fixture(scope="session")
def trl_suite_caches(tmp_path_factory) -> Path:
    "Where the libraries' own caches write during these tests (one per process, the same for each test)."
    return tmp_path_factory.mktemp("trl-suite-caches")


@pytest.fixture(autouse=True)
def offline_hub_ids(monkeypatch, trl_suite_fixtures, trl_suite_caches):
    """The Hub offline, its cache the fixtures' own, and `load_dataset(id)` reading the dataset's folder.

    The environment is for any process a test starts; the constants are for this one, whose libraries read the
    variables once, when first imported (before this fixture)."""
    import datasets.config
    import datasets.load
    import transformers.dynamic_module_utils
    from huggingface_hub import constants

    hub, local = trl_suite_fixtures / "hub", trl_suite_fixtures / "datasets"
    modules, arrow = trl_suite_caches / "modules", trl_suite_caches / "datasets"
    for k, v in {
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "HF_HUB_CACHE": str(hub),
        "HF_DATASETS_CACHE": str(arrow),
        "HF_MODULES_CACHE": str(modules),
    }.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(hub))
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(datasets.config, "HF_DATASETS_OFFLINE", True)
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", arrow)
    monkeypatch.setattr(transformers.dynamic_module_utils, "HF_MODULES_CACHE", str(modules))
    factory = datasets.load.dataset_module_factory

    def local_dataset_first(path, *args, **kwargs):
        folder = local / path if isinstance(path, str) and path.count("/") == 1 else None
        return factory(str(folder) if folder is not None and folder.is_dir() else path, *args, **kwargs)

    monkeypatch.setattr(datasets.load, "dataset_module_factory", local_dataset_first)


# -------------------- report
_outcomes: dict[str, str] = {}


def pytest_runtest_logreport(report):
    "Each of TRL's tests' outcome: a failed setup or teardown is a failure, an expected failure is apart."
    if not is_ours(report.nodeid):
        return
    xfail = hasattr(report, "wasxfail")
    if report.when == "call" or (report.when == "setup" and not report.passed):
        if report.passed:
            outcome = "xpassed" if xfail else "passed"
        elif report.skipped:
            outcome = "xfailed" if xfail else "skipped"
        else:
            outcome = "failed"
        _outcomes[report.nodeid] = outcome
    elif report.when == "teardown" and report.failed:
        _outcomes[report.nodeid] = "failed"


def pytest_terminal_summary(terminalreporter):
    if not _outcomes:
        return
    counts = {
        k: sum(v == k for v in _outcomes.values())
        for k in ("passed", "failed", "skipped", "xfailed", "xpassed")
    }
    total = len(_outcomes)
    extra = "".join(f", {counts[k]} {k}" for k in ("xfailed", "xpassed") if counts[k])
    target = "grpo_edu" if TARGET == "grpo_edu" else f"TRL {importlib.import_module('trl').__version__}"
    terminalreporter.write_sep("=", "TRL GRPO suite")
    terminalreporter.write_line(
        f"TRL GRPO suite against {target}: {counts['passed']} passed, {counts['failed']} "
        f"failed, {counts['skipped']} skipped{extra} of {total} collected "
        f"(applicable: {total - counts['skipped']})"
    )
