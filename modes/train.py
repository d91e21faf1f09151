"""``mode=train``: data -> tokenizer -> task -> ``Trainer.fit`` -> a run directory; a sweep's
job re-run in its directory is skipped when it completed, resumed when it left a last.ckpt."""

from __future__ import annotations

import shutil
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import lightning as L
import torch

from analysis.records import DamagedRecord, warn
from analysis.run_record import FINISHED, HEADLINE, Status, read_record, run_record, write_record
from analysis.time_to_target import first_reached
from common.provenance import code_label, code_version, provenance, same_code
from common.ranks import global_rank
from conf.schema import Settings
from data.datamodule import LMDataModule, prepared_datamodule
from data.tokenizer import save_tokenizer
from models.config import ModelConfig
from modes import SweepConflict
from modes.fitting import fit
from modes.inference import sample_text
from modes.report import refresh
from training.budget import apply_budget
from training.checkpoint import check_language_model, check_resume, read_checkpoint
from training.compile import compile_network
from training.precision import native_precision
from training.task import LanguageModelTask, task_class
from training.trainer import finish_logger, training_trainer


def new_task(
    settings: Settings, model_config: ModelConfig, datamodule: LMDataModule, **options: Any
) -> LanguageModelTask:
    """An untrained language-model task of ``model_config`` (its vocabulary and padding id
    the datamodule's tokenizer's) for ``settings``' optimiser and data; ``options``: the task's
    other keywords (``total_steps``, ``seconds_budget``)."""
    model_config = replace(
        model_config, vocab_size=datamodule.vocab_size, pad_token_id=datamodule.pad_token_id
    )
    return task_class(model_config.arch)(
        model_config=model_config,
        optim_config=settings.optim,
        tokenizer_json=datamodule.tokenizer.to_str(),
        data_config=settings.data,
        chars_per_token=datamodule.chars_per_token,
        bytes_per_token=datamodule.bytes_per_token,
        **options,
    )


def run(settings: Settings, callbacks: Sequence[L.Callback] = ()) -> dict[str, Any]:
    started_at = time.time()
    out_dir = Path(settings.job.output_dir)
    resume = settings.job.ckpt_path
    if settings.sweep_dir is not None:
        done, resume = sweep_job_state(
            out_dir, resume, settings.overrides, settings.sweep.rerun_changed
        )
        if done is not None:
            return done
    settings = native_precision(settings)  # before any work: it may refuse the precision
    L.seed_everything(settings.job.seed, workers=True, verbose=False)
    trained = read_checkpoint(resume)["hyper_parameters"] if resume else None
    if trained:
        check_language_model(resume, trained, "train")
        changes = check_resume(resume, trained, settings.model, settings.optim)
        if global_rank() == 0:
            for change in changes:
                warn(f"resuming ckpt_path={resume} with {change}")

    model_config = settings.model
    datamodule = prepared_datamodule(
        settings.data,
        model_config.arch,
        model_config.max_seq_len,
        seed=settings.job.seed,
        stage="fit",
        tokenizer_json=trained["tokenizer_json"] if trained else None,
    )
    task = new_task(
        settings, model_config, datamodule, seconds_budget=settings.trainer.budget.seconds
    )
    counts = {
        "params": task.model.num_parameters(exclude_embeddings=True),
        "params_with_embeddings": task.model.num_parameters(exclude_embeddings=False),
    }
    if global_rank() == 0:
        out_dir.mkdir(parents=True, exist_ok=True)
        save_tokenizer(datamodule.tokenizer, out_dir)
        print(
            f"tinylm: {model_config.arch} with {counts['params']:,} parameters "
            f"({counts['params_with_embeddings']:,} with embeddings), run dir {out_dir}"
        )

    prepared = time.time()  # the data, its tokenizer and the network are ready
    trainer = training_trainer(settings, out_dir, callbacks)
    apply_budget(settings, trainer, model_config, task.flops_per_token)
    if settings.trainer.compile:
        note = compile_network(task.model)
        if note and global_rank() == 0:
            warn(note)
    started = time.perf_counter()
    fit(trainer, task, datamodule, resume, settings)
    if "val/loss" not in trainer.callback_metrics:
        # Resumed from a checkpoint taken at the last step: nothing was left to train.
        trainer.validate(task, datamodule=datamodule, verbose=False)
    train_seconds = time.perf_counter() - started

    checkpointing = trainer.checkpoint_callback
    best = checkpointing.best_model_score
    last = {k: float(v) for k, v in trainer.callback_metrics.items()}
    # A callback that stopped the run says how it ended (an Optuna search's pruner: pruned).
    ended = [c.run_status for c in trainer.callbacks if getattr(c, "run_status", None)]
    metrics = run_record(
        Status(ended[0]) if ended else Status.COMPLETED,
        arch=model_config.arch,
        seed=settings.job.seed,  # what mode=reproduce re-runs it with, whatever the default
        step=trainer.global_step,
        best_val_loss=float(best) if best is not None else last.get("val/loss"),
        **{f"val_{name}": last.get(f"val/{name}") for name in ("loss", "ppl", "bpc", "bpb", "acc")},
        tokens_per_sec=task.tokens_per_sec(),
        train_seconds=train_seconds,
        # What the training steps consumed (resumed runs included; validation excluded):
        # the currency of trainer.budget and of the sweep summary's time to a target loss.
        consumed={
            "steps": trainer.global_step,
            "tokens": task.consumed["tokens"],
            "flops": task.consumed["tokens"] * task.flops_per_token,
            "seconds": task.consumed["seconds"],
        },
        flops_per_token=task.flops_per_token,
        # When and how the job ran: parallel sweep jobs overlap, each on its share of threads.
        started_at=started_at,
        finished_at=time.time(),
        threads=torch.get_num_threads(),
        # Where this process's time went; the closing sample's is added when it is drawn.
        seconds={
            "data": prepared - started_at,
            "training": train_seconds - task.validation_seconds,
            "validation": task.validation_seconds,
        },
        best_ckpt=checkpointing.best_model_path,
        **_to_target(task.val_curve, settings.trainer.stop_at_loss),
        val_curve=task.val_curve,
        overrides=settings.overrides,
        config={f"model.{k}": v for k, v in model_config.to_dict().items()},
        settings=settings.plain(),
        provenance=provenance(
            settings.trainer.precision,
            settings.trainer.accelerator,
            compiled=settings.trainer.compile,
        ),
        **counts,
    )
    if trainer.is_global_zero:
        write_record(out_dir, metrics)
        sampling = time.perf_counter()
        metrics["sample"] = _final_report(task, datamodule, settings, metrics)
        metrics["seconds"]["sample"] = time.perf_counter() - sampling
        write_record(out_dir, metrics)  # with the closing sample, which the run's page shows
        refresh(out_dir)
    finish_logger(trainer)
    return metrics


