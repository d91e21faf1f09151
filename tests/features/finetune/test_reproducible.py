"""The same fine-tune in a warm process and in a fresh one (an empty data cache, another hash
seed) records the same numbers: metrics.json, the line in the pretrained checkpoint's
eval.jsonl, and the tokenizer it saved."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import copy_tiny_runs, warm_and_fresh_train_py
from tests.records import assert_reproduced, read_records

# Two epochs of three batches: validation runs after each, the best checkpoint is scored on
# the test split.
QUICK = ["finetune.batch_size=8", "finetune.epochs=2", "finetune.lr=1e-3", "logger=none"]
WORDS = {"loop": "for while range", "call": "def return lambda", "raise": "raise except try"}


def write_task(path: Path, n: int = 36) -> None:
    """Three classes, each text drawn from its class's words; labels are strings."""
    rows = []
    for i in range(n):
        label = list(WORDS)[i % 3]
        words = WORDS[label].split()
        text = " ".join(words[(i + j) % 3] for j in range(4 + i % 3))
        rows.append({"text": f"the {text} statement", "label": label})
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))


@pytest.mark.slow
def test_a_finetune_gives_the_same_numbers_in_a_fresh_process(
    tiny_checkpoints, tmp_path: Path
) -> None:
    # One command line, run from two folders (its paths are relative).
    roots = (tmp_path / "first", tmp_path / "second")
    for root in roots:
        # A directory of runs: each is fine-tuned, into tuned/decoder and tuned/encoder.
        copy_tiny_runs(tiny_checkpoints, root / "runs")
        write_task(root / "task.jsonl")
    warm_and_fresh_train_py(
        "mode=finetune",
        "ckpt_path=runs",
        "finetune.task=files",
        "finetune.path=task.jsonl",
        *QUICK,
        "output_dir=tuned",
        roots=roots,
    )
    for arch in ("decoder", "encoder"):
        records = [f"tuned/{arch}/metrics.json", f"runs/{arch}/checkpoints/eval.jsonl"]
        for record in records:
            assert_reproduced(*(read_records(root / record) for root in roots), *roots)
        (metrics,) = read_records(roots[0] / records[0])
        assert metrics["arch"] == arch and "test_accuracy" in metrics
        # The tokenizer saved with the classifier: the pretrained one's, byte for byte.
        tokenizers = [(root / "tuned" / arch / "tokenizer.json").read_bytes() for root in roots]
        assert tokenizers[0] == tokenizers[1]
