"""data.streaming=true: blocks, held-out validation, sharding, exact resume, errors, end to end."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import lightning as L
import numpy as np
import pytest
import torch

from data.collate import collate_blocks
from data.config import DataConfig
from data.datamodule import LMDataModule
from features.streaming.stream import (
    LIGHTNING_PREFETCH,
    StreamBlocks,
    StreamLoader,
    stream_splits,
    stream_tokenizer_key,
)
from tests.conftest import TINY, train_py
from tests.data.test_sources import WIKITEXT
from train import run

MAX_SEQ_LEN = 16


def _write_paragraphs(path: Path, prefix: str, count: int) -> Path:
    # Every paragraph unique (numbered) and of varied length: equal blocks mean equal data.
    path.write_text("\n\n".join(_paragraph(prefix, i) for i in range(count)))
    return path


def _paragraph(prefix: str, i: int) -> str:
    return f"{prefix} {i}: " + " ".join(["lorem ipsum dolor"] * (i % 7 + 1))


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return make_corpus(tmp_path_factory.mktemp("streaming"))


def make_corpus(root: Path) -> dict[str, Path]:
    """A train file, a validation file, and a tokenizer trained on them (by the cached path)."""
    files = {
        "train": _write_paragraphs(root / "train.txt", "Paragraph", 400),
        "validation": _write_paragraphs(root / "valid.txt", "Held", 40),
    }
    paths = {split: str(path) for split, path in files.items()}
    reference = LMDataModule(_cfg(paths, tokenizer="bpe"), "decoder", MAX_SEQ_LEN)
    reference.prepare_data()
    files["tokenizer"] = root / "tokenizer.json"
    files["tokenizer"].write_text(reference.tokenizer.to_str())
    return files


def _cfg(path: object, **options: object) -> DataConfig:
    return DataConfig(source="files", path=path, vocab_size=300, batch_size=4, **options)


def _split_paths(corpus: dict[str, Path]) -> dict[str, str]:
    return {"train": str(corpus["train"]), "validation": str(corpus["validation"])}


def streaming_module(
    path: object,
    corpus: dict[str, Path],
    arch: str = "decoder",
    max_seq_len: int = MAX_SEQ_LEN,
    **options: object,
) -> LMDataModule:
    cfg = _cfg(path, tokenizer=str(corpus["tokenizer"]), streaming=True, **options)
    datamodule = LMDataModule(cfg, arch, max_seq_len)
    datamodule.prepare_data()
    datamodule.setup("fit")
    return datamodule


def train_blocks(datamodule: LMDataModule, rank: int = 0, world_size: int = 1, roles: int = 1):
    """Every block of the train stream of `rank`, reader by reader."""
    blocks = StreamBlocks(
        stream_splits(datamodule.cfg),
        datamodule.tokenizer,
        datamodule.arch,
        datamodule.max_seq_len,
        batch_size=4,
        rank=rank,
        world_size=world_size,
    )
    return [
        [block for batch, _ in blocks.batches(role, roles, None) for block in batch]
        for role in range(roles)
    ]


@pytest.mark.parametrize("arch", ["decoder", "encoder"])
def test_stream_gives_the_cached_paths_examples(corpus: dict[str, Path], arch: str) -> None:
    # With fixed split files nothing is carved, so both paths train on the same text.
    paths = _split_paths(corpus)
    cached = LMDataModule(_cfg(paths, tokenizer=str(corpus["tokenizer"])), arch, MAX_SEQ_LEN)
    cached.prepare_data()
    cached.setup("fit")
    streamed = streaming_module(paths, corpus, arch)
    expected = [cached.dataset("train")[i] for i in range(len(cached.dataset("train")))]
    (got,) = train_blocks(streamed)
    assert len(got) == len(expected) > 100
    assert all(np.array_equal(g, e) for g, e in zip(got, expected, strict=True))
    # Validation is the validation file's, as the cached path has it; bpc divides by its ratio.
    assert len(streamed.dataset("validation")) == len(cached.dataset("validation"))
    validation = cached.chars_per_token["validation"]
    assert streamed.chars_per_token == {"validation": validation, "train": validation}


def test_first_examples_are_validation_and_never_trained_on(corpus: dict[str, Path]) -> None:
    cfg = _cfg(str(corpus["train"]), streaming=True, stream_val_examples=25)
    splits = stream_splits(cfg)
    validation = [row["text"] for row in splits.evaluation["validation"]]
    train = [row["text"] for row in splits.train]
    assert validation == [_paragraph("Paragraph", i) for i in range(25)]
    assert not set(validation) & set(train) and len(train) == 400 - 25
    # The training blocks hold no validation paragraph's number.
    datamodule = streaming_module(str(corpus["train"]), corpus, stream_val_examples=25)
    assert len(datamodule.dataset("validation")) > 0
    (blocks,) = train_blocks(datamodule)
    text = "".join(datamodule.tokenizer.decode(block.tolist()) for block in blocks)
    assert "Paragraph 25:" in text
    assert not any(f"Paragraph {i}:" in text for i in range(25))


def documents_in(blocks: list[np.ndarray], eos_id: int) -> list[tuple[int, ...]]:
    """The whole documents (token tuples) in a reader's blocks, joined in order."""
    stream = np.concatenate(blocks)
    ends = np.flatnonzero(stream == eos_id)
    return [tuple(d) for d in np.split(stream[: ends[-1] + 1], ends[:-1] + 1)]


