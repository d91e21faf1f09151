"""Streaming data (`data.streaming=true`, README.md): the source read, tokenized and packed as
training goes. Decoder blocks are cut exactly as `PackedBlocks` cuts the joined stream;
evaluation splits are held in memory. The train stream is dealt out by
`split_dataset_by_node` over ranks x DataLoader workers (datasets' own per-worker split is
bypassed so that the roles can rotate on resume). Each batch travels with the stream position
just after it (`IterableDataset.state_dict()` at the start of the examples being cut, plus how
many of their tokens or rows were used); `StreamLoader` keeps every worker's position, which
worker is next and the epoch, gathered over ranks under DDP, for Lightning's checkpoint.
"""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import fsspec.asyn
import numpy as np
import torch.distributed as dist
from datasets import IterableDataset
from datasets.distributed import split_dataset_by_node
from tokenizers import Tokenizer
from torch.utils.data import DataLoader, get_worker_info
from torch.utils.data import IterableDataset as TorchIterableDataset

from common.files import stable_hash
from common.ranks import rank_and_world_size
from data.cache import prepare_lock
from data.config import EVAL_SPLITS, TOKENIZER_KINDS, DataConfig
from data.corpus import split_units
from data.datamodule import DEFAULT_TOKENIZER, Prepared
from data.examples import EncoderExamples
from data.sources import source_of
from data.store import SplitStore, join_documents, text_bytes, text_chars
from data.tokenize import encode_documents
from data.tokenizer import (
    SpecialTokens,
    cached_trained_tokenizer,
    load_tokenizer,
    special_tokens_of,
    tokenizer_from_json,
)
from data.tokenizer_sample import head

# Examples read and tokenized at once: big enough for the Rust tokenizer's batching, small
# enough that a resume re-tokenizes little.
EXAMPLES_PER_READ = 64
# Batches Lightning draws from a loader without a length before training on the first
# (`lightning.pytorch.loops.fetchers._PrefetchDataFetcher`): the loader's state must be that of
# the batch trained last, not of the batch fetched last.
LIGHTNING_PREFETCH = 1


@dataclass(frozen=True)
class StreamSplits:
    """The source as streams of example units ({"text"}), read only when iterated.

    evaluation: "validation" (and "test" when the source has one), each its first
    `stream_val_examples` examples; held_out: validation is the start of the train stream,
    which `train` skips.
    """

    train: IterableDataset
    evaluation: dict[str, IterableDataset]
    held_out: bool

    @property
    def node_strategy(self) -> str:
        """How `split_dataset_by_node` deals the train stream out. datasets would split a
        skip(n) among the shards it deals out (each skipping ~n / shards of its own), putting
        held-out examples in training; taking every n-th example keeps the skip global."""
        return "examples" if self.held_out else "auto"


def stream_splits(cfg: DataConfig) -> StreamSplits:
    raw = source_of(cfg).load(streaming=True)
    units = {
        split: ds.map(
            split_units,
            batched=True,
            fn_kwargs={"unit": cfg.example_unit},
            remove_columns=["text"],
        )
        for split, ds in raw.items()
    }
    n = cfg.stream_val_examples
    evaluation = {split: units[split].take(n) for split in EVAL_SPLITS if split in units}
    if "validation" in units:
        return StreamSplits(units["train"], evaluation, held_out=False)
    # Held out from the start of train: fixed whatever the corpus's length, never trained on.
    evaluation["validation"] = units["train"].take(n)
    return StreamSplits(units["train"].skip(n), evaluation, held_out=True)


