"""CPU DDP (trainer=cpu_ddp): one tokenizer training, one log and one set of checkpoints; under
a multirun; interrupted and resumed with the ranks stopping together (a streamed corpus under
DDP: tests/features/streaming/test_ddp_ranks.py). One file, so that one test worker runs them
one after another: two DDP runs' ranks at once on a 2-core machine spend their time waiting on
each other."""

from __future__ import annotations

import json
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

from tests.conftest import RESUME, TINY, train_py

DDP = ["trainer=cpu_ddp"]


@dataclass
class DdpRun:
    """A trainer=cpu_ddp run: its process and the file where each rank wrote "RANK STEP" when
    its training ended."""

    proc: subprocess.CompletedProcess
    final_steps: Path


def ddp_train(
    tmp: Path,
    name: str,
    *extra: str,
    signal_at: int | None = None,
    setup: str = "",
    callbacks: tuple[str, ...] = (),
) -> DdpRun:
    """TINY and RESUME under trainer=cpu_ddp into ``tmp/name``, with the data cache
    ``tmp/cache``; ``setup`` (Python run first) and ``callbacks`` (expressions) add fault
    injectors from ``tests.faults``, imported as ``faults``."""
    steps = tmp / f"{name}-final-steps.txt"
    injectors = [f"faults.RecordFinalStep({str(steps)!r})", *callbacks]
    if signal_at is not None:
        injectors.append(f"faults.SignalAtStep({signal_at})")
    wrapper = f"from tests import faults\n{setup}faults.main_with({', '.join(injectors)})\n"
    proc = train_py(
        *TINY,
        *DDP,
        *RESUME,
        *extra,
        f"hydra.run.dir={tmp / name}",
        cwd=tmp,
        wrapper=wrapper,
        TINYLM_CACHE=str(tmp / "cache"),
    )
    return DdpRun(proc, steps)


@pytest.fixture(scope="module")
def ddp_tmp(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("ddp")


@pytest.fixture(scope="module")
def full_run(ddp_tmp: Path) -> DdpRun:
    """24 steps in a fresh cache, counting tokenizer trainings and recording each rank's
    batches: the straight run that both tests below read (one DDP run, not two)."""
    return ddp_train(
        ddp_tmp,
        "full",
        setup=f"faults.count_tokenizer_training({str(ddp_tmp / 'tokenizer_trainings.txt')!r})\n",
        callbacks=(f"faults.RecordBatches({str(ddp_tmp / 'rows')!r})",),
    )


def test_cpu_ddp_trains_once_logs_once_and_checkpoints_once(
    full_run: DdpRun, ddp_tmp: Path
) -> None:
    proc, out = full_run.proc, ddp_tmp / "full"
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "GLOBAL_RANK: 1" in proc.stderr  # two processes really ran
    assert proc.stdout.count("tinylm: decoder with") == 1
    assert proc.stdout.count("=== tinylm results ===") == 1
    # the tokenizer was trained once, by rank 0
    assert (ddp_tmp / "tokenizer_trainings.txt").read_text().split() == ["0"]
    # Each rank trained on its own blocks, read from the one memory-mapped token store.
    ranks = [
        [
            tuple(b)
            for line in Path(f"{ddp_tmp / 'rows'}.{r}").read_text().splitlines()
            for b in json.loads(line)["blocks"]
        ]
        for r in (0, 1)
    ]
    assert len(ranks[0]) == len(ranks[1]) == 24 * 8  # 24 steps of data.batch_size=8 blocks
    assert not set(ranks[0]) & set(ranks[1])
    assert len(list((ddp_tmp / "cache" / "tokens").iterdir())) == 1
    assert sorted(p.name for p in (out / "checkpoints").iterdir()) == ["best.ckpt", "last.ckpt"]
    assert not list(ddp_tmp.rglob("version_*"))  # one csv log, no per-rank directories
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["status"] == "completed" and metrics["step"] == 24
    with open(out / "csv" / "metrics.csv") as f:
        steps = [line.split(",") for line in f]
    assert len(steps) > 2


@pytest.mark.slow
def test_cpu_ddp_under_multirun_uses_spawn(tmp_path: Path) -> None:
    import csv

    sweep = tmp_path / "sweep"
    proc = train_py(
        "-m",
        *TINY,
        *DDP,
        "trainer.max_steps=6",
        "trainer.val_check_interval=3",
        "model.dropout=0.0,0.1",
        f"hydra.sweep.dir={sweep}",
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.count("Launching 2 jobs") == 1  # the sweep ran once, not per rank
    with open(sweep / "runs.csv") as f:
        assert [r["status"] for r in csv.DictReader(f)] == ["completed", "completed"]
    assert len(list(sweep.glob("*/checkpoints/best.ckpt"))) == 2


@pytest.mark.slow
def test_cpu_ddp_interrupted_run_resumes_to_the_same_loss_and_ranks_stop_together(
    full_run: DdpRun, ddp_tmp: Path
) -> None:
    def train(name: str, *extra: str, signal_at: int | None = None) -> Path:
        run = ddp_train(ddp_tmp, name, *extra, signal_at=signal_at)  # full_run's cache
        expected_code = 0 if signal_at is None else 128 + signal.SIGTERM
        assert run.proc.returncode == expected_code, run.proc.stderr[-3000:]
        lines = [line for line in run.proc.stderr.splitlines() if line.startswith("tinylm:")]
        assert len(lines) == (signal_at is not None), lines  # one line, from rank 0
        return run.final_steps

    assert full_run.proc.returncode == 0, full_run.proc.stderr[-3000:]
    assert not [line for line in full_run.proc.stderr.splitlines() if line.startswith("tinylm:")]
    full = full_run.final_steps
    cut = train("cut", signal_at=11)
    # Each rank wrote the step it stopped at: the same one, the step of the checkpoint. (The
    # ranks agree at the end of each step whether to stop: a signal sent after that, at the
    # end of step 11, stops them at the end of step 12.)
    stopped = dict(line.split() for line in cut.read_text().splitlines())
    last = ddp_tmp / "cut" / "checkpoints" / "last.ckpt"
    step = torch.load(last, weights_only=True)["global_step"]
    assert stopped == {"0": str(step), "1": str(step)} and 11 <= step < 24
    status = json.loads((ddp_tmp / "cut" / "metrics.json").read_text())
    assert status["status"] == "interrupted" and status["step"] == step
    resumed = train("resumed", f"ckpt_path={last}")
    for finished in (full, resumed):
        assert dict(line.split() for line in finished.read_text().splitlines()) == {
            "0": "24",
            "1": "24",
        }

    final = {
        name: json.loads((ddp_tmp / name / "metrics.json").read_text())
        for name in ("full", "resumed")
    }
    assert final["resumed"]["step"] == final["full"]["step"] == 24
    assert final["resumed"]["val_loss"] == pytest.approx(final["full"]["val_loss"], abs=1e-6)
    assert final["resumed"]["best_val_loss"] == pytest.approx(
        final["full"]["best_val_loss"], abs=1e-6
    )