@pytest.mark.parametrize("files", [1, 4])
def test_ranks_and_workers_read_distinct_blocks(
    corpus: dict[str, Path], tmp_path: Path, files: int
) -> None:
    # One file: every reader takes every n-th example; four files: whole files per reader.
    for f in range(files):
        _write_paragraphs(tmp_path / f"part{f}.txt", f"File {f} paragraph", 120)
    datamodule = streaming_module(str(tmp_path), corpus, stream_val_examples=10)
    eos = datamodule.eos_token_id
    readers = [
        documents_in(blocks, eos)
        for rank in (0, 1)
        for blocks in train_blocks(datamodule, rank=rank, world_size=2, roles=2)
    ]
    # Each of the 2 ranks x 2 workers reads its own examples: no document (so no block) twice,
    # and together they read them all (but for the tail of each reader's last block).
    documents = [d for reader in readers for d in reader]
    assert all(len(reader) > 10 for reader in readers)
    assert len(documents) == len(set(documents))
    assert 120 * files - 10 - 2 * len(readers) <= len(documents) <= 120 * files - 10
    (everything,) = train_blocks(datamodule)
    assert set(documents) <= set(documents_in(everything, eos))


def _stream_loader(datamodule: LMDataModule, workers: int) -> StreamLoader:
    blocks = StreamBlocks(
        stream_splits(datamodule.cfg),
        datamodule.tokenizer,
        "decoder",
        MAX_SEQ_LEN,
        batch_size=4,
    )
    return StreamLoader(blocks, collate_blocks, num_workers=workers)


def _train_like_lightning(loader: StreamLoader, steps: int) -> list[torch.Tensor]:
    """The input_ids of `steps` batches drawn as Lightning's fetcher draws them: one batch
    ahead of training (the next is fetched before the current one is trained on), and a new
    epoch, a new iterator, when the stream ends."""
    trained: list[torch.Tensor] = []
    while len(trained) < steps:
        batches = iter(loader)
        queue = list(itertools.islice(batches, LIGHTNING_PREFETCH))
        while queue and len(trained) < steps:
            batch = queue.pop(0)
            queue += itertools.islice(batches, 1)
            trained.append(batch["input_ids"])
    return trained


@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.parametrize("stop", ["mid-epoch", "epoch-end", "second-epoch"])
def test_loader_resumes_with_the_batches_it_would_have_given(
    corpus: dict[str, Path], tmp_path: Path, workers: int, stop: str
) -> None:
    small = _write_paragraphs(tmp_path / "small.txt", "Small", 30)
    paths = {"train": str(small), "validation": str(corpus["validation"])}
    datamodule = streaming_module(paths, corpus)
    epoch = len(list(_stream_loader(datamodule, workers)))
    assert epoch > 5
    straight = _train_like_lightning(_stream_loader(datamodule, workers), 3 * epoch)
    step = {"mid-epoch": 3, "epoch-end": epoch, "second-epoch": epoch + 3}[stop]

    interrupted = _stream_loader(datamodule, workers)
    first = _train_like_lightning(interrupted, step)
    state = json.loads(json.dumps(interrupted.state_dict()))  # as plain as a checkpoint's
    resumed = _stream_loader(datamodule, workers)
    resumed.load_state_dict(state)
    rest = _train_like_lightning(resumed, epoch)
    assert all(torch.equal(a, b) for a, b in zip(first + rest, straight, strict=False))
    if workers:  # the two workers' batches alternate, each from its own share of the stream
        shares = train_blocks(datamodule, roles=2)
        for batch, share in zip(straight[:2], shares, strict=True):
            assert torch.equal(batch, collate_blocks(share[:4])["input_ids"])


class RecordBatches(L.Callback):
    def __init__(self) -> None:
        self.batches: list[torch.Tensor] = []

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        self.batches.append(batch["input_ids"].clone())


def tiny_streaming_args(path: Path, corpus: dict[str, Path], out: Path, *extra: str) -> list[str]:
    return [
        *TINY,
        "data=text",
        f"data.path={path}",
        "data.streaming=true",
        f"data.tokenizer={corpus['tokenizer']}",
        "data.stream_val_examples=20",
        "trainer.val_check_interval=3",
        "trainer.limit_val_batches=2",
        f"output_dir={out}",
        *extra,
    ]


