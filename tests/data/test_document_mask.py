"""Document masking (``data.document_mask=true``): within a packed block a token attends only to
its own document and positions restart per document; the collator's document ids, the model,
the data module's refusal for encoders and one run through ``train.py``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from torch import Tensor

from data.collate import (
    IGNORE_INDEX,
    DocumentCollator,
    collate_blocks,
    collate_windows,
    document_ids,
)
from data.config import DataConfig
from data.datamodule import LMDataModule
from models.config import ModelConfig
from models.positions import document_layout
from models.transformer import Decoder
from tests.conftest import TINY, train_py
from tests.corpora import ready, small_cfg

VOCAB = 37
EOS = 0  # the documents below draw their tokens from 1..VOCAB-1
ATOL = 1e-5
POSITIONS = ["learned", "sinusoidal", "rope"]


def tiny_decoder(position: str = "learned", **overrides: Any) -> Decoder:
    torch.manual_seed(0)
    cfg = ModelConfig(
        vocab_size=VOCAB,
        arch="decoder",
        max_seq_len=16,
        hidden_size=32,
        num_layers=2,
        num_heads=4,
        dropout=0.0,
        norm="pre",
        position=position,
        **overrides,
    )
    return Decoder(cfg).eval()


def document(length: int, seed: int) -> Tensor:
    """``length`` tokens of text, no EOS among them."""
    return torch.randint(1, VOCAB, (length,), generator=torch.Generator().manual_seed(seed))


def packed(*documents: Tensor) -> tuple[Tensor, Tensor]:
    """Input ids [1, T] of documents each ended by EOS (the last one cut before its EOS), and
    their document ids [1, T] as the collator builds them."""
    eos = torch.tensor([EOS])
    ids = torch.cat([t for d in documents[:-1] for t in (d, eos)] + [documents[-1]])[None]
    return ids, document_ids(ids, EOS)  # (1, T) each


# ----------------------------------------------------------------------------- collator


def test_collator_document_ids_and_positions_on_a_hand_made_block() -> None:
    eos = 9
    # Block of T + 1 = 9 tokens: the tail of a document, a whole one, the start of a third.
    block = np.array([5, 9, 1, 2, 9, 3, 4, 9, 7])
    batch = DocumentCollator(collate_blocks, eos)([block, np.roll(block, -1)])
    assert batch["input_ids"][0].tolist() == [5, 9, 1, 2, 9, 3, 4, 9]
    assert batch["labels"][0].tolist() == [9, 1, 2, 9, 3, 4, 9, 7]
    # The EOS belongs to the document it ends; a block starting at an EOS ends a document at 0.
    assert batch["document_ids"].tolist() == [[0, 0, 1, 1, 1, 2, 2, 2], [0, 1, 1, 1, 2, 2, 2, 3]]
    assert batch["document_ids"].dtype == torch.int64
    same_document, positions = document_layout(batch["document_ids"])
    assert positions.tolist() == [[0, 1, 0, 1, 2, 0, 1, 2], [0, 0, 1, 2, 0, 1, 2, 0]]
    assert same_document.shape == (2, 1, 8, 8)
    assert same_document[0, 0, 4].tolist() == [False, False, True, True, True, False, False, False]


def test_collator_keeps_the_wrapped_collator_batch() -> None:
    windows = [{"block": np.array([5, 9, 1, 2, 9, 3]), "scored": 2}]
    batch = DocumentCollator(collate_windows, 9)(windows)
    expected = collate_windows(windows)
    assert batch.keys() == {*expected, "document_ids"}
    assert torch.equal(batch["labels"], expected["labels"])
    assert batch["labels"][0, :3].tolist() == [IGNORE_INDEX] * 3
    assert batch["document_ids"].tolist() == [[0, 0, 1, 1, 1]]


def test_window_batch_of_one_keeps_its_inputs() -> None:
    # A one-row batch (the last of an evaluation, or data.batch_size=1): the ignored labels
    # must not leak into the inputs.
    batch = collate_windows([{"block": np.array([5, 9, 1, 2, 9, 3]), "scored": 2}])
    assert batch["input_ids"].tolist() == [[5, 9, 1, 2, 9]]
    assert batch["labels"].tolist() == [[IGNORE_INDEX] * 3 + [9, 3]]
    assert batch["input_ids"].is_contiguous() and batch["labels"].is_contiguous()


def test_runs_not_id_values_define_documents() -> None:
    # Ids that come back (0, 1, 0) are a third document: mask and positions agree.
    same_document, positions = document_layout(torch.tensor([[0, 0, 1, 0, 0]]))
    assert positions.tolist() == [[0, 1, 0, 0, 1]]
    assert same_document[0, 0, 4].tolist() == [False, False, False, True, True]


# ----------------------------------------------------------------------------- model


@pytest.mark.parametrize("position", POSITIONS)
@pytest.mark.parametrize("length_a", [5, 9])
def test_later_document_ignores_earlier_one_and_equals_itself_alone(
    position: str, length_a: int
) -> None:
    model = tiny_decoder(position)
    b = document(6, seed=2)
    ids, docs = packed(document(length_a, seed=1), b)
    other_ids, other_docs = packed(document(length_a, seed=3), b)
    assert torch.equal(docs, other_docs) and not torch.equal(ids, other_ids)
    start = length_a + 1  # B's first token, after A and its EOS
    with torch.no_grad():
        logits_b = model(ids, document_ids=docs)[:, start:]  # (1, 6, V)
        changed_a = model(other_ids, document_ids=other_docs)[:, start:]
        alone = model(b[None])  # (1, 6, V)
        unmasked = model(ids)[:, start:]
    torch.testing.assert_close(logits_b, changed_a, atol=ATOL, rtol=0)
    torch.testing.assert_close(logits_b, alone, atol=ATOL, rtol=0)
    # Without document ids, A does reach B: the comparison above can fail.
    assert (unmasked - alone).abs().max() > 1e-3


@pytest.mark.parametrize("position", POSITIONS)
def test_sdpa_path_and_plain_path_agree(position: str) -> None:
    model = tiny_decoder(position, num_kv_heads=2)
    ids, docs = packed(document(4, seed=1), document(3, seed=2), document(5, seed=3))
    ids, docs = torch.cat([ids, ids.flip(1)]), torch.cat([docs, docs.flip(1)])  # (2, T) each
    sdpa = model(ids, document_ids=docs)  # (2, T, V)
    sdpa.sum().backward()
    grads_sdpa = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    plain, attentions = model(ids, document_ids=docs, output_attentions=True)
    plain.sum().backward()
    torch.testing.assert_close(sdpa, plain, atol=ATOL, rtol=0)
    for g_sdpa, p in zip(grads_sdpa, model.parameters(), strict=True):
        # Relative too: summed over every logit, some gradients reach the hundreds.
        torch.testing.assert_close(g_sdpa, p.grad, atol=ATOL, rtol=1e-5)
    same_document, _ = document_layout(docs)
    causal = torch.ones(ids.shape[1], ids.shape[1], dtype=torch.bool).tril()
    for probs in attentions:  # (B, H, T, T): no weight outside the token's document or future
        assert probs.masked_select(~(same_document & causal)).abs().max() == 0


def test_sdpa_gets_one_boolean_mask_and_never_is_causal_with_it(sdpa_calls: list[dict]) -> None:
    calls = sdpa_calls
    model = tiny_decoder()
    ids, docs = packed(document(4, seed=1), document(3, seed=2))
    with torch.no_grad():
        model(ids)
        model(ids, document_ids=docs)
    plain, masked = calls[:2], calls[2:]
    assert all(c["is_causal"] and c["attn_mask"] is None for c in plain)
    assert all(not c["is_causal"] and c["attn_mask"].dtype == torch.bool for c in masked)
    assert len(masked) == 2 and masked[0]["attn_mask"].shape == (1, 1, ids.shape[1], ids.shape[1])


# Logits of the decoder before document masking existed (commit df23f8c), seed 0: the default
# path, without document_ids, must give them still.
TODAYS_LOGITS = {
    "learned": [0.05615341290831566, 0.07225918769836426, 0.17514723539352417, 0.0350976102054],
    "sinusoidal": [0.07735209912061691, -0.017536181956529617, 0.0524069853127, 0.0646135658026],
    "rope": [0.19640778005123138, 0.08207150548696518, 0.04423438757658005, -0.1304708570241928],
}


@pytest.mark.parametrize("position", POSITIONS)
def test_forward_without_document_ids_is_unchanged(position: str) -> None:
    model = tiny_decoder(position)
    ids = torch.randint(1, VOCAB, (2, 12), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        logits = model(ids)
        one_document = model(ids, document_ids=torch.zeros_like(ids))
    expected = torch.tensor(TODAYS_LOGITS[position])
    torch.testing.assert_close(logits[0, -1, :4], expected, atol=ATOL, rtol=0)
    torch.testing.assert_close(one_document, logits, atol=ATOL, rtol=0)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"document_ids": torch.zeros(1, 6)}, r"dtype torch.float32; pass integer ids"),
        ({"document_ids": torch.zeros(1, 6, dtype=torch.bool)}, r"dtype torch.bool"),
        ({"document_ids": torch.zeros(1, 5, dtype=torch.long)}, r"shape \(1, 5\).*\(1, 6\)"),
        (
            {"document_ids": torch.zeros(1, 6, dtype=torch.long), "kv_caches": "caches"},
            r"cannot be combined with kv_caches",
        ),
        (
            {
                "document_ids": torch.zeros(1, 6, dtype=torch.long),
                "attention_mask": torch.ones(1, 6, dtype=torch.long),
            },
            r"cannot be combined with attention_mask; give the padding a document id",
        ),
    ],
    ids=["float", "bool", "shape", "cache", "padding"],
)
def test_bad_document_ids_are_refused(kwargs: dict, message: str) -> None:
    model = tiny_decoder()
    if kwargs.get("kv_caches") == "caches":
        kwargs = {**kwargs, "kv_caches": model.init_caches(1)}
    with pytest.raises(ValueError, match=message):
        model(torch.ones(1, 6, dtype=torch.long), **kwargs)


# ----------------------------------------------------------------------------- data and runs


def test_datamodule_batches_carry_the_document_ids(tmp_path: Path) -> None:
    dm = ready(small_cfg(tmp_path, document_mask=True), max_seq_len=64)
    for loader in (dm.train_dataloader(), dm.val_dataloader()):
        batches = list(loader)
        for batch in batches:
            expected = document_ids(batch["input_ids"], dm.eos_token_id)
            assert torch.equal(batch["document_ids"], expected)
        assert any(batch["document_ids"].max() > 0 for batch in batches)  # boundaries exist
    assert "document_ids" not in next(iter(ready(small_cfg(tmp_path)).train_dataloader()))


def test_encoder_refuses_document_mask() -> None:
    with pytest.raises(ValueError, match=r"^data.document_mask=true is for decoders.*model=gpt$"):
        LMDataModule(DataConfig(document_mask=True), arch="encoder", max_seq_len=16)


@pytest.mark.slow
def test_train_py_with_document_mask(tmp_path: Path) -> None:
    quick = ["trainer.max_steps=2", "trainer.val_check_interval=2", "trainer.limit_val_batches=1"]
    run_dir = tmp_path / "run"
    proc = train_py(
        *TINY, *quick, "data.document_mask=true", f"hydra.run.dir={run_dir}", cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert metrics["status"] == "completed" and metrics["step"] == 2


@pytest.mark.slow
def test_train_py_encoder_with_document_mask_is_one_line(tmp_path: Path) -> None:
    proc = train_py(
        *TINY, "model=bert", "data.document_mask=true", f"hydra.run.dir={tmp_path}", cwd=tmp_path
    )
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert "data.document_mask=true is for decoders" in proc.stderr
    assert "Traceback" not in proc.stderr
