"""Minimal pairs: BLiMP-format JSON lines from a file or a directory, or the built-in set drawn
from the built-in corpus (features/pairs/README.md); ``frame_sentence``, a sentence's tokens as
its model read text in training.
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass
from pathlib import Path

from tokenizers import Tokenizer

from common.files import stable_hash
from data.sources import builtin_documents
from data.tokenizer import special_tokens_of

BUILTIN = "builtin"
FIELDS = ("sentence_good", "sentence_bad")
PARADIGM_FIELDS = ("UID", "paradigm")
BUILTIN_SEED = 0  # fixed: every checkpoint and seed is scored on the same built-in pairs
# Short plain sentences: a capitalised word, 4 to 11 more words of letters, a full stop. At
# most 60 characters, so that they fit a context of 64 tokens even with a tokenizer close to
# one token per byte (a tiny vocabulary).
_SENTENCE = re.compile(r"[A-Z][a-z]*(?: [A-Za-z]+){4,11}\.")
_MAX_CHARS = 60


@dataclass(frozen=True)
class MinimalPair:
    good: str
    bad: str
    paradigm: str
    where: str  # how errors name it: "FILE line N", "builtin adjacent_swap pair N"


@dataclass(frozen=True)
class PairSet:
    name: str  # what records call it: the file or directory (resolved), or "builtin"
    fingerprint: str  # of the pairs themselves: edited pairs are another evaluation
    pairs: tuple[MinimalPair, ...]

    @property
    def paradigms(self) -> list[str]:
        return sorted({pair.paradigm for pair in self.pairs})


def read_pairs(spec: str) -> PairSet:
    """The pairs ``pairs.path=spec`` names; errors are one line naming the file and line."""
    if spec == BUILTIN:
        pairs = builtin_pairs()
        name = BUILTIN
    else:
        path = Path(spec)
        pairs = [pair for file in _pair_files(path) for pair in _read_file(file)]
        name = str(path.resolve())
    fingerprint = stable_hash([[p.good, p.bad, p.paradigm] for p in pairs])
    return PairSet(name, fingerprint, tuple(pairs))


def _pair_files(path: Path) -> list[Path]:
    if path.is_file():
        return [path]
    if path.is_dir():
        files = sorted(path.glob("*.jsonl"))
        if not files:
            raise FileNotFoundError(
                f"pairs.path={path} is a directory without .jsonl files; pass a BLiMP-format "
                "file or a directory of them (one per paradigm, as BLiMP's data/ is)"
            )
        return files
    raise FileNotFoundError(
        f"pairs.path={path} does not exist; pass a BLiMP-format .jsonl file (sentence_good, "
        "sentence_bad on each line), a directory of them, or pairs.path=builtin"
    )


def _read_file(path: Path) -> list[MinimalPair]:
    pairs = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if line.strip():
            pairs.append(_parse_line(line, f"{path} line {number}", path.stem))
    if not pairs:
        raise ValueError(
            f"{path} holds no pairs; minimal pairs are JSON lines with sentence_good and "
            "sentence_bad"
        )
    return pairs


def _parse_line(line: str, where: str, default_paradigm: str) -> MinimalPair:
    try:
        record = json.loads(line)
    except json.JSONDecodeError as err:
        raise ValueError(
            f"{where} is not JSON ({err.msg} at column {err.colno}); minimal pairs are JSON "
            "lines with sentence_good and sentence_bad"
        ) from None
    if not isinstance(record, dict):
        raise ValueError(
            f"{where} is a JSON {type(record).__name__}, not an object with sentence_good "
            "and sentence_bad"
        )
    missing = [f for f in FIELDS if f not in record]
    if missing:
        fields = ", ".join(record) or "none"
        raise ValueError(
            f"{where} has no {' or '.join(missing)} (its fields: {fields}); minimal pairs are "
            "BLiMP-format JSON lines with sentence_good and sentence_bad"
        )
    for field in FIELDS:
        value = record[field]
        if not isinstance(value, str) or not value.strip():
            shown = "empty" if isinstance(value, str) else f"a JSON {type(value).__name__}"
            raise ValueError(f"{where}: {field} is {shown}; each pair needs two sentences")
    paradigm = next((str(record[f]) for f in PARADIGM_FIELDS if record.get(f)), None)
    return MinimalPair(
        record["sentence_good"], record["sentence_bad"], paradigm or default_paradigm, where
    )


def builtin_sentences() -> list[str]:
    """The short plain sentences of the built-in corpus, sorted, each once."""
    found = set()
    for document in builtin_documents():
        for paragraph in document.split("\n\n"):
            for sentence in re.split(r"(?<=\.)\s+", " ".join(paragraph.split())):
                if len(sentence) <= _MAX_CHARS and _SENTENCE.fullmatch(sentence):
                    found.add(sentence)
    return sorted(found)


def builtin_pairs(seed: int = BUILTIN_SEED) -> list[MinimalPair]:
    """One ``adjacent_swap`` and one ``word_replace`` pair per built-in sentence, each after
    the first word; deterministic for a given Python (its documentation is the corpus)."""
    sentences = [s.removesuffix(".").split(" ") for s in builtin_sentences()]
    by_length: dict[int, list[str]] = {}
    for word in sorted({w for words in sentences for w in words[1:]}):
        by_length.setdefault(len(word), []).append(word)
    rng = random.Random(seed)
    swaps, replacements = [], []
    for words in sentences:
        good = " ".join(words) + "."
        swappable = [i for i in range(1, len(words) - 1) if words[i] != words[i + 1]]
        if swappable:
            i = rng.choice(swappable)
            bad = [*words[:i], words[i + 1], words[i], *words[i + 2 :]]
            swaps.append((good, " ".join(bad) + "."))
        replaceable = [i for i in range(1, len(words)) if len(by_length[len(words[i])]) > 1]
        if replaceable:
            i = rng.choice(replaceable)
            word = rng.choice([w for w in by_length[len(words[i])] if w != words[i]])
            replacements.append((good, " ".join([*words[:i], word, *words[i + 1 :]]) + "."))
    return [
        MinimalPair(good, bad, paradigm, f"{BUILTIN} {paradigm} pair {n}")
        for paradigm, pairs in (("adjacent_swap", swaps), ("word_replace", replacements))
        for n, (good, bad) in enumerate(pairs, start=1)
    ]


def frame_sentence(
    tokenizer: Tokenizer, text: str, arch: str, max_seq_len: int, where: str
) -> list[int]:
    """``[EOS] sentence`` for a decoder, ``[CLS] sentence [SEP]`` for an encoder; a sentence
    longer than the context is refused, never cut."""
    ids = tokenizer.encode(text, add_special_tokens=False).ids
    if not ids:
        raise ValueError(f"{where}: {text!r} has no tokens; each pair needs two sentences")
    specials = special_tokens_of(tokenizer)
    if arch == "decoder":
        framed, room = [specials.eos_id, *ids], max_seq_len
    else:
        framed, room = [specials.cls_id, *ids, specials.sep_id], max_seq_len - 2
    if len(ids) > room:
        raise ValueError(
            f"{where}: a sentence of {len(ids)} tokens is longer than the checkpoint's context "
            f"({room} tokens with max_seq_len={max_seq_len}); minimal pairs are scored whole, "
            "never cut or in windows: drop the pair or shorten the sentence"
        )
    return framed
