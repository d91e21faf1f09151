"""What ``mode=eval`` scores: which data a checkpoint is evaluated on (`data_to_evaluate`), and
that data counted."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, fields, replace

from data.collate import IGNORE_INDEX
from data.config import DataConfig
from data.corpus import Corpus
from data.datamodule import LMDataModule, prepared_datamodule
from data.examples import StridedWindows
from data.sources import kind_keys, kind_named, source_keys, source_of


@dataclass(frozen=True)
class ScoredText:
    """The text one evaluation scores, counted."""

    data: str  # the source as the user named it
    fingerprint: str  # names that text: the run's carved corpus, or the source read whole
    split: str  # the split scored: validation | test
    label: str  # the split as records name it: "all" for a source without splits, read whole
    tokens: int
    characters: int
    bytes: int  # UTF-8, counted as characters are (one separator per document)
    tokens_scored: int  # targets of the windows (decoder) or masked tokens (encoder)


@dataclass(frozen=True)
class EvaluationData:
    """The data config to score a checkpoint on, and whether it is read whole."""

    cfg: DataConfig
    whole: bool

    def prepare(
        self,
        arch: str,
        max_seq_len: int,
        seed: int,
        tokenizer_json: str,
        stride: int | None,
    ) -> tuple[LMDataModule, ScoredText]:
        """The data module that scores it with the checkpoint's tokenizer (a decoder in
        windows sliding by ``stride``; an encoder's masks fixed by ``seed``), and its counts."""
        datamodule = prepared_datamodule(
            self.cfg,
            arch,
            max_seq_len,
            seed=seed,
            stage="validate" if self.cfg.split == "validation" else "test",
            tokenizer_json=tokenizer_json,
            whole=self.whole,
            eval_stride=stride,
        )
        return datamodule, scored_text(datamodule)


def data_to_evaluate(
    trained: DataConfig, asked: DataConfig, overridden: Iterable[str]
) -> EvaluationData:
    """The data to score a checkpoint trained on ``trained`` on, given the command line's data
    config ``asked`` and the keys it overrides (``data``, ``data.KEY``).

    The run's own split, unless the command line says where text comes from (``data=...`` or
    a source key): then that text, whole. Other data.* keys on the command line
    (``data.split`` always) change the run's data config.
    """
    overridden = list(overridden)
    if "data" in overridden:
        return EvaluationData(asked, whole=True)
    # data.path.validation=FILE changes the key data.path
    asked_keys = {k.split(".")[1] for k in overridden if k.startswith("data.")}
    changed = {key: getattr(asked, key) for key in asked_keys}
    if "source" not in changed and (named := kind_named(asked_keys)):
        changed["source"] = named  # data.path=FILE alone means that file
    if changed.get("source", trained.source) != trained.source:
        # Another kind of source: the run's own source keys (its data.name, say) are not read.
        defaults = {f.name: f.default for f in fields(DataConfig)}
        changed.update({k: defaults[k] for k in kind_keys() - asked_keys})
    whole = bool(asked_keys & source_keys())
    return EvaluationData(replace(trained, **{"split": asked.split, **changed}), whole)


def scored_text(datamodule: LMDataModule) -> ScoredText:
    """What a prepared evaluation data module scores on its ``cfg.split``, counted."""
    cfg, split = datamodule.cfg, datamodule.cfg.split
    source = source_of(cfg)
    dataset = datamodule.dataset(split)
    store = datamodule.prepared.stores[split]
    if len(dataset) == 0:
        raise ValueError(
            f"the data {source.display_name} has {len(store.tokens)} tokens, too few to fill one "
            f"window of max_seq_len + 1 = {datamodule.max_seq_len + 1} tokens; give more text"
        )
    if isinstance(dataset, StridedWindows):
        scored = dataset.num_scored
    else:  # the encoder scores its masked tokens: count them as the loader draws them
        loader = datamodule.test_dataloader() if split == "test" else datamodule.val_dataloader()
        scored = sum(int((batch["labels"] != IGNORE_INDEX).sum()) for batch in loader)
    whole = datamodule.whole
    return ScoredText(
        data=source.display_name,
        fingerprint=Corpus(cfg, whole).key,
        split=split,
        label="all" if whole and not source.has_own_splits else split,
        tokens=len(store.tokens),
        characters=store.chars,
        bytes=store.bytes,
        tokens_scored=scored,
    )
