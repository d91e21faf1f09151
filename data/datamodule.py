"""`LMDataModule`: corpus -> tokenizer -> token store -> decoder or encoder loaders."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import lightning as L
from tokenizers import Tokenizer
from torch.utils.data import DataLoader, Dataset

from conf.features import data_stream
from data.cache import prepare_lock
from data.collate import DocumentCollator, MLMCollator, collate_blocks, collate_windows
from data.config import TOKENIZER_KINDS, DataConfig
from data.corpus import Corpus
from data.examples import EncoderExamples, PackedBlocks, StridedWindows, check_max_seq_len
from data.sampler import ResumableDataLoader, ResumableSampler
from data.store import SplitStore
from data.tokenize import token_store
from data.tokenizer import (
    SpecialTokens,
    cached_trained_tokenizer,
    load_tokenizer,
    special_tokens_of,
    tokenizer_from_json,
)

# The tokenizer each architecture trains when data.tokenizer is null; its keys are the
# architectures the data module serves (CLM blocks for the decoder, MLM rows for the encoder).
DEFAULT_TOKENIZER = {"decoder": "bpe", "encoder": "wordpiece"}


@dataclass(frozen=True)
class Prepared:
    """What `prepare` produces: everything else is cheap to derive from it."""

    stores: dict[str, SplitStore]
    tokenizer: Tokenizer
    specials: SpecialTokens


def prepare(
    cfg: DataConfig, arch: str, tokenizer_json: str | None = None, whole: bool = False
) -> Prepared:
    """The tokenizer and the token store, each read from the cache when it is there, under the
    cache's lock (ARCHITECTURE.md, "Data"). `tokenizer_json` (a checkpoint's) takes precedence
    over `cfg.tokenizer`; `whole`: the source's text read whole as `cfg.split` (`Corpus`)."""
    with prepare_lock(cfg.cache_dir) as root:
        corpus = Corpus(cfg, whole)
        spec = cfg.tokenizer or DEFAULT_TOKENIZER[arch]
        if tokenizer_json is not None:
            tokenizer = tokenizer_from_json(tokenizer_json)
        elif spec in TOKENIZER_KINDS:
            tokenizer = cached_trained_tokenizer(
                spec,
                corpus.tokenizer_texts(),
                cfg.vocab_size,
                corpus.key,
                root,
                corpus.tokenizer_sample_key,
            )
        else:
            tokenizer = load_tokenizer(spec)
        return Prepared(
            token_store(corpus, tokenizer, root), tokenizer, special_tokens_of(tokenizer)
        )


