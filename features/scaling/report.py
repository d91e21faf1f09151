"""The scaling law's part of a sweep's report (``Feature.report``): when the completed runs vary
the model's size and its compute (``trainer.budget.flops``, ``trainer.max_steps``, ...), the
summary's ``## Scaling law`` section (Approach 3's fit with its intervals, the compute-optimal N
and D of ``scaling.flops``, Approach 2's IsoFLOP minima) and two figures: the IsoFLOP
parabolas and the fitted law against the points. Matplotlib loads only when a figure is drawn.
"""

from __future__ import annotations

import json
import statistics
import time
from dataclasses import asdict
from functools import partial
from pathlib import Path

from analysis.records import markdown_table, warn
from analysis.report import Figure, Report
from common.files import stable_hash, write_text_atomically
from features.scaling.config import PARAMETER_FIELDS, ScalingConfig
from features.scaling.fit import describe_fit, interval, number, parameter_lines
from features.scaling.law import GRIDS, Allocation, Fit, IsoFlop, fit_law, isoflop
from features.scaling.points import Point, scaling_points, scaling_settings

# Approach 3 needs this many distinct (N, D) points; its law has 5 parameters.
MIN_POINTS = 5
# The sweep's file that keeps its fit (kept_fit); FIT_FORMAT changes when what is kept does.
FIT_FILE = "scaling_fit.json"
FIT_FORMAT = 1


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
    try:
        found, seconds = kept_fit(report.root, points, config)
    except ValueError as err:
        warn(f"the scaling law was not fitted: {err}")
        report.sections.append(f"## Scaling law\n\nNot fitted: {err}.\n")
        return
    budgeted = [p for p in points if p.budget is not None]
    iso = isoflop([p.budget for p in budgeted], [p.n for p in budgeted], [p.loss for p in budgeted])
    flops = config.flops if config.flops is not None else max(6 * p.n * p.d for p in points)
    best = found.optimal(flops)
    report.sections.append(
        scaling_section(
            points,
            config,
            found,
            iso,
            best,
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
        draw = partial(_draw_isoflop, budgeted, iso, convention)
        report.figures.append(Figure(title, draw, "isoflop.png"))
    fitted = ", ".join(
        f"{name} = {value} {bounds}" for name, value, bounds in parameter_lines(found)
    )
    title = (
        f"Scaling law (Approach 3) against the runs: L = E + A/N^α + B/D^β with N {convention}; "
        f"{fitted}; compute-optimal for C = {flops:.3g} FLOPs: N = {number(best.n)} "
        f"{interval(best.n_interval)}, D = {number(best.d)} {interval(best.d_interval)}"
    )
    draw = partial(_draw_fit, points, found, convention)
    report.figures.append(Figure(title, draw, "scaling_law.png"))


def kept_fit(root: Path, points: list[Point], config: ScalingConfig) -> tuple[Fit, float]:
    """Approach 3 on ``points`` with ``config``, and the seconds it took: read from the sweep's
    ``FIT_FILE`` when that holds the fit of the same points and settings (the whole grid costs
    tens of seconds, and every ``mode=eval`` or ``mode=report`` on the sweep rebuilds its
    report), else fitted and kept there."""
    key = stable_hash(
        FIT_FORMAT, [[p.n, p.d, p.loss] for p in points], asdict(config), GRIDS[config.grid]
    )
    path = root / FIT_FILE
    try:
        kept = json.loads(path.read_text(encoding="utf-8"))
        if kept["key"] == key:
            return Fit.from_dict(kept["fit"]), float(kept["seconds"])
    except (OSError, ValueError, KeyError, TypeError):
        pass  # none kept, or damaged: fitted again and written over
    started = time.perf_counter()
    found = fit_law(
        [p.n for p in points],
        [p.d for p in points],
        [p.loss for p in points],
        bootstrap=config.bootstrap,
        seed=config.seed,
        level=config.level,
        starts=GRIDS[config.grid],
    )
    seconds = time.perf_counter() - started
    kept = {"key": key, "seconds": seconds, "fit": found.to_dict()}
    try:
        write_text_atomically(path, json.dumps(kept))
    except OSError as err:  # a directory it may not write: the report goes on without it
        warn(f"the scaling fit was not kept in {path} ({err}); each report fits it again")
    return found, seconds


def scaling_section(
    points: list[Point],
    config: ScalingConfig,
    found: Fit,
    iso: IsoFlop | None,
    best: Allocation,
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
    lines += [
        "",
        f"Compute-optimal for C = {best.flops:.3g} FLOPs ({named}; C ≈ 6ND): N_opt = "
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
    figures = ", ".join([*drawn, "`scaling_law.png` (Approach 3)"])
    lines.append(
        f"\nFigures: {figures}. The fit is kept in `{FIT_FILE}` and read back while the points "
        "and the scaling settings stay the same.\n"
    )
    return "\n".join(lines)


def _convention(config: ScalingConfig) -> str:
    return "non-embedding parameters" if config.parameters == "non_embedding" else "all parameters"


def _draw_isoflop(points: list[Point], iso: IsoFlop, convention: str, out_path: Path) -> Path:
    from features.scaling.figures import plot_isoflop  # matplotlib: only when drawing

    return plot_isoflop(points, iso, convention, out_path)


def _draw_fit(points: list[Point], found: Fit, convention: str, out_path: Path) -> Path:
    from features.scaling.figures import plot_fit  # matplotlib: only when drawing

    return plot_fit(points, found, convention, out_path)
