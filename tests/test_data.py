"""The data pipeline: sources, tokenizers, caching, packing, MLM masking, resumable loading."""

from __future__ import annotations

import dataclasses
import json
import random
import socket
from pathlib import Path

import datasets
import lightning as L
import numpy as np
import pandas as pd
import pytest
import torch
from hydra import compose, initialize_config_dir
from lightning.pytorch.callbacks import ModelCheckpoint
from omegaconf import OmegaConf
from tokenizers import Tokenizer, decoders, models, pre_tokenizers

import data.tokenize
import data.tokenizer
from data.collate import IGNORE_INDEX, MLMCollator
from data.config import DataConfig
from data.corpus import Corpus, split_units
from data.datamodule import LMDataModule
from data.sampler import ResumableDataLoader, ResumableSampler
from data.sources import builtin_documents
from data.tokenizer import (
    EOS_TOKEN,
    SpecialTokens,
    load_tokenizer,
    save_tokenizer,
    special_tokens_of,
    tokenizer_from_json,
    train_tokenizer,
)

CONF_DATA = Path(__file__).resolve().parents[1] / "conf" / "data"
WORDS = [
    "the",
    "a",
    "cat",
    "dog",
    "sat",
    "on",
    "mat",
    "ran",
    "far",
    "away",
    "quickly",
    "slowly",
    "big",
    "small",
    "red",
    "green",
]


