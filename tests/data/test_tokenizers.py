"""Tokenizers: the trained kinds round-trip text, carry the special tokens both
architectures need, save and load as tokenizer.json; a Hub name offline fails fast."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from tokenizers import Tokenizer, decoders, models, pre_tokenizers

from common.files import stable_hash
from data.tokenizer import (
    EOS_TOKEN,
    load_tokenizer,
    save_tokenizer,
    special_tokens_of,
    tokenizer_from_json,
    tokenizer_key,
    train_tokenizer,
)
from tests.corpora import make_paragraphs

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


def test_hub_tokenizer_name_offline_fails_fast(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ConnectionError, match="openai-community/gpt2.*tokenizer.json"):
        load_tokenizer("openai-community/gpt2")


# Trains in a fresh interpreter: the trainer's hash maps are seeded per process, so only
# separate processes show whether the result depends on that seed.
_TRAIN_IN_A_FRESH_PROCESS = """
import hashlib, random
from data.tokenizer import train_tokenizer
rng = random.Random(0)
words = ["".join(rng.choice("abcdefghij") for _ in range(rng.randint(1, 9))) for _ in range(600)]
texts = [" ".join(rng.choice(words) for _ in range(30)) for _ in range(300)]
tokenizer = train_tokenizer("wordpiece", [texts], 400)
print(hashlib.sha256(tokenizer.to_str().encode()).hexdigest())
"""


def test_wordpiece_training_is_the_same_in_every_process() -> None:
    # huggingface/tokenizers#1794: the trainer breaks ties between merges by ids that it gives
    # continuing tokens (##c) in a hash map's per-process order.
    root = Path(__file__).resolve().parents[2]
    hashes = {
        subprocess.run(
            [sys.executable, "-c", _TRAIN_IN_A_FRESH_PROCESS],
            cwd=root,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for _ in range(3)
    }
    assert len(hashes) == 1


def test_wordpiece_continuing_tokens_are_plain_vocabulary(trained: dict[str, Tokenizer]) -> None:
    wordpiece = trained["wordpiece"]
    added = {token.content for token in wordpiece.get_added_tokens_decoder().values()}
    assert added == {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"}
    assert any(token.startswith("##") for token in wordpiece.get_vocab())
    assert wordpiece.encode("##t").tokens == ["#", "#", "t"]  # "##t" is not matched whole


def test_a_wordpiece_cached_by_the_old_recipe_is_not_reused() -> None:
    assert tokenizer_key("wordpiece", 2048, "k") != stable_hash("wordpiece", 2048, "k")
    assert tokenizer_key("bpe", 2048, "k") == stable_hash("bpe", 2048, "k")  # unchanged recipe
