"""tinylm's single entry point: ``python train.py [mode=train|eval|generate|attention] ...``.

``main`` is the Hydra wrapper; ``run(cfg)`` does the work and is what the tests call. This
file wires configs, data, task, trainer and logger together; it owns no model or data logic.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
import warnings
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.experimental.callback import Callback
from omegaconf import DictConfig

from conf.schema import (
    Settings,
    check_data_files,
    check_no_model_overrides,
    check_resume_model,
    cli_overrides,
    parse_settings,
)

# Quiet, offline-safe defaults; the environment can still override each one.
os.environ.setdefault("WANDB_SILENT", "true")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
warnings.filterwarnings("ignore", message=r".*does not have many workers.*")
warnings.filterwarnings("ignore", message=r".*LeafSpec.*")


def _quiet_lightning() -> None:
    """One copy of Lightning's messages (Hydra's root handler would repeat them), no ads."""
    rank_zero = logging.getLogger("lightning.pytorch.utilities.rank_zero")
    rank_zero.addFilter(lambda record: "litlogger" not in record.getMessage())
    logging.getLogger("lightning.pytorch").propagate = False


_quiet_lightning()


def run(cfg: DictConfig) -> dict[str, Any]:
    """Run the job ``cfg.mode`` describes and return its metrics."""
    settings = parse_settings(cfg)
    import torch

    # Subnormal floats are 10-100x slower on x86 CPUs, and training makes many: softmax
    # gradients and Adam moments of tokens the model never predicts. Flushing them to zero
    # took the shakespeare_char preset from 569 s to 86 s at the same validation loss.
    torch.set_flush_denormal(True)
    job = {"train": train, "eval": evaluate, "generate": generate, "attention": attention,
           "export": export}
    return job[settings.run.mode](settings)


class Interrupted(Exception):
    """Training stopped on SIGINT/SIGTERM; ``exit_code`` is the shell's 128 + signal."""

    def __init__(self, message: str, signum: int) -> None:
        super().__init__(message)
        self.exit_code = 128 + signum


# Extra Lightning callbacks for every training run (tests add fault injectors here).
EXTRA_CALLBACKS: list[Any] = []


def _global_rank() -> int:
    """This process's rank, known before the Trainer exists (DDP children, SLURM tasks)."""
    from lightning.fabric.utilities.rank_zero import _get_rank

    return _get_rank() or 0


# --------------------------------------------------------------------------- train


def train(settings: Settings) -> dict[str, Any]:
    import lightning as L

    from data.tokenizer import save_tokenizer
    from models.checkpoint import read_checkpoint
    from models.config import ModelConfig
    from models.report import write_metrics
    from models.tasks import task_class

    out_dir = Path(settings.run.output_dir)
    resume = settings.run.ckpt_path
    if _is_multirun():
        done, resume = _sweep_job_state(out_dir, resume)
        if done is not None:
            return done
    L.seed_everything(settings.run.seed, workers=True, verbose=False)
    resumed_hparams = read_checkpoint(resume)["hyper_parameters"] if resume else None
    if resumed_hparams:
        check_resume_model(resume, resumed_hparams["model_config"], settings.model)
    tokenizer_json = resumed_hparams["tokenizer_json"] if resumed_hparams else None
    check_data_files(settings.data)

    arch = settings.model["arch"]
    dm = _datamodule(settings, arch, settings.model["max_seq_len"], tokenizer_json)
    _prepare(dm, settings.data, "fit")
    model_config = ModelConfig.from_dict(_model_dict(settings.model, dm))
    task = task_class(arch)(
        model_config=model_config.to_dict(),
        optim_config=asdict(settings.optim),
        tokenizer_json=dm.tokenizer.to_str(),
        data_config=asdict(settings.data),
        chars_per_token=dict(dm.chars_per_token),
    )
    if resumed_hparams and resumed_hparams["model_config"] != task.hparams["model_config"]:
        raise ValueError(
            f"ckpt_path={resume} was trained with another model config; resume with the "
            "same model.* settings, or start a new run without ckpt_path"
        )
    params = model_config_summary(task)
    if _global_rank() == 0:
        out_dir.mkdir(parents=True, exist_ok=True)
        save_tokenizer(dm.tokenizer, out_dir)
        print(f"tinylm: {arch} with {params['params']:,} parameters "
              f"({params['params_with_embeddings']:,} with embeddings), run dir {out_dir}")

    trainer = _trainer(settings, out_dir, arch)
    if settings.trainer.compile:
        task.model.compile()
    started = time.perf_counter()
    _fit(trainer, task, dm, resume, out_dir)
    if "val/loss" not in trainer.callback_metrics:
        # Resumed from a checkpoint taken at the last step: nothing was left to train.
        trainer.validate(task, datamodule=dm, verbose=False)
    train_seconds = time.perf_counter() - started

    checkpointing = trainer.checkpoint_callback
    best = checkpointing.best_model_score
    last_metrics = {k: float(v) for k, v in trainer.callback_metrics.items()}
    metrics = {
        "status": "completed",
        "arch": arch,
        "step": trainer.global_step,
        "best_val_loss": float(best) if best is not None else last_metrics.get("val/loss"),
        "val_loss": last_metrics.get("val/loss"),
        "val_ppl": last_metrics.get("val/ppl"),
        "val_bpc": last_metrics.get("val/bpc"),
        "val_acc": last_metrics.get("val/acc"),
        "tokens_per_sec": task.tokens_per_sec(),
        "train_seconds": train_seconds,
        "best_ckpt": checkpointing.best_model_path,
        "overrides": cli_overrides(),
        "config": {f"model.{k}": v for k, v in task.hparams["model_config"].items()},
        **params,
    }
    if trainer.is_global_zero:
        write_metrics(out_dir, metrics)
        metrics["sample"] = _final_report(task, dm, settings, metrics)
    _finish_logger(trainer)
    return metrics