def make_paragraphs(n: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    return [
        f"Paragraph {i}: " + " ".join(rng.choice(WORDS) for _ in range(rng.randint(5, 30))) + "."
        for i in range(n)
    ]


def write_source(directory: Path, fmt: str, paragraphs: list[str], column: str) -> Path:
    """One file of `fmt` holding `paragraphs` (txt: separated by blank lines)."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"corpus.{fmt}"
    frame = pd.DataFrame({column: paragraphs, "other": range(len(paragraphs))})
    if fmt == "txt":
        path.write_text("\n\n".join(paragraphs) + "\n")
    elif fmt == "jsonl":
        frame.to_json(path, orient="records", lines=True)
    elif fmt == "json":
        path.write_text(json.dumps(frame.to_dict(orient="records")))
    elif fmt == "csv":
        frame.to_csv(path, index=False)
    else:
        frame.to_parquet(path)
    return path


def load_corpus(cfg: DataConfig, whole: bool = False) -> dict[str, list[str]]:
    """Every split's examples, in order, read from the source."""
    corpus = Corpus(cfg, whole)
    texts: dict[str, list[str]] = {split: [] for split in corpus.splits}
    for split, batch in corpus.batches():
        texts[split] += batch
    return texts


def all_texts(corpus: dict[str, list[str]]) -> list[str]:
    return [text for texts in corpus.values() for text in texts]


def small_cfg(tmp_path: Path, **overrides) -> DataConfig:
    """A small txt corpus (60 paragraphs) with a small tokenizer, cached under tmp_path."""
    path = tmp_path / "src" / "corpus.txt"
    if not path.exists():
        write_source(path.parent, "txt", make_paragraphs(60), "text")
    settings = {
        "source": "files",
        "path": str(path),
        "vocab_size": 300,
        "batch_size": 4,
        "cache_dir": str(tmp_path / "cache"),
        "val_fraction": 0.1,
        "test_fraction": 0.1,
    }
    return DataConfig(**{**settings, **overrides})


def ready(cfg: DataConfig, arch: str = "decoder", max_seq_len: int = 16, **kw) -> LMDataModule:
    dm = LMDataModule(cfg, arch=arch, max_seq_len=max_seq_len, seed=7, **kw)
    dm.prepare_data()
    dm.setup("fit")
    return dm


# ----------------------------------------------------------------------------- sources


@pytest.mark.parametrize("fmt", ["txt", "jsonl", "json", "csv", "parquet"])
def test_each_file_format_loads_every_example_once(tmp_path: Path, fmt: str) -> None:
    paragraphs = make_paragraphs(40)
    column = "text" if fmt == "txt" else "body"  # a configurable column, not just "text"
    path = write_source(tmp_path / "src", fmt, paragraphs, column)
    cfg = DataConfig(source="files", path=str(path), text_column=column, cache_dir=str(tmp_path))
    corpus = load_corpus(cfg)
    assert set(corpus) == {"train", "validation", "test"}
    assert all(len(corpus[s]) > 0 for s in corpus)
    assert sorted(all_texts(corpus)) == sorted(paragraphs)


@pytest.mark.parametrize("pattern", ["dir", "glob"])
def test_directory_and_glob_read_all_files(tmp_path: Path, pattern: str) -> None:
    first, second = make_paragraphs(20, seed=1), make_paragraphs(20, seed=2)
    write_source(tmp_path / "src" / "a", "jsonl", first, "text")
    write_source(tmp_path / "src" / "b", "jsonl", second, "text")
    (tmp_path / "src" / "notes.md").write_text("not data")  # ignored: not a data file type
    path = tmp_path / "src" if pattern == "dir" else tmp_path / "src" / "*" / "*.jsonl"
    corpus = load_corpus(DataConfig(source="files", path=str(path), cache_dir=str(tmp_path)))
    assert sorted(all_texts(corpus)) == sorted(first + second)


def test_example_unit_line_cuts_lines(tmp_path: Path) -> None:
    path = tmp_path / "poem.txt"
    lines = [f"line {i} of the poem" for i in range(30)]
    path.write_text("\n".join(lines[:15]) + "\n\n" + "\n".join(lines[15:]) + "\n")
    for unit, expected in [("line", sorted(lines)), ("paragraph", None)]:
        cfg = DataConfig(source="files", path=str(path), example_unit=unit, cache_dir=str(tmp_path))
        if expected is None:  # two paragraphs cannot be carved into three splits
            with pytest.raises(ValueError, match="too few"):
                load_corpus(cfg)
        else:
            assert sorted(all_texts(load_corpus(cfg))) == expected


def test_builtin_corpus_loads_offline_and_splits_deterministically(tmp_path: Path) -> None:
    corpus = load_corpus(DataConfig(cache_dir=str(tmp_path / "one")))
    again = load_corpus(DataConfig(cache_dir=str(tmp_path / "two")))
    assert Corpus(DataConfig(cache_dir="one")).key == Corpus(DataConfig(cache_dir="two")).key
    assert corpus == again
    texts = all_texts(corpus)
    paragraphs = split_units({"text": builtin_documents()}, "paragraph")["text"]
    assert sorted(texts) == sorted(paragraphs) and sum(map(len, texts)) > 400_000
    assert len(corpus["validation"]) == round(len(texts) * 0.05)
    for split_texts in corpus.values():  # each split keeps the source's order
        remaining = iter(paragraphs)
        assert all(text in remaining for text in split_texts)
    other = load_corpus(DataConfig(cache_dir=str(tmp_path / "three"), split_seed=99))
    assert other["validation"] != corpus["validation"]


@pytest.mark.parametrize("switch", ["env", "library"])
def test_hub_offline_fails_fast_naming_dataset_and_local_route(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, switch: str
) -> None:
    if switch == "env":  # set after import: datasets itself would not notice
        monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
        monkeypatch.setenv("HF_HUB_OFFLINE", "1")
        monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", False)
    else:  # set before import: datasets tries its cache, and fails
        monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True)
    cfg = DataConfig(**{**_composed_data("wikitext2"), "cache_dir": str(tmp_path)})
    # Fast means before any connection is tried (no timeouts, no retries): every one is
    # recorded and refused.
    attempts: list[object] = []

    def no_network(sock: socket.socket, address: object) -> None:
        attempts.append(address)
        raise OSError("no network in this test")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    monkeypatch.setattr(socket.socket, "connect_ex", no_network)
    with pytest.raises(ConnectionError, match=r"Salesforce/wikitext.*data=text data\.path="):
        load_corpus(cfg)
    assert attempts == []


def test_hub_tokenizer_name_offline_fails_fast(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ConnectionError, match="openai-community/gpt2.*tokenizer.json"):
        load_tokenizer("openai-community/gpt2")


