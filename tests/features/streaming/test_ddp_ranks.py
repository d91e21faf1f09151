"""A streamed corpus under ``trainer=cpu_ddp``: each rank reads the blocks of its own share
of the stream, in order, and resumes at its own position."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import train_py
from tests.features.streaming.test_streaming import (
    documents_in,
    make_corpus,
    streaming_module,
    tiny_streaming_args,
    train_blocks,
)


@pytest.mark.slow
def test_cpu_ddp_ranks_read_their_own_blocks_and_resume(tmp_path: Path) -> None:
    (tmp_path / "streaming").mkdir()
    corpus = make_corpus(tmp_path / "streaming")

    def train(name: str, steps: int, *extra: str) -> list[list[list[int]]]:
        record = tmp_path / f"{name}-batches"
        wrapper = (
            "from tests.faults import RecordBatches, main_with\n"
            f"main_with(RecordBatches({str(record)!r}))\n"
        )
        out = tmp_path / name
        proc = train_py(
            *tiny_streaming_args(corpus["train"], corpus, out, f"trainer.max_steps={steps}"),
            "trainer=cpu_ddp",
            "trainer.val_check_interval=2",
            "max_new_tokens=1",
            *extra,
            f"hydra.run.dir={out}",
            cwd=tmp_path,
            wrapper=wrapper,
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        return [
            [
                json.loads(line)["blocks"]
                for line in Path(f"{record}.{rank}").read_text().splitlines()
            ]
            for rank in (0, 1)
        ]

    straight = train("straight", 4)
    datamodule = streaming_module(
        str(corpus["train"]), corpus, max_seq_len=32, stream_val_examples=20
    )  # TINY's
    eos = datamodule.eos_token_id
    for rank, batches in enumerate(straight):
        # Each rank trains on the blocks of its own share of the stream, in order.
        (expected,) = train_blocks(datamodule, rank=rank, world_size=2)
        assert len(batches) == 4
        got = [block for batch in batches for block in batch]
        assert got == [block.tolist() for block in expected[: len(got)]]
    documents = [
        set(documents_in([np.array(b) for batch in batches for b in batch], eos))
        for batches in straight
    ]
    assert documents[0] and documents[1] and not documents[0] & documents[1]
    train("cut", 2)
    last = tmp_path / "cut" / "checkpoints" / "last.ckpt"
    resumed = train("resumed", 4, f"ckpt_path={last}")
    for rank in (0, 1):  # each rank resumed at its own position (gathered into the checkpoint)
        assert resumed[rank] == straight[rank][2:]
