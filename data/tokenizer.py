"""Tokenizers: train (byte-level BPE, WordPiece, characters), load, save, rebuild from JSON.

Every tokenizer this module hands out carries the special tokens both architectures need
(pad, eos, cls, sep, mask), so any kind works for a decoder or an encoder. No post-processor
is attached: the data pipeline adds [CLS]/[SEP] itself, so `encode` returns plain text ids.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

from common.files import stable_hash, write_text_atomically
from data.hub import hub_unavailable_reason

EOS_TOKEN = "<|endoftext|>"
# Ids 0..4 in every trained tokenizer; BPE/char add EOS_TOKEN as id 5, WordPiece uses [SEP].
BASE_SPECIALS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
# Names each role goes by in common tokenizer.json files, in order of preference; the first
# is added when a loaded tokenizer has none of them.
ROLE_NAMES = {
    "pad": ("[PAD]", "<pad>", "<|pad|>"),
    "eos": (EOS_TOKEN, "</s>", "<eos>", "[SEP]"),
    "cls": ("[CLS]", "<s>", "<cls>"),
    "sep": ("[SEP]", "</s>", "<sep>"),
    "mask": ("[MASK]", "<mask>"),
}
TOKENIZER_FILE = "tokenizer.json"
# A kind's training recipe, in its cache key: bumped when the recipe changes, so that a
# tokenizer cached by the old one is retrained, not reused. wordpiece 2: deterministic.
RECIPE_VERSIONS = {"wordpiece": 2}


@dataclass(frozen=True)
class SpecialTokens:
    """The special roles of a tokenizer: the tokens (e.g. eos="<|endoftext|>") and their ids,
    plus every special id (none of them is ever a masking target)."""

    pad: str
    eos: str
    cls: str
    sep: str
    mask: str
    pad_id: int
    eos_id: int
    cls_id: int
    sep_id: int
    mask_id: int
    all_ids: tuple[int, ...]


def special_tokens_of(tokenizer: Tokenizer) -> SpecialTokens:
    """The tokenizer's special roles; raises if one is missing (see `ensure_special_tokens`)."""
    tokens, ids = {}, {}
    for role, names in ROLE_NAMES.items():
        found = [name for name in names if tokenizer.token_to_id(name) is not None]
        if not found:
            raise ValueError(f"tokenizer has no {role} token (looked for {list(names)})")
        tokens[role] = found[0]
        ids[f"{role}_id"] = tokenizer.token_to_id(found[0])
    added = tokenizer.get_added_tokens_decoder()
    all_ids = sorted({i for i, token in added.items() if token.special} | set(ids.values()))
    return SpecialTokens(**tokens, **ids, all_ids=tuple(all_ids))


def ensure_special_tokens(tokenizer: Tokenizer) -> SpecialTokens:
    """Add the roles a loaded tokenizer lacks (e.g. GPT-2 has no pad or mask), then look up."""
    for names in ROLE_NAMES.values():
        if all(tokenizer.token_to_id(name) is None for name in names):
            tokenizer.add_special_tokens([names[0]])
    return special_tokens_of(tokenizer)


def train_tokenizer(kind: str, texts: Iterable[list[str]], vocab_size: int) -> Tokenizer:
    """Train a `kind` tokenizer (bpe | wordpiece | char) on batches of texts."""
    if kind == "bpe":
        # Byte-level: every string encodes (no [UNK]) and decodes back exactly.
        tokenizer = Tokenizer(models.BPE())
        tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tokenizer.decoder = decoders.ByteLevel()
        trainer = trainers.BpeTrainer(
            vocab_size=vocab_size,
            min_frequency=2,
            special_tokens=[*BASE_SPECIALS, EOS_TOKEN],
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
            show_progress=False,
        )
    elif kind == "wordpiece":
        return _train_wordpiece(texts, vocab_size)
    elif kind == "char":
        # One token per character (newlines included); characters unseen in training -> [UNK].
        tokenizer = Tokenizer(models.WordLevel(unk_token="[UNK]"))
        tokenizer.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")
        tokenizer.decoder = decoders.Fuse()
        trainer = trainers.WordLevelTrainer(
            vocab_size=vocab_size, special_tokens=[*BASE_SPECIALS, EOS_TOKEN], show_progress=False
        )
    else:
        raise ValueError(f"unknown tokenizer kind {kind!r}; choose bpe, wordpiece or char")
    tokenizer.train_from_iterator(texts, trainer=trainer)
    ensure_special_tokens(tokenizer)
    return tokenizer


