"""What a sweep directory says: runs grouped by configuration, with seeds as replicates.

Every run directory of a sweep holds a ``metrics.json``; this module reads them alone, so a
summary can be rebuilt at any time. Runs that differ only in ``seed`` are one configuration:
its ``best_val_loss`` is reported as mean ± sample standard deviation over its completed runs,
and each configuration is compared with the best one: a difference counts when it exceeds two
standard errors of the difference (``sqrt(se_a² + se_b²)``, ``se = std / sqrt(n)``). With one
run per configuration no spread is known and no difference is judged.

Writes ``summary.md`` (configurations, then runs), ``summary.csv`` (configurations),
``runs.csv`` (runs), ``heatmap_val_loss.png`` and ``curves_val_loss.png``.
"""

from __future__ import annotations

import csv
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (the backend must be chosen first)

from common.files import write_text_atomically  # noqa: E402
from modes.report import collect_runs, format_value, markdown_table, natural_key  # noqa: E402

REPLICATE_KEY = "seed"
_FIXED_KEYS = ("model.num_heads", "model.dropout")
_MEANS = ("val_ppl", "val_bpc", "val_acc", "tokens_per_sec")
_RUN_COLUMNS = ("params", "best_val_loss", "val_ppl", "val_acc", "tokens_per_sec", "status")


@dataclass
class Configuration:
    """The runs of one setting of the swept keys (other than the seed)."""

    values: dict[str, str]
    runs: list[dict[str, Any]] = field(default_factory=list)
    metric: str = "best_val_loss"  # the loss compared between configurations

    @property
    def completed(self) -> list[dict[str, Any]]:
        return [
            r
            for r in self.runs
            if r.get("status") == "completed" and r.get(self.metric) is not None
        ]

    @property
    def failed(self) -> int:
        return sum(r.get("status") == "failed" for r in self.runs)

    @property
    def n(self) -> int:
        return len(self.completed)

    @property
    def losses(self) -> list[float]:
        return [float(r[self.metric]) for r in self.completed]

    @property
    def mean(self) -> float | None:
        return statistics.fmean(self.losses) if self.losses else None

    @property
    def std(self) -> float | None:
        """Sample standard deviation; None below two runs."""
        return statistics.stdev(self.losses) if self.n >= 2 else None

    @property
    def standard_error(self) -> float | None:
        return None if self.std is None else self.std / math.sqrt(self.n)

    def mean_of(self, key: str) -> float | None:
        values = [float(r[key]) for r in self.completed if r.get(key) is not None]
        return statistics.fmean(values) if values else None

    def label(self) -> str:
        return ", ".join(f"{k}={v}" for k, v in self.values.items()) or "all runs"


def swept_keys(runs: Sequence[dict[str, Any]]) -> list[str]:
    """Override keys whose value differs between runs, in the order the user typed them."""
    keys: list[str] = []
    for run in runs:
        for key in run.get("overrides", {}):
            if key not in keys:
                keys.append(key)
    return [k for k in keys if len({str(r.get("overrides", {}).get(k)) for r in runs}) > 1]


def group_runs(
    runs: Sequence[dict[str, Any]], keys: Sequence[str], metric: str = "best_val_loss"
) -> list[Configuration]:
    """One ``Configuration`` per distinct setting of ``keys``, in natural order of the values."""
    groups: dict[tuple[str, ...], Configuration] = {}
    for run in runs:
        values = {k: str(run.get("overrides", {}).get(k)) for k in keys}
        group = groups.setdefault(tuple(values.values()), Configuration(values, metric=metric))
        group.runs.append(run)
    return [groups[k] for k in sorted(groups, key=lambda t: [natural_key(v) for v in t])]


def best_configuration(configs: Sequence[Configuration]) -> Configuration | None:
    """The configuration with the lowest mean loss (None when every one failed)."""
    ranked = [c for c in configs if c.mean is not None]
    return min(ranked, key=lambda c: c.mean) if ranked else None


def difference_from_best(
    config: Configuration, best: Configuration
) -> tuple[float | None, bool | None]:
    """(mean - best mean, whether it exceeds two standard errors of the difference); the
    second is None when either side has fewer than two runs."""
    if config.mean is None or best.mean is None:
        return None, None
    diff = config.mean - best.mean
    if config.standard_error is None or best.standard_error is None:
        return diff, None
    return diff, diff > 2 * math.hypot(config.standard_error, best.standard_error)


def mean_pm_std(config: Configuration) -> str:
    if config.mean is None:
        return "failed" if config.failed else ""
    if config.std is None:
        return f"{config.mean:.4f}"
    return f"{config.mean:.4f} ± {config.std:.4f}"


