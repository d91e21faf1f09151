"""The sequence classifier, its metrics, the pair encoding and the labelled data, each against
a computation written from its definition."""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from features.finetune.classifier import SequenceClassifier, last_real_positions
from features.finetune.encoding import PadCollator, encode_pair
from features.finetune.labelled import Columns, load_task
from features.finetune.task import accuracy, f1_score, matthews_correlation
from tests.tiny_models import tiny_model

SPECIALS = SimpleNamespace(cls_id=2, sep_id=3, eos_id=1, pad_id=0)


def _padded(rows: list[list[int]]) -> dict[str, torch.Tensor]:
    return PadCollator(pad_id=0)([{"input_ids": r, "label": 0} for r in rows])


ROWS = [[5, 6, 7, 8, 9, 10], [11, 12, 13], [14, 15, 16, 17]]


@pytest.mark.parametrize("position", ["learned", "rope"])
def test_encoder_head_pools_cls_through_dense_tanh(position: str) -> None:
    torch.manual_seed(0)
    classifier = SequenceClassifier(tiny_model("encoder", position=position), 3).eval()
    batch = _padded(ROWS)
    logits = classifier(batch["input_ids"], batch["attention_mask"])  # (B, K)
    pooler, score = classifier.pooler, classifier.score
    for i, row in enumerate(ROWS):  # each row alone, unpadded, through the backbone's forward
        alone = torch.tensor([row])
        hidden = classifier.backbone.hidden_states(alone)[0, 0]  # (C,) at [CLS]
        pooled = torch.tanh(hidden @ pooler.weight.T + pooler.bias)
        expected = pooled @ score.weight.T + score.bias
        torch.testing.assert_close(logits[i], expected, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("position", ["learned", "rope"])
def test_decoder_head_reads_the_last_real_token(position: str) -> None:
    torch.manual_seed(0)
    classifier = SequenceClassifier(tiny_model("decoder", position=position), 4).eval()
    assert classifier.pooler is None and classifier.score.bias is None  # as GPT-2's score
    batch = _padded(ROWS)
    logits = classifier(batch["input_ids"], batch["attention_mask"])
    for i, row in enumerate(ROWS):
        # The row alone, unpadded: its last position's state, scored by hand.
        hidden = classifier.backbone.hidden_states(torch.tensor([row]))[0, -1]  # (C,)
        torch.testing.assert_close(logits[i], hidden @ classifier.score.weight.T, atol=1e-5, rtol=0)


def test_last_real_positions_follow_the_mask() -> None:
    mask = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1], [1, 0, 0, 0, 0]])
    hidden = torch.zeros(3, 5, 2)
    assert last_real_positions(mask, hidden).tolist() == [2, 4, 0]
    assert last_real_positions(None, hidden).tolist() == [4, 4, 4]


def test_frozen_mlm_head_but_trainable_tied_embedding() -> None:
    classifier = SequenceClassifier(tiny_model("encoder"), 2)
    head = classifier.backbone.mlm_head
    assert not head.dense.weight.requires_grad and not head.proj.bias.requires_grad
    assert head.proj.weight.requires_grad  # the token embedding itself
    with pytest.raises(ValueError, match="2 or more classes, or 1 for a regression"):
        SequenceClassifier(tiny_model("encoder"), 0)
    assert SequenceClassifier(tiny_model("encoder"), 1).score.out_features == 1  # a score


# ------------------------------------------------------------------------------ metrics


def _confusion(true: list[int], pred: list[int], k: int) -> torch.Tensor:
    confusion = torch.zeros(k, k, dtype=torch.long)
    for t, p in zip(true, pred, strict=True):
        confusion[t, p] += 1
    return confusion


def test_binary_metrics_match_their_definitions() -> None:
    true = [1, 1, 1, 0, 0, 1, 0, 1, 0, 0, 1]
    pred = [1, 0, 1, 0, 1, 1, 0, 1, 0, 1, 0]
    tp = sum(t == p == 1 for t, p in zip(true, pred, strict=True))
    tn = sum(t == p == 0 for t, p in zip(true, pred, strict=True))
    fp = sum(t == 0 and p == 1 for t, p in zip(true, pred, strict=True))
    fn = sum(t == 1 and p == 0 for t, p in zip(true, pred, strict=True))
    confusion = _confusion(true, pred, 2)
    assert accuracy(confusion) == pytest.approx((tp + tn) / len(true))
    assert f1_score(confusion) == pytest.approx(2 * tp / (2 * tp + fp + fn))
    mcc = (tp * tn - fp * fn) / np.sqrt((tp + fp) * (tp + fn) * (tn + fp) * (tn + fn))
    assert matthews_correlation(confusion) == pytest.approx(mcc)