def untrained_wordpiece() -> Tokenizer:
    """BERT's WordPiece recipe, cased, before training (``bench.data`` trains it the old way to
    measure what the deterministic path costs): whitespace and punctuation split words, so
    decoding restores the characters but not the exact spacing."""
    tokenizer = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.BertNormalizer(lowercase=False, strip_accents=False)
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tokenizer.decoder = decoders.WordPiece()
    return tokenizer


def _train_wordpiece(texts: Iterable[list[str]], vocab_size: int) -> Tokenizer:
    """WordPiece, the same on every run. The trainer gives a continuing token (``##c``) its id
    when it first meets it in a hash map's random order, and ids break ties between merges of
    equal count (huggingface/tokenizers#1794), so it picks different merges run to run. A
    first pass that stops before merging finds the continuing tokens; the second gets them,
    sorted, as special tokens (fixed ids from the start), which are then made plain vocabulary
    again, so that "##c" in a text is not matched whole."""
    texts = list(texts)  # bounded by data.tokenizer_sample_bytes; read twice
    probe = untrained_wordpiece()
    probe.train_from_iterator(
        texts, trainer=trainers.WordPieceTrainer(vocab_size=0, show_progress=False)
    )
    continuing = sorted(token for token in probe.get_vocab() if token.startswith("##"))
    tokenizer = untrained_wordpiece()
    trainer = trainers.WordPieceTrainer(
        vocab_size=vocab_size,
        special_tokens=[*BASE_SPECIALS, *continuing],
        show_progress=False,
    )
    tokenizer.train_from_iterator(texts, trainer=trainer)
    state = json.loads(tokenizer.to_str())
    state["added_tokens"] = [t for t in state["added_tokens"] if t["content"] in BASE_SPECIALS]
    tokenizer = Tokenizer.from_str(json.dumps(state))
    ensure_special_tokens(tokenizer)
    return tokenizer


def cached_trained_tokenizer(
    kind: str,
    texts: Iterator[list[str]],
    vocab_size: int,
    corpus_key: str,
    cache_dir: Path,
    sample: tuple[object, ...] = (),
) -> Tokenizer:
    """`train_tokenizer`, cached under `cache_dir` by corpus key, settings and ``sample`` (what
    bounds `texts`: `data.tokenizer_sample.sample_key`; () for a whole train split, the key of
    versions before the sample)."""
    key = tokenizer_key(kind, vocab_size, corpus_key, sample)
    path = cache_dir / "tokenizers" / f"{kind}-{key}.json"
    if path.exists():
        return Tokenizer.from_file(str(path))
    tokenizer = train_tokenizer(kind, texts, vocab_size)
    write_text_atomically(path, tokenizer.to_str())
    return tokenizer


def tokenizer_key(
    kind: str, vocab_size: int, corpus_key: str, sample: tuple[object, ...] = ()
) -> str:
    """Names a trained tokenizer in the cache (see `cached_trained_tokenizer`)."""
    version = RECIPE_VERSIONS.get(kind, 1)
    recipe = () if version == 1 else (("recipe", version),)  # 1: the key of earlier versions
    return stable_hash(kind, vocab_size, corpus_key, *sample, *recipe)


def load_tokenizer(spec: str) -> Tokenizer:
    """A tokenizer.json path (or a directory holding one) or a Hub tokenizer name."""
    path = Path(spec).expanduser()
    if path.is_dir():
        path = path / TOKENIZER_FILE
    if path.is_file():
        tokenizer = Tokenizer.from_file(str(path))
    else:
        if why := hub_unavailable_reason():
            raise ConnectionError(
                f"cannot fetch tokenizer {spec!r}: the Hugging Face Hub is {why}. "
                "Pass data.tokenizer=PATH/tokenizer.json or a kind (bpe, wordpiece, char)"
            )
        tokenizer = Tokenizer.from_pretrained(spec)
    ensure_special_tokens(tokenizer)
    return tokenizer


def save_tokenizer(tokenizer: Tokenizer, directory: str | os.PathLike) -> Path:
    """Write `directory/tokenizer.json` (the run directory's copy); returns its path."""
    path = Path(directory) / TOKENIZER_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    tokenizer.save(str(path))
    return path


def tokenizer_from_json(text: str) -> Tokenizer:
    """Rebuild a tokenizer from `Tokenizer.to_str()` output (what checkpoints carry)."""
    tokenizer = Tokenizer.from_str(text)
    special_tokens_of(tokenizer)  # fail now, not at the first batch, if a role is missing
    return tokenizer
