"""The data module: packed decoder blocks, MLM masking and encoder batches, the cache,
resumable loading."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import lightning as L
import numpy as np
import pytest
import torch
from lightning.pytorch.callbacks import ModelCheckpoint

import data.datamodule
import data.tokenize
import data.tokenizer
from data.collate import IGNORE_INDEX, MLMCollator
from data.datamodule import LMDataModule
from data.sampler import ResumableDataLoader, ResumableSampler
from data.tokenizer import SpecialTokens
from tests.corpora import load_corpus, ready, small_cfg

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
    assert dm.tokenizer.token_to_id("[MASK]") == dm.prepared.specials.mask_id
    for batch in dm.train_dataloader():
        ids, mask = batch["input_ids"], batch["attention_mask"]
        assert set(batch) == {"input_ids", "attention_mask", "labels"}
        assert ids.shape[1] <= 12 and ids.shape[1] % 4 == 0
        assert (ids[:, 0] == dm.prepared.specials.cls_id).all()
        last = mask.sum(1) - 1
        assert (ids[torch.arange(len(ids)), last] == dm.prepared.specials.sep_id).all()


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
    path = Path(cfg.path["train"])
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


def test_unknown_architecture_is_rejected(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"arch='gpt'.*\['decoder', 'encoder'\]"):
        LMDataModule(small_cfg(tmp_path), arch="gpt", max_seq_len=16)


def test_streaming_without_its_feature_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(data.datamodule, "data_stream", lambda: None)  # features/streaming gone
    cfg = dataclasses.replace(small_cfg(tmp_path), streaming=True)
    with pytest.raises(ValueError, match=r"^data.streaming=true needs the streaming feature"):
        LMDataModule(cfg, arch="decoder", max_seq_len=16)


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
