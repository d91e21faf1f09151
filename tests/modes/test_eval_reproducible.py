"""The same mode=eval in a warm process and in a fresh one (an empty data cache, another hash
seed) records the same numbers in eval.jsonl, for a GPT and a BERT (its masks drawn from the
seed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import copy_tiny_runs, warm_and_fresh_train_py
from tests.records import assert_reproduced, read_records


@pytest.mark.slow
def test_mode_eval_gives_the_same_numbers_in_a_fresh_process(
    tiny_checkpoints, tmp_path: Path
) -> None:
    # One command line, run from two folders (its paths are relative).
    roots = (tmp_path / "first", tmp_path / "second")
    for root in roots:
        copy_tiny_runs(tiny_checkpoints, root / "runs")
    # Each run's own validation split, carved again from the built-in corpus in the empty
    # cache, at mode=eval's default precision.
    warm_and_fresh_train_py("mode=eval", "ckpt_path=runs", "logger=none", roots=roots)
    records = [read_records(root / "runs" / "eval.jsonl") for root in roots]
    assert_reproduced(*records, *roots)
    assert [record["arch"] for record in records[0]] == ["decoder", "encoder"]
