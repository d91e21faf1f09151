"""Shared fixtures: offline environment, one data cache per test session, tiny configs."""

from __future__ import annotations

import atexit
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import DictConfig

ROOT = Path(__file__).resolve().parents[1]

# Under pytest-xdist (pyproject's addopts: one worker per core), each worker gets its share of
# the cores, read by torch when it is first imported (in this process, its fork server and the
# train.py processes it starts): tiny models gain nothing from threads that the other worker
# needs.
WORKER = os.environ.get("PYTEST_XDIST_WORKER")
if WORKER:
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    threads = str(max(1, len(os.sched_getaffinity(0)) // workers))
    for variable in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(variable, threads)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The files with the most slow tests first, then the others by their number of tests.

    pytest-xdist hands out whole files (``--dist loadfile``) in this order
    (``--no-loadscope-reorder``): a long file handed out last would keep one worker busy
    while the other has nothing left to run."""
    slow = Counter(item.path for item in items if item.get_closest_marker("slow"))
    count = Counter(item.path for item in items)
    items.sort(key=lambda item: (-slow[item.path], -count[item.path], item.path.name))


# Tiny but real: a one-layer model on the built-in corpus, a few dozen steps.
TINY = [
    "logger=none",
    "model.num_layers=1",
    "model.hidden_size=32",
    "model.num_heads=2",
    "model.max_seq_len=32",
    "data.vocab_size=300",
    "data.batch_size=8",
    "data.num_workers=0",
    "trainer.max_steps=30",
    "trainer.val_check_interval=15",
    "trainer.limit_val_batches=4",
    "trainer.log_every_n_steps=5",
    "trainer.enable_progress_bar=false",
    # float32: the tests compare runs with float32 oracles; tests/training/test_precision.py trains
    # trainer=cpu's bf16-mixed (and every other precision) on its own.
    "trainer.precision=32-true",
    "optim.warmup_steps=5",
    "optim.lr=3e-3",
    "max_new_tokens=10",
]
# Dropout on, so that resuming exactly needs the RNG states too.
RESUME = ["logger=csv", "model.dropout=0.2", "trainer.max_steps=24", "trainer.val_check_interval=8"]


# No network and no account, set before any test module imports datasets or huggingface_hub:
# they read these once, at import (set later, the Hub is probed instead, and the messages differ).
os.environ.update(
    {
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "WANDB_MODE": "offline",
        "WANDB_SILENT": "true",
    }
)


@pytest.fixture(scope="session", autouse=True)
def shared_data_cache(tmp_path_factory: pytest.TempPathFactory) -> None:
    """A data cache shared by the whole session."""
    # One cache for all the test workers of a run (pytest-xdist): its file lock lets each
    # piece be built once, as for parallel sweep jobs.
    base = tmp_path_factory.getbasetemp()
    cache = (base.parent if WORKER else base) / "tinylm-cache"
    cache.mkdir(exist_ok=True)
    saved = os.environ.get("TINYLM_CACHE")
    os.environ["TINYLM_CACHE"] = str(cache)
    yield
    if saved is None:
        os.environ.pop("TINYLM_CACHE", None)
    else:
        os.environ["TINYLM_CACHE"] = saved


def compose_config(*overrides: str) -> DictConfig:
    """The real config tree with the tiny overrides, then ``overrides``."""
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        return compose(config_name="config", overrides=[*TINY, *overrides])


@pytest.fixture(scope="session")
def tiny_checkpoints(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A decoder and an encoder trained a few steps on the built-in corpus, with a context of
    64 tokens; arch -> checkpoints/last.ckpt. Tests may write beside them (exports,
    attention.png), never over them."""
    from train import run

    found = {}
    for arch, model in (("decoder", "gpt"), ("encoder", "bert")):
        out = tmp_path_factory.mktemp(arch) / "run"
        run(
            compose_config(
                f"model={model}",
                *TINY[1:5],  # model=... resets the model keys: the tiny ones again
                "model.max_seq_len=64",
                "trainer.max_steps=12",
                "trainer.val_check_interval=12",
                "trainer.limit_val_batches=1",
                f"output_dir={out}",
            )
        )
        found[arch] = out / "checkpoints" / "last.ckpt"
    return found


def copy_tiny_runs(tiny_checkpoints: dict[str, Path], where: Path) -> Path:
    """A copy of the two tiny runs in ``where`` (``decoder/``, ``encoder/``): a directory of
    runs, which the modes that read a sweep directory take whole; they write beside the
    copies, never beside the session's runs."""
    for arch, ckpt in tiny_checkpoints.items():
        shutil.copytree(ckpt.parents[1], where / arch)
    return where


@pytest.fixture(scope="session")
def tiny_ckpt(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One tiny decoder run (16 steps, TINY's context of 32 tokens); returns its
    checkpoints/last.ckpt."""
    from train import run

    out = tmp_path_factory.mktemp("tiny") / "run"
    run(compose_config(f"output_dir={out}", "trainer.max_steps=16", "trainer.val_check_interval=8"))
    return out / "checkpoints" / "last.ckpt"


@pytest.fixture
def make_cfg(tmp_path: Path) -> Callable[..., DictConfig]:
    """Compose the real config tree with the tiny overrides, writing into tmp_path/run."""

    def make(*overrides: str, output_dir: Path | None = None) -> DictConfig:
        out = output_dir or tmp_path / "run"
        with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
            return compose(config_name="config", overrides=[*TINY, f"output_dir={out}", *overrides])

    return make


def train_py(
    *args: str,
    cwd: Path,
    wrapper: str | None = None,
    timeout: int = 600,
    **env_vars: str,
) -> subprocess.CompletedProcess:
    """The real entry point, ``python train.py ARGS``, run from ``cwd`` in a process of its
    own: a child forked by this worker's fork server (tinylm imported once, not once per
    call). ``wrapper`` is Python code run in place of
    ``train.py`` that adds fault injectors (it ends by calling ``tests.faults.main_with``;
    DDP children re-run it too, in new interpreters)."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": str(ROOT), **env_vars}
    env.pop("TINYLM_DEBUG", None)
    script = str(ROOT / "train.py")
    if wrapper:
        path = cwd / "train_with_faults.py"
        path.write_text(f"import sys\nsys.path.insert(0, {str(ROOT)!r})\n" + wrapper)
        script = str(path)
    return FORK_SERVER.run([script, *args], cwd=cwd, env=env, timeout=timeout)


def fresh_train_py(
    *args: str, root: Path, hash_seed: int, timeout: int = 600
) -> subprocess.CompletedProcess:
    """``python train.py ARGS`` in a new interpreter, run from ``root`` with caches of its own
    (tinylm's ``root/cache`` and the datasets library's ``root/hf-datasets``, empty at first)
    and ``PYTHONHASHSEED=hash_seed``: a user's first run on another machine. The
    reproducibility tests compare it with a forked child (``warm_and_fresh_train_py``).

    Never two of ``train_py``'s forked children: a fork inherits its server's hash seed
    (Python reads PYTHONHASHSEED at start-up only) and the random keys of the Rust hash maps
    the tokenizers library had made (per thread, drawn once): three forks of one process
    trained Hugging Face's WordPiece into one tokenizer.json, three fresh processes into
    three. A test of two forks passes on code that is not reproducible."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": str(ROOT)}
    env |= {"TINYLM_CACHE": str(root / "cache"), "HF_DATASETS_CACHE": str(root / "hf-datasets")}
    env["PYTHONHASHSEED"] = str(hash_seed)
    env.pop("TINYLM_DEBUG", None)
    root.mkdir(parents=True, exist_ok=True)
    return subprocess.run(
        [sys.executable, str(ROOT / "train.py"), *args],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


# The fork server's hash seed, and another for the new interpreter it is compared with.
SERVER_HASH_SEED, FRESH_HASH_SEED = 0, 1


def warm_train_py(*args: str, root: Path, timeout: int = 600) -> subprocess.CompletedProcess:
    """``python train.py ARGS`` run from ``root`` in a child of this worker's warm fork server
    (a process that has trained before: its imports, the kernels' first calls, its hash seed
    and the tokenizers library's hash keys, the datasets library's cache), with an empty tinylm
    cache of its own (``root/cache``): the warm side of a reproducibility test."""
    root.mkdir(parents=True, exist_ok=True)
    return train_py(*args, cwd=root, timeout=timeout, TINYLM_CACHE=str(root / "cache"))


def warm_and_fresh_train_py(*args: str, roots: tuple[Path, Path], timeout: int = 600) -> None:
    """``python train.py ARGS`` run from ``roots[0]``, then from ``roots[1]`` (the command's
    relative paths are each root's), for a reproducibility test to compare the two: warm
    (``warm_train_py``), then as a user's first run on another machine (``fresh_train_py``: a
    new interpreter, empty caches, another hash seed). A number that hangs on any of these
    differs; two new interpreters would cost one more start-up (~6 s of imports) and differ
    from each other in less."""
    warm = warm_train_py(*args, root=roots[0], timeout=timeout)
    assert warm.returncode == 0, warm.stderr[-3000:]
    fresh = fresh_train_py(*args, root=roots[1], hash_seed=FRESH_HASH_SEED, timeout=timeout)
    assert fresh.returncode == 0, fresh.stderr[-3000:]


class ForkServer:
    """This test process's ``tests/fork_server.py --serve``, started at its first job and
    stopped at exit; a job's output comes back through files."""

    def __init__(self) -> None:
        self.process: subprocess.Popen | None = None

    def run(
        self, argv: list[str], cwd: Path, env: dict[str, str], timeout: int
    ) -> subprocess.CompletedProcess:
        if self.process is None or self.process.poll() is not None:
            self.process = subprocess.Popen(
                [sys.executable, str(ROOT / "tests" / "fork_server.py"), "--serve"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
                env={
                    **os.environ,
                    "PYTHONPATH": str(ROOT),
                    "PYTHONHASHSEED": str(SERVER_HASH_SEED),
                },
            )
            atexit.register(self.process.kill)
        with tempfile.TemporaryDirectory(prefix="tinylm-job-") as logs:
            out, err = Path(logs) / "stdout", Path(logs) / "stderr"
            job = {"argv": argv, "cwd": str(cwd), "env": env, "whole_env": True}
            job |= {"stdout": str(out), "stderr": str(err), "timeout": timeout}
            self.process.stdin.write(json.dumps(job) + "\n")
            self.process.stdin.flush()
            answer = json.loads(self.process.stdout.readline())
            if answer["rc"] == "timeout":
                raise subprocess.TimeoutExpired(argv, timeout)
            return subprocess.CompletedProcess(
                [sys.executable, *argv],
                answer["rc"],
                stdout=out.read_text(errors="replace"),
                stderr=err.read_text(errors="replace"),
            )


FORK_SERVER = ForkServer()


@pytest.fixture
def sdpa_calls(monkeypatch: pytest.MonkeyPatch) -> list[dict]:
    """The keyword arguments of every ``scaled_dot_product_attention`` call the attention
    module makes from now on (the calls still run)."""
    import models.attention as attention_module

    calls: list[dict] = []
    real_sdpa = attention_module.F.scaled_dot_product_attention

    def recording_sdpa(*args: object, **kw: object) -> object:
        calls.append(kw)
        return real_sdpa(*args, **kw)

    monkeypatch.setattr(attention_module.F, "scaled_dot_product_attention", recording_sdpa)
    return calls