def write_sweep_summary(sweep_dir: Path) -> list[Path]:
    """The summary files of ``sweep_dir`` (see the module docstring); the paths written."""
    sweep_dir = Path(sweep_dir)
    runs = collect_runs(sweep_dir)
    if not runs:
        return []
    keys = swept_keys(runs)
    config_keys = [k for k in keys if k != REPLICATE_KEY]
    configs = group_runs(runs, config_keys)
    rows = configuration_rows(configs)
    run_columns = ["run", *keys, *(c for c in _FIXED_KEYS if c not in keys), *_RUN_COLUMNS]
    run_columns.append("error")
    run_rows = [{c: format_value(_run_value(run, c)) for c in run_columns} for run in runs]
    numbers = ["best_val_loss_mean", "best_val_loss_std", "vs_best", "exceeds_2se"]
    written = [
        _write_csv(
            sweep_dir / "summary.csv",
            [*config_keys, "n", "failed", *numbers, *_MEANS, "params"],
            rows,
        ),
        _write_csv(sweep_dir / "runs.csv", run_columns, run_rows),
    ]
    markdown = (
        f"# Sweep {sweep_dir}\n\n{_explanation(configs, rows, len(runs))}\n\n"
        "## Configurations\n\n"
        + configuration_table(configs, rows, [*_MEANS, "params"])
        + "\n## Runs\n\n"
        + markdown_table(run_columns, run_rows)
    )
    written.append(write_text_atomically(sweep_dir / "summary.md", markdown))
    if config_keys:
        written.append(plot_heatmap(configs, config_keys, sweep_dir / "heatmap_val_loss.png"))
    if any(r.get("val_curve") for r in runs):
        written.append(plot_curves(configs, sweep_dir / "curves_val_loss.png"))
    return written


def configuration_rows(
    configs: Sequence[Configuration], means: Sequence[str] = (*_MEANS, "params")
) -> list[dict[str, Any]]:
    """One row per configuration: its key values, n, failed runs, the loss as mean and std,
    its difference from the best configuration and whether that exceeds the noise, and the
    means of the ``means`` metrics."""
    best = best_configuration(configs)
    rows = []
    for config in configs:
        diff, exceeds = difference_from_best(config, best) if best else (None, None)
        rows.append(
            {
                **config.values,
                "n": config.n,
                "failed": config.failed,
                "best_val_loss_mean": config.mean,
                "best_val_loss_std": config.std,
                "vs_best": diff,
                "exceeds_2se": exceeds,
                "is_best": config is best,
                "label": mean_pm_std(config),
                **{key: config.mean_of(key) for key in means},
            }
        )
    return rows


def configuration_table(
    configs: Sequence[Configuration], rows: Sequence[dict[str, Any]], extra: Sequence[str] = ()
) -> str:
    """The markdown table of ``configuration_rows``: the metric as mean ± std, its verdict
    against the best configuration, then the ``extra`` columns."""
    keys = list(configs[0].values) if configs else []
    metric = configs[0].metric if configs else "best_val_loss"
    columns = [*keys, "n", "failed", metric, "vs_best", *extra]
    return markdown_table(columns, [{**_display(row), metric: row["label"]} for row in rows])


def _display(row: dict[str, Any]) -> dict[str, Any]:
    """A configuration row as the markdown table shows it (the metric's cell: ``label``)."""
    if row["is_best"]:
        verdict = "best"
    elif row["vs_best"] is None:
        verdict = ""
    else:
        judged = {True: " (> 2 SE)", False: " (within noise)", None: ""}[row["exceeds_2se"]]
        verdict = f"+{row['vs_best']:.4f}{judged}"
    shown = {k: format_value(v) for k, v in row.items()}
    return {**shown, "vs_best": verdict}


def _explanation(
    configs: Sequence[Configuration], rows: Sequence[dict[str, Any]], n_runs: int
) -> str:
    text = (
        f"{n_runs} runs in {len(configs)} configurations. best_val_loss is the mean ± "
        "sample standard deviation over a configuration's completed runs (seeds are "
        "replicates); vs_best is its difference from the best configuration's mean, "
        '"> 2 SE" when that exceeds two standard errors of the difference.'
    )
    if min(c.n for c in configs) < 2:
        text += (
            " Configurations with fewer than 2 completed runs have no known spread and their "
            "differences are not judged; add seeds (e.g. seed=1,2,3) to judge them."
        )
    beyond = [c.label() for c, row in zip(configs, rows, strict=True) if row["exceeds_2se"]]
    if beyond:
        text += f" Worse than the best beyond noise: {'; '.join(beyond)}."
    return text


def _run_value(run: dict[str, Any], column: str) -> Any:
    return {**run.get("config", {}), **run.get("overrides", {}), **run}.get(column)


def _write_csv(path: Path, columns: Sequence[str], rows: Sequence[dict[str, Any]]) -> Path:
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=columns, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(
            {c: "" if row.get(c) is None else row.get(c) for c in columns} for row in rows
        )
    return path