def _fit(trainer, task, dm, resume: str | None, out_dir: Path) -> None:
    """``trainer.fit``; on SIGINT/SIGTERM a resumable checkpoint is saved and ``Interrupted``
    raised (one line for the user, exit code 130/143)."""
    import signal

    from models.fault_tolerance import SaveOnInterrupt
    from models.report import write_metrics

    guard = next(c for c in trainer.callbacks if isinstance(c, SaveOnInterrupt))
    try:
        trainer.fit(task, datamodule=dm, ckpt_path=resume, weights_only=True)
    except (SystemExit, KeyboardInterrupt) as err:
        # Lightning ends an interrupted fit with SystemExit: SIGTERMException after a
        # signal, sys.exit(1) after a KeyboardInterrupt (our second Ctrl-C).
        signum = guard.signal or signal.SIGINT
        name = signal.Signals(signum).name
        if guard.saved is None:
            raise Interrupted(
                f"training interrupted by {name} (twice) and stopped at once, without saving; "
                f"the last regular checkpoint is in {out_dir / 'checkpoints'}", signum,
            ) from err
        resume_hint = f"python train.py ckpt_path={guard.saved}"
        if trainer.is_global_zero:
            write_metrics(out_dir, {"status": "interrupted", "step": guard.step,
                                    "resume_ckpt": str(guard.saved),
                                    "overrides": cli_overrides()})
        raise Interrupted(
            f"training interrupted by {name} at step {guard.step}; saved {guard.saved}. "
            f"Resume with: {resume_hint} (plus the same settings)", signum,
        ) from err


def _sweep_job_state(out_dir: Path, resume: str | None) -> tuple[dict | None, str | None]:
    """A sweep job re-run in the same sweep directory: skip it when it completed (returning
    its stored metrics), resume it from checkpoints/last.ckpt when it got that far."""
    from models.report import read_metrics

    stored = read_metrics(out_dir)
    if stored and stored.get("status") == "completed":
        print(f"tinylm: {out_dir} already completed, skipping it (delete its metrics.json to "
              "train it again)")
        return stored, resume
    last = out_dir / "checkpoints" / "last.ckpt"
    if resume is None and last.is_file():
        print(f"tinylm: resuming the unfinished job in {out_dir} from {last}")
        return None, str(last)
    return None, resume


def _prepare(dm, data, stage: str) -> None:
    """``prepare_data`` and ``setup``, with the datasets library's errors made readable."""
    from datasets.exceptions import DatasetGenerationError

    try:
        dm.prepare_data()
    except DatasetGenerationError as err:
        cause = err.__cause__ or err.__context__
        raise ValueError(
            f"cannot read the corpus data.path={data.path}: {cause or err}. An empty file "
            "or one without a single record does this; check the file and data.text_column"
        ) from None
    dm.setup(stage)


