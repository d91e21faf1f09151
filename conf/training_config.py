"""The ``trainer`` (with ``trainer.budget``), ``logger`` and ``optim`` groups and the top-level
keys (``JobConfig``), each validating itself (docs/training.md, docs/sweeps.md)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any, ClassVar

from conf.features import fresh_modes
from models.config import check_field_types, from_mapping

PRECISIONS = ("32-true", "32", "16-mixed", "bf16-mixed", "bf16-true", "16-true", "64-true")
LOGGERS = ("wandb", "tensorboard", "csv", "none")


@dataclass
class BudgetConfig:
    """``trainer.budget``: the tokens, FLOPs or seconds each job trains for, at most one of them
    (``training/budget.py``); none: ``trainer.max_steps`` decides."""

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
    """The Lightning ``Trainer`` arguments we set (same names), plus ``compile``, ``budget``
    and ``stop_at_loss`` (stop at the first validation loss below it: the time to a target);
    no defaults: ``conf/trainer/*.yaml`` is the one place they are written."""

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
    budget: Any
    stop_at_loss: float | None

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

    def trainer_kwargs(self) -> dict[str, Any]:
        """The fields that are ``lightning.Trainer`` arguments (all but ``compile``, ``budget``
        and ``stop_at_loss``)."""
        ours = ("compile", "budget", "stop_at_loss")
        return {k: v for k, v in asdict(self).items() if k not in ours}


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
SCHEDULES = ("cosine", "wsd")
MUON_MOMENTUM_START = 0.85  # modded-nanogpt's momentum warm-up starts here


@dataclass
class OptimConfig:
    """The optimiser (``kind``: adamw, or muon for the blocks' matrices with AdamW for the
    rest) and its schedule, linear warmup then cosine decay, or with ``schedule: wsd``
    warmup-stable-decay: constant, then a linear decay over the last ``cooldown_fraction`` of
    the steps (read under wsd only, so that one sweep may set it for both). The muon_* fields
    are set for muon only; checkpoints saved before the group existed lack them and kind:
    AdamW runs. ``muon_momentum_warmup`` raises Muon's momentum linearly from 0.85 to
    ``muon_momentum`` over that many steps (modded-nanogpt's warm-up; null or 0: none)."""

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
    schedule: str = "cosine"
    cooldown_fraction: float = 0.2
    muon_momentum_warmup: int | None = None

    def __post_init__(self) -> None:
        check_field_types(self, "optim.")
        if self.kind not in OPTIMIZERS:
            raise ValueError(f"optim.kind={self.kind} is unknown; choose optim=adamw or optim=muon")
        if self.schedule not in SCHEDULES:
            raise ValueError(
                f"optim.schedule={self.schedule} is unknown; choose one of: {', '.join(SCHEDULES)}"
            )
        if not 0 < self.cooldown_fraction <= 1:
            raise ValueError(
                f"optim.cooldown_fraction={self.cooldown_fraction} must be in (0, 1], e.g. 0.2"
            )
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
            optional = ("muon_momentum_warmup",)
            given = [f"optim.{k}" for k in (*muon_keys, *optional) if getattr(self, k) is not None]
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
        if (self.muon_momentum_warmup or 0) < 0:
            raise ValueError(
                f"optim.muon_momentum_warmup={self.muon_momentum_warmup} must be >= 0 (steps)"
            )
        if self.muon_momentum_warmup and self.muon_momentum < MUON_MOMENTUM_START:
            raise ValueError(
                f"optim.muon_momentum={self.muon_momentum} is below the warm-up's start, "
                f"{MUON_MOMENTUM_START}; raise it or set optim.muon_momentum_warmup=0"
            )

    def muon_momentum_at(self, step: int) -> float | None:
        """Muon's momentum at ``step`` under ``muon_momentum_warmup``; None without one."""
        if not self.muon_momentum_warmup:
            return None
        progress = min(1.0, step / self.muon_momentum_warmup)
        return MUON_MOMENTUM_START + progress * (self.muon_momentum - MUON_MOMENTUM_START)


@dataclass
class JobConfig:
    """The top-level keys of ``conf/config.yaml``: what to do, and the generation options
    (``mode`` is checked by ``modes.find`` before this is built)."""

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
        if self.mode not in ("train", *fresh_modes()) and not self.ckpt_path:
            raise ValueError(
                f"mode={self.mode} needs a checkpoint: add ckpt_path=RUN_DIR/checkpoints/"
                "best.ckpt (or the run or sweep directory, where the mode reads one)"
            )
        if self.max_new_tokens < 0:
            raise ValueError(f"max_new_tokens={self.max_new_tokens} must be >= 0")
        if self.temperature < 0:
            raise ValueError(f"temperature={self.temperature} must be >= 0 (0 = greedy)")
        if self.top_k is not None and self.top_k < 0:
            raise ValueError(f"top_k={self.top_k} must be >= 0 (0 or null = off)")
        if self.top_p is not None and not 0 < self.top_p <= 1:
            raise ValueError(f"top_p={self.top_p} must be in (0, 1] (null = off)")