def test_multiclass_mcc_is_the_correlation_of_one_hot_labels() -> None:
    rng = np.random.default_rng(0)
    true = rng.integers(0, 4, 60).tolist()
    pred = [t if rng.random() < 0.6 else int(rng.integers(0, 4)) for t in true]
    x, y = np.eye(4)[true], np.eye(4)[pred]  # (N, K) one-hot
    x, y = x - x.mean(0), y - y.mean(0)
    expected = (x * y).sum() / np.sqrt((x * x).sum() * (y * y).sum())
    confusion = _confusion(true, pred, 4)
    assert matthews_correlation(confusion) == pytest.approx(expected)
    per_class_f1 = []
    for k in range(4):
        tp = sum(t == p == k for t, p in zip(true, pred, strict=True))
        per_class_f1.append(2 * tp / (true.count(k) + pred.count(k)))
    assert f1_score(confusion) == pytest.approx(np.mean(per_class_f1))
    assert matthews_correlation(_confusion([0, 1, 2], [1, 1, 1], 3)) == 0.0  # constant guess


# ------------------------------------------------------------------------ pair encoding


def test_encoder_pair_layout_with_segment_ids() -> None:
    ids, types = encode_pair(
        [10, 11], [20, 21, 22], arch="encoder", max_len=16, specials=SPECIALS, token_types=True
    )
    assert ids == [2, 10, 11, 3, 20, 21, 22, 3]  # [CLS] a [SEP] b [SEP]
    assert types == [0, 0, 0, 0, 1, 1, 1, 1]
    single, no_types = encode_pair(
        [10, 11], None, arch="encoder", max_len=16, specials=SPECIALS, token_types=False
    )
    assert single == [2, 10, 11, 3] and no_types is None


def test_decoder_pair_layout_and_longest_first_truncation() -> None:
    ids, _ = encode_pair(
        [10], [20, 21], arch="decoder", max_len=16, specials=SPECIALS, token_types=False
    )
    assert ids == [10, 1, 20, 21, 1]  # a EOS b EOS: the last token has read both
    a, b = list(range(100, 110)), list(range(200, 204))
    ids, types = encode_pair(a, b, arch="encoder", max_len=11, specials=SPECIALS, token_types=True)
    # 11 - 3 specials = 8 tokens: the longer text is cut first, until both are 4
    assert ids == [2, 100, 101, 102, 103, 3, 200, 201, 202, 203, 3] and len(types) == 11


def test_collator_right_pads_with_mask_and_types() -> None:
    rows = [
        {"input_ids": [5, 6, 7], "token_type_ids": [0, 1, 1], "label": 1},
        {"input_ids": [8], "token_type_ids": [0], "label": 0},
    ]
    batch = PadCollator(pad_id=0)(rows)
    assert batch["input_ids"].tolist() == [[5, 6, 7], [8, 0, 0]]
    assert batch["attention_mask"].tolist() == [[1, 1, 1], [1, 0, 0]]
    assert batch["token_type_ids"].tolist() == [[0, 1, 1], [0, 0, 0]]
    assert batch["labels"].tolist() == [1, 0]


# ------------------------------------------------------------------------ labelled data


def _jsonl(path, rows: list[dict]) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def test_string_labels_round_trip_and_numbers_sort_by_value(tmp_path) -> None:
    names = ["spam", "ham", "eggs"]
    rows = [{"body": f"text {i}", "kind": names[i % 3]} for i in range(30)]
    task = load_task(
        "files",
        path=_jsonl(tmp_path / "a.jsonl", rows),
        columns=Columns(text="body", label="kind"),
    )
    assert task.label_names == ["eggs", "ham", "spam"]
    by_text = {r["body"]: r["kind"] for r in rows}
    every = [e for split in task.splits.values() for e in split]
    assert sorted(e.text for e in every) == sorted(by_text)  # carved: disjoint and complete
    assert all(task.label_names[e.label] == by_text[e.text] for e in every)
    numbers = [{"text": str(i), "label": [2, 10, 1][i % 3]} for i in range(30)]
    assert load_task("files", path=_jsonl(tmp_path / "n.jsonl", numbers)).label_names == [
        "1",
        "2",
        "10",
    ]


def test_builtin_task_is_fixed_and_offline() -> None:
    first, again = load_task("builtin"), load_task("builtin")
    assert first.splits == again.splits and len(first.label_names) == 8
    sizes = {split: len(rows) for split, rows in first.splits.items()}
    assert sizes["validation"] == sizes["test"] > 0 and sizes["train"] > 6 * sizes["test"]
    texts = [{e.text for e in rows} for rows in first.splits.values()]
    assert not (texts[0] & texts[1]) and not (texts[0] & texts[2])


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_csv_and_parquet_files_with_pairs(tmp_path, suffix: str) -> None:
    import pandas as pd

    frame = pd.DataFrame(
        {
            "q": [f"q{i}" for i in range(20)],
            "a": [f"a{i}" for i in range(20)],
            "y": [i % 2 for i in range(20)],
        }
    )
    path = tmp_path / f"pairs{suffix}"
    frame.to_csv(path, index=False) if suffix == ".csv" else frame.to_parquet(path)
    task = load_task("files", path=str(path), columns=Columns("q", "a", "y"))
    assert task.has_pairs and task.label_names == ["0", "1"]
    example = task.splits["train"][0]
    assert example.pair == example.text.replace("q", "a")
