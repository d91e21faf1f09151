"""Torch datasets over a token stream (a store's memory-mapped tokens, or any array): packed
blocks (decoder), wrapped rows (encoder), and strided windows (decoder evaluation)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from torch.utils.data import Dataset

# [CLS], one token and [SEP] for the encoder; below that an example holds no text.
MIN_SEQ_LEN = 3


def check_max_seq_len(max_seq_len: int) -> None:
    if max_seq_len < MIN_SEQ_LEN:
        raise ValueError(
            f"max_seq_len={max_seq_len} must be >= {MIN_SEQ_LEN}: an encoder example is "
            "[CLS] text [SEP]"
        )


class PackedBlocks(Dataset):
    """Non-overlapping blocks of `block_len` tokens cut from a stream; the tail is dropped.

    A block of max_seq_len + 1 tokens gives inputs block[:-1] and labels block[1:].
    """

    def __init__(self, stream: Sequence, block_len: int) -> None:
        self.stream = stream
        self.block_len = block_len

    def __len__(self) -> int:
        return len(self.stream) // self.block_len

    def __getitem__(self, index: int) -> np.ndarray:
        start = index * self.block_len
        return self.stream[start : start + self.block_len]


def check_stride(stride: int, window: int) -> None:
    if isinstance(stride, bool) or not isinstance(stride, int) or not 1 <= stride <= window:
        raise ValueError(
            f"eval.stride={stride} must be between 1 and the checkpoint's max_seq_len={window} "
            f"(the default, {window}, scores non-overlapping windows; smaller strides give each "
            "token more context at more cost)"
        )


class StridedWindows(Dataset):
    """Windows of `window` inputs (+1 target) sliding by `stride` over a stream, for scoring.

    Window i starts at token i * stride. The first scores all its `window` targets; every later
    one only its last `stride`, which no earlier window scored, with up to `window - stride`
    tokens of context before them. So every target from stream[1] on is scored exactly once,
    except a tail shorter than `stride` that fills no window. Item: {"block": the window's
    `window + 1` tokens, "scored": how many of its last targets count}.
    """

    def __init__(self, stream: Sequence, window: int, stride: int) -> None:
        check_stride(stride, window)
        self.stream = stream
        self.window = window
        self.stride = stride

    def __len__(self) -> int:
        if len(self.stream) < self.window + 1:
            return 0
        return 1 + (len(self.stream) - 1 - self.window) // self.stride

    def __getitem__(self, index: int) -> dict[str, object]:
        start = index * self.stride
        block = self.stream[start : start + self.window + 1]
        return {"block": block, "scored": self.window if index == 0 else self.stride}

    @property
    def num_scored(self) -> int:
        """Targets scored over all windows."""
        return self.window + self.stride * (len(self) - 1) if len(self) else 0


class EncoderExamples(Dataset):
    """Example d as [CLS] text[:max_seq_len - 2] [SEP], where document d of the token stream
    is ``tokens[starts[d]:starts[d + 1]]``: its text, then the EOS (left out here)."""

    def __init__(
        self, tokens: Sequence, starts: Sequence, cls_id: int, sep_id: int, max_seq_len: int
    ) -> None:
        check_max_seq_len(max_seq_len)
        self.tokens = tokens
        self.starts = starts
        self.cls_id = cls_id
        self.sep_id = sep_id
        self.max_seq_len = max_seq_len

    def __len__(self) -> int:
        return len(self.starts) - 1

    def __getitem__(self, index: int) -> np.ndarray:
        start, end = int(self.starts[index]), int(self.starts[index + 1]) - 1
        end = min(end, start + self.max_seq_len - 2)
        return np.concatenate(([self.cls_id], self.tokens[start:end], [self.sep_id]))