def heatmap_cells(
    configs: Sequence[Configuration], keys: Sequence[str]
) -> tuple[list[str], list[str], list[list[Configuration | None]]]:
    """(row values, column values, the configuration drawn in each cell) over the first two
    keys; with more keys a cell shows the configuration with the lowest mean among its own."""
    row_key, col_key = keys[0], (keys[1] if len(keys) > 1 else None)
    row_values = sorted({c.values[row_key] for c in configs}, key=natural_key)
    col_values = sorted({c.values[col_key] for c in configs}, key=natural_key) if col_key else [""]
    cells: list[list[Configuration | None]] = [[None] * len(col_values) for _ in row_values]
    for config in configs:
        i = row_values.index(config.values[row_key])
        j = col_values.index(config.values[col_key]) if col_key else 0
        current = cells[i][j]
        if current is None or (
            config.mean is not None and (current.mean is None or config.mean < current.mean)
        ):
            cells[i][j] = config
    return row_values, col_values, cells


def plot_heatmap(configs: Sequence[Configuration], keys: Sequence[str], out_path: Path) -> Path:
    """Mean best validation loss per cell with its spread; failed cells hatched. The colour
    range is never narrower than four standard deviations, so noise does not look like a
    result; cells worse than the best beyond two standard errors are starred."""
    row_values, col_values, cells = heatmap_cells(configs, keys)
    ranked = [c for c in configs if c.mean is not None]
    best = best_configuration(configs)
    grid = [[math.nan if c is None or c.mean is None else c.mean for c in row] for row in cells]
    stds = [c.std for c in ranked if c.std is not None]
    low = best.mean if best else 0.0
    high = max((c.mean for c in ranked), default=low)
    high = max(high, low + 4 * max(stds, default=0.0), low + 1e-6)
    fig, ax = plt.subplots(figsize=(2.2 + 1.6 * len(col_values), 1.6 + 0.9 * len(row_values)))
    image = ax.imshow(grid, cmap="viridis_r", aspect="auto", vmin=low, vmax=high)
    fig.colorbar(image, ax=ax, label="best validation loss (mean over seeds)")
    ax.set_xticks(range(len(col_values)), col_values)
    ax.set_yticks(range(len(row_values)), row_values)
    ax.set_xlabel(keys[1] if len(keys) > 1 else "")
    ax.set_ylabel(keys[0])
    for i, row in enumerate(cells):
        for j, config in enumerate(row):
            if config is None:
                text, light = "-", True
            elif config.mean is None:
                text, light = "failed", True
                ax.add_patch(plt.Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, hatch="xx", lw=0))
            else:
                _, exceeds = difference_from_best(config, best)
                text = mean_pm_std(config).replace(" ± ", "\n± ") + ("*" if exceeds else "")
                if config.failed:
                    text += f"\n({config.failed} failed)"
                # Dark text on the light (low-loss) end of the colour map, white on the dark.
                light = config.mean - low <= 0.5 * (high - low)
            color = "black" if light else "white"
            ax.text(j, i, text, ha="center", va="center", fontsize=8, color=color)
    counts = sorted({c.n for c in configs})
    caption = (
        f"n = {counts[0]}" if len(counts) == 1 else f"n = {counts[0]}–{counts[-1]}"
    ) + " runs per cell; * worse than the best beyond 2 standard errors"
    if not stds:
        caption = f"n = {max(counts, default=0)} per cell: no spread, differences not judged"
    ax.set_title(f"validation loss\n{caption}", fontsize=9)
    fig.tight_layout()
    fig.savefig(out_path, dpi=120)
    plt.close(fig)
    return out_path


def mean_curve(config: Configuration) -> tuple[list[int], list[float], list[float], list[float]]:
    """(steps, mean, low, high) of the validation loss at the steps every completed run of
    ``config`` evaluated; low/high are the min and max over its runs."""
    curves = [dict(map(tuple, r["val_curve"])) for r in config.completed if r.get("val_curve")]
    if not curves:
        return [], [], [], []
    steps = sorted(set.intersection(*(set(c) for c in curves)))
    values = [[c[s] for c in curves] for s in steps]
    return (
        steps,
        [statistics.fmean(v) for v in values],
        [min(v) for v in values],
        [max(v) for v in values],
    )


def plot_curves(configs: Sequence[Configuration], out_path: Path) -> Path:
    """Validation loss against step: one line per configuration (mean over its runs), the
    band between its best and worst run."""
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for config in configs:
        steps, mean, low, high = mean_curve(config)
        if not steps:
            continue
        (line,) = ax.plot(steps, mean, label=f"{config.label()} (n={config.n})")
        if config.n > 1:
            ax.fill_between(steps, low, high, color=line.get_color(), alpha=0.2)
    ax.set_xlabel("step")
    ax.set_ylabel("validation loss")
    ax.set_title("validation loss (mean over seeds; band: min to max)", fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out_path, dpi=120)
    plt.close(fig)
    return out_path