def prepare_stream(cfg: DataConfig, arch: str, tokenizer_json: str | None, whole: bool) -> Prepared:
    """The evaluation splits and the tokenizer: the splits in memory, laid out as the token
    store of a cached corpus lays them out (`memory_split`).

    `tokenizer_json` (a checkpoint's) takes precedence over `cfg.tokenizer` (a kind, a path
    or a Hub name; None: the architecture's default)."""
    if whole:
        raise ValueError(
            "whole-file evaluation (data named on the mode=eval command line) reads its text "
            "whole, not as a stream: add data.streaming=false to the command"
        )
    splits = stream_splits(cfg)
    spec = cfg.tokenizer or DEFAULT_TOKENIZER[arch]
    tokenizer = _stream_tokenizer(cfg, spec, tokenizer_json, splits.train)
    specials = special_tokens_of(tokenizer)
    stores = {}
    for split, stream in splits.evaluation.items():
        texts = _read_texts(cfg, stream)
        stores[split] = memory_split(*encode_documents(tokenizer, texts), texts, specials.eos_id)
    return Prepared(stores, tokenizer, specials)


def memory_split(ids: np.ndarray, offsets: np.ndarray, texts: list[str], eos_id: int) -> SplitStore:
    """``texts`` tokenized as ``(ids, offsets)`` (see ``data.tokenize.encode_documents``), laid
    out as a store lays out a split, in memory: what a stream's evaluation splits are."""
    starts = offsets + np.arange(len(offsets))  # document d follows d EOS tokens
    return SplitStore(
        join_documents(ids, offsets, eos_id), starts, text_chars(texts), text_bytes(texts)
    )


def stream_tokenizer_key(cfg: DataConfig) -> str:
    """Names the sample a streaming tokenizer learns from (cheap: reads nothing)."""
    return stable_hash(
        "stream-tokenizer",
        source_of(cfg).fingerprint(),
        cfg.example_unit,
        cfg.stream_val_examples,
        cfg.tokenizer_sample_bytes,
    )


def _stream_tokenizer(
    cfg: DataConfig, spec: str, tokenizer_json: str | None, train: IterableDataset
) -> Tokenizer:
    if tokenizer_json is not None:
        return tokenizer_from_json(tokenizer_json)
    if spec not in TOKENIZER_KINDS:
        return load_tokenizer(spec)
    sample = head(
        (batch["text"] for batch in train.iter(batch_size=1000)), cfg.tokenizer_sample_bytes
    )
    # Parallel jobs and DDP ranks train it once: the others find it in the cache.
    with prepare_lock(cfg.cache_dir) as root:
        return cached_trained_tokenizer(
            spec,
            sample,
            cfg.vocab_size,
            stream_tokenizer_key(cfg),
            root,
        )


def _read_texts(cfg: DataConfig, stream: IterableDataset) -> list[str]:
    try:
        return [text for batch in stream.iter(batch_size=1000) for text in batch["text"]]
    except (OSError, ValueError, TypeError) as err:
        raise ValueError(f"cannot read the corpus {source_of(cfg).display_name}: {err}") from None


@dataclass
class _Piece:
    """Items (tokens or rows) of consecutive examples, and the example stream's state just
    before them: where a resume starts reading, skipping `used` items."""

    before: dict
    items: Any
    used: int = 0


class _Cursor:
    """Draws items in order from a stream of examples, and says where the next item is."""

    def __init__(
        self,
        examples: IterableDataset,
        encode: Callable[[list[str]], Any],
        position: dict | None,
    ) -> None:
        if position is not None:
            examples.load_state_dict(position["examples"])
        self._examples = examples
        self._reads = examples.iter(batch_size=EXAMPLES_PER_READ)
        self._encode = encode
        self._pieces: deque[_Piece] = deque()
        self._next_before = position["examples"] if position else examples.state_dict()
        self._skip = position["skip"] if position else 0

    def take(self, n: int) -> list | None:
        """The next `n` items as slices of the pieces they lie in; None if the stream ends
        first."""
        taken = []
        while n:
            if not self._pieces and not self._read():
                return None
            piece = self._pieces[0]
            part = piece.items[piece.used : piece.used + n]
            taken.append(part)
            piece.used += len(part)
            n -= len(part)
            if piece.used == len(piece.items):
                self._pieces.popleft()
        return taken

    def position(self) -> dict:
        """Where the next item lies: {"examples": a stream state, "skip": items to skip}."""
        if self._pieces:
            return {"examples": self._pieces[0].before, "skip": self._pieces[0].used}
        return {"examples": self._next_before, "skip": 0}

    def _read(self) -> bool:
        batch = next(self._reads, None)
        if batch is None:
            return False
        before, self._next_before = self._next_before, self._examples.state_dict()
        skip, self._skip = self._skip, 0
        self._pieces.append(_Piece(before, self._encode(batch["text"]), used=skip))
        return True


