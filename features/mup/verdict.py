"""What a coordinate check says (``coordcheck.json``'s means): per parametrization, layer and
step the ratio of the widest width's mean |activation| to the narrowest's, and the verdict.
Under μP every layer should stay within ``FLAT`` of flat at every step; under the standard
parametrization the logits grow with width. Plain Python: the report reads it without torch.

Zero means: a zero-initialised readout (``model.mup_zero_init``) gives logits of exactly 0 at
step 0 at every width. 0/0 is counted as equal (a ratio of 1), and said so; a zero at the
narrowest width only is an unbounded ratio (``math.inf``), written as null in JSON.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from analysis.records import markdown_table

# Within this factor of flat (both ways) from the narrowest width to the widest: μP's check.
FLAT = 1.25
LOGITS = "logits"


def ratio(narrowest: float, widest: float) -> float:
    """widest / narrowest; 0/0 is 1 (equal), x/0 is inf."""
    if narrowest == 0:
        return 1.0 if widest == 0 else math.inf
    return widest / narrowest


def is_flat(value: float) -> bool:
    return 1 / FLAT <= value <= FLAT


@dataclass
class Judgement:
    """One parametrization's ratios (layer -> one per step) and what they say."""

    parametrization: str
    ratios: dict[str, list[float]]
    zero_pairs: list[tuple[str, int]] = field(default_factory=list)  # 0/0, counted as equal

    @property
    def outside(self) -> list[tuple[str, int, float]]:
        """(layer, step, ratio) beyond ``FLAT`` either way, the farthest first."""
        found = [
            (layer, step, r)
            for layer, values in self.ratios.items()
            for step, r in enumerate(values)
            if not is_flat(r)
        ]
        return sorted(found, key=lambda item: -abs(math.log(item[2])) if item[2] > 0 else -math.inf)

    @property
    def flat(self) -> bool:
        return not self.outside

    @property
    def logits_grow(self) -> bool:
        """Whether the logits grow beyond ``FLAT`` at some step."""
        return any(r > FLAT for r in self.ratios.get(LOGITS, []))

    def worst(self) -> tuple[str, int, float]:
        """The (layer, step, ratio) farthest from flat."""
        pairs = [
            (layer, step, r)
            for layer, values in self.ratios.items()
            for step, r in enumerate(values)
        ]
        return max(pairs, key=lambda item: abs(math.log(item[2])) if item[2] > 0 else math.inf)


def judge(data: dict[str, Any]) -> list[Judgement]:
    """The ratios of each parametrization of ``coordcheck.json``'s ``results``."""
    judged = []
    for parametrization, means in data["results"].items():
        ratios: dict[str, list[float]] = {}
        zeros = []
        for layer, per_step in means.items():
            ratios[layer] = []
            for step, values in enumerate(per_step):
                narrowest, widest = values[0], values[-1]
                if narrowest == 0 and widest == 0:
                    zeros.append((layer, step))
                ratios[layer].append(ratio(narrowest, widest))
        judged.append(Judgement(parametrization, ratios, zeros))
    return judged


def sentence(judgement: Judgement, widths: list[int]) -> str:
    """The verdict of one parametrization, one line."""
    span = f"from width {widths[0]} to {widths[-1]}"
    name = judgement.parametrization
    steps = len(next(iter(judgement.ratios.values())))
    zeros = ""
    if judgement.zero_pairs:
        listed = ", ".join(f"{layer} at step {step}" for layer, step in judgement.zero_pairs)
        zeros = f" ({listed}: zero at every width, 0/0 counted as equal)"
    logits = ", ".join(_times(r) for r in judgement.ratios.get(LOGITS, []))
    outside = judgement.outside
    if name == "mup":
        if not outside:
            layer, step, r = judgement.worst()
            return (
                f"mup: passed, every layer within ×{FLAT} {span} at each of {steps} steps "
                f"(farthest: {layer} at step {step}, {_times(r)}){zeros}."
            )
        named = "; ".join(f"{layer} at step {step} {_times(r)}" for layer, step, r in outside[:4])
        more = f" and {len(outside) - 4} more" if len(outside) > 4 else ""
        shrinking = all(layer == LOGITS and r < 1 for layer, _, r in outside)
        why = (
            f"; every other layer within ×{FLAT}, only the logits shrink with width (μP's 1/m "
            "readout multiplier: the random part of the first steps' logits falls as "
            "1/sqrt(m) until the learned part outgrows it; see the guide)"
            if shrinking
            else ""
        )
        return (
            f"mup: failed, {len(outside)} (layer, step) pairs beyond ×{FLAT} {span}: "
            f"{named}{more}{why}{zeros}."
        )
    grows = "grow" if judgement.logits_grow else f"stay within ×{FLAT}"
    return (
        f"{name}: the logits {grows} {span} (by step: {logits}); {len(outside)} (layer, step) "
        f"pairs beyond ×{FLAT}{zeros}."
    )


def _times(r: float) -> str:
    if math.isinf(r):
        return "×inf (from zero)"
    return f"×{r:.3g}"


def ratio_table(judgement: Judgement) -> str:
    """Layer x step ratios (widest / narrowest) as markdown, those beyond ``FLAT`` starred."""
    steps = len(next(iter(judgement.ratios.values())))
    columns = ["layer", *(f"step {s}" for s in range(steps))]
    rows = [
        {
            "layer": layer,
            **{
                f"step {s}": _times(r).removeprefix("×") + ("" if is_flat(r) else " *")
                for s, r in enumerate(values)
            },
        }
        for layer, values in judgement.ratios.items()
    ]
    return markdown_table(columns, rows)


def markdown(data: dict[str, Any], judged: list[Judgement]) -> str:
    """``coordcheck.md``: the verdicts, then each parametrization's ratio table."""
    widths = data["widths"]
    lines = [
        "# Coordinate check",
        "",
        f"Mean |activation| of each layer's output, averaged over {len(data['seeds'])} seed(s) "
        f"({', '.join(map(str, data['seeds']))}), at widths {', '.join(map(str, widths))}, "
        f"for the first {data['steps']} training steps (step 0: at initialisation). The ratio "
        f"is the widest width's mean over the narrowest's: under μP each should be within "
        f"×{FLAT} either way (* beyond it); under the standard parametrization the logits "
        "grow. Zero at both widths (a zero-initialised readout at step 0) counts as equal. "
        "Figure: coordcheck.png; numbers: coordcheck.json.",
        "",
        *(f"- {sentence(j, widths)}" for j in judged),
        "",
    ]
    for judgement in judged:
        lines += [f"## {judgement.parametrization}", "", ratio_table(judgement)]
    return "\n".join(lines)