@pytest.mark.parametrize("workers", [0, 2])
def test_resumed_run_trains_on_the_same_batches(
    corpus: dict[str, Path], tmp_path: Path, workers: int
) -> None:
    from hydra import compose, initialize_config_dir

    from tests.conftest import ROOT

    def train(name: str, steps: int, *extra: str) -> list[torch.Tensor]:
        recorder = RecordBatches()
        overrides = tiny_streaming_args(
            corpus["train"],
            corpus,
            tmp_path / name,
            f"trainer.max_steps={steps}",
            f"data.num_workers={workers}",
            "max_new_tokens=1",
            *extra,
        )
        with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
            run(compose(config_name="config", overrides=overrides), [recorder])
        return recorder.batches

    straight = train("straight", 6)
    first = train("cut", 3)
    last = tmp_path / "cut" / "checkpoints" / "last.ckpt"
    rest = train("resumed", 6, f"ckpt_path={last}")
    assert len(straight) == 6 and len(first) == 3 and len(rest) == 3
    assert all(torch.equal(a, b) for a, b in zip(first + rest, straight, strict=True))


def test_cache_holds_only_the_trained_tokenizer(
    corpus: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import data.tokenizer

    trainings = []
    train_tokenizer = data.tokenizer.train_tokenizer
    monkeypatch.setattr(
        data.tokenizer,
        "train_tokenizer",
        lambda *args, **kwargs: trainings.append(1) or train_tokenizer(*args, **kwargs),
    )
    cache = tmp_path / "cache"
    cfg = _cfg(
        str(corpus["train"]),
        streaming=True,
        tokenizer="bpe",
        cache_dir=str(cache),
        stream_val_examples=20,
        tokenizer_sample_bytes=2000,
    )
    for _ in range(2):
        datamodule = LMDataModule(cfg, "decoder", MAX_SEQ_LEN)
        datamodule.prepare_data()
        datamodule.setup("fit")
        next(iter(datamodule.train_dataloader()))
    assert len(trainings) == 1  # the second run read it from the cache
    written = [p for p in cache.rglob("*") if p.is_file() and not p.name.endswith(".lock")]
    assert [p.parent.name for p in written] == ["tokenizers"]
    assert sum(p.stat().st_size for p in written) < 100_000


def test_stream_tokenizer_learns_from_the_head_up_to_tokenizer_sample_bytes(
    tmp_path: Path,
) -> None:
    """The cached path's setting, taken from the stream's head: a character that only the
    last paragraph holds is learnt only when the budget reaches it, and each budget is its own
    cache entry."""
    path = _write_paragraphs(tmp_path / "train.txt", "Paragraph", 60)
    path.write_text(path.read_text() + "\n\nlast: ø")
    learnt = {}
    for budget in (500, path.stat().st_size):
        cfg = _cfg(
            str(path),
            streaming=True,
            tokenizer="char",
            cache_dir=str(tmp_path / "cache"),
            stream_val_examples=5,
            tokenizer_sample_bytes=budget,
        )
        datamodule = LMDataModule(cfg, "decoder", MAX_SEQ_LEN)
        datamodule.prepare_data()
        learnt[budget] = datamodule.tokenizer.token_to_id("ø") is not None
        assert datamodule.tokenizer.token_to_id("P") is not None  # the head's, always
    assert list(learnt.values()) == [False, True]
    assert len(list((tmp_path / "cache" / "tokenizers").iterdir())) == 2


def test_stream_tokenizer_cache_key_does_not_change() -> None:
    # Pinned since data.tokenizer_sample_bytes replaced its example count (issue 26).
    assert stream_tokenizer_key(DataConfig(**WIKITEXT)) == "bb2263632b5f0b45"


def test_stream_ending_before_the_first_batch_is_one_line(
    corpus: dict[str, Path], tmp_path: Path
) -> None:
    short = _write_paragraphs(tmp_path / "short.txt", "Short", 21)  # 20 held out
    proc = train_py(
        *tiny_streaming_args(short, corpus, tmp_path / "run"),
        f"hydra.run.dir={tmp_path / 'run'}",
        cwd=tmp_path,
    )
    assert proc.returncode == 1, proc.stderr[-2000:]
    lines = [line for line in proc.stderr.splitlines() if line.startswith("tinylm:")]
    assert len(lines) == 1 and "ends before the first training batch" in lines[0], proc.stderr
    assert "data.stream_val_examples=20" in lines[0]
    assert "Traceback" not in proc.stderr


def test_whole_file_evaluation_does_not_stream(corpus: dict[str, Path]) -> None:
    cfg = _cfg(str(corpus["train"]), streaming=True, tokenizer=str(corpus["tokenizer"]))
    with pytest.raises(ValueError, match="add data.streaming=false"):
        LMDataModule(cfg, "decoder", MAX_SEQ_LEN, whole=True).prepare_data()


def test_train_py_streams_a_file(corpus: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "run"
    proc = train_py(
        *tiny_streaming_args(corpus["train"], corpus, out, "trainer.max_steps=3"),
        f"hydra.run.dir={out}",
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["status"] == "completed" and metrics["step"] == 3
    assert metrics["val_loss"] > 0 and metrics["val_bpc"] > 0
    assert (out / "checkpoints" / "last.ckpt").is_file()
    # mode=eval scores the run's held-out validation, rebuilt from the stream.
    proc = train_py(*TINY, "mode=eval", f"ckpt_path={out}", f"hydra.run.dir={out}", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (record,) = [json.loads(line) for line in (out / "eval.jsonl").read_text().splitlines()]
    assert record["split"] == "validation" and record["loss"] > 0 and record["bpc"] > 0
