"""``mode=eval``: whole held-out files, strided windows, records that accumulate, bad input.

The decoder here is a character model trained on a text it can predict from context (a
pangram, over and over), so more context must lower its loss: what strided evaluation buys.
"""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

import modes.eval
from conf.hydra_runtime import parse_settings
from data.tokenizer import special_tokens_of, tokenizer_from_json
from tests.conftest import TINY, compose_config, train_py
from train import run
from training.checkpoint import load_checkpoint

PANGRAM = "the quick brown fox jumps over the lazy dog"
WINDOW = 32


def _paragraphs(n: int, offset: int = 0) -> list[str]:
    return [f"{PANGRAM} {i + offset}." for i in range(n)]


@pytest.fixture(scope="module")
def pattern_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, list[str]]:
    """(checkpoint, held-out file, its paragraphs)."""
    where = tmp_path_factory.mktemp("pattern")
    corpus = where / "corpus.txt"
    corpus.write_text("\n\n".join(_paragraphs(300)) + "\n")
    held = _paragraphs(12, offset=1000)
    heldout = where / "heldout.txt"
    heldout.write_text("\n\n".join(held) + "\n")
    out = where / "run"
    run(
        compose_config(
            "data=text",
            f"data.path={corpus}",
            "data.tokenizer=char",
            f"model.max_seq_len={WINDOW}",
            "trainer.max_steps=90",
            "trainer.val_check_interval=30",
            "optim.lr=1e-2",  # fast enough to learn the pattern's context in 90 steps
            "model.dropout=0.0",
            f"output_dir={out}",
        )
    )
    return out / "checkpoints" / "last.ckpt", heldout, held


def _evaluate(ckpt: Path, *overrides: str, output_dir: Path) -> dict:
    """``modes.eval.run`` with ``overrides`` recorded as Hydra records a command line's
    (``compose`` records none)."""
    cfg = compose_config("mode=eval", f"ckpt_path={ckpt}", f"output_dir={output_dir}", *overrides)
    recorded = dict(o.split("=", 1) for o in overrides)
    return modes.eval.run(replace(parse_settings(cfg), overrides=recorded))["results"][0]


def _records(ckpt: Path) -> list[dict]:
    return [json.loads(line) for line in (ckpt.parent / "eval.jsonl").read_text().splitlines()]


def _independent_loss(ckpt: Path, paragraphs: list[str], stride: int) -> tuple[float, int, int]:
    """(loss, targets scored, stream length) computed here, window by window."""
    loaded = load_checkpoint(ckpt)
    tokenizer = tokenizer_from_json(loaded.tokenizer_json)
    eos = special_tokens_of(tokenizer).eos_id
    stream = [i for p in paragraphs for i in [*tokenizer.encode(p).ids, eos]]
    total, count, start = 0.0, 0, 0
    with torch.no_grad():
        while start + WINDOW + 1 <= len(stream):
            block = torch.tensor([stream[start : start + WINDOW + 1]])
            scored = WINDOW if start == 0 else stride
            logits = loaded.model(block[:, :-1])[0, -scored:]
            total += F.cross_entropy(logits, block[0, 1:][-scored:], reduction="sum").item()
            count += scored
            start += stride
    return total / count, count, len(stream)


@pytest.mark.parametrize("stride", [WINDOW, 8])
def test_whole_file_is_scored_and_the_loss_is_the_windows(pattern_run, tmp_path, stride) -> None:
    ckpt, heldout, paragraphs = pattern_run
    record = _evaluate(ckpt, f"data.path={heldout}", f"eval.stride={stride}", output_dir=tmp_path)
    loss, scored, tokens = _independent_loss(ckpt, paragraphs, stride)
    assert record["split"] == "all" and record["data"] == str(heldout)
    assert record["tokens"] == tokens and record["tokens_scored"] == scored
    assert 0 <= (tokens - 1) - scored < stride  # every target but a tail of one window
    assert record["loss"] == pytest.approx(loss, abs=1e-4)
    assert record["ppl"] == pytest.approx(math.exp(loss), rel=1e-4)
    chars = sum(len(p) + 1 for p in paragraphs)  # one separator character per paragraph
    assert record["characters"] == chars
    assert record["bpc"] == pytest.approx(loss / math.log(2) / (chars / tokens), rel=1e-4)
    assert record["stride"] == stride and record["step"] == 90


def test_small_stride_is_no_worse_and_records_accumulate(pattern_run, tmp_path) -> None:
    ckpt, heldout, _ = pattern_run
    (ckpt.parent / "eval.jsonl").unlink(missing_ok=True)
    data = f"data.path={heldout}"
    full = _evaluate(ckpt, data, output_dir=tmp_path)
    small = _evaluate(ckpt, data, "eval.stride=8", output_dir=tmp_path)
    assert full["stride"] == WINDOW
    # More context per token: a model that uses context predicts better.
    assert small["loss"] < full["loss"], (small["loss"], full["loss"])
    own = _evaluate(ckpt, output_dir=tmp_path)  # the run's own validation split
    assert own["split"] == "validation" and own["data"] != str(heldout)
    records = _records(ckpt)
    assert [r["stride"] for r in records] == [WINDOW, 8, WINDOW]
    again = _evaluate(ckpt, data, "eval.stride=8", output_dir=tmp_path)
    assert again == small  # deterministic
    # The re-run replaced its own record only; the others stay, unchanged.
    assert _records(ckpt) == [records[0], records[2], again]