def _datamodule(settings: Settings, arch: str, max_seq_len: int, tokenizer_json: str | None):
    from data.datamodule import LMDataModule

    return LMDataModule(settings.data, arch=arch, max_seq_len=max_seq_len,
                        seed=settings.run.seed, tokenizer_json=tokenizer_json)


def _model_dict(model: dict[str, Any], dm) -> dict[str, Any]:
    """The model config with what the tokenizer decides (vocabulary and special ids)."""
    return {**model, "vocab_size": dm.vocab_size, "pad_token_id": dm.pad_token_id}


def model_config_summary(task) -> dict[str, int]:
    return {
        "params": task.model.num_parameters(exclude_embeddings=True),
        "params_with_embeddings": task.model.num_parameters(exclude_embeddings=False),
    }


def _trainer(settings: Settings, out_dir: Path, arch: str):
    import lightning as L
    from lightning.pytorch.callbacks import LearningRateMonitor, ModelCheckpoint, TQDMProgressBar

    checkpointing = ModelCheckpoint(
        dirpath=out_dir / "checkpoints", filename="best", monitor="val/loss", mode="min",
        save_top_k=1, save_last=True, auto_insert_metric_name=False,
    )
    from models.fault_tolerance import AtomicCheckpointIO, SaveOnInterrupt

    logger = _logger(settings, out_dir)
    callbacks = [checkpointing, SaveOnInterrupt(out_dir / "checkpoints" / "last.ckpt"),
                 *EXTRA_CALLBACKS]
    if settings.trainer.enable_progress_bar:
        # Redrawing the bar every step costs more than a small CPU step's logging.
        callbacks.append(TQDMProgressBar(refresh_rate=settings.trainer.log_every_n_steps))
    if logger:
        callbacks.append(LearningRateMonitor(logging_interval="step"))
    kwargs = settings.trainer.trainer_kwargs()
    if kwargs["strategy"] == "ddp" and _is_multirun():
        # The ddp launcher re-runs this script with its command line, which under multirun
        # would re-run the whole sweep in every child; spawned workers run just this job.
        kwargs["strategy"] = "ddp_spawn"
    return L.Trainer(
        **kwargs,
        default_root_dir=out_dir,
        logger=logger or False,
        callbacks=callbacks,
        plugins=[AtomicCheckpointIO()],
        enable_model_summary=False,
        num_sanity_val_steps=0,
    )


def _logger(settings: Settings, out_dir: Path):
    cfg = settings.logger
    if cfg.kind == "none":
        return None
    if cfg.kind == "csv":
        from lightning.pytorch.loggers import CSVLogger

        return CSVLogger(save_dir=out_dir, name="", version="csv")
    from lightning.pytorch.loggers import WandbLogger

    overrides = cli_overrides()
    group = cfg.group or (Path(HydraConfig.get().sweep.dir).name if _is_multirun() else None)
    # WANDB_MODE in the environment wins over logger.mode; both default to offline.
    mode = os.environ.get("WANDB_MODE", cfg.mode)
    if mode == "online" and not _wandb_logged_in():
        raise ValueError(
            "logger.mode=online needs a Weights & Biases account: run `wandb login` or set "
            "WANDB_API_KEY, or keep the default logger.mode=offline and `wandb sync` later"
        )
    return WandbLogger(
        project=cfg.project, entity=cfg.entity, group=group, save_dir=str(out_dir),
        name=",".join(f"{k}={v}" for k, v in overrides.items()) or None, mode=mode,
        config={"settings": _plain_settings(settings), "overrides": overrides},
    )


def _wandb_logged_in() -> bool:
    import wandb

    return bool(os.environ.get("WANDB_API_KEY") or wandb.api.api_key)


def _plain_settings(settings: Settings) -> dict[str, Any]:
    return {
        "run": asdict(settings.run), "model": settings.model, "data": asdict(settings.data),
        "trainer": asdict(settings.trainer), "optim": asdict(settings.optim),
    }