def _composed_data(name: str) -> dict:
    """The `data` group as Hydra composes it (the other data configs extend builtin.yaml)."""
    with initialize_config_dir(config_dir=str(CONF_DATA.parent), version_base="1.3"):
        cfg = compose(config_name="config", overrides=[f"data={name}"])
    return OmegaConf.to_container(cfg.data, resolve=True)


def test_data_yamls_list_exactly_the_config_fields() -> None:
    fields = {f.name for f in dataclasses.fields(DataConfig)}
    files = sorted(CONF_DATA.glob("*.yaml"))
    assert {f.stem for f in files} >= {"builtin", "text", "wikitext2", "tinystories"}
    for file in files:
        settings = _composed_data(file.stem)
        assert set(settings) == fields, file.name
        if settings["source"] == "files":
            settings["path"] = "corpus.txt"
        DataConfig(**settings)


# ----------------------------------------------------------------------------- tokenizers

SAMPLE = "The cat sat on the mat.\n    Indented code: x = f(y, z)  # note\nEnd!"


@pytest.fixture(scope="module")
def trained() -> dict[str, Tokenizer]:
    texts = [SAMPLE, *make_paragraphs(200)]
    return {kind: train_tokenizer(kind, [texts], 400) for kind in ("bpe", "wordpiece", "char")}


def test_bpe_round_trips_any_text(trained: dict[str, Tokenizer]) -> None:
    bpe = trained["bpe"]
    for text in [SAMPLE, "naïve café — 😀 unseen\r\n\ttabs  and  spaces "]:
        assert bpe.decode(bpe.encode(text).ids) == text


def test_char_round_trips_seen_characters_and_marks_unseen(trained: dict[str, Tokenizer]) -> None:
    char = trained["char"]
    assert char.decode(char.encode(SAMPLE).ids) == SAMPLE
    assert len(char.encode(SAMPLE).ids) == len(SAMPLE)  # one token per character
    assert char.encode("cat€").ids[-1] == char.token_to_id("[UNK]")


def test_wordpiece_round_trips_up_to_whitespace(trained: dict[str, Tokenizer]) -> None:
    wordpiece = trained["wordpiece"]
    decoded = wordpiece.decode(wordpiece.encode(SAMPLE).ids)
    assert "".join(decoded.split()) == "".join(SAMPLE.split())
    assert decoded != SAMPLE  # lossy in spacing, as documented


@pytest.mark.parametrize("kind", ["bpe", "wordpiece", "char"])
def test_every_kind_has_the_tokens_both_architectures_need(
    trained: dict[str, Tokenizer], kind: str
) -> None:
    specials = special_tokens_of(trained[kind])
    expected_eos = "[SEP]" if kind == "wordpiece" else EOS_TOKEN
    assert (specials.pad, specials.eos, specials.cls, specials.sep, specials.mask) == (
        "[PAD]",
        expected_eos,
        "[CLS]",
        "[SEP]",
        "[MASK]",
    )
    ids = [specials.pad_id, specials.cls_id, specials.sep_id, specials.mask_id]
    assert len(set(ids)) == 4 and set(ids) <= set(specials.all_ids)


def test_tokenizer_json_save_and_rebuild(trained: dict[str, Tokenizer], tmp_path: Path) -> None:
    bpe = trained["bpe"]
    rebuilt = tokenizer_from_json(bpe.to_str())
    assert rebuilt.encode(SAMPLE).ids == bpe.encode(SAMPLE).ids
    path = save_tokenizer(bpe, tmp_path / "run")
    assert path == tmp_path / "run" / "tokenizer.json"
    assert load_tokenizer(str(path)).encode(SAMPLE).ids == bpe.encode(SAMPLE).ids
    assert load_tokenizer(str(tmp_path / "run")).get_vocab_size() == bpe.get_vocab_size()


def test_loaded_tokenizer_gets_missing_roles(tmp_path: Path) -> None:
    # GPT-2 style: a byte-level BPE with <|endoftext|> only.
    bare = Tokenizer(models.BPE())
    bare.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bare.decoder = decoders.ByteLevel()
    bare.add_special_tokens([EOS_TOKEN])
    with pytest.raises(ValueError, match="no pad token"):
        tokenizer_from_json(bare.to_str())
    bare.save(str(tmp_path / "tokenizer.json"))
    loaded = load_tokenizer(str(tmp_path / "tokenizer.json"))
    specials = special_tokens_of(loaded)
    assert specials.eos_id == bare.token_to_id(EOS_TOKEN)
    assert {specials.pad, specials.mask, specials.cls} == {"[PAD]", "[MASK]", "[CLS]"}


