"""``mode=heads``: what each attention head of a checkpoint does (``statistics.py``), on the data
``mode=eval`` scores; ``heads.json``, ``heads.png`` and ``prune_curve.png`` beside the
checkpoint. Over a sweep directory every completed job is analysed and the sweep's summary is
written again, with its ``## Heads`` section (``report.py``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from analysis.records import format_value, markdown_table
from analysis.report import build_report
from analysis.run_record import Status, read_run, record_path
from analysis.sweep_summary import write_summary_files
from common.files import write_text_atomically
from common.provenance import provenance
from conf.schema import Settings
from features.heads.report import (
    IMPORTANCE_SHARE,
    RESULTS_FILE,
    grouped_heads,
    heads_section,
    plot_head_maps,
    plot_prune_curve,
)
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

# The point of the prune curve a sweep compares: half the heads gated off.
HALF = 0.5
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
    # summary.md rendered again from the records, now with its head section and figure
    report = build_report(target)
    assert report is not None, "the analysed jobs are runs of the sweep"
    written = write_summary_files(report)
    print(heads_section(grouped_heads(report)))
    print(f"wrote {', '.join(str(path) for path in written)}")
    refresh(target, report=report)
    return {"results": records, "summary_md": str(target / "summary.md")}


def completed_jobs(sweep_dir: Path, checkpoints: Sequence[Path]) -> list[Path]:
    """The checkpoints of the sweep's jobs whose record says completed; none is an
    error that says so."""
    done = [
        ckpt
        for ckpt in checkpoints
        if (read_run(ckpt.parent.parent, "the job is left out") or {}).get("status")
        == Status.COMPLETED
    ]
    if not done:
        raise ValueError(
            f"{sweep_dir} holds no completed job ({len(checkpoints)} with a checkpoint, none "
            f"with a completed {record_path().name}); let the sweep finish (re-run its command) "
            "or pass one run's checkpoint"
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
        **{k: getattr(stats, k) for k in ("base_loss", "tokens", "batches", "entropy_uniform")},
        "heads_for_90": heads_for_share(stats.importance, IMPORTANCE_SHARE),
        "pruned_half_loss": next(p["loss"] for p in curve if len(p["removed"]) == half),
        "heads": stats.rows(),
        "prune_curve": curve,
        "provenance": provenance(FLOAT32, device.type),  # where it scored (auto: the CPU)
    }
    out = ckpt.parent / RESULTS_FILE
    write_text_atomically(out, json.dumps(record, indent=1) + "\n")
    title = f"{arch} step {record['step']}, {text.data} ({text.label})"
    plot_head_maps([record], ckpt.parent / "heads.png", title)
    plot_prune_curve(curve, ckpt.parent / "prune_curve.png", title)
    print(head_table(record))
    print(f"wrote {out}, {ckpt.parent / 'heads.png'}, {ckpt.parent / 'prune_curve.png'}")
    refresh(ckpt)  # its run's page shows the heads
    return record


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