def test_encoder_masks_are_fixed_so_evaluations_agree(tiny_checkpoints, tmp_path) -> None:
    ckpt = tiny_checkpoints["encoder"]
    (ckpt.parent / "eval.jsonl").unlink(missing_ok=True)  # the session's checkpoint: start afresh
    first = _evaluate(ckpt, output_dir=tmp_path)
    second = _evaluate(ckpt, output_dir=tmp_path)
    assert first == second and first["mask_seed"] == 1234 and first["stride"] is None
    assert 0 < first["tokens_scored"] < first["tokens"]
    assert [r["loss"] for r in _records(ckpt)] == [first["loss"]]
    other_seed = _evaluate(ckpt, "seed=7", output_dir=tmp_path)
    assert other_seed["loss"] != first["loss"] and len(_records(ckpt)) == 2


def _bad_inputs(where: Path) -> list[tuple[list[str], str]]:
    (where / "empty.txt").write_text("")
    (where / "notes.docx").write_text("not really a docx")
    (where / "short.txt").write_text("the quick brown fox")
    return [
        (["eval.stride=0"], r"eval.stride=0 must be >= 1"),
        (["eval.stride=-3"], r"eval.stride=-3 must be >= 1"),
        ([f"eval.stride={WINDOW + 1}"], r"eval.stride=33 must be between 1 and .*max_seq_len=32"),
        ([f"data.path={where / 'empty.txt'}"], r"is an empty file"),
        ([f"data.path={where / 'notes.docx'}"], r"unsupported file type"),
        ([f"data.path={where / 'short.txt'}"], r"too few to fill one window of .* 33 tokens"),
    ]


def test_bad_eval_input_gives_one_message_and_keeps_the_records(pattern_run, tmp_path) -> None:
    ckpt, heldout, _ = pattern_run
    _evaluate(ckpt, f"data.path={heldout}", output_dir=tmp_path)
    before = (ckpt.parent / "eval.jsonl").read_bytes()
    for overrides, message in _bad_inputs(tmp_path):
        with pytest.raises((ValueError, FileNotFoundError), match=message):
            _evaluate(ckpt, *overrides, output_dir=tmp_path)
    assert (ckpt.parent / "eval.jsonl").read_bytes() == before


def test_stride_is_refused_for_an_encoder(tiny_checkpoints, tmp_path) -> None:
    with pytest.raises(ValueError, match=r"eval.stride=4 is for decoders"):
        _evaluate(tiny_checkpoints["encoder"], "eval.stride=4", output_dir=tmp_path)


def test_data_path_on_the_command_line_is_scored_whole(pattern_run, tmp_path) -> None:
    """Through train.py, where Hydra records the command line: ``data.path=FILE`` alone."""
    ckpt, heldout, paragraphs = pattern_run
    proc = train_py(
        *TINY,
        "mode=eval",
        f"ckpt_path={ckpt}",
        f"data.path={heldout}",
        "eval.stride=16",
        f"hydra.run.dir={tmp_path / 'run'}",
        cwd=tmp_path,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    record = _records(ckpt)[-1]
    _, scored, tokens = _independent_loss(ckpt, paragraphs, 16)
    assert (record["split"], record["stride"], record["tokens"]) == ("all", 16, tokens)
    assert record["tokens_scored"] == scored
    assert "| tokens_scored |" in proc.stdout  # the table


# ------------------------------------------------------------------- fixed split files


def test_data_path_mapping_gives_fixed_splits(tmp_path) -> None:
    from data.config import DataConfig
    from data.corpus import Corpus
    from data.datamodule import prepared_datamodule

    texts = {
        split: _paragraphs(n, offset)
        for split, n, offset in (("train", 40, 0), ("validation", 7, 100), ("test", 5, 200))
    }
    for split, paragraphs in texts.items():
        (tmp_path / f"{split}.txt").write_text("\n\n".join(paragraphs) + "\n")
    paths = {split: str(tmp_path / f"{split}.txt") for split in texts}
    cfg = DataConfig(source="files", path=paths, tokenizer="char", cache_dir=str(tmp_path / "c"))
    datamodule = prepared_datamodule(cfg, "decoder", WINDOW, seed=0, stage="fit")
    read = {split: [] for split in datamodule.prepared.stores}
    for split, batch in Corpus(cfg).batches():
        read[split] += batch
    assert read == texts  # nothing carved

    no_test = DataConfig(**{**cfg.__dict__, "path": {k: paths[k] for k in ("train", "validation")}})
    datamodule = prepared_datamodule(no_test, "decoder", WINDOW, seed=0, stage="fit")
    with pytest.raises(ValueError, match=r"the corpus has no test split .* map a file to it"):
        datamodule.dataset("test")
    with pytest.raises(ValueError, match=r"use the keys train, validation, test"):
        DataConfig(source="files", path={"train": paths["train"], "dev": paths["test"]})
    with pytest.raises(ValueError, match=r"train and validation required"):
        DataConfig(source="files", path={"train": paths["train"], "test": paths["test"]})
