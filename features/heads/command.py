"""``mode=heads``: what each attention head of a checkpoint does, or of every job of a sweep.

Scored on the data ``mode=eval`` scores (``modes/scoring.py``: the run's own split, or the
text the command line names), per head (``statistics.py``): the loss with the head gated
off against the loss with all (``delta_loss``, with its paired standard error over batches),
its importance (mean |dL/dgate|, Michel et al. 2019), its attention entropy (with the uniform
maximum beside it) and the attention it gives the previous, first and own token; then the
prune curve (the least important heads gated off first, a layer never emptied, the loss at
each tenth). ``heads.json`` and the figures ``heads.png`` and ``prune_curve.png`` go beside
the checkpoint. Over a sweep directory every completed job is analysed, then grouped by
configuration over seeds as the sweep summary groups them: the heads per layer that carry 90%
of the importance, the loss after pruning half the heads, the prune curves with a band over
seeds (``prune_curves.png``), and a section of the sweep's ``summary.md``.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from analysis.plots import plot_head_maps, plot_prune_curve, plot_prune_curves
from analysis.records import collect_runs, format_value, markdown_table, read_run
from analysis.summary import (
    REPLICATE_KEY,
    configuration_rows,
    configuration_table,
    group_runs,
    swept_keys,
)
from common.files import write_text_atomically
from common.provenance import provenance
from conf.schema import Settings
from features.heads.statistics import (
    HeadStats,
    head_stats,
    heads_for_share,
    heads_to_prune,
    prune_curve,
)
from modes.inference import checkpoints_to_evaluate
from modes.report import refresh
from modes.scoring import FLOAT32, record_head, scored_batches, task_and_data
from training.checkpoint import check_language_model, check_no_model_overrides, read_checkpoint

RESULTS_FILE = "heads.json"
# The share of a layer's importance whose heads count as the ones that matter.
IMPORTANCE_SHARE = 0.9
# The point of the prune curve a sweep compares: half the heads gated off.
HALF = 0.5
SECTION = "## Heads"
COLUMNS = ("layer", "head", *HeadStats.PER_HEAD)


def run(settings: Settings, callbacks: Sequence[Any] = ()) -> dict[str, Any]:
    target = Path(settings.job.ckpt_path)
    checkpoints = checkpoints_to_evaluate(target)
    sweep = target.is_dir() and not (target / "checkpoints" / "best.ckpt").is_file()
    if sweep:
        checkpoints = completed_jobs(target, checkpoints)
    records = [analyse_checkpoint(ckpt, settings) for ckpt in checkpoints]
    if not sweep:
        return records[0]
    section = sweep_section(target, records)
    summary = target / "summary.md"
    # The sweep summary's own sections are kept; an earlier head section is replaced.
    kept = summary.read_text(encoding="utf-8") if summary.is_file() else ""
    kept = kept.split(f"\n{SECTION}\n")[0].rstrip()
    write_text_atomically(summary, f"{kept}\n\n{section}".lstrip())
    print(section)
    print(f"wrote {summary}")
    refresh(target)
    return {"results": records, "summary_md": str(summary)}


def completed_jobs(sweep_dir: Path, checkpoints: Sequence[Path]) -> list[Path]:
    """The checkpoints of the sweep's jobs whose metrics.json says completed; none is an
    error that says so."""
    done = [
        ckpt
        for ckpt in checkpoints
        if (read_run(ckpt.parent.parent, "the job is left out") or {}).get("status") == "completed"
    ]
    if not done:
        raise ValueError(
            f"{sweep_dir} holds no completed job ({len(checkpoints)} with a checkpoint, none "
            "with a completed metrics.json); let the sweep finish (re-run its command) or pass "
            "one run's checkpoint"
        )
    return done


def analyse_checkpoint(ckpt: Path, settings: Settings) -> dict[str, Any]:
    """The head analysis of one checkpoint, printed, written as heads.json with its figures
    beside it; returns the record."""
    checkpoint = read_checkpoint(ckpt)
    hparams = checkpoint["hyper_parameters"]
    check_language_model(ckpt, hparams, "heads")
    check_no_model_overrides(settings, hparams["model_config"], ckpt)
    arch, window = hparams["model_config"]["arch"], hparams["model_config"]["max_seq_len"]
    task, datamodule, text = task_and_data(
        checkpoint, settings, stride=window if arch == "decoder" else None
    )
    device = torch.device("cuda" if settings.trainer.accelerator in ("gpu", "cuda") else "cpu")
    model = task.model.to(device).eval()
    batches = [
        {k: v.to(device) for k, v in batch.items()} for batch in scored_batches(datamodule, text)
    ]
    stats = head_stats(model, batches)
    curve = prune_curve(model, batches, stats)
    half = len(heads_to_prune(stats.importance, HALF))
    record = {
        **record_head(ckpt, checkpoint, text),
        "num_layers": len(stats.importance),
        "num_heads": len(stats.importance[0]),
        **{k: v for k, v in stats.to_dict().items() if k in ("base_loss", "tokens", "batches")},
        "entropy_uniform": stats.entropy_uniform,
        "heads_for_90": heads_for_share(stats.importance, IMPORTANCE_SHARE),
        "pruned_half_loss": next(p["loss"] for p in curve if len(p["removed"]) == half),
        "heads": stats.rows(),
        "prune_curve": curve,
        "provenance": provenance(FLOAT32, settings.trainer.accelerator),
    }
    out = ckpt.parent / RESULTS_FILE
    write_text_atomically(out, json_text(record))
    title = f"{arch} step {record['step']}, {text.data} ({text.label})"
    plot_head_maps(stats, ckpt.parent / "heads.png", title)
    plot_prune_curve(curve, ckpt.parent / "prune_curve.png", title)
    print(head_table(record))
    print(f"wrote {out}, {ckpt.parent / 'heads.png'}, {ckpt.parent / 'prune_curve.png'}")
    refresh(ckpt)  # its run's page shows the heads
    return record


def json_text(record: dict[str, Any]) -> str:
    return json.dumps(record, indent=1) + "\n"


def head_table(record: dict[str, Any]) -> str:
    """The per-head markdown table, with base loss, tokens and the uniform entropy above it."""
    rows = [{c: format_value(row[c]) for c in COLUMNS} for row in record["heads"]]
    curve = ", ".join(
        f"{point['removed_fraction']:.2f}: {point['loss']:.4f}" for point in record["prune_curve"]
    )
    return (
        f"base_loss {record['base_loss']:.4f} over {record['tokens']} tokens "
        f"({record['batches']} batches); uniform attention entropy "
        f"{record['entropy_uniform']:.3f} nats\n\n"
        + markdown_table(COLUMNS, rows)
        + f"\nprune curve (fraction removed: loss): {curve}\n"
    )


def sweep_section(sweep_dir: Path, records: Sequence[dict[str, Any]]) -> str:
    """The sweep's head analysis grouped by configuration over seeds, as markdown, with the
    prune curves' figure written beside summary.md."""
    analysed = {Path(r["checkpoint"]).parent.parent.name: r for r in records}
    runs = []
    for job in collect_runs(sweep_dir):  # every job, so that failed ones count as failed
        run = {"status": job.get("status"), "overrides": job.get("overrides", {})}
        record = analysed.get(job["run"])
        if record is not None:
            run.update(
                pruned_half_loss=record["pruned_half_loss"],
                heads_90=statistics.fmean(record["heads_for_90"]),
                num_heads=record["num_heads"],
                prune_curve=record["prune_curve"],
            )
        runs.append(run)
    keys = [k for k in swept_keys(runs) if k != REPLICATE_KEY]
    configs = group_runs(runs, keys, metric="pruned_half_loss")
    rows = configuration_rows(configs, means=())
    for config, row in zip(configs, rows, strict=True):
        counts = [r["heads_90"] for r in config.completed]
        row["heads_90"] = (
            f"{statistics.fmean(counts):.2f} ± {statistics.stdev(counts):.2f}"
            if len(counts) > 1
            else ", ".join(f"{c:.2f}" for c in counts)
        )
        row["of_heads"] = config.completed[0]["num_heads"] if counts else None
    figure = plot_prune_curves(configs, sweep_dir / "prune_curves.png")
    return (
        f"{SECTION}\n\n"
        f"`mode=heads` on each completed job ({len(records)}), on its validation data: "
        f"`heads_90` is the number of heads per layer that carry {IMPORTANCE_SHARE:.0%} of the "
        "layer's importance (mean over layers, then mean ± std over seeds) of `of_heads`; "
        "`pruned_half_loss` the loss with the least important half of the heads gated off "
        "(mean ± std over seeds; against the best by 2 standard errors, Welch and Holm as "
        f"above). Prune curves: `{figure.name}`.\n\n"
        + configuration_table(configs, rows, extra=("heads_90", "of_heads"))
    )