def _to_target(val_curve: list[list[float]], target: float | None) -> dict[str, Any]:
    """The record's seconds_to_target and steps_to_target under trainer.stop_at_loss: at the
    first validation that reached it, None for a run that never got there."""
    if target is None:
        return {}
    reached = first_reached({"val_curve": val_curve}, target) or {}
    steps = reached.get("steps")
    return {
        "seconds_to_target": reached.get("seconds"),
        "steps_to_target": None if steps is None else int(steps),
    }


def sweep_job_state(
    out_dir: Path, resume: str | None, overrides: dict[str, str], rerun_changed: bool = False
) -> tuple[dict[str, Any] | None, str | None]:
    """(stored metrics when the job completed already, the checkpoint to resume from) of a
    sweep job whose directory may hold an earlier run; other settings there are refused. A
    "running" record is left at once, so that a job killed before its first checkpoint is
    recognised."""
    try:
        stored = read_record(out_dir)
    except DamagedRecord as err:  # stop rather than overwrite it: it may be a finished run's
        raise SweepConflict(
            f"{err}, so whether {out_dir} holds this job cannot be checked; delete that file "
            "to run the job again (from its checkpoints/last.ckpt when there is one), or give "
            "a new hydra.sweep.dir"
        ) from None
    if stored is None:
        if global_rank() == 0:
            write_record(out_dir, run_record(Status.RUNNING, overrides=overrides))
    else:
        check_same_job(out_dir, stored.get("overrides", {}), overrides)
    if stored is not None and stored.get("status") in FINISHED:
        if _ran_other_code(out_dir, stored, rerun_changed):
            return None, resume
        print(
            f"tinylm: {out_dir} already {stored['status']}, skipping it (delete that directory to "
            "train it again from scratch)"
        )
        return stored, resume
    last = out_dir / "checkpoints" / "last.ckpt"
    if resume is None and last.is_file():
        print(f"tinylm: resuming the unfinished job in {out_dir} from {last}")
        return None, str(last)
    return None, resume


def _ran_other_code(out_dir: Path, stored: dict[str, Any], rerun_changed: bool) -> bool:
    """Whether a completed job's code differs from this checkout's and is to be trained again
    (``rerun_changed``: its checkpoints and records are deleted first); says which it is."""
    now = {"code": code_version()}
    if same_code(stored.get("provenance"), now):
        return False
    earlier = code_label(stored.get("provenance"))
    ran = f"{out_dir} completed on {earlier}, not this checkout's {code_label(now)}"
    if not rerun_changed:
        warn(f"{ran}; its results are reused (sweep.rerun_changed=true trains it again)")
        return False
    warn(f"{ran}; sweep.rerun_changed=true: training it again from scratch")
    if global_rank() == 0:
        shutil.rmtree(out_dir / "checkpoints", ignore_errors=True)
        running = run_record(Status.RUNNING, overrides=stored.get("overrides", {}))
        write_record(out_dir, running)
    return True


def check_same_job(out_dir: Path, stored: dict[str, str], requested: dict[str, str]) -> None:
    # summary.* shapes the sweep's summary and sweep.* its re-run, not its jobs: a re-run may
    # change them.
    keys = {k for k in {*stored, *requested} if not k.startswith(("summary.", "sweep."))}
    differ = sorted(k for k in keys if stored.get(k) != requested.get(k))
    if differ:
        pairs = ", ".join(f"{k}={requested.get(k)} (there: {stored.get(k)})" for k in differ)
        raise SweepConflict(
            f"{out_dir} holds a job with other settings: {pairs}. A sweep re-run in its own "
            "directory needs the same command; for new values, leave out hydra.sweep.dir (or "
            "give a new one)"
        )


def _final_report(
    task: LanguageModelTask, datamodule: LMDataModule, settings: Settings, metrics: dict[str, Any]
) -> str:
    """Print the headline metrics and a sample, as the README promises."""
    print("\n=== tinylm results ===")
    for key in HEADLINE:
        if metrics.get(key) is not None:
            print(f"{key:>16}: {metrics[key]:.4f}")
    # Eager even when trained compiled: each new length while generating would recompile.
    with torch.compiler.set_stance("force_eager"):
        sample = sample_text(task.model.cpu().eval(), datamodule.tokenizer, settings.job, "The")
    print(f"\n--- sample ---\n{sample}\n")
    return sample
