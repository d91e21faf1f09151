"""The same mode=heads in a warm process and in a fresh one (an empty data cache, another hash
seed) records the same numbers in heads.json, for a GPT and a BERT: every head's statistics
and the prune curve."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import copy_tiny_runs, warm_and_fresh_train_py
from tests.corpora import make_paragraphs
from tests.records import assert_reproduced, read_records


@pytest.mark.slow
def test_mode_heads_gives_the_same_numbers_in_a_fresh_process(
    tiny_checkpoints, tmp_path: Path
) -> None:
    # A few batches of text read whole, not the runs' validation split: a fifth of the time.
    # One file for both runs: a file's data_fingerprint names its path and mtime.
    held = tmp_path / "held.txt"
    held.write_text("\n\n".join(make_paragraphs(40)) + "\n")
    # One command line, run from two folders (its other paths are relative).
    roots = (tmp_path / "first", tmp_path / "second")
    for root in roots:
        copy_tiny_runs(tiny_checkpoints, root / "runs")
    warm_and_fresh_train_py(
        "mode=heads", "ckpt_path=runs", f"data.path={held}", "logger=none", roots=roots
    )
    for arch in ("decoder", "encoder"):
        heads = [read_records(root / f"runs/{arch}/checkpoints/heads.json") for root in roots]
        assert_reproduced(*heads, *roots)
        (record,) = heads[0]
        assert record["arch"] == arch and len(record["heads"]) == 2
