"""Statistical tests of token sampling: temperature, greedy, top-k, top-p (nucleus), and both.

They drive ``models.sampling.sample_next_token``, the helper ``Decoder.generate`` draws every token
with, on fixed logits repeated over many rows (one independent draw per row) with a seeded
``torch.Generator``; one test goes through ``Decoder.generate`` to check it forwards the
arguments. Expected distributions are computed here in float64 from the definitions, never
with the code under test.

Tolerance: with n draws, a category of probability p has an empirical frequency with standard
error sqrt(p (1 - p) / n); every category must lie within 5 of them (a two-sided normal bound,
false alarm ~6e-7 per category; scipy is not installed, so no chi-square quantile). A category
of probability 0 must never be drawn, and every category of positive probability must be.

Definitions tested, read from ``sample_next_token`` and ``Decoder.generate``'s docstring:

- temperature T > 0: the distribution is softmax(logits / T); T = 0 is greedy (argmax).
- top-k: keep the tokens whose logit is >= the k-th largest logit (k above V keeps all; 0 or
  None disables it), renormalise. So a tie with the k-th logit keeps every tied token.
- top-p, nucleus sampling as in Holtzman et al. 2020 ("The Curious Case of Neural Text
  Degeneration"): sort by probability, descending; keep the smallest prefix whose cumulative
  probability reaches p (>= p), i.e. keep a token iff the tokens sorted before it sum to < p;
  renormalise. Ties are broken by the sort order, so the prefix takes only as many of the
  tied tokens as it needs to reach p, not all of them. top_p = 1 disables it.
- both: top-k first, then top-p on the renormalised top-k distribution (the order of Hugging
  Face's default warpers).
"""

from __future__ import annotations

import math
from typing import Any

import pytest
import torch
from torch import Tensor

from models.config import ModelConfig
from models.sampling import sample_next_token
from models.transformer import Decoder

N = 40_000  # draws per distribution
SIGMAS = 5.0


def draw(
    logits: list[float],
    *,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    n: int = N,
    seed: int = 0,
) -> Tensor:
    """Counts per token [V] of ``n`` draws from one logit vector (one draw per batch row)."""
    rows = torch.tensor(logits, dtype=torch.float32).expand(n, -1)  # (n, V)
    generator = torch.Generator().manual_seed(seed)
    ids = sample_next_token(rows, temperature, top_k, top_p, generator)  # (n,)
    assert ids.shape == (n,)
    return torch.bincount(ids, minlength=len(logits))


def softmax(logits: list[float], temperature: float = 1.0) -> list[float]:
    """softmax(logits / T) in float64 Python, -inf giving 0."""
    scaled = [x / temperature for x in logits]
    top = max(scaled)
    exps = [math.exp(x - top) for x in scaled]
    return [e / sum(exps) for e in exps]


def restrict(probs: list[float], keep: set[int]) -> list[float]:
    """``probs`` renormalised over the tokens in ``keep``, 0 elsewhere."""
    mass = sum(probs[t] for t in keep)
    return [p / mass if t in keep else 0.0 for t, p in enumerate(probs)]


def assert_frequencies(counts: Tensor, expected: list[float]) -> None:
    n = int(counts.sum())
    for token, (count, p) in enumerate(zip(counts.tolist(), expected, strict=True)):
        if p == 0.0:
            assert count == 0, f"token {token} has probability 0 but was drawn {count} times"
            continue
        assert count > 0, f"token {token} (p={p:.4f}) was never drawn in {n} draws"
        bound = SIGMAS * math.sqrt(p * (1 - p) / n)
        freq = count / n
        assert abs(freq - p) <= bound, (
            f"token {token}: frequency {freq:.4f}, expected {p:.4f} +- {bound:.4f} "
            f"({SIGMAS:g} standard errors of {n} draws); all counts {counts.tolist()}"
        )


# Unsorted on purpose, so a cut that forgets to map sorted positions back to token ids shows.
LOGITS = [0.3, -1.0, 1.5, 0.0, 2.2, -0.4, 1.1]


# --------------------------------------------------------------------------------------------
# Temperature
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("temperature", [0.5, 1.0, 2.0])
def test_temperature_scales_the_logits(temperature: float) -> None:
    counts = draw(LOGITS, temperature=temperature)
    assert_frequencies(counts, softmax(LOGITS, temperature))


def test_temperatures_are_distinguishable_at_this_draw_count() -> None:
    # The bound must be able to fail: T = 0.5 and T = 2 are far apart at n = N.
    counts = draw(LOGITS, temperature=0.5)
    with pytest.raises(AssertionError, match="frequency"):
        assert_frequencies(counts, softmax(LOGITS, 2.0))


