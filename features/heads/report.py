"""The head analyses' part of a report (``Feature.report``), read from each run's
``checkpoints/heads.json`` (``mode=heads``): two columns (the heads per layer that carry 90% of
the importance, the loss with half the heads gated off), the summary's ``## Heads`` section,
the prune curves and the head maps of each configuration; and the figures of one analysis.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt

from analysis.plots import band, plot_bands, save_figure
from analysis.records import warn
from analysis.report import Figure, Report
from analysis.report_columns import Column, run_dirs
from analysis.summary import Configuration, configuration_rows, configuration_table, group_runs

RESULTS_FILE = "heads.json"
# The share of a layer's importance whose heads count as the ones that matter.
IMPORTANCE_SHARE = 0.9


def add_heads(report: Report) -> None:
    """The runs' head analyses in ``report``, when any run has one."""
    configs = grouped_heads(report)
    analysed = {r["run"]: r["heads"] for config in configs for r in config.runs if "heads" in r}
    if not analysed:
        return
    heads_90 = {name: statistics.fmean(h["heads_for_90"]) for name, h in analysed.items()}
    half = {name: h["pruned_half_loss"] for name, h in analysed.items()}
    share = f"heads for {IMPORTANCE_SHARE:.0%} of importance"
    report.columns += [
        Column("heads_90", share, "heads", None, heads_90),
        Column("pruned_half_loss", "loss, half the heads pruned", "heads", False, half),
    ]
    report.appendix.append(heads_section(configs))
    report.run_files.append(f"checkpoints/{RESULTS_FILE}")
    completed = [run["heads"] for config in configs for run in config.completed]
    if report.single and completed:
        curve = partial(plot_prune_curve, completed[0]["prune_curve"])
        report.figures.append(Figure("prune curve", curve))
    elif completed:
        curves = partial(plot_prune_curves, configs)
        report.figures.append(Figure("prune curves", curves, "prune_curves.png"))
    for config in configs:
        records = [run["heads"] for run in config.completed]
        if not records or len({(r["num_layers"], r["num_heads"]) for r in records}) > 1:
            continue
        title = f"{config.label()} (mean over {len(records)} run{'s' * (len(records) > 1)})"
        if report.single:  # a run's own page: no configuration, nothing averaged
            title = "the run"
        maps = partial(plot_head_maps, records, title=title)
        report.figures.append(Figure(f"head maps of {title}", maps))


def grouped_heads(report: Report) -> list[Configuration]:
    """The report's runs grouped by configuration, those with a ``heads.json`` holding it as
    ``heads``, compared by the loss with half the heads gated off."""
    dirs, runs = run_dirs(report.root, report.runs), []
    for run in report.runs:
        record = _heads_record(dirs[run["run"]])
        found = {"heads": record, "pruned_half_loss": record["pruned_half_loss"]} if record else {}
        runs.append({**run, **found})
    return group_runs(runs, report.keys, metric="pruned_half_loss")


def heads_section(configs: Sequence[Configuration]) -> str:
    """The ``## Heads`` section: the head analyses grouped by configuration over seeds."""
    rows = configuration_rows(configs, means=())
    for config, row in zip(configs, rows, strict=True):
        counts = [statistics.fmean(r["heads"]["heads_for_90"]) for r in config.completed]
        row["heads_90"] = (
            f"{statistics.fmean(counts):.2f} ± {statistics.stdev(counts):.2f}"
            if len(counts) > 1
            else ", ".join(f"{c:.2f}" for c in counts)
        )
        row["of_heads"] = config.completed[0]["heads"]["num_heads"] if counts else None
    analysed = sum(len(config.completed) for config in configs)
    return (
        "## Heads\n\n"
        f"`mode=heads` on each completed job ({analysed}), on its validation data: "
        f"`heads_90` is the number of heads per layer that carry {IMPORTANCE_SHARE:.0%} of "
        "the layer's importance (mean over layers, then mean ± std over seeds) of `of_heads`; "
        "`pruned_half_loss` the loss with the least important half of the heads gated off "
        "(mean ± std over seeds; against the best by 2 standard errors, Welch and Holm as "
        "above). Prune curves: `prune_curves.png`.\n\n"
        + configuration_table(configs, rows, extra=("heads_90", "of_heads"))
    )