class LMDataModule(L.LightningDataModule):
    """Train / validation / test loaders for a decoder (CLM) or an encoder (MLM).

    Decoder batches: {"input_ids", "labels"} [B, max_seq_len], documents joined by EOS and
    packed without padding (with `eval_stride`, `StridedWindows` whose labels are
    IGNORE_INDEX where a window gives context only). Encoder batches: {"input_ids",
    "attention_mask", "labels"}, [CLS] example [SEP] padded per batch and MLM-masked. After
    `prepare_data(); setup()`, the tokenizer and its ids (vocab_size, pad/eos_token_id,
    `prepared.specials`) and per-split `chars_per_token` and `bytes_per_token` are
    available for the model config and the bits-per-character and per-byte metrics.
    """

    def __init__(
        self,
        cfg: DataConfig,
        arch: str,
        max_seq_len: int,
        seed: int = 0,
        tokenizer_json: str | None = None,
        whole: bool = False,
        eval_stride: int | None = None,
    ) -> None:
        super().__init__()
        if arch not in DEFAULT_TOKENIZER:
            raise ValueError(f"arch={arch!r} is not valid; choose one of {list(DEFAULT_TOKENIZER)}")
        if cfg.document_mask and arch == "encoder":
            raise ValueError(
                "data.document_mask=true is for decoders (packed blocks of several documents); "
                "an encoder example is one document already: drop data.document_mask or use "
                "model=gpt"
            )
        if cfg.streaming and data_stream() is None:
            raise ValueError(
                "data.streaming=true needs the streaming feature (features/streaming/), which "
                "this installation lacks: drop data.streaming=true to train from the token store"
            )
        check_max_seq_len(max_seq_len)
        self.cfg = cfg
        self.arch = arch
        self.max_seq_len = max_seq_len
        self.seed = seed
        self.tokenizer_json = tokenizer_json  # resume / eval: the checkpoint's tokenizer
        self.whole = whole
        self.eval_stride = eval_stride
        self._prepared: Prepared | None = None
        self._splits: dict[str, Dataset] = {}

    def prepare_data(self) -> None:
        # Lightning runs this on one process per node: the expensive work (tokenizer
        # training, tokenization) happens here and leaves its results in the cache.
        self._prepared = self._prepare()

    def setup(self, stage: str | None = None) -> None:
        if self._prepared is None:  # another rank prepared; everything is a cache hit now
            self._prepared = self._prepare()
        if not self._splits:
            self._splits = {split: self._examples(split) for split in self._prepared.stores}

    def _prepare(self) -> Prepared:
        if self.cfg.streaming:  # the evaluation splits only: training reads the stream
            stream = data_stream()
            return stream.prepare_stream(self.cfg, self.arch, self.tokenizer_json, self.whole)
        return prepare(self.cfg, self.arch, self.tokenizer_json, self.whole)

    def _examples(self, split: str) -> Dataset:
        store = self.prepared.stores[split]
        specials = self.prepared.specials
        if self.arch == "decoder":
            if self.eval_stride is not None:
                return StridedWindows(store.tokens, self.max_seq_len, self.eval_stride)
            return PackedBlocks(store.tokens, self.max_seq_len + 1)
        return EncoderExamples(
            store.tokens, store.starts, specials.cls_id, specials.sep_id, self.max_seq_len
        )

    @property
    def prepared(self) -> Prepared:
        if self._prepared is None:
            raise RuntimeError("call prepare_data() and setup() before using the data module")
        return self._prepared

    @property
    def tokenizer(self) -> Tokenizer:
        return self.prepared.tokenizer

    @property
    def vocab_size(self) -> int:
        return self.tokenizer.get_vocab_size(with_added_tokens=True)

    @property
    def pad_token_id(self) -> int:
        return self.prepared.specials.pad_id

    @property
    def eos_token_id(self) -> int:
        return self.prepared.specials.eos_id

    @property
    def chars_per_token(self) -> dict[str, float]:
        """Per split: characters of raw text per token (bpc = loss / ln 2 / this)."""
        return self._per_split(lambda store: store.chars_per_token)

    @property
    def bytes_per_token(self) -> dict[str, float]:
        """Per split: UTF-8 bytes of raw text per token (bpb = loss / ln 2 / this)."""
        return self._per_split(lambda store: store.bytes_per_token)

    def _per_split(self, ratio: Callable[[SplitStore], float]) -> dict[str, float]:
        ratios = {split: ratio(store) for split, store in self.prepared.stores.items()}
        if self.cfg.streaming:  # the stream is not counted: validation's ratio estimates it
            ratios["train"] = ratios["validation"]
        return ratios

    def train_dataloader(self) -> DataLoader:
        if self.cfg.streaming:
            collate = self._loader_options()["collate_fn"]
            return data_stream().stream_loader(
                self.cfg, self.tokenizer, self.arch, self.max_seq_len, collate
            )
        dataset = self.dataset("train")
        if self.trainer is not None and self.trainer.overfit_batches > 0:
            # Lightning rebuilds the loader around a sequential sampler: nothing to resume.
            return DataLoader(dataset, **self._loader_options())
        return ResumableDataLoader(
            dataset, sampler=ResumableSampler(dataset, seed=self.seed), **self._loader_options()
        )

    def val_dataloader(self) -> DataLoader:
        return DataLoader(self.dataset("validation"), **self._loader_options())

    def test_dataloader(self) -> DataLoader:
        return DataLoader(self.dataset("test"), **self._loader_options())

    def dataset(self, split: str) -> Dataset:
        """The split's examples: PackedBlocks or, with `eval_stride`, StridedWindows (decoder);
        EncoderExamples (encoder)."""
        if not self._splits:
            raise RuntimeError("call prepare_data() and setup() before asking for loaders")
        if split not in self._splits:  # a data.path mapping without that split
            raise ValueError(
                f"the corpus has no {split} split (its splits: {', '.join(self._splits)}); "
                "map a file to it in data.path or choose another data.split"
            )
        return self._splits[split]

    def _loader_options(self) -> dict:
        if self.arch == "decoder":
            collate = collate_blocks if self.eval_stride is None else collate_windows
            if self.cfg.document_mask:
                collate = DocumentCollator(collate, self.prepared.specials.eos_id)
        else:
            collate = MLMCollator(
                self.prepared.specials,
                self.vocab_size,
                self.max_seq_len,
                self.cfg.mlm_probability,
                self.seed,
            )
        workers = self.cfg.num_workers
        return {
            "batch_size": self.cfg.batch_size,
            "collate_fn": collate,
            "num_workers": workers,
            "persistent_workers": workers > 0,
        }


def prepared_datamodule(
    cfg: DataConfig,
    arch: str,
    max_seq_len: int,
    seed: int,
    stage: str,
    tokenizer_json: str | None = None,
    **options: Any,
) -> LMDataModule:
    """An ``LMDataModule`` after ``prepare_data`` and ``setup(stage)``: what a mode that runs
    outside ``Trainer.fit`` (or needs the tokenizer before it) works with. ``options``: the
    data module's evaluation options (``whole``, ``eval_stride``)."""
    datamodule = LMDataModule(
        cfg, arch, max_seq_len, seed=seed, tokenizer_json=tokenizer_json, **options
    )
    datamodule.prepare_data()
    datamodule.setup(stage)
    return datamodule
