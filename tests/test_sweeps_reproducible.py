"""The same sweep in a warm process and in a fresh one (an empty data cache, another hash seed):
each job records the same numbers (metrics.json with the closing sample, curves.jsonl) and
trains the same tokenizer (tokenizer.json), a GPT and a BERT, one after the other in one
process as the basic launcher runs them, their batches drawn by DataLoader workers."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import TINY, warm_and_fresh_train_py
from tests.records import assert_reproduced, read_records


@pytest.mark.slow
def test_a_sweeps_jobs_give_the_same_numbers_in_a_fresh_process(tmp_path: Path) -> None:
    # One command line, run from two folders (its paths are relative).
    roots = (tmp_path / "first", tmp_path / "second")
    warm_and_fresh_train_py(
        "-m",
        "model=gpt,bert",
        *TINY,
        "trainer.max_steps=10",
        "trainer.val_check_interval=5",
        "data.num_workers=2",  # batches drawn by worker processes: the same ones, in order
        "hydra.sweep.dir=sweep",
        roots=roots,
    )
    for job, arch in enumerate(("decoder", "encoder")):
        # The record, and the curves: the training loss and gradient norm at each logged step.
        for name in ("metrics.json", "curves.jsonl"):
            records = [read_records(root / "sweep" / str(job) / name) for root in roots]
            assert_reproduced(*records, *roots)
        (record,) = read_records(roots[0] / "sweep" / str(job) / "metrics.json")
        assert record["arch"] == arch and record["status"] == "completed" and record["sample"]
        tokenizers = [(root / "sweep" / str(job) / "tokenizer.json").read_bytes() for root in roots]
        assert tokenizers[0] == tokenizers[1]