# ----------------------------------------------------------------------------- packing


def test_decoder_blocks_cover_every_token_once_and_shift_labels(tmp_path: Path) -> None:
    dm = ready(small_cfg(tmp_path), max_seq_len=16)
    tokenizer, eos = dm.tokenizer, dm.eos_token_id
    expected = []
    for text in load_corpus(dm.cfg)["train"]:
        expected += tokenizer.encode(text).ids + [eos]
    blocks = dm.dataset("train")
    assert len(blocks) == len(expected) // 17 and len(blocks) > 10
    loaded = [row for batch in dm.train_dataloader() for row in _blocks_of(batch)]
    assert len(loaded) == len(blocks)
    # Shuffled order, but the loader yields each block once: sort them back by content.
    in_order = [list(blocks[i]) for i in range(len(blocks))]
    assert sorted(loaded) == sorted(in_order)
    assert [t for block in in_order for t in block] == expected[: len(blocks) * 17]
    batch = next(iter(dm.train_dataloader()))
    assert batch["input_ids"].shape == (4, 16) and batch["input_ids"].dtype == torch.long
    assert torch.equal(batch["labels"][:, :-1], batch["input_ids"][:, 1:])


def _blocks_of(batch: dict[str, torch.Tensor]) -> list[list[int]]:
    """Rebuild the T + 1 token blocks from shifted inputs and labels."""
    full = torch.cat([batch["input_ids"], batch["labels"][:, -1:]], dim=1)
    return full.tolist()


# ----------------------------------------------------------------------------- MLM

VOCAB = 1000
SPECIALS = SpecialTokens(
    pad="[PAD]", eos="[SEP]", cls="[CLS]", sep="[SEP]", mask="[MASK]",
    pad_id=0, eos_id=3, cls_id=2, sep_id=3, mask_id=4, all_ids=(0, 1, 2, 3, 4),
)  # fmt: skip


