"""Bits per UTF-8 byte (``bpb``): training's validation, ``mode=eval`` and the sweep summary
divide the loss by bytes counted here, independently, from text that is not ASCII (so that a
count of characters, or bpc, would be caught)."""

from __future__ import annotations

import csv
import json
import math
from dataclasses import replace
from pathlib import Path

import pytest

import modes.eval
from analysis.run_record import write_record
from analysis.sweep_summary import write_sweep_summary
from conf.hydra_runtime import parse_settings
from data.config import DataConfig
from data.corpus import Corpus
from data.datamodule import prepare
from tests.conftest import compose_config
from train import run
from training.checkpoint import read_checkpoint

# Two-, three- and four-byte characters in every paragraph.
WORDS = ["naïve", "café", "Größe", "€", "日本語", "🙂", "the", "fox", "jumps", "über"]


def _paragraphs(n: int, offset: int = 0) -> list[str]:
    return [
        " ".join(WORDS[(i + j) % len(WORDS)] for j in range(5 + i % 7)) + f" {i + offset}."
        for i in range(n)
    ]


def _counts(texts: list[str]) -> tuple[int, int]:
    """(characters, UTF-8 bytes), one separator per document: written here, not imported."""
    return sum(len(t) + 1 for t in texts), sum(len(bytes(t, "utf-8")) + 1 for t in texts)


@pytest.fixture(scope="module")
def unicode_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny character-level decoder trained on the paragraphs above; its run directory."""
    where = tmp_path_factory.mktemp("unicode")
    corpus = where / "corpus.txt"
    corpus.write_text("\n\n".join(_paragraphs(200)) + "\n", encoding="utf-8")
    out = where / "run"
    run(
        compose_config(
            "data=text",
            f"data.path={corpus}",
            "data.tokenizer=char",
            "trainer.max_steps=6",
            "trainer.val_check_interval=6",
            f"output_dir={out}",
        )
    )
    return out


def test_training_logs_bpb_from_the_validation_texts_bytes(unicode_run: Path) -> None:
    metrics = json.loads((unicode_run / "metrics.json").read_text())
    hparams = read_checkpoint(unicode_run / "checkpoints" / "last.ckpt")["hyper_parameters"]
    corpus = Corpus(DataConfig(**hparams["data_config"]))
    texts = [text for batch in corpus.texts("validation") for text in batch]
    chars, n_bytes = _counts(texts)
    assert n_bytes > chars * 1.2  # the test text is far from ASCII
    assert metrics["val_bpb"] == pytest.approx(metrics["val_bpc"] * chars / n_bytes, rel=1e-5)
    tokens = n_bytes / hparams["bytes_per_token"]["validation"]
    bits = metrics["val_loss"] / math.log(2) * tokens
    assert metrics["val_bpb"] == pytest.approx(bits / n_bytes, rel=1e-5)


def test_eval_records_bpb_of_the_text_scored(unicode_run: Path, tmp_path: Path) -> None:
    held = _paragraphs(15, offset=1000)
    heldout = tmp_path / "heldout.txt"
    heldout.write_text("\n\n".join(held) + "\n", encoding="utf-8")
    overrides = {"data.path": str(heldout)}
    cfg = compose_config(
        "mode=eval", f"ckpt_path={unicode_run}", f"output_dir={tmp_path}", f"data.path={heldout}"
    )
    results = modes.eval.run(replace(parse_settings(cfg), overrides=overrides))
    (record,) = results["results"]
    chars, n_bytes = _counts(held)
    assert (record["characters"], record["bytes"]) == (chars, n_bytes)
    assert record["bpb"] == pytest.approx(
        record["loss"] / math.log(2) / (n_bytes / record["tokens"]), rel=1e-5
    )
    assert record["bpb"] == pytest.approx(record["bpc"] * chars / n_bytes, rel=1e-5)
    assert "bpb" in modes.eval.COLUMNS
    stored = json.loads((unicode_run / "eval.jsonl").read_text().splitlines()[-1])
    assert stored["bpb"] == record["bpb"]


def test_the_sweep_summary_shows_the_mean_bpb(tmp_path: Path) -> None:
    values = {("1", "1"): 2.0, ("1", "2"): 2.2, ("2", "1"): 3.0, ("2", "2"): 3.4}
    for job, ((heads, seed), bpb) in enumerate(values.items()):
        write_record(
            tmp_path / str(job),
            {
                "status": "completed",
                "best_val_loss": bpb,
                "val_bpb": bpb,
                "overrides": {"model.num_heads": heads, "seed": seed},
            },
        )
    write_sweep_summary(tmp_path)
    with open(tmp_path / "summary.csv") as f:
        rows = {row["model.num_heads"]: row for row in csv.DictReader(f)}
    assert float(rows["1"]["val_bpb"]) == pytest.approx(2.1)
    assert float(rows["2"]["val_bpb"]) == pytest.approx(3.2)
    assert "val_bpb" in (tmp_path / "summary.md").read_text()


def test_a_store_without_byte_counts_is_built_again(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n\n".join(_paragraphs(40)) + "\n", encoding="utf-8")
    cfg = DataConfig(source="files", path=str(corpus), tokenizer="char", cache_dir=str(tmp_path))
    built = prepare(cfg, "decoder").stores["train"]
    (meta_file,) = (tmp_path / "tokens").glob("*/meta.json")
    meta = json.loads(meta_file.read_text())
    for entry in meta["splits"].values():  # as a store of an earlier tinylm has it
        del entry["bytes"]
    meta_file.write_text(json.dumps(meta))
    again = prepare(cfg, "decoder").stores["train"]
    assert again.bytes == built.bytes > again.chars
    assert "bytes" in json.loads(meta_file.read_text())["splits"]["train"]
