"""The configuration of one job: a dataclass per config group, validated once, into ``Settings``.

Each Hydra group maps 1:1 onto a dataclass that checks itself on creation: ``model`` onto
``models.config.ModelConfig``, ``data`` onto ``data.config.DataConfig``, and ``trainer``,
``logger``, ``optim``, ``eval``, ``export`` and the top-level keys (``JobConfig``) onto the
classes below. ``settings_from_tree`` builds them all before any data is touched, so a typo
costs seconds, not a tokenization run. Nothing here reads files or Hydra's runtime state (the
job's overrides and sweep: ``conf/hydra_runtime.py``), so the training layer imports these
classes without Hydra: holding settings against a checkpoint is its job
(``training/checkpoint.py``), checking data files the data layer's.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, ClassVar

from data.config import DataConfig
from data.labelled import TASKS as FINETUNE_TASKS
from data.labelled import Columns, LabelledTask, load_task
from models.config import ModelConfig, check_field_types, closest, from_mapping

EXPORT_FORMATS = ("safetensors", "hf")
PRECISIONS = ("32-true", "32", "16-mixed", "bf16-mixed", "bf16-true", "16-true", "64-true")
LOGGERS = ("wandb", "tensorboard", "csv", "none")
WEIGHTS = ("trained", "untrained")


@dataclass
class BudgetConfig:
    """``trainer.budget``: the compute each job of a sweep gets, so that arms whose steps cost
    differently are compared at equal compute (``training/budget.py`` turns it into steps or a
    stop). At most one is set; None for all = ``trainer.max_steps`` decides.

    tokens: tokens trained on, counted as batch_size x max_seq_len per micro-batch (exact for
        packed decoder blocks; an upper bound for encoder batches padded to their longest row).
    flops: training FLOPs, the model's ``flops_per_token`` (forward + backward) x tokens.
    seconds: wall time of the training steps, validation excluded; the learning-rate schedule
        then decays over the time spent instead of the steps taken.
    """

    tokens: int | None = None
    flops: float | None = None
    seconds: float | None = None

    def __post_init__(self) -> None:
        check_field_types(self, "trainer.budget.")
        chosen = self.chosen()
        if len(chosen) > 1:
            raise ValueError(
                f"trainer.budget sets {' and '.join(f'trainer.budget.{k}' for k in chosen)}; "
                "give one budget per run (each alone decides how long it trains)"
            )
        for name in chosen:
            if getattr(self, name) <= 0:
                raise ValueError(
                    f"trainer.budget.{name}={getattr(self, name)} must be > 0 (or null for none)"
                )

    def chosen(self) -> list[str]:
        """The names of the budgets that are set (none or one once validated)."""
        return [name for name in ("tokens", "flops", "seconds") if getattr(self, name) is not None]


@dataclass
class TrainerConfig:
    """The Lightning ``Trainer`` arguments we set (same names), plus ``compile``,
    ``head_stats_every`` (training/head_logging.py) and ``budget`` (a ``BudgetConfig``).

    No defaults here: ``conf/trainer/*.yaml`` is the one place they are written."""

    # The blocks below a key, each its own dataclass (conf.command_line checks their keys).
    NESTED: ClassVar[dict[str, type]] = {"budget": BudgetConfig}

    accelerator: str
    devices: Any
    num_nodes: int
    strategy: str
    precision: str
    max_steps: int
    max_epochs: int
    val_check_interval: Any
    check_val_every_n_epoch: int | None
    limit_val_batches: Any
    accumulate_grad_batches: int
    gradient_clip_val: float | None
    log_every_n_steps: int
    enable_progress_bar: bool
    deterministic: bool
    compile: bool
    head_stats_every: int | None
    budget: Any

    def __post_init__(self) -> None:
        self.precision = str(self.precision)  # Hydra reads trainer.precision=32 as an int
        check_field_types(self, "trainer.")
        if not isinstance(self.budget, BudgetConfig):
            if not isinstance(self.budget, Mapping):
                raise ValueError(
                    f"trainer.budget={self.budget!r} must be a block of tokens, flops and "
                    "seconds; set one as trainer.budget.flops=1e12"
                )
            self.budget = from_mapping(BudgetConfig, dict(self.budget), "trainer.budget.")
        if self.precision not in PRECISIONS:
            raise ValueError(
                f"trainer.precision={self.precision} is not one of {', '.join(PRECISIONS)}; "
                "use bf16-mixed on recent GPUs, 32-true on the CPU"
            )
        if self.precision == "16-mixed" and self.accelerator == "cpu":
            # Lightning would train in bf16-mixed instead, with a warning.
            raise ValueError(
                "trainer.precision=16-mixed (float16 with a gradient scaler) needs a GPU; on the "
                "CPU use trainer.precision=bf16-mixed"
            )
        if self.max_steps == 0 or (self.max_steps < 0 and self.max_epochs <= 0):
            raise ValueError(
                f"trainer.max_steps={self.max_steps} with trainer.max_epochs={self.max_epochs} "
                "never trains; set trainer.max_steps to a positive number (or max_epochs > 0)"
            )
        if self.accumulate_grad_batches < 1:
            raise ValueError(
                f"trainer.accumulate_grad_batches={self.accumulate_grad_batches} must be >= 1"
            )
        if self.log_every_n_steps < 1:
            raise ValueError(f"trainer.log_every_n_steps={self.log_every_n_steps} must be >= 1")
        if self.head_stats_every is not None and self.head_stats_every < 1:
            raise ValueError(
                f"trainer.head_stats_every={self.head_stats_every} must be >= 1: the steps "
                "between the heads' logged entropy and importance (null: off)"
            )

    def trainer_kwargs(self) -> dict[str, Any]:
        """The fields that are ``lightning.Trainer`` arguments (all but ``compile``,
        ``head_stats_every`` and ``budget``)."""
        kwargs = asdict(self)
        for own in ("compile", "head_stats_every", "budget"):
            kwargs.pop(own)
        return kwargs


@dataclass
class LoggerConfig:
    """Where metrics go: ``wandb`` (offline unless told otherwise), ``tensorboard``, ``csv``
    or ``none``."""

    kind: str = "wandb"
    project: str = "tinylm"
    mode: str = "offline"
    group: str | None = None
    entity: str | None = None

    def __post_init__(self) -> None:
        check_field_types(self, "logger.")
        if self.kind not in LOGGERS:
            raise ValueError(f"logger={self.kind} is unknown; choose logger={', '.join(LOGGERS)}")
        if self.mode not in ("offline", "online"):
            raise ValueError(f"logger.mode={self.mode} must be offline or online")


OPTIMIZERS = ("adamw", "muon")


@dataclass
class OptimConfig:
    """The ``optim`` group (``conf/optim/adamw.yaml``, ``muon.yaml``): the optimiser and its
    schedule, linear warmup then cosine decay, which scales every learning rate below.

    kind: "adamw" (every parameter) or "muon" (Muon for the 2-D weight matrices inside the
        blocks, AdamW for the embeddings, the tied head, norms and biases).
    lr, weight_decay, beta1, beta2: AdamW's (decay on matrices only, never biases or norms).
    muon_lr, muon_momentum, muon_weight_decay: Muon's; set for kind=muon only. Checkpoints
        saved before the group existed lack kind and these: they were AdamW runs.
    """

    lr: float
    weight_decay: float
    beta1: float
    beta2: float
    warmup_steps: int
    min_lr_ratio: float
    kind: str = "adamw"
    muon_lr: float | None = None
    muon_momentum: float | None = None
    muon_weight_decay: float | None = None

    def __post_init__(self) -> None:
        check_field_types(self, "optim.")
        if self.kind not in OPTIMIZERS:
            raise ValueError(f"optim.kind={self.kind} is unknown; choose optim=adamw or optim=muon")
        if not self.lr > 0:
            raise ValueError(f"optim.lr={self.lr} must be > 0, e.g. optim.lr=1e-3")
        if self.weight_decay < 0:
            raise ValueError(f"optim.weight_decay={self.weight_decay} must be >= 0")
        for name in ("beta1", "beta2"):
            value = getattr(self, name)
            if not 0 <= value < 1:
                raise ValueError(f"optim.{name}={value} must be in [0, 1), e.g. 0.9")
        if self.warmup_steps < 0:
            raise ValueError(f"optim.warmup_steps={self.warmup_steps} must be >= 0")
        if not 0 <= self.min_lr_ratio <= 1:
            raise ValueError(f"optim.min_lr_ratio={self.min_lr_ratio} must be in [0, 1]")
        muon_keys = ("muon_lr", "muon_momentum", "muon_weight_decay")
        if self.kind == "adamw":
            given = [f"optim.{k}" for k in muon_keys if getattr(self, k) is not None]
            if given:
                raise ValueError(
                    f"{', '.join(given)} set with optim=adamw; they are Muon's: add optim=muon "
                    "or drop them"
                )
            return
        missing = [f"optim.{k}" for k in muon_keys if getattr(self, k) is None]
        if missing:
            raise ValueError(
                f"optim=muon needs {', '.join(missing)}; conf/optim/muon.yaml sets them"
            )
        if not self.muon_lr > 0:
            raise ValueError(f"optim.muon_lr={self.muon_lr} must be > 0, e.g. 0.02")
        if not 0 <= self.muon_momentum < 1:
            raise ValueError(f"optim.muon_momentum={self.muon_momentum} must be in [0, 1)")
        if self.muon_weight_decay < 0:
            raise ValueError(f"optim.muon_weight_decay={self.muon_weight_decay} must be >= 0")


@dataclass
class JobConfig:
    """The top-level keys of ``conf/config.yaml``: what to do, and the generation options.

    ``mode`` is checked against the registry of modes (``modes.find``) before this is built.
    """

    mode: str
    seed: int
    ckpt_path: str | None
    output_dir: str
    prompt: str | None
    max_new_tokens: int
    temperature: float
    top_k: int | None
    top_p: float | None

    def __post_init__(self) -> None:
        if self.prompt is not None:  # Hydra reads prompt=42 as an int
            self.prompt = str(self.prompt)
        check_field_types(self, "")
        if self.mode != "train" and not self.ckpt_path:
            raise ValueError(
                f"mode={self.mode} needs a checkpoint: add ckpt_path=RUN_DIR/checkpoints/"
                "best.ckpt" + (" (or a sweep directory)" if self.mode in ("eval", "heads") else "")
            )
        if self.max_new_tokens < 0:
            raise ValueError(f"max_new_tokens={self.max_new_tokens} must be >= 0")
        if self.temperature < 0:
            raise ValueError(f"temperature={self.temperature} must be >= 0 (0 = greedy)")
        if self.top_k is not None and self.top_k < 0:
            raise ValueError(f"top_k={self.top_k} must be >= 0 (0 or null = off)")
        if self.top_p is not None and not 0 < self.top_p <= 1:
            raise ValueError(f"top_p={self.top_p} must be in (0, 1] (null = off)")


@dataclass
class EvalConfig:
    """The ``eval`` block of conf/config.yaml: what ``mode=eval`` scores, and how.

    stride: sliding windows of ``max_seq_len`` tokens, each scoring its last ``stride``
    tokens (every token once, with up to ``max_seq_len - stride`` tokens of extra context);
    None = ``max_seq_len``, non-overlapping windows. Checked against the checkpoint's
    ``max_seq_len`` when it is read.
    pairs: minimal pairs to score instead of text: a BLiMP-format JSON-lines file, a
    directory of them, or ``builtin`` (``data/pairs.py``); None = text.
    weights: ``trained`` (the checkpoint's) or ``untrained``: a fresh network of the
    checkpoint's shape drawn from ``seed``, the baseline that trained weights must beat.

    harness: lm-evaluation-harness tasks (names, groups or tags, as ``lm-eval --tasks``
    takes them: a list or one comma-separated string) to score a decoder on instead of text;
    None = no harness. harness_include: a directory of task YAMLs added to the harness's
    own (``lm-eval --include_path``). harness_limit: at most this many examples per task
    (an integer), or this fraction of each (below 1), for a quick look (``--limit``);
    harness_num_fewshot: examples in each prompt (``--num_fewshot``; None = the task's own);
    harness_batch_size: requests per forward pass (``--batch_size``; changes speed only).
    """

    stride: int | None = None
    pairs: str | None = None
    weights: str = "trained"
    harness: Any = None
    harness_include: str | None = None
    harness_limit: float | None = None
    harness_num_fewshot: int | None = None
    harness_batch_size: int = 16

    def __post_init__(self) -> None:
        check_field_types(self, "eval.")
        if self.stride is not None and self.stride < 1:
            raise ValueError(
                f"eval.stride={self.stride} must be >= 1 (and at most the checkpoint's "
                "max_seq_len); omit it for non-overlapping windows"
            )
        self.harness = _task_names(self.harness)
        if self.weights not in WEIGHTS:
            raise ValueError(
                f"eval.weights={self.weights} is unknown; choose eval.weights=trained (the "
                "checkpoint's) or eval.weights=untrained (a fresh network of its shape, seeded "
                "by seed)"
            )
        if self.pairs is not None and not self.pairs.strip():
            raise ValueError(
                "eval.pairs is empty; pass a BLiMP-format .jsonl file, a directory of them or "
                "eval.pairs=builtin (or drop it to score text)"
            )
        if self.pairs is not None and self.harness is not None:
            raise ValueError(
                "eval.pairs and eval.harness each choose what mode=eval scores: keep one"
            )
        if self.harness is not None and self.weights != "trained":
            raise ValueError(
                f"eval.weights={self.weights} is for tinylm's own scoring (text, eval.pairs); "
                "the harness scores the checkpoint's weights: drop eval.weights"
            )
        if self.pairs is not None and self.stride is not None:
            raise ValueError(
                f"eval.stride={self.stride} is for text; minimal pairs score each sentence "
                "whole: drop eval.stride or eval.pairs"
            )
        harness_keys = {
            "harness_include": self.harness_include,
            "harness_limit": self.harness_limit,
            "harness_num_fewshot": self.harness_num_fewshot,
        }
        if self.harness is None:
            stray = [f"eval.{k}" for k, v in harness_keys.items() if v is not None]
            if stray:
                raise ValueError(
                    f"{', '.join(stray)} set without eval.harness: name the tasks to run, "
                    "e.g. eval.harness=TASK (or drop them)"
                )
        elif self.stride is not None:
            raise ValueError(
                f"eval.stride={self.stride} is for scoring text; the harness tasks decide "
                "their own contexts (drop eval.stride or eval.harness)"
            )
        limit = self.harness_limit
        if limit is not None and not (0 < limit < 1 or (limit >= 1 and limit.is_integer())):
            raise ValueError(
                f"eval.harness_limit={limit:g} must be a whole number of examples (>= 1) or "
                "a fraction of each task in (0, 1)"
            )
        if self.harness_num_fewshot is not None and self.harness_num_fewshot < 0:
            raise ValueError(
                f"eval.harness_num_fewshot={self.harness_num_fewshot} must be >= 0 (0: "
                "zero-shot; omit it for each task's own)"
            )
        if self.harness_batch_size < 1:
            raise ValueError(f"eval.harness_batch_size={self.harness_batch_size} must be >= 1")


def _task_names(value: Any) -> list[str] | None:
    """eval.harness as a list of task names: from a list, or one comma-separated string."""
    if value is None:
        return None
    items = value.split(",") if isinstance(value, str) else value
    if not isinstance(items, list) or not all(isinstance(item, str) for item in items):
        raise ValueError(
            f"eval.harness={value!r} must name tasks: eval.harness=TASK, "
            "eval.harness='TASK1,TASK2' or eval.harness=[TASK1,TASK2]"
        )
    names = [item.strip() for item in items if item.strip()]
    if not names:
        raise ValueError(
            f"eval.harness={value!r} names no task: eval.harness=TASK (or omit it for "
            "tinylm's own loss, ppl and bpc)"
        )
    return list(dict.fromkeys(names))


@dataclass
class SummaryConfig:
    """The ``summary`` block of conf/config.yaml: what the sweep summary adds.

    target_loss: report, per configuration, the steps, tokens, FLOPs and seconds at which
        validation loss first reached it (``modes/time_to_target.py``); None = not reported.
        Not a setting of the jobs: a sweep re-run with another value rewrites the summary.
    """

    target_loss: float | None = None

    def __post_init__(self) -> None:
        check_field_types(self, "summary.")
        if self.target_loss is not None and self.target_loss <= 0:
            raise ValueError(f"summary.target_loss={self.target_loss} must be a loss > 0")


@dataclass
class ExportConfig:
    """The ``export`` block of conf/config.yaml: what ``mode=export`` writes, and where.

    format: safetensors (tinylm's own file, the config in its metadata) or hf (a folder that
    Hugging Face ``transformers`` loads as GPT2LMHeadModel, GPTNeoXForCausalLM (rope) or
    BertForMaskedLM).
    path: the output file (safetensors) or folder (hf); None puts it beside the checkpoint.
    overwrite: replace an existing output; without it an existing one is refused.
    """

    format: str = "safetensors"
    path: str | None = None
    overwrite: bool = False

    def __post_init__(self) -> None:
        check_field_types(self, "export.")
        if self.format not in EXPORT_FORMATS:
            raise ValueError(
                f"export.format={self.format} is unknown; choose export.format=safetensors "
                "(tinylm's file) or export.format=hf (a Hugging Face transformers folder)"
            )


@dataclass
class HeadsConfig:
    """The ``heads`` block of conf/config.yaml: the head analysis's settings.

    prune (``mode=eval`` only): gate heads off before scoring, either a fraction of all
    heads in [0, 1] (the least important on the data scored first, never a layer's last
    head, as on ``mode=heads``'s prune curve) or heads named ``LAYER:HEAD`` (both from 0; a
    list ``[0:1,1:3]`` or one string ``0:1,1:3``). None scores every head.
    """

    prune: Any = None

    def __post_init__(self) -> None:
        value = self.prune
        if value is None:
            return
        if isinstance(value, bool) or not isinstance(value, (int, float, str, list, tuple)):
            raise ValueError(
                f"heads.prune={value!r} must be a fraction of the heads (heads.prune=0.5) or "
                "heads named LAYER:HEAD (heads.prune=[0:1,1:3])"
            )
        if isinstance(value, (int, float)):
            if not 0 <= value <= 1:
                raise ValueError(
                    f"heads.prune={value} is outside [0, 1]: give the fraction of the heads to "
                    "gate off (0.5: the least important half) or name them, "
                    "heads.prune=[0:1,1:3]"
                )
            self.prune = float(value)
            return
        items = value.split(",") if isinstance(value, str) else [str(v) for v in value]
        names = [item.strip() for item in items if item.strip()]
        bad = [n for n in names if not re.fullmatch(r"\d+:\d+", n)]
        if bad or not names:
            raise ValueError(
                f"heads.prune names {', '.join(map(repr, bad)) or 'no head'}: write heads as "
                "LAYER:HEAD (both from 0), heads.prune=[0:1,1:3], or a fraction heads.prune=0.5"
            )
        self.prune = list(dict.fromkeys(names))


FINETUNE_INITS = ("pretrained", "scratch")
FINETUNE_METRICS = ("accuracy", "f1", "mcc")


@dataclass
class FinetuneConfig:
    """The ``finetune`` block of conf/config.yaml: what ``mode=finetune`` trains on, and how.

    task: ``builtin`` (which reference-documentation topic a paragraph of the built-in corpus
    comes from; no network), ``files`` (``path``: a .csv/.jsonl/.parquet file, its splits
    carved, or a {train:, validation:, test:} mapping) or a GLUE task (sst2, cola, mrpc,
    qqp, qnli, rte, wnli, mnli; from the Hub). text_column, text_pair_column (None: single
    texts) and label_column name a file's columns.
    init: ``pretrained`` (the checkpoint's weights) or ``scratch`` (the same architecture from
    random weights, seeded by ``seed``: what pretraining is measured against).
    The protocol (cramming's "sane" one, for every task): ``epochs`` epochs of batches of
    ``batch_size``, AdamW at ``lr`` with ``weight_decay``, linear warmup over ``warmup_ratio``
    of the steps, then cosine decay to 0; ``max_steps`` (None: the epochs decide) caps it.
    metric: the one the task is known by (None: accuracy; F1 for mrpc/qqp; Matthews
    correlation, mcc, for cola). max_seq_len: examples cut to this many tokens, specials
    included (None: the checkpoint's context; at most that). val_fraction, test_fraction,
    split_seed: the splits carved from train where the task lacks them, the same for every
    job.
    """

    task: str = "builtin"
    path: Any = None
    text_column: str = "text"
    text_pair_column: str | None = None
    label_column: str = "label"
    init: str = "pretrained"
    epochs: int = 5
    max_steps: int | None = None
    batch_size: int = 32
    lr: float = 1e-4
    weight_decay: float = 0.01
    warmup_ratio: float = 0.1
    metric: str | None = None
    max_seq_len: int | None = None
    val_fraction: float = 0.1
    test_fraction: float = 0.1
    split_seed: int = 0

    def __post_init__(self) -> None:
        check_field_types(self, "finetune.")
        if self.task not in FINETUNE_TASKS:
            hint = closest(self.task, FINETUNE_TASKS)
            raise ValueError(
                f"finetune.task={self.task} is unknown"
                + (f" (did you mean {hint}?)" if hint else "")
                + f"; choose one of {', '.join(FINETUNE_TASKS)}"
            )
        if self.path is not None and self.task != "files":
            raise ValueError(
                f"finetune.path is for finetune.task=files (got finetune.task={self.task}): "
                "add finetune.task=files or drop finetune.path"
            )
        if self.init not in FINETUNE_INITS:
            raise ValueError(
                f"finetune.init={self.init} is unknown; choose finetune.init=pretrained (the "
                "checkpoint's weights) or finetune.init=scratch (random weights, same shape)"
            )
        if self.metric is not None and self.metric not in FINETUNE_METRICS:
            raise ValueError(
                f"finetune.metric={self.metric} is unknown; choose one of "
                f"{', '.join(FINETUNE_METRICS)} (or null: the task's own)"
            )
        for name in ("epochs", "batch_size"):
            if getattr(self, name) < 1:
                raise ValueError(f"finetune.{name}={getattr(self, name)} must be >= 1")
        if self.max_seq_len is not None and self.max_seq_len < 8:
            raise ValueError(
                f"finetune.max_seq_len={self.max_seq_len} must be >= 8 (null: the checkpoint's)"
            )
        if self.max_steps is not None and self.max_steps < 1:
            raise ValueError(f"finetune.max_steps={self.max_steps} must be >= 1 (null: epochs)")
        if not self.lr > 0:
            raise ValueError(f"finetune.lr={self.lr} must be > 0, e.g. finetune.lr=1e-4")
        if self.weight_decay < 0:
            raise ValueError(f"finetune.weight_decay={self.weight_decay} must be >= 0")
        for name in ("warmup_ratio", "val_fraction", "test_fraction"):
            if not 0 <= getattr(self, name) < 1:
                raise ValueError(f"finetune.{name}={getattr(self, name)} must be in [0, 1)")

    def columns(self) -> Columns:
        return Columns(self.text_column, self.text_pair_column, self.label_column)

    def labelled_task(self) -> LabelledTask:
        """The task's examples per split as these settings choose them (``data.labelled``)."""
        return load_task(
            self.task,
            path=self.path,
            columns=self.columns(),
            val_fraction=self.val_fraction,
            test_fraction=self.test_fraction,
            split_seed=self.split_seed,
            metric=self.metric,
        )


GROUPS = {
    "model": ModelConfig,
    "data": DataConfig,
    "trainer": TrainerConfig,
    "logger": LoggerConfig,
    "optim": OptimConfig,
    "eval": EvalConfig,
    "export": ExportConfig,
    "summary": SummaryConfig,
    "heads": HeadsConfig,
    "finetune": FinetuneConfig,
}


@dataclass(frozen=True)
class Settings:
    """Everything one job needs to know, validated; built once by ``parse_settings``
    (``conf/hydra_runtime.py``).

    ``model.vocab_size`` and ``model.pad_token_id`` are None here: the tokenizer decides them.
    ``overrides`` are this job's ``key=value`` command-line overrides (under a multirun, the
    swept values); ``sweep_dir`` is the multirun's directory, None for a single run;
    ``job_num`` the job's number in it; ``parallel_jobs`` how many jobs a parallel launcher
    runs at once on this machine (1 otherwise); ``swept`` the keys the multirun sweeps.
    """

    job: JobConfig
    model: ModelConfig
    data: DataConfig
    trainer: TrainerConfig
    logger: LoggerConfig
    optim: OptimConfig
    eval: EvalConfig
    export: ExportConfig
    summary: SummaryConfig
    heads: HeadsConfig
    finetune: FinetuneConfig
    overrides: dict[str, str]
    sweep_dir: Path | None
    job_num: int = 0
    parallel_jobs: int = 1
    swept: tuple[str, ...] = ()

    def run_name(self) -> str | None:
        """The run as loggers name it: its swept ``key=value`` pairs under a multirun, else
        all of its overrides; None without any."""
        keys = [k for k in self.swept if k in self.overrides] or list(self.overrides)
        return ",".join(f"{k}={self.overrides[k]}" for k in keys) or None

    def plain(self) -> dict[str, Any]:
        """The validated config groups as plain dicts (for the logger's run config)."""
        return {"job": asdict(self.job), **{name: asdict(getattr(self, name)) for name in GROUPS}}


def settings_from_tree(tree: Mapping[str, Any], **context: Any) -> Settings:
    """Validate every config group of ``tree`` (the resolved config as plain types) before any
    data is touched; ``context`` holds the job's fields of ``Settings`` beyond the groups
    (overrides, sweep_dir, job_num, parallel_jobs, swept), which Hydra's runtime knows
    (``conf.hydra_runtime.parse_settings``)."""
    top = {k: v for k, v in tree.items() if k not in GROUPS and k != "hydra"}
    groups = {name: from_mapping(cls, tree[name], f"{name}.") for name, cls in GROUPS.items()}
    return Settings(job=from_mapping(JobConfig, top, ""), **groups, **context)
