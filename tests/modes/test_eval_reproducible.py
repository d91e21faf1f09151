"""The same mode=eval twice, each in a fresh process with an empty data cache and another hash
seed, records the same numbers in eval.jsonl, for a GPT and a BERT (its masks drawn from the
seed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import copy_tiny_runs, fresh_train_py
from tests.records import assert_reproduced, read_records


@pytest.mark.slow
def test_mode_eval_gives_the_same_numbers_in_a_fresh_process(
    tiny_checkpoints, tmp_path: Path
) -> None:
    # One command line, run from two folders (its paths are relative).
    roots = [tmp_path / "first", tmp_path / "second"]
    for hash_seed, root in enumerate(roots, 1):
        copy_tiny_runs(tiny_checkpoints, root / "runs")
        # Each run's own validation split, carved again from the built-in corpus in the
        # empty cache, at mode=eval's default precision.
        proc = fresh_train_py(
            "mode=eval", "ckpt_path=runs", "logger=none", root=root, hash_seed=hash_seed
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
    records = [read_records(root / "runs" / "eval.jsonl") for root in roots]
    assert_reproduced(*records, *roots)
    assert [record["arch"] for record in records[0]] == ["decoder", "encoder"]