def _heads_record(run_dir: Path) -> dict[str, Any] | None:
    path = run_dir / "checkpoints" / RESULTS_FILE
    if not path.is_file():
        return None
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        warn(f"{path} is not a mode=heads record ({err}); the report leaves it out")
        return None
    return record if isinstance(record, dict) and "heads_for_90" in record else None


def plot_head_maps(records: Sequence[dict[str, Any]], out_path: Path, title: str = "") -> Path:
    """Layer x head heatmaps of delta_loss, importance and entropy of ``heads.json`` records
    of one shape (each head's mean over them: a configuration's seeds), the uniform maximum in
    the entropy's label, each head's value written in its cell."""
    uniform = statistics.fmean(record["entropy_uniform"] for record in records)
    panels = (
        ("delta_loss", "loss with the head gated off - base"),
        ("importance", "importance: mean |dL/dgate|"),
        ("entropy", f"entropy, nats (uniform: {uniform:.2f})"),
    )
    num_layers, num_heads = records[0]["num_layers"], records[0]["num_heads"]
    fig, axes = plt.subplots(
        1, 3, figsize=(3 * max(3.0, 0.7 * num_heads + 1.5), max(2.5, 0.6 * num_layers + 1.5))
    )
    for ax, (name, label) in zip(axes, panels, strict=True):
        means = [[0.0] * num_heads for _ in range(num_layers)]
        # each head's rows, one per record (the records list their heads in one order)
        for rows in zip(*(record["heads"] for record in records), strict=True):
            means[rows[0]["layer"]][rows[0]["head"]] = statistics.fmean(row[name] for row in rows)
        image = ax.imshow(means, cmap="viridis", aspect="auto")
        for layer, row in enumerate(means):
            for head, mean in enumerate(row):
                text = f"{mean:.3g}"
                ax.text(head, layer, text, ha="center", va="center", fontsize=7, color="white")
        ax.set_xticks(range(num_heads))
        ax.set_yticks(range(num_layers))
        ax.set_xlabel("head")
        ax.set_ylabel("layer")
        ax.set_title(label, fontsize=8)
        fig.colorbar(image, ax=ax, fraction=0.046, pad=0.04)
    if title:
        fig.suptitle(title, fontsize=9)
    return save_figure(fig, out_path, dpi=110)


def plot_prune_curve(curve: Sequence[dict], out_path: Path, title: str = "") -> Path:
    """Loss against the fraction of heads gated off (least important first)."""
    fig, ax = plt.subplots(figsize=(5.5, 4))
    ax.plot([p["removed_fraction"] for p in curve], [p["loss"] for p in curve], marker="o")
    _prune_axes(ax, title)
    return save_figure(fig, out_path, dpi=110)


def plot_prune_curves(configs: Sequence[Configuration], out_path: Path) -> Path:
    """One prune curve per configuration (its runs with their ``heads.json`` as ``heads``) as
    the loss over each run's own base loss (so the seeds' different losses do not hide what
    pruning costs), the mean over its runs (seeds), the band between its lowest and highest
    run."""
    fig, ax = plt.subplots(figsize=(7, 4.5))
    plot_bands(
        ax,
        configs,
        lambda config: band([_over_base(r["heads"]["prune_curve"]) for r in config.completed]),
        marker="o",
    )
    _prune_axes(ax, "prune curves (mean over seeds; band: min to max)")
    ax.set_ylabel("loss - the run's loss with every head")
    ax.legend(fontsize=7)
    return save_figure(fig, out_path, dpi=120)


def _over_base(curve: Sequence[dict]) -> dict[float, float]:
    """A prune curve as removed fraction -> loss minus its first point's (nothing removed)."""
    return {p["removed_fraction"]: p["loss"] - curve[0]["loss"] for p in curve}


def _prune_axes(ax: plt.Axes, title: str) -> None:
    ax.set_xlabel("fraction of heads gated off (least important first)")
    ax.set_ylabel("loss")
    if title:
        ax.set_title(title, fontsize=9)
