"""The data windows (data/examples.py) against enumerations written here: strided evaluation
windows over every stream length around a window, the stride's bounds, packed blocks, and
encoder examples cut to max_seq_len."""

from __future__ import annotations

import numpy as np
import pytest

from data.collate import IGNORE_INDEX, collate_windows
from data.examples import (
    MIN_SEQ_LEN,
    EncoderExamples,
    PackedBlocks,
    StridedWindows,
    check_max_seq_len,
    check_stride,
)


def _windows_by_definition(length: int, window: int, stride: int) -> list[tuple[int, int]]:
    """(start, targets scored) of every window that fits: starts 0, stride, 2 * stride, ..
    while start + window + 1 tokens fit; the first scores all its targets, later ones their
    last ``stride``."""
    starts = range(0, max(0, length - window), stride)
    return [(start, window if start == 0 else stride) for start in starts]


@pytest.mark.parametrize("window", [1, 4, 5])
@pytest.mark.parametrize("stride_of", [lambda w: 1, lambda w: max(1, w // 2), lambda w: w])
def test_strided_windows_match_their_definition_around_every_length(window, stride_of) -> None:
    stride = stride_of(window)
    for length in range(0, 3 * window + 4):
        stream = np.arange(length) + 100
        windows = StridedWindows(stream, window, stride)
        expected = _windows_by_definition(length, window, stride)
        assert len(windows) == len(expected), (length, window, stride)
        items = [windows[i] for i in range(len(windows))]
        assert [(int(w["block"][0]) - 100, w["scored"]) for w in items] == expected
        assert all(len(w["block"]) == window + 1 for w in items)
        assert windows.num_scored == sum(scored for _, scored in expected)
        if items:  # the scored targets are stream[1:] once each, up to the last window's end
            batch = collate_windows(items)
            scored = batch["labels"][batch["labels"] != IGNORE_INDEX].tolist()
            assert scored == list(stream[1 : 1 + windows.num_scored])


@pytest.mark.parametrize("stride", [1, 3, 4])
def test_a_stride_from_1_to_the_window_is_accepted(stride: int) -> None:
    check_stride(stride, 4)


@pytest.mark.parametrize("stride", [0, -1, 5, True, 2.0, "2", None])
def test_a_stride_outside_1_to_the_window_or_not_an_integer_is_refused(stride) -> None:
    with pytest.raises(ValueError) as error:
        check_stride(stride, 4)
    assert str(error.value) == (
        f"eval.stride={stride} must be between 1 and the checkpoint's max_seq_len=4 (the "
        "default, 4, scores non-overlapping windows; smaller strides give each token more "
        "context at more cost)"
    )
    with pytest.raises(ValueError):
        StridedWindows(np.arange(10), 4, stride)


def test_packed_blocks_are_consecutive_and_drop_the_tail() -> None:
    stream = np.arange(23)
    blocks = PackedBlocks(stream, 5)
    assert len(blocks) == 4
    assert [blocks[i].tolist() for i in range(4)] == [list(range(i, i + 5)) for i in (0, 5, 10, 15)]
    assert len(PackedBlocks(np.arange(4), 5)) == 0 and len(PackedBlocks(np.arange(5), 5)) == 1


def test_the_shortest_context_is_cls_one_token_sep() -> None:
    check_max_seq_len(MIN_SEQ_LEN)
    assert MIN_SEQ_LEN == 3
    with pytest.raises(ValueError) as error:
        check_max_seq_len(2)
    assert str(error.value) == (
        "max_seq_len=2 must be >= 3: an encoder example is [CLS] text [SEP]"
    )
    with pytest.raises(ValueError, match="max_seq_len=2 must be >= 3"):
        EncoderExamples(np.arange(5), np.array([0, 5]), 1, 2, max_seq_len=2)


def test_encoder_examples_are_cls_text_sep_without_the_eos_cut_to_max_seq_len() -> None:
    eos, cls, sep = 0, 1, 2
    # Documents of 3, 1 and 7 text tokens, each followed by its EOS.
    documents = [[10, 11, 12], [20], [30, 31, 32, 33, 34, 35, 36]]
    tokens = np.array([t for doc in documents for t in (*doc, eos)])
    starts = np.cumsum([0, *(len(doc) + 1 for doc in documents)])
    examples = EncoderExamples(tokens, starts, cls, sep, max_seq_len=6)
    assert len(examples) == 3
    assert [examples[i].tolist() for i in range(3)] == [
        [cls, 10, 11, 12, sep],
        [cls, 20, sep],
        [cls, 30, 31, 32, 33, sep],  # max_seq_len=6: 4 text tokens
    ]