def synthetic_examples(n: int, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    lengths = rng.integers(1, 62, size=n)
    return [np.array([2, *rng.integers(5, VOCAB, size=k), 3]) for k in lengths]


def test_mlm_masking_statistics() -> None:
    collator = MLMCollator(SPECIALS, VOCAB, max_seq_len=64, seed=11)
    examples = synthetic_examples(1600, seed=0)
    counts = dict.fromkeys(["real", "selected", "mask", "random", "same"], 0)
    for start in range(0, len(examples), 32):
        chunk = examples[start : start + 32]
        batch = collator(chunk)
        original = torch.full_like(batch["input_ids"], SPECIALS.pad_id)
        for row, example in enumerate(chunk):
            original[row, : len(example)] = torch.from_numpy(example)
        labels, masked = batch["labels"], batch["input_ids"]
        selected = labels != IGNORE_INDEX
        special = torch.isin(original, torch.tensor(SPECIALS.all_ids))
        assert not (selected & special).any()  # [CLS], [SEP], [PAD] never selected
        assert torch.equal(labels[selected], original[selected])
        assert torch.equal(masked[~selected], original[~selected])  # only selected change
        assert not torch.isin(masked[selected & (masked != 4)], torch.tensor([0, 1, 2, 3])).any()
        counts["real"] += int((~special).sum())
        counts["selected"] += int(selected.sum())
        counts["mask"] += int((selected & (masked == SPECIALS.mask_id)).sum())
        counts["same"] += int((selected & (masked == original)).sum())
        counts["random"] += int((selected & (masked != original) & (masked != 4)).sum())
    assert counts["real"] >= 50_000
    assert abs(counts["selected"] / counts["real"] - 0.15) < 0.01
    # A random replacement equals the original 1 time in ~995: within the tolerance.
    for kind, share in [("mask", 0.8), ("random", 0.1), ("same", 0.1)]:
        assert abs(counts[kind] / counts["selected"] - share) < 0.02, kind


def test_mlm_masking_is_seeded_and_reproducible() -> None:
    examples = synthetic_examples(32, seed=1)
    first = MLMCollator(SPECIALS, VOCAB, max_seq_len=64, seed=5)(examples)
    again = MLMCollator(SPECIALS, VOCAB, max_seq_len=64, seed=5)(examples)
    other = MLMCollator(SPECIALS, VOCAB, max_seq_len=64, seed=6)(examples)
    assert all(torch.equal(first[k], again[k]) for k in first)
    assert not torch.equal(first["labels"], other["labels"])


@pytest.mark.parametrize(
    ("lengths", "max_seq_len", "padded"),
    [([5, 9, 3], 64, 16), ([8, 2], 64, 8), ([17], 64, 24), ([11, 4], 12, 12)],
)
def test_padding_to_multiple_of_8_capped(lengths: list[int], max_seq_len: int, padded: int):
    examples = [np.array([2, *range(10, 10 + k - 2), 3]) for k in lengths]
    batch = MLMCollator(SPECIALS, VOCAB, max_seq_len=max_seq_len, seed=0)(examples)
    assert batch["input_ids"].shape == batch["attention_mask"].shape == (len(lengths), padded)
    for row, k in enumerate(lengths):
        assert batch["attention_mask"][row].tolist() == [1] * k + [0] * (padded - k)
    padding = batch["attention_mask"] == 0
    assert (batch["input_ids"][padding] == SPECIALS.pad_id).all()
    assert (batch["labels"][padding] == IGNORE_INDEX).all()


def test_encoder_batches_from_the_datamodule(tmp_path: Path) -> None:
    dm = ready(small_cfg(tmp_path), arch="encoder", max_seq_len=12)
    assert dm.tokenizer.token_to_id("[MASK]") == dm.mask_token_id
    for batch in dm.train_dataloader():
        ids, mask = batch["input_ids"], batch["attention_mask"]
        assert set(batch) == {"input_ids", "attention_mask", "labels"}
        assert ids.shape[1] <= 12 and ids.shape[1] % 4 == 0
        assert (ids[:, 0] == dm.cls_token_id).all()
        last = mask.sum(1) - 1
        assert (ids[torch.arange(len(ids)), last] == dm.sep_token_id).all()


# ----------------------------------------------------------------------------- cache


def test_second_preparation_does_no_work_and_changes_invalidate(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = {"build": 0, "train": 0}
    build, train = data.tokenize.build_store, data.tokenizer.train_tokenizer

    def counting_build(*args, **kwargs):
        calls["build"] += 1
        return build(*args, **kwargs)

    def counting_train(*args, **kwargs):
        calls["train"] += 1
        return train(*args, **kwargs)

    monkeypatch.setattr(data.tokenize, "build_store", counting_build)
    monkeypatch.setattr(data.tokenizer, "train_tokenizer", counting_train)
    monkeypatch.setenv("TINYLM_CACHE", str(tmp_path / "env-cache"))
    cfg = dataclasses.replace(small_cfg(tmp_path), cache_dir=None)  # the env var decides

    def files() -> set[Path]:
        return {p for p in (tmp_path / "env-cache").rglob("*") if p.is_file()}

    first = ready(cfg)
    assert calls == {"build": 1, "train": 1}  # one token store, one tokenizer
    before = files()
    second = ready(cfg)
    assert calls == {"build": 1, "train": 1}
    assert files() == before
    assert second.tokenizer.to_str() == first.tokenizer.to_str()
    assert second.chars_per_token == first.chars_per_token

    ready(dataclasses.replace(cfg, vocab_size=320))  # another tokenizer: retrain, retokenize
    assert calls == {"build": 2, "train": 2}
    path = Path(cfg.path or "")
    path.write_text(path.read_text() + "\n\nOne more paragraph about a cat.\n")
    ready(cfg)  # another corpus: new split, new tokenizer, new tokens
    assert calls == {"build": 3, "train": 3}


def test_checkpoint_tokenizer_json_overrides_training(tmp_path: Path) -> None:
    trained = ready(small_cfg(tmp_path))
    other = ready(small_cfg(tmp_path, tokenizer="char"), tokenizer_json=trained.tokenizer.to_str())
    assert other.tokenizer.to_str() == trained.tokenizer.to_str()
    assert other.vocab_size == trained.vocab_size


def test_chars_per_token_per_split(tmp_path: Path) -> None:
    char = ready(small_cfg(tmp_path, tokenizer="char"))
    assert char.chars_per_token == {"train": 1.0, "validation": 1.0, "test": 1.0}
    bpe = ready(small_cfg(tmp_path))
    texts = load_corpus(bpe.cfg)["validation"]
    tokens = sum(len(bpe.tokenizer.encode(t).ids) for t in texts)
    expected = (sum(map(len, texts)) + len(texts)) / (tokens + len(texts))
    assert bpe.chars_per_token["validation"] == pytest.approx(expected)
    assert bpe.chars_per_token["validation"] > 1.5


def test_properties_need_preparation(tmp_path: Path) -> None:
    dm = LMDataModule(small_cfg(tmp_path), arch="decoder", max_seq_len=16)
    with pytest.raises(RuntimeError, match="prepare_data"):
        _ = dm.vocab_size


# ----------------------------------------------------------------------------- resuming


class Numbers(torch.utils.data.Dataset):
    def __init__(self, n: int) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, index: int) -> int:
        return index


def numbers_loader(n: int, seed: int, num_workers: int = 0) -> ResumableDataLoader:
    dataset = Numbers(n)
    return ResumableDataLoader(
        dataset, sampler=ResumableSampler(dataset, seed=seed), batch_size=4,
        num_workers=num_workers, persistent_workers=num_workers > 0,
    )  # fmt: skip


@pytest.mark.parametrize("num_workers", [0, 2])
def test_loader_resumes_mid_epoch(num_workers: int) -> None:
    reference = numbers_loader(50, seed=3)
    reference.sampler.set_epoch(1)
    uninterrupted = [b.tolist() for b in reference]
    assert sorted(sum(uninterrupted, [])) == list(range(50))

    loader = numbers_loader(50, seed=3, num_workers=num_workers)
    loader.sampler.set_epoch(1)
    iterator = iter(loader)
    seen = [next(iterator).tolist() for _ in range(5)]
    state = loader.state_dict()  # workers have prefetched further: must not count
    assert state["samples_seen"] == 20 and state["epoch"] == 1
    del iterator

    fresh = numbers_loader(50, seed=999, num_workers=num_workers)  # the state restores the seed
    fresh.load_state_dict(state)
    fresh.sampler.set_epoch(1)  # what Lightning does at the epoch start
    rest = [b.tolist() for b in fresh]
    assert seen + rest == uninterrupted
    fresh.sampler.set_epoch(2)  # the next epoch starts from its beginning
    assert len([b for b in fresh]) == len(uninterrupted)


def test_loader_state_rejects_another_dataset() -> None:
    with pytest.raises(ValueError, match="samples per rank"):
        numbers_loader(40, seed=0).load_state_dict(numbers_loader(50, seed=0).state_dict())


class Recorder(L.LightningModule):
    """Records the batches it trains on; learns nothing."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.zeros(1))
        self.seen: list[list[int]] = []

    def training_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> torch.Tensor:
        self.seen += batch["input_ids"][:, 0].tolist()
        return self.weight.sum() * 0.0

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.1)


def _fit(dm: LMDataModule, max_steps: int, root: Path, ckpt_path: str | None = None) -> Recorder:
    model = Recorder()
    trainer = L.Trainer(
        max_steps=max_steps, accelerator="cpu", logger=False, enable_progress_bar=False,
        enable_model_summary=False, limit_val_batches=0, default_root_dir=root,
        callbacks=[ModelCheckpoint(dirpath=root, every_n_train_steps=7, save_top_k=-1)],
    )  # fmt: skip
    trainer.fit(model, datamodule=dm, ckpt_path=ckpt_path, weights_only=True)
    return model


def test_lightning_resume_continues_at_the_same_batch(tmp_path: Path) -> None:
    cfg = small_cfg(tmp_path, batch_size=16)
    dm = ready(cfg, max_seq_len=16)
    per_epoch = len(dm.train_dataloader())
    assert 7 < per_epoch < 15  # the checkpoint at step 7 is mid-epoch; step 18 is in epoch 2
    full = _fit(dm, 18, tmp_path / "full").seen
    first = _fit(ready(cfg, max_seq_len=16), 7, tmp_path / "part").seen
    ckpt = next((tmp_path / "part").glob("*step=7.ckpt"))
    rest = _fit(ready(cfg, max_seq_len=16), 18, tmp_path / "rest", str(ckpt)).seen
    epochs, steps = divmod(18, per_epoch)
    assert len(full) == epochs * len(dm.dataset("train")) + steps * 16
    assert first + rest == full


# ----------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    ("settings", "error", "message"),
    [
        ({"batch_size": 0}, ValueError, r"data.batch_size=0 must be an integer >= 1"),
        ({"source": "web"}, ValueError, r"data.source='web'.*\['builtin', 'files', 'hub'\]"),
        ({"tokenizer": "bpee"}, ValueError, r"data.tokenizer='bpee'.*\['bpe', 'wordpiece', 'char'"),
        ({"tokenizer": "/no/such/tokenizer.json"}, FileNotFoundError, r"/no/such/tokenizer.json"),
        ({"source": "files"}, ValueError, r"data.path is required"),
        # A config file's typo gets a did-you-mean from parse_settings (test_reliability).
        ({"vocab_szie": 10}, TypeError, r"unexpected keyword argument 'vocab_szie'"),
        ({"example_unit": "word"}, ValueError, r"example_unit='word'.*'paragraph'"),
        ({"val_fraction": 0.7}, ValueError, r"val_fraction=0.7"),
    ],
)
def test_bad_config_is_rejected_on_creation(settings: dict, error: type, message: str) -> None:
    with pytest.raises(error, match=message):
        DataConfig(**settings)


def test_bad_files_are_rejected_before_any_work(tmp_path: Path) -> None:
    def prepare(**settings) -> None:
        ready(DataConfig(source="files", cache_dir=str(tmp_path / "cache"), **settings))

    with pytest.raises(FileNotFoundError, match="no such file"):
        prepare(path=str(tmp_path / "missing.txt"))
    with pytest.raises(FileNotFoundError, match="matches no data files"):
        prepare(path=str(tmp_path / "*.parquet"))
    (tmp_path / "empty.txt").write_text("\n  \n\n")
    with pytest.raises(ValueError, match="has no text"):
        prepare(path=str(tmp_path / "empty.txt"))
    table = write_source(tmp_path / "t", "csv", make_paragraphs(10), "body")
    with pytest.raises(ValueError, match=r"text_column='text'.*\['body', 'other'\]"):
        prepare(path=str(table))
    (tmp_path / "notes.md").write_text("# notes")
    with pytest.raises(ValueError, match="unsupported file type"):
        prepare(path=str(tmp_path / "notes.md"))
    assert not (tmp_path / "cache" / "tokenizers").exists()  # nothing was trained


def test_unknown_architecture_is_rejected(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"arch='gpt'.*\['decoder', 'encoder'\]"):
        LMDataModule(small_cfg(tmp_path), arch="gpt", max_seq_len=16)


def test_overfit_batches_gets_a_plain_sequential_loader(tmp_path: Path) -> None:
    dm = ready(small_cfg(tmp_path))
    model = Recorder()
    trainer = L.Trainer(
        max_steps=4, overfit_batches=2, accelerator="cpu", logger=False,
        enable_progress_bar=False, enable_checkpointing=False, limit_val_batches=0,
    )  # fmt: skip
    trainer.fit(model, datamodule=dm)
    first_two = [int(dm.dataset("train")[i][0]) for i in range(8)]  # batch_size 4
    assert model.seen == first_two + first_two  # the same two batches, in order, twice


def test_a_malformed_file_is_one_error_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text('{"text": "fine"}\n{"text": broken\n')
    cfg = DataConfig(source="files", path=str(path), cache_dir=str(tmp_path / "cache"))
    with pytest.raises(ValueError, match=r"cannot read data\.path='?.*bad\.jsonl'?: .*JSON"):
        load_corpus(cfg)