def _finish_logger(trainer) -> None:
    from lightning.pytorch.loggers import WandbLogger

    if isinstance(trainer.logger, WandbLogger):
        import wandb

        # One wandb run per job: a multirun must not append its next job to this run.
        wandb.finish()


def _final_report(task, dm, settings: Settings, metrics: dict[str, Any]) -> str:
    """Print the headline metrics and a sample, as the README promises."""
    print("\n=== tinylm results ===")
    for key in ("best_val_loss", "val_loss", "val_ppl", "val_bpc", "val_acc", "tokens_per_sec"):
        if metrics.get(key) is not None:
            print(f"{key:>16}: {metrics[key]:.4f}")
    model = task.model.cpu().eval()
    if metrics["arch"] == "decoder":
        sample = _generate_text(model, dm.tokenizer, settings, settings.run.prompt or "The")
    else:
        sample = _fill_mask_text(model, dm.tokenizer, settings.run.prompt)
    print(f"\n--- sample ---\n{sample}\n")
    return sample


# --------------------------------------------------------------------------- eval


def evaluate(settings: Settings) -> dict[str, Any]:
    from models.report import markdown_table

    target = Path(settings.run.ckpt_path)
    checkpoints = _checkpoints_to_evaluate(target)
    check_no_model_overrides(settings, checkpoints[0])
    rows = [_evaluate_one(ckpt, settings) for ckpt in checkpoints]
    columns = ["checkpoint", "arch", "split", "loss", "ppl", "bpc", "acc", "step"]
    table = markdown_table(columns, [{c: _cell(r.get(c)) for c in columns} for r in rows])
    print(table)
    out = (target if target.is_dir() else target.parent) / "eval.json"
    out.write_text(json.dumps(rows if target.is_dir() else rows[0], indent=2))
    print(f"wrote {out}")
    return {"results": rows, "eval_json": str(out)}


def _cell(value: Any) -> Any:
    return f"{value:.4f}" if isinstance(value, float) else ("" if value is None else value)


def _checkpoints_to_evaluate(target: Path) -> list[Path]:
    from models.report import natural_key

    if target.is_file():
        return [target]
    if not target.is_dir():
        raise FileNotFoundError(f"ckpt_path={target} does not exist")
    own = target / "checkpoints" / "best.ckpt"
    found = [own] if own.is_file() else sorted(
        target.glob("*/checkpoints/best.ckpt"), key=lambda p: natural_key(p.parent.parent.name)
    )
    if not found:
        raise FileNotFoundError(
            f"no checkpoints/best.ckpt in {target} or in its run directories; pass a "
            "checkpoint file, a run directory or a sweep directory"
        )
    return found


def _evaluate_one(ckpt: Path, settings: Settings) -> dict[str, Any]:
    import lightning as L

    from data.config import DataConfig
    from models.checkpoint import read_checkpoint
    from models.tasks import task_class

    checkpoint = read_checkpoint(ckpt)
    hparams = checkpoint["hyper_parameters"]
    arch = hparams["model_config"]["arch"]
    data_config = _eval_data_config(DataConfig(**hparams["data_config"]), settings)
    dm = _datamodule(replace(settings, data=data_config), arch,
                     hparams["model_config"]["max_seq_len"], hparams["tokenizer_json"])
    _prepare(dm, data_config, "validate" if data_config.split == "validation" else "test")
    # bpc divides by the characters per token of the data evaluated, not of the training run.
    task = task_class(arch)(**{**hparams, "chars_per_token": dict(dm.chars_per_token)})
    task.load_state_dict(checkpoint["state_dict"])
    trainer = L.Trainer(
        accelerator=settings.trainer.accelerator, devices=1, logger=False,
        enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
        precision=settings.trainer.precision,
    )
    if data_config.split == "validation":
        results = trainer.validate(task, datamodule=dm, verbose=False)[0]
        stage = "val"
    else:
        results = trainer.test(task, datamodule=dm, verbose=False)[0]
        stage = "test"
    return {
        "checkpoint": str(ckpt), "arch": arch, "split": data_config.split,
        "step": int(checkpoint.get("global_step", 0)),
        **{name: float(results[f"{stage}/{name}"]) for name in ("loss", "ppl", "bpc", "acc")
           if f"{stage}/{name}" in results},
    }


