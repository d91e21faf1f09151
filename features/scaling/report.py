"""The scaling law's part of a sweep's report (``Feature.report``): when the completed runs vary
the model's size and its compute (``trainer.budget.flops``, ``trainer.max_steps``, ...), the
summary's ``## Scaling law`` section (Approach 3's fit with its intervals, the compute-optimal N
and D of ``scaling.flops``, Approach 2's IsoFLOP minima) and two figures: the IsoFLOP
parabolas and the fitted law against the points. Matplotlib loads only when a figure is drawn.
"""

from __future__ import annotations

import statistics
import time
from functools import partial
from pathlib import Path

from analysis.records import markdown_table, warn
from analysis.report import Figure, Report
from features.scaling.config import PARAMETER_FIELDS, ScalingConfig
from features.scaling.fit import describe_fit, interval, number, parameter_lines
from features.scaling.law import GRIDS, Fit, IsoFlop, fit_law, isoflop
from features.scaling.points import Point, scaling_points, scaling_settings

# Approach 3 needs this many distinct (N, D) points; its law has 5 parameters.
MIN_POINTS = 5


def add_scaling(report: Report) -> None:
    """The scaling-law section and figures of a sweep that varies size and compute."""
    if report.single or report.ranked.fine_tunes:
        return
    config = scaling_settings(report.runs)
    points = scaling_points(report.runs, config)
    sizes = {p.n for p in points}
    computes = {p.compute for p in points}
    distinct = {(p.n, p.d) for p in points}
    if len(sizes) < 2 or len(computes) < 2 or len(distinct) < MIN_POINTS:
        return  # a sweep of one size, or of one compute, has no law to fit
    started = time.perf_counter()
    try:
        found = fit_law(
            [p.n for p in points],
            [p.d for p in points],
            [p.loss for p in points],
            bootstrap=config.bootstrap,
            seed=config.seed,
            level=config.level,
            starts=GRIDS[config.grid],
        )
    except ValueError as err:
        warn(f"the scaling law was not fitted: {err}")
        report.sections.append(f"## Scaling law\n\nNot fitted: {err}.\n")
        return
    seconds = time.perf_counter() - started
    budgeted = [p for p in points if p.budget is not None]
    iso = isoflop([p.budget for p in budgeted], [p.n for p in budgeted], [p.loss for p in budgeted])
    flops = config.flops if config.flops is not None else max(6 * p.n * p.d for p in points)
    report.sections.append(
        scaling_section(
            points,
            config,
            found,
            iso,
            flops,
            describe_fit(found, config.grid, seconds, config.bootstrap, config.seed),
        )
    )
    report.notes.append("The runs vary size and compute: a scaling law is fitted below.")
    convention = _convention(config)
    if iso is not None:
        title = (
            f"IsoFLOP parabolas (Approach 2): final validation loss against N ({convention}) "
            "at each trainer.budget.flops, each parabola's minimum starred"
        )
        report.figures.append(Figure(title, partial(_draw_isoflop, budgeted, iso), "isoflop.png"))
    fitted = ", ".join(
        f"{name} = {value} {bounds}" for name, value, bounds in parameter_lines(found)
    )
    best = found.optimal(flops)
    title = (
        f"Scaling law (Approach 3) against the runs: L = E + A/N^α + B/D^β with N {convention}; "
        f"{fitted}; compute-optimal for C = {flops:.3g} FLOPs: N = {number(best.n)} "
        f"{interval(best.n_interval)}, D = {number(best.d)} {interval(best.d_interval)}"
    )
    report.figures.append(Figure(title, partial(_draw_fit, points, found), "scaling_law.png"))


def scaling_section(
    points: list[Point],
    config: ScalingConfig,
    found: Fit,
    iso: IsoFlop | None,
    flops: float,
    how: str,
) -> str:
    """The summary's ``## Scaling law`` section."""
    field = PARAMETER_FIELDS[config.parameters]
    named = "scaling.flops" if config.flops is not None else "the sweep's largest 6ND"
    other = "total" if config.parameters == "non_embedding" else "non_embedding"
    # A token table tied to the readout counts in `params` (it is a matmul), and rotary
    # positions have no table: GPT's defaults give the two counts one value.
    same = ", the same here: tied embeddings count" if all(p.n_other == p.n for p in points) else ""
    lines = [
        "## Scaling law",
        "",
        f"{len(points)} completed runs, each a point (seed replicates stay separate points: the "
        "bootstrap resamples them). N is the "
        f"{_convention(config)} (`{field}`, scaling.parameters={config.parameters}; "
        f"scaling.parameters={other} for the other count{same}), D the tokens the run "
        "trained on (`consumed.tokens`), L its final validation loss (`val_loss`).",
        "",
        f"{how}.",
        "",
        markdown_table(
            ["parameter", "fit", f"{found.level:.0%} interval"],
            [
                {"parameter": name, "fit": value, f"{found.level:.0%} interval": bounds}
                for name, value, bounds in parameter_lines(found)
            ],
        ),
    ]
    best = found.optimal(flops)
    lines += [
        "",
        f"Compute-optimal for C = {flops:.3g} FLOPs ({named}; C ≈ 6ND): N_opt = "
        f"{number(best.n)} {interval(best.n_interval)}, D_opt = {number(best.d)} "
        f"{interval(best.d_interval)} ({number(best.d / best.n)} tokens per parameter), "
        f"predicted loss {number(best.loss)}.",
    ]
    ratios = [
        p.flops_per_token / (6 * p.n) for p in points if isinstance(p.flops_per_token, int | float)
    ]
    if ratios:
        lines.append(
            f"tinylm counts {statistics.fmean(ratios):.3g}× 6N FLOPs per token at these sizes "
            "(the mean over the runs; its count adds attention's 12 × layers × hidden × context "
            "to 6 × `params`), so trainer.budget.flops is not 6ND."
        )
    if iso is not None:
        lines += [
            "",
            "Approach 2 (IsoFLOP parabolas, loss against log N per trainer.budget.flops):",
            "",
        ]
        rows = [
            {
                "budget": f"{p.flops:.3g}",
                "points": p.sizes,
                "N*": number(p.n_star) if p.n_star is not None else "no minimum",
                "loss at N*": number(p.loss_star) if p.loss_star is not None else "",
                "within the sizes": "yes" if p.inside else "no: extrapolated",
            }
            for p in iso.parabolas
        ]
        lines.append(markdown_table(list(rows[0]), rows))
        if iso.exponent is not None:
            alpha, beta = found.params["alpha"], found.params["beta"]
            lines += [
                "",
                f"N* ∝ C^{number(iso.exponent)} over the budgets with a minimum; Approach 3's "
                f"exponent β/(α+β) is {number(beta / (alpha + beta))}.",
            ]
    drawn = ["`isoflop.png` (Approach 2)"] if iso is not None else []
    lines.append(f"\nFigures: {', '.join([*drawn, '`scaling_law.png` (Approach 3)'])}.\n")
    return "\n".join(lines)


def _convention(config: ScalingConfig) -> str:
    return "non-embedding parameters" if config.parameters == "non_embedding" else "all parameters"


def _draw_isoflop(points: list[Point], iso: IsoFlop, out_path: Path) -> Path:
    from features.scaling.figures import plot_isoflop  # matplotlib: only when drawing

    return plot_isoflop(points, iso, out_path)


def _draw_fit(points: list[Point], found: Fit, out_path: Path) -> Path:
    from features.scaling.figures import plot_fit  # matplotlib: only when drawing

    return plot_fit(points, found, out_path)