def test_temperature_zero_is_greedy() -> None:
    torch.manual_seed(0)
    logits = torch.randn(2_000, 11) * 3  # (rows, V), a different distribution per row
    generator = torch.Generator().manual_seed(0)
    ids = sample_next_token(logits, 0.0, None, None, generator)
    assert torch.equal(ids, logits.argmax(dim=-1))
    # top-k / top-p cannot change the argmax, which they always keep.
    assert torch.equal(sample_next_token(logits, 0.0, 3, 0.5, generator), logits.argmax(dim=-1))
    # One fixed logit vector over many rows: the argmax every single time.
    counts = draw(LOGITS, temperature=0.0, n=1_000)
    assert counts[LOGITS.index(max(LOGITS))] == 1_000


# --------------------------------------------------------------------------------------------
# Top-k
# --------------------------------------------------------------------------------------------


def top_k_set(logits: list[float], k: int) -> set[int]:
    return set(sorted(range(len(logits)), key=lambda t: -logits[t])[:k])


@pytest.mark.parametrize("temperature", [0.5, 1.0, 2.0])
@pytest.mark.parametrize("k", [1, 2, 4])
def test_top_k_draws_exactly_the_k_best(k: int, temperature: float) -> None:
    counts = draw(LOGITS, temperature=temperature, top_k=k)
    keep = top_k_set(LOGITS, k)
    assert {t for t, c in enumerate(counts.tolist()) if c > 0} == keep
    assert_frequencies(counts, restrict(softmax(LOGITS, temperature), keep))


@pytest.mark.parametrize("k", [0, None, len(LOGITS), 100])
def test_top_k_disabled_or_above_vocab_keeps_everything(k: int | None) -> None:
    assert_frequencies(draw(LOGITS, top_k=k), softmax(LOGITS))


def test_top_k_keeps_every_token_tied_with_the_kth_logit() -> None:
    # The rule masks logits strictly below the k-th largest, so ties at the cut all survive
    # (as Hugging Face's TopKLogitsWarper does): k = 2 here keeps three tokens.
    logits = [0.0, 2.0, 1.0, 1.0, -1.0]
    counts = draw(logits, top_k=2)
    assert_frequencies(counts, restrict(softmax(logits), {1, 2, 3}))


# --------------------------------------------------------------------------------------------
# Top-p (nucleus)
# --------------------------------------------------------------------------------------------

# Sorted, the probabilities are 0.5, 0.3, 0.15, 0.05: cumulative 0.5, 0.8, 0.95, 1.0.
NUCLEUS_PROBS = [0.05, 0.5, 0.15, 0.3]


def nucleus(probs: list[float], top_p: float) -> set[int]:
    """The smallest set of most likely tokens whose probability sum reaches ``top_p``."""
    keep: set[int] = set()
    mass = 0.0
    for token in sorted(range(len(probs)), key=lambda t: -probs[t]):
        if mass >= top_p:
            break
        keep.add(token)
        mass += probs[token]
    return keep


@pytest.mark.parametrize(
    ("top_p", "expected"),
    [
        (0.3, {1}),  # the best token alone already exceeds p
        (0.55, {1, 3}),  # 0.5 < p, 0.8 >= p: the token that crosses p is kept
        (0.79, {1, 3}),
        (0.81, {1, 3, 2}),  # just past 0.8 takes the next token
        (0.96, {0, 1, 2, 3}),
        (1.0, {0, 1, 2, 3}),
    ],
)
def test_top_p_exact_cut(top_p: float, expected: set[int]) -> None:
    # Boundaries are >= 0.01 away from every cumulative sum, far above float32 rounding.
    assert nucleus(NUCLEUS_PROBS, top_p) == expected  # the definition agrees with the table
    logits = [math.log(p) for p in NUCLEUS_PROBS]
    counts = draw(logits, top_p=top_p)
    assert_frequencies(counts, restrict(NUCLEUS_PROBS, expected))


