"""Schemas of the config groups that belong to the application (trainer, logger, top level).

``model`` and ``data`` are validated by ``models.config.ModelConfig`` and
``data.config.DataConfig``, ``optim`` by ``models.tasks.OptimConfig``. ``parse_settings`` checks
all of them before any data is touched, so a typo costs seconds, not a tokenization run.
The ``check_*`` functions at the end hold settings against what already exists: the
checkpoint being resumed or read, and the data files.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

from models.config import check_field_types

MODES = ("train", "eval", "generate", "attention", "export")
PRECISIONS = ("32-true", "32", "16-mixed", "bf16-mixed", "bf16-true", "16-true", "64-true")


@dataclass
class TrainerConfig:
    """The Lightning ``Trainer`` arguments we set (same names), plus ``compile``.

    No defaults here: ``conf/trainer/*.yaml`` is the one place they are written."""

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

    def __post_init__(self) -> None:
        self.precision = str(self.precision)  # Hydra reads trainer.precision=32 as an int
        check_field_types(self, "trainer.")
        if self.precision not in PRECISIONS:
            raise ValueError(
                f"trainer.precision={self.precision} is not one of {', '.join(PRECISIONS)}; "
                "use bf16-mixed on recent GPUs, 32-true on the CPU"
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
        kwargs = asdict(self)
        kwargs.pop("compile")
        return kwargs


@dataclass
class LoggerConfig:
    """Where metrics go: ``wandb`` (offline unless told otherwise), ``csv`` or ``none``."""

    kind: str = "wandb"
    project: str = "tinylm"
    mode: str = "offline"
    group: str | None = None
    entity: str | None = None

    def __post_init__(self) -> None:
        check_field_types(self, "logger.")
        if self.kind not in ("wandb", "csv", "none"):
            raise ValueError(f"logger={self.kind} is unknown; choose logger=wandb, csv or none")
        if self.mode not in ("offline", "online"):
            raise ValueError(f"logger.mode={self.mode} must be offline or online")


@dataclass
class RunConfig:
    """The top-level keys of ``conf/config.yaml``: what to do and the generation options."""

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
        if self.mode not in MODES:
            raise ValueError(f"mode={self.mode} is unknown; choose one of {', '.join(MODES)}")
        if self.mode != "train" and not self.ckpt_path:
            raise ValueError(
                f"mode={self.mode} needs a checkpoint: add ckpt_path=RUN_DIR/checkpoints/"
                "best.ckpt" + (" (or a sweep directory)" if self.mode == "eval" else "")
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
class Settings:
    run: RunConfig
    model: dict[str, Any]
    data: Any
    trainer: TrainerConfig
    logger: LoggerConfig
    optim: Any


def _from_section(cls: type, values: dict[str, Any], prefix: str) -> Any:
    from models.config import check_known_keys

    check_known_keys(cls, values, prefix)
    return cls(**values)


def parse_settings(cfg: DictConfig) -> Settings:
    """Validate every config group before any data is touched."""
    from data.config import DataConfig
    from models.config import ModelConfig
    from models.tasks import OptimConfig

    values = OmegaConf.to_container(cfg, resolve=True)
    top = {k: v for k, v in values.items() if k not in ("model", "data", "trainer", "logger",
                                                          "optim", "hydra")}
    model = dict(values["model"])
    ModelConfig.from_dict(model)  # validation only: the tokenizer fills in vocab_size later
    return Settings(
        run=_from_section(RunConfig, top, ""),
        model=model,
        data=_data_config(DataConfig, values["data"]),
        trainer=_from_section(TrainerConfig, values["trainer"], "trainer."),
        logger=_from_section(LoggerConfig, values["logger"], "logger."),
        optim=OptimConfig.from_dict(values["optim"]),
    )


def _data_config(cls: type, values: dict[str, Any]) -> Any:
    try:
        return cls(**values)
    except TypeError as err:  # an unknown key: a user error like the others
        raise ValueError(f"{err}; remove it or fix its spelling") from None


def cli_overrides() -> dict[str, str]:
    """The ``key=value`` overrides of this job (the swept values under multirun)."""
    if not HydraConfig.initialized():
        return {}
    pairs = (o.split("=", 1) for o in HydraConfig.get().overrides.task if "=" in o)
    return {k.lstrip("+~"): v for k, v in pairs}


# ------------------------------------------- settings checked against checkpoints and files


def check_resume_model(ckpt: str, trained: dict[str, Any], requested: dict[str, Any]) -> None:
    """Resuming needs the model of the checkpoint: say which keys differ, before any data."""
    filled = ("vocab_size", "pad_token_id")  # the tokenizer decides these
    differ = [k for k in requested if k not in filled and trained.get(k) != requested[k]]
    if not differ:
        return
    if "arch" in differ:
        def named(arch: str) -> str:
            return "a decoder (model=gpt)" if arch == "decoder" else "an encoder (model=bert)"

        raise ValueError(
            f"ckpt_path={ckpt} holds {named(trained['arch'])} but the model config builds "
            f"{named(requested['arch'])}; resume with the checkpoint's model, or start a new "
            "run without ckpt_path"
        )
    pairs = ", ".join(f"model.{k}={requested[k]} (checkpoint: {trained.get(k)})" for k in differ)
    raise ValueError(
        f"ckpt_path={ckpt} was trained with another model config: {pairs}. Resume with the "
        "checkpoint's model.* settings, or start a new run without ckpt_path"
    )


def check_data_files(data) -> None:
    """An empty data file is named before the datasets library trips over it."""
    if data.source != "files" or not data.path:
        return
    path = Path(data.path).expanduser()
    if path.is_file() and path.stat().st_size == 0:
        raise ValueError(
            f"data.path={data.path} is an empty file: the corpus has no text. Point data.path "
            "at a file (or directory, or glob) with text in it"
        )


def check_no_model_overrides(settings: Settings, ckpt: Path) -> None:
    """eval/generate/attention/export take the model from the checkpoint: a model.* (or
    model=) on the command line would be silently ignored, so it is refused instead. A
    larger model.max_seq_len is the case users hit: the learned position table of the
    checkpoint has exactly max_seq_len rows."""
    from models.checkpoint import read_checkpoint

    asked = [k for k in cli_overrides() if k == "model" or k.startswith("model.")]
    if not asked:
        return
    trained = read_checkpoint(ckpt)["hyper_parameters"]["model_config"]
    mode = settings.run.mode
    table = trained["max_seq_len"]
    if "model.max_seq_len" in asked and settings.model["max_seq_len"] > table:
        raise ValueError(
            f"model.max_seq_len={settings.model['max_seq_len']} is larger than the position "
            f"table of {ckpt} ({table} positions); mode={mode} uses the checkpoint's model: "
            f"drop model.max_seq_len (generation slides a window of {table} tokens over longer "
            "texts)"
        )
    differ = [k for k in asked if k == "model" and settings.model["arch"] != trained["arch"]
              or k != "model" and settings.model.get(k[6:]) != trained.get(k[6:])]
    if differ:
        raise ValueError(
            f"mode={mode} takes the model config from the checkpoint {ckpt}, which differs from "
            f"{', '.join(differ)} on the command line: drop them (to train another model, use "
            "mode=train)"
        )