def fresh_state(epoch: int, roles: int) -> dict:
    """A loader state at the start of `epoch` with `roles` readers per rank."""
    return {"epoch": epoch, "positions": [None] * roles, "next_role": 0}


class StreamBlocks(TorchIterableDataset):
    """Training batches cut from a stream of example units, each with the stream position
    just after it: items (role, `batch_size` blocks or rows (fewer at the end), position).

    In DataLoader worker w of W, it reads as role (w + start["next_role"]) % W: after a resume
    the worker whose batch comes first (DataLoader's round robin starts at worker 0) continues
    the role that was next.
    """

    def __init__(
        self,
        splits: StreamSplits,
        tokenizer: Tokenizer,
        arch: str,
        max_seq_len: int,
        batch_size: int,
        rank: int = 0,
        world_size: int = 1,
    ) -> None:
        self.examples = splits.train
        self.node_strategy = splits.node_strategy
        self.tokenizer = tokenizer
        self.specials: SpecialTokens = special_tokens_of(tokenizer)
        self.arch = arch
        self.max_seq_len = max_seq_len
        self.batch_size = batch_size
        self.rank = rank
        self.world_size = world_size
        self.start = fresh_state(0, 1)  # the loader sets it before each pass

    def __iter__(self) -> Iterator[tuple[int, list[np.ndarray], dict]]:
        info = get_worker_info()
        if info is not None:
            # A lock inherited from the parent would hang a remote (Hub) stream in a forked
            # worker; datasets resets it the same way in its own worker path.
            fsspec.asyn.reset_lock()
        worker, workers = (info.id, info.num_workers) if info else (0, 1)
        role = (worker + self.start["next_role"]) % workers
        for batch, position in self.batches(role, workers, self.start["positions"][role]):
            yield role, batch, position

    def batches(
        self, role: int, roles: int, position: dict | None
    ) -> Iterator[tuple[list[np.ndarray], dict]]:
        """The batches of reader `role` of `roles` on this rank, from `position` (None: the
        start), each with the position after it."""
        examples = split_dataset_by_node(
            self.examples,
            rank=self.rank * roles + role,
            world_size=self.world_size * roles,
            strategy=self.node_strategy,
        )
        cursor = _Cursor(examples, self._encode, position)
        items = self._items(cursor)
        while True:
            batch = list(itertools.islice(items, self.batch_size))
            if batch:
                yield batch, cursor.position()
            if len(batch) < self.batch_size:
                return

    def _items(self, cursor: _Cursor) -> Iterator[np.ndarray]:
        """Blocks (decoder) or rows (encoder) until the stream ends."""
        size = self.max_seq_len + 1 if self.arch == "decoder" else 1
        while (parts := cursor.take(size)) is not None:
            yield np.concatenate(parts) if self.arch == "decoder" else parts[0][0]

    def _encode(self, texts: list[str]) -> Any:
        """Decoder: the examples' tokens, each example followed by EOS; encoder: their rows."""
        split = memory_split(*encode_documents(self.tokenizer, texts), texts, self.specials.eos_id)
        if self.arch == "decoder":
            return split.tokens
        rows = EncoderExamples(
            split.tokens, split.starts, self.specials.cls_id, self.specials.sep_id, self.max_seq_len
        )
        return [rows[i] for i in range(len(rows))]


class _CollateKeepingPosition:
    """The loader's collate function, passing each batch's role and position along."""

    def __init__(self, collate: Callable[[list[np.ndarray]], Any]) -> None:
        self.collate = collate

    def __call__(self, item: tuple[int, list[np.ndarray], dict]) -> tuple[int, Any, dict]:
        role, examples, position = item
        return role, self.collate(examples), position


