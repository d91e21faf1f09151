"""trainer.deterministic reaches Lightning's Trainer, in training and in evaluation (torch's
deterministic algorithms and cuBLAS's workspace, docs/training.md#reproducibility), and the
records say it; on the CPU it changes no number."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch

from analysis.records import RESULTS_FILE
from conf.hydra_runtime import parse_settings
from train import run
from training.trainer import evaluation_trainer, training_trainer

SHORT = ["trainer.max_steps=4", "trainer.val_check_interval=4", "trainer.limit_val_batches=1"]


@pytest.fixture
def restored(monkeypatch: pytest.MonkeyPatch):
    """torch's deterministic switch and cuBLAS's variable as they were, after the test (a
    Trainer sets both for the whole process)."""
    before = torch.are_deterministic_algorithms_enabled()
    monkeypatch.setenv("CUBLAS_WORKSPACE_CONFIG", "")  # undone at teardown, whatever is set
    yield
    torch.use_deterministic_algorithms(before)


@pytest.mark.parametrize("deterministic", [True, False])
def test_trainer_deterministic_reaches_both_trainers(
    make_cfg, tmp_path: Path, restored, deterministic: bool
) -> None:
    settings = parse_settings(make_cfg(f"trainer.deterministic={str(deterministic).lower()}"))
    for build in (
        lambda: training_trainer(settings, tmp_path),
        lambda: evaluation_trainer(settings),
    ):
        torch.use_deterministic_algorithms(not deterministic)  # each Trainer sets it afresh
        build()
        assert torch.are_deterministic_algorithms_enabled() is deterministic
    if deterministic:
        assert os.environ["CUBLAS_WORKSPACE_CONFIG"] == ":4096:8"


def test_a_deterministic_run_is_recorded_so_and_gives_the_same_numbers_on_the_cpu(
    make_cfg, tmp_path: Path, restored
) -> None:
    plain = run(make_cfg(*SHORT, "max_new_tokens=4", output_dir=tmp_path / "plain"))
    strict = run(make_cfg(*SHORT, "max_new_tokens=4", "trainer.deterministic=true"))
    assert strict["provenance"]["deterministic"] is True
    assert plain["provenance"]["deterministic"] is False
    for key in ("val_loss", "best_val_loss", "val_acc", "sample"):
        assert strict[key] == plain[key], key  # bitwise: the CPU's kernels are deterministic
    ckpt = tmp_path / "run" / "checkpoints" / "last.ckpt"
    run(make_cfg("mode=eval", f"ckpt_path={ckpt}", "trainer.deterministic=true"))
    (record,) = (ckpt.parent / RESULTS_FILE).read_text().splitlines()
    stamp = json.loads(record)["provenance"]
    assert stamp["deterministic"] is True
    assert (stamp["accelerator"], stamp["compile"], stamp["attention"]) == (
        "cpu",
        "off",
        "sdpa: cpu",
    )
    assert stamp["threads"] == torch.get_num_threads()