def test_top_p_cut_is_per_row() -> None:
    # Two distributions in one batch, interleaved: each row's nucleus is its own.
    first = [math.log(p) for p in NUCLEUS_PROBS]
    second = first[2:] + first[:2]  # the same probabilities rotated by two tokens
    rows = torch.tensor([first, second], dtype=torch.float32).repeat(N // 2, 1)  # (N, V)
    ids = sample_next_token(rows, 1.0, None, 0.7, torch.Generator().manual_seed(0))
    for offset, probs in ((0, NUCLEUS_PROBS), (1, NUCLEUS_PROBS[2:] + NUCLEUS_PROBS[:2])):
        counts = torch.bincount(ids[offset::2], minlength=len(probs))
        assert_frequencies(counts, restrict(probs, nucleus(probs, 0.7)))


@pytest.mark.parametrize(("top_p", "kept"), [(0.5, 2), (0.5 + 1e-6, 3), (0.75, 3), (0.8, 4)])
def test_top_p_reaching_p_exactly_closes_the_nucleus(top_p: float, kept: int) -> None:
    # Four equal logits and -inf elsewhere give probabilities of exactly 0.25 and partial sums
    # that are exact in binary, so p = 0.5 is reached exactly by two tokens: ">= p" keeps two,
    # a "> p" rule would keep three. The four are tied, so which ones are kept is the sort's
    # choice; the test asserts how many, and that they are drawn uniformly.
    logits = [0.0, 0.0, -math.inf, 0.0, 0.0, -math.inf]
    assert len(nucleus(softmax(logits), top_p)) == kept
    counts = draw(logits, top_p=top_p)
    drawn = {t for t, c in enumerate(counts.tolist()) if c > 0}
    assert drawn <= {0, 1, 3, 4}
    assert len(drawn) == kept
    assert_frequencies(counts, restrict(softmax(logits), drawn))


@pytest.mark.parametrize(("top_p", "tied_kept"), [(0.5, 1), (0.6, 2), (0.8, 3)])
def test_top_p_takes_only_as_many_tied_tokens_as_it_needs(top_p: float, tied_kept: int) -> None:
    # Sorted: 0.4, then three tokens tied at 0.15, then 0.1 and 0.05; cumulative 0.4, 0.55,
    # 0.7, 0.85, 0.95, 1. The nucleus is the smallest set reaching p, so it takes tied tokens
    # one at a time (in sort order) until p is reached, not the whole tie. Asserted through the
    # share of the best token, 0.4 / (0.4 + 0.15 m) with m tied tokens kept.
    probs = [0.15, 0.4, 0.15, 0.05, 0.15, 0.1]
    logits = [math.log(p) for p in probs]  # the tied logits are the same float
    assert len(nucleus(probs, top_p)) == 1 + tied_kept
    counts = draw(logits, top_p=top_p)
    drawn = {t for t, c in enumerate(counts.tolist()) if c > 0}
    assert 1 in drawn and drawn - {1} <= {0, 2, 4}
    assert len(drawn) == 1 + tied_kept
    assert_frequencies(counts, restrict(probs, drawn))


# --------------------------------------------------------------------------------------------
# Top-k and top-p together
# --------------------------------------------------------------------------------------------

# Sorted: 0.4, 0.3, 0.2, 0.1.
BOTH_PROBS = [0.2, 0.1, 0.4, 0.3]


@pytest.mark.parametrize(
    ("top_k", "top_p", "expected"),
    [
        # Top-3 renormalised is 4/9, 3/9, 2/9, so p = 0.75 is reached by two tokens (7/9).
        # Top-p on the raw probabilities would need three (0.4 + 0.3 = 0.7 < 0.75).
        (3, 0.75, {2, 3}),
        (2, 0.95, {2, 3}),  # top-k is the tighter cut
        (4, 0.5, {2, 3}),  # top-p is the tighter cut
        (3, 0.2, {2}),
    ],
)
def test_top_k_then_top_p(top_k: int, top_p: float, expected: set[int]) -> None:
    renormalised = restrict(BOTH_PROBS, top_k_set(BOTH_PROBS, top_k))
    assert nucleus(renormalised, top_p) == expected
    for temperature in (1.0, 0.5):
        # logits * T make softmax(logits / T) equal BOTH_PROBS, so the sets stay as above.
        logits = [math.log(p) * temperature for p in BOTH_PROBS]
        counts = draw(logits, temperature=temperature, top_k=top_k, top_p=top_p)
        assert_frequencies(counts, restrict(BOTH_PROBS, expected))


# --------------------------------------------------------------------------------------------
# Decoder.generate uses the same rule
# --------------------------------------------------------------------------------------------


def test_generate_samples_from_the_filtered_distribution(monkeypatch: pytest.MonkeyPatch) -> None:
    vocab = len(LOGITS)
    cfg = ModelConfig(
        vocab_size=vocab,
        arch="decoder",
        max_seq_len=4,
        hidden_size=8,
        num_layers=1,
        num_heads=2,
        dropout=0.0,
        norm="pre",
    )
    torch.manual_seed(0)
    model = Decoder(cfg).eval()
    fixed = torch.tensor(LOGITS)

    def fixed_logits(input_ids: Tensor, *args: Any, **kwargs: Any) -> Tensor:
        # The model's own logits are irrelevant here: generate must sample from these.
        return fixed.expand(input_ids.shape[0], input_ids.shape[1], vocab)

    monkeypatch.setattr(model, "forward", fixed_logits)
    n = 20_000
    prompts = torch.zeros(n, 1, dtype=torch.long)
    out = model.generate(
        prompts,
        1,
        temperature=2.0,
        top_k=5,
        top_p=0.8,
        use_cache=False,
        generator=torch.Generator().manual_seed(0),
    )
    assert out.shape == (n, 2)
    renormalised = restrict(softmax(LOGITS, 2.0), top_k_set(LOGITS, 5))
    expected = restrict(renormalised, nucleus(renormalised, 0.8))
    assert_frequencies(torch.bincount(out[:, 1], minlength=vocab), expected)