class StreamLoader(DataLoader):
    """The streaming train loader: no length; an epoch ends when the stream does. Stateful in
    Lightning's sense (`state_dict`/`load_state_dict`), so a resumed run trains on exactly the
    batches the uninterrupted run would have.

    Workers are not persistent: each epoch's workers are started with the positions they
    resume from.
    """

    dataset: StreamBlocks

    def __init__(
        self,
        dataset: StreamBlocks,
        collate: Callable[[list[np.ndarray]], Any],
        num_workers: int = 0,
    ) -> None:
        super().__init__(
            dataset,
            batch_size=None,
            collate_fn=_CollateKeepingPosition(collate),
            num_workers=num_workers,
        )
        self.roles = max(1, num_workers)
        self._start = fresh_state(0, self.roles)
        # States after the batches yielded lately, oldest first: the first is the state after
        # the batch being trained on (see LIGHTNING_PREFETCH).
        self._recent: deque[dict] = deque([self._start], maxlen=LIGHTNING_PREFETCH + 1)
        self._ended = False

    def __iter__(self) -> Iterator[Any]:
        # A generator: nothing runs before the first batch is requested, so a
        # `load_state_dict` made after `iter()` still applies.
        state = self._start
        self.dataset.start = state
        self._recent = deque([state], maxlen=LIGHTNING_PREFETCH + 1)
        self._ended = False
        for role, batch, position in super().__iter__():
            positions = list(state["positions"])
            positions[role] = position
            state = {**state, "positions": positions, "next_role": (role + 1) % self.roles}
            self._recent.append(state)
            yield batch
        self._start = fresh_state(state["epoch"] + 1, self.roles)
        self._recent.append(self._start)
        self._ended = True

    def state_dict(self) -> dict[str, Any]:
        mine = self._recent[-1] if self._ended else self._recent[0]
        if not (dist.is_available() and dist.is_initialized()):
            return {"ranks": [mine]}
        # Each rank reads other examples: rank 0 writes the checkpoint, so it holds them all.
        ranks: list[Any] = [None] * dist.get_world_size()
        dist.all_gather_object(ranks, mine)
        return {"ranks": ranks}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        ranks = state["ranks"]
        world_size = self.dataset.world_size
        if len(ranks) != world_size or len(ranks[0]["positions"]) != self.roles:
            raise ValueError(
                f"cannot resume the streaming train loader: the checkpoint was read by "
                f"{len(ranks)} rank(s) x {len(ranks[0]['positions'])} reader(s), this run has "
                f"{world_size} x {self.roles} (keep trainer.devices and data.num_workers)"
            )
        self._start = ranks[self.dataset.rank]
        self._recent = deque([self._start], maxlen=LIGHTNING_PREFETCH + 1)


def stream_loader(
    cfg: DataConfig,
    tokenizer: Tokenizer,
    arch: str,
    max_seq_len: int,
    collate: Callable[[list[np.ndarray]], Any],
) -> StreamLoader:
    """The train loader of a streaming run, for this process's rank; raises if the rank's
    stream ends before its first batch."""
    rank, world_size = rank_and_world_size()
    blocks = StreamBlocks(
        stream_splits(cfg),
        tokenizer,
        arch,
        max_seq_len,
        cfg.batch_size,
        rank=rank,
        world_size=world_size,
    )
    if next(blocks.batches(0, 1, None), None) is None:
        raise ValueError(_ends_early_message(cfg, arch, max_seq_len, world_size))
    return StreamLoader(blocks, collate, cfg.num_workers)


def _ends_early_message(cfg: DataConfig, arch: str, max_seq_len: int, world_size: int) -> str:
    if arch == "decoder":
        need = f"one block of max_seq_len + 1 = {max_seq_len + 1} tokens"
    else:
        need = "one example"
    share = f" (this rank's share, 1 of {world_size})" if world_size > 1 else ""
    return (
        f"the streamed corpus {source_of(cfg).display_name} ends before the first training "
        f"batch: its training stream{share} holds less than {need} once validation is held "
        "out (the source's validation split, else its first data.stream_val_examples="
        f"{cfg.stream_val_examples} examples). Give more text or lower data.stream_val_examples"
    )