def _eval_data_config(trained: Any, settings: Settings) -> Any:
    """The run's own data, unless the command line names other data (``data=...``)."""
    overrides = cli_overrides()
    if "data" in overrides:
        return settings.data
    changed = {k.removeprefix("data."): getattr(settings.data, k.removeprefix("data."))
               for k in overrides if k.startswith("data.")}
    return replace(trained, **{"split": settings.data.split, **changed})


# --------------------------------------------------------------------------- export


def export(settings: Settings) -> dict[str, Any]:
    """``mode=export``: the checkpoint's weights as ``NAME.safetensors`` beside it, with the
    model config and the tokenizer in the file's metadata."""
    from models.checkpoint import export_safetensors

    ckpt = Path(settings.run.ckpt_path)
    check_no_model_overrides(settings, ckpt)
    out = export_safetensors(ckpt, ckpt.with_suffix(".safetensors"))
    print(f"wrote {out}")
    return {"safetensors": str(out)}


# --------------------------------------------------------------------------- generate


def generate(settings: Settings) -> dict[str, Any]:
    from data.tokenizer import tokenizer_from_json
    from models.checkpoint import load_checkpoint

    loaded = load_checkpoint(settings.run.ckpt_path)
    check_no_model_overrides(settings, loaded.path)
    tokenizer = tokenizer_from_json(loaded.tokenizer_json)
    if loaded.config.arch == "decoder":
        text = _generate_text(loaded.model, tokenizer, settings, settings.run.prompt or "")
    else:
        text = _fill_mask_text(loaded.model, tokenizer, settings.run.prompt)
    print(text)
    return {"text": text}


def _generate_text(model, tokenizer, settings: Settings, prompt: str) -> str:
    import torch

    from data.tokenizer import special_tokens_of

    run = settings.run
    encoding = tokenizer.encode(prompt) if prompt else None
    ids = encoding.ids if encoding else []
    unk_id = tokenizer.token_to_id("[UNK]")
    if unk_id is not None and unk_id in ids:
        unknown = sorted({prompt[a:b] for i, (a, b) in zip(ids, encoding.offsets, strict=True)
                          if i == unk_id})
        print(f"tinylm: the tokenizer does not know {', '.join(map(repr, unknown))} in the "
              "prompt; they are read as [UNK] and left out of the output", file=sys.stderr)
    if len(ids) > model.config.max_seq_len:
        print(f"tinylm: the prompt has {len(ids)} tokens, more than the context of "
              f"{model.config.max_seq_len}; the model sees its last {model.config.max_seq_len}",
              file=sys.stderr)
    if not ids:  # an empty prompt starts a fresh document
        ids = [special_tokens_of(tokenizer).eos_id]
    generator = torch.Generator().manual_seed(run.seed)
    with warnings.catch_warnings():  # the long-prompt warning: said above, in one line
        warnings.simplefilter("ignore")
        out = model.generate(
            torch.tensor([ids]), max_new_tokens=run.max_new_tokens, temperature=run.temperature,
            top_k=run.top_k or None, top_p=run.top_p, generator=generator,
            eos_token_id=None,
        )
    return tokenizer.decode(out[0].tolist(), skip_special_tokens=True)


def _fill_mask_text(model, tokenizer, prompt: str | None) -> str:
    import torch

    from data.tokenizer import special_tokens_of

    specials = special_tokens_of(tokenizer)
    prompt = prompt or f"The {specials.mask} of the function is returned."
    if specials.mask not in prompt:
        raise ValueError(
            f"prompt={prompt!r} has no {specials.mask} token to fill; an encoder fills masks, "
            f"e.g. 'prompt=\"The {specials.mask} is returned.\"' (quoted whole for Hydra)"
        )
    # The encoder was trained on [CLS] ... [SEP] examples; the tokenizer adds neither.
    ids = [specials.cls_id, *tokenizer.encode(prompt).ids, specials.sep_id]
    results = model.fill_mask(torch.tensor([ids]), specials.mask_id, top_k=5)
    lines = [prompt]
    for number, prediction in enumerate(results[0], start=1):
        guesses = ", ".join(f"{tokenizer.id_to_token(i)!r} {p:.2f}" for i, p in
                            zip(prediction.token_ids, prediction.probs, strict=True))
        lines.append(f"  {specials.mask} #{number}: {guesses}")
    return "\n".join(lines)


