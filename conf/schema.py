"""The configuration of one job: a dataclass per config group, validated once, into ``Settings``.

Free of Hydra (its runtime state is ``conf/hydra_runtime.py``'s), so that the training layer
imports these classes without it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from conf.evaluation_config import EvalConfig, ExportConfig, SummaryConfig, SweepConfig
from conf.features import feature_groups
from conf.training_config import BudgetConfig as BudgetConfig  # re-exported
from conf.training_config import JobConfig, LoggerConfig, OptimConfig, TrainerConfig
from data.config import DataConfig
from models.config import ModelConfig, from_mapping

GROUPS = {
    "model": ModelConfig,
    "data": DataConfig,
    "trainer": TrainerConfig,
    "logger": LoggerConfig,
    "optim": OptimConfig,
    "eval": EvalConfig,
    "export": ExportConfig,
    "summary": SummaryConfig,
    "sweep": SweepConfig,
}


@dataclass(frozen=True)
class Settings:
    """Everything one job needs to know, validated; built once by ``parse_settings``
    (``conf/hydra_runtime.py``).

    ``model.vocab_size`` and ``model.pad_token_id`` are None here: the tokenizer decides them.
    ``overrides`` are this job's ``key=value`` command-line overrides (under a multirun, the
    swept values); ``sweep_dir`` is the multirun's directory, None for a single run;
    ``parallel_jobs`` how many jobs a parallel launcher runs at once here (1 otherwise).
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
    sweep: SweepConfig
    overrides: dict[str, str]
    sweep_dir: Path | None
    job_num: int = 0
    parallel_jobs: int = 1
    swept: tuple[str, ...] = ()
    features: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for config in self.features.values():  # a feature's setting this mode does not read
            if hasattr(config, "check_mode"):
                config.check_mode(self.job.mode)

    def group(self, name: str) -> Any:
        """A feature's config group (``conf/features.py``), validated."""
        return self.features[name]

    def with_group(self, name: str, config: Any) -> Settings:
        """These settings with a feature's group replaced."""
        return replace(self, features={**self.features, name: config})

    def run_name(self) -> str | None:
        """The run as loggers name it: its swept ``key=value`` pairs under a multirun, else
        all of its overrides; None without any."""
        keys = [k for k in self.swept if k in self.overrides] or list(self.overrides)
        return ",".join(f"{k}={self.overrides[k]}" for k in keys) or None

    def plain(self) -> dict[str, Any]:
        """The validated config groups as plain dicts (for the logger's run config)."""
        groups = {name: asdict(getattr(self, name)) for name in GROUPS}
        return {
            "job": asdict(self.job),
            **groups,
            **{k: asdict(v) for k, v in self.features.items()},
        }


def all_groups() -> dict[str, type]:
    """Every config group, the core's and the features': group -> dataclass."""
    return {**GROUPS, **feature_groups()}


def settings_from_tree(tree: Mapping[str, Any], **context: Any) -> Settings:
    """Validate every config group of ``tree`` (the resolved config as plain types); ``context``
    holds the fields of ``Settings`` that Hydra's runtime knows (overrides, sweep_dir, ...)."""
    extra = feature_groups()
    top = {k: v for k, v in tree.items() if k not in {*GROUPS, *extra, "hydra"}}
    groups = {name: from_mapping(cls, tree[name], f"{name}.") for name, cls in GROUPS.items()}
    features = {
        name: from_mapping(cls, tree.get(name, {}), f"{name}.") for name, cls in extra.items()
    }
    return Settings(job=from_mapping(JobConfig, top, ""), **groups, **context, features=features)