# --------------------------------------------------------------------------- attention


def attention(settings: Settings) -> dict[str, Any]:
    import torch

    from data.tokenizer import tokenizer_from_json
    from models.checkpoint import load_checkpoint
    from models.report import plot_attention

    loaded = load_checkpoint(settings.run.ckpt_path)
    check_no_model_overrides(settings, loaded.path)
    tokenizer = tokenizer_from_json(loaded.tokenizer_json)
    prompt = settings.run.prompt or "The quick brown fox"
    ids = tokenizer.encode(prompt).ids
    if len(ids) > loaded.config.max_seq_len:  # as generate does: the model reads the last ones
        print(f"tinylm: the prompt has {len(ids)} tokens, more than the context of "
              f"{loaded.config.max_seq_len}; showing its last {loaded.config.max_seq_len}",
              file=sys.stderr)
        ids = ids[-loaded.config.max_seq_len:]
    if not ids:
        raise ValueError(f"prompt={prompt!r} encodes to no tokens; give a non-empty prompt")
    with torch.inference_mode():
        _, attentions = loaded.model(torch.tensor([ids]), output_attentions=True)
    # Decoded one by one, so byte-level BPE shows " class" rather than "Ġclass".
    tokens = [tokenizer.decode([i]) or tokenizer.id_to_token(i) for i in ids]
    out = Path(settings.run.ckpt_path).parent / "attention.png"
    plot_attention([a[0].numpy() for a in attentions], tokens, out,
                   title=f"{loaded.config.arch}: {prompt!r}")
    print(f"wrote {out}")
    return {"png": str(out), "tokens": tokens}


# --------------------------------------------------------------------------- entry


class SweepSummary(Callback):
    """At the end of a multirun: summary.csv, summary.md and the heatmap at the sweep root."""

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        sweep_dir = config.hydra.sweep.dir
        print(f"tinylm: sweep directory {sweep_dir}; if the sweep is interrupted, re-run the "
              f"same command with hydra.sweep.dir={sweep_dir}: finished runs are skipped, "
              "unfinished ones resume from their last checkpoint")

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        from models.report import write_sweep_summary

        written = write_sweep_summary(Path(config.hydra.sweep.dir))
        for path in written:
            print(f"tinylm: wrote {path}")


def _is_multirun() -> bool:
    return HydraConfig.initialized() and HydraConfig.get().mode.name == "MULTIRUN"


# ConnectionError: a Hub dataset or tokenizer while offline (the message says what to do).
USER_ERRORS = (ValueError, FileNotFoundError, IsADirectoryError, FloatingPointError,
               ConnectionError)


@hydra.main(config_path="conf", config_name="config", version_base="1.3")
def main(cfg: DictConfig) -> float | None:
    """Run one job. A user error prints one clear message, not a traceback (TINYLM_DEBUG=1
    shows it); under multirun a failing job is recorded as failed and the sweep goes on."""
    try:
        metrics = run(cfg)
    except Interrupted as err:
        # Not a failed job: the user (or the scheduler) stops the run, and the sweep with it.
        print(f"tinylm: {err}", file=sys.stderr)
        raise SystemExit(err.exit_code) from None
    except KeyboardInterrupt:
        print("tinylm: interrupted before training started; nothing to save", file=sys.stderr)
        raise SystemExit(130) from None
    except Exception as err:
        if _is_multirun():
            _record_failure(cfg, err)
            return None
        if isinstance(err, USER_ERRORS) and not os.environ.get("TINYLM_DEBUG"):
            print(f"tinylm: error: {err}", file=sys.stderr)
            raise SystemExit(1) from None
        raise
    return metrics.get("best_val_loss")


def _record_failure(cfg: DictConfig, err: Exception) -> None:
    import traceback

    from models.report import write_metrics

    traceback.print_exc()
    message = str(err) if isinstance(err, USER_ERRORS) else f"{type(err).__name__}: {err}"
    print(f"tinylm: this job failed, the sweep goes on: {message}", file=sys.stderr)
    write_metrics(Path(cfg.output_dir), {"status": "failed", "error": message,
                                         "overrides": cli_overrides()})
    if "wandb" in sys.modules:
        import wandb

        if wandb.run is not None:
            wandb.finish(exit_code=1)


if __name__ == "__main__":
    main()
