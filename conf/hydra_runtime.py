"""What Hydra's runtime knows about the running job: its overrides, its sweep, its launcher;
``parse_settings`` builds ``conf.schema.Settings`` with them."""

from __future__ import annotations

import os
from pathlib import Path

from hydra.core.hydra_config import HydraConfig
from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import DictConfig, OmegaConf

from conf.schema import Settings, settings_from_tree


def parse_settings(cfg: DictConfig) -> Settings:
    """Validate every config group before any data is touched, with the job's Hydra context."""
    return settings_from_tree(
        OmegaConf.to_container(cfg, resolve=True),
        overrides=job_overrides(),
        sweep_dir=sweep_dir(),
        job_num=job_num(),
        parallel_jobs=parallel_jobs(),
        swept=tuple(swept_keys()),
    )


def job_overrides() -> dict[str, str]:
    """This job's ``key=value`` overrides (the swept values under a multirun), without the
    ``+``/``~`` prefixes; empty outside a Hydra run (``compose()`` records none)."""
    if not HydraConfig.initialized():
        return {}
    pairs = (o.split("=", 1) for o in HydraConfig.get().overrides.task if "=" in o)
    return {k.lstrip("+~"): v for k, v in pairs}


def job_num() -> int:
    """This job's number in its multirun; 0 for a single run."""
    return int(HydraConfig.get().job.get("num") or 0) if HydraConfig.initialized() else 0


def swept_keys() -> list[str]:
    """The keys this job's multirun sweeps, command line and ``hydra.sweeper.params`` alike,
    from the ``multirun.yaml`` written at the sweep's start; empty for a single run."""
    directory = sweep_dir()
    record = directory / "multirun.yaml" if directory else None
    if record is None or not record.is_file():
        return []
    hydra = OmegaConf.load(record).hydra
    search_space = hydra.sweeper.get("params") or {}
    command_line = [*(f"{k}={v}" for k, v in search_space.items()), *hydra.overrides.task]
    parsed = OverridesParser.create().parse_overrides(command_line)
    return list(dict.fromkeys(o.key_or_group for o in parsed if o.is_sweep_override()))


def sweep_dir() -> Path | None:
    """The multirun's sweep directory, or None for a single run."""
    if not HydraConfig.initialized() or HydraConfig.get().mode.name != "MULTIRUN":
        return None
    return Path(HydraConfig.get().sweep.dir)


def parallel_jobs(launcher: DictConfig | None = None) -> int:
    """Jobs a parallel launcher (``hydra.launcher.n_jobs``, as joblib counts them) runs at once
    here; 1 for the sequential launchers. ``launcher``: this job's by default."""
    if launcher is None:
        if not HydraConfig.initialized():
            return 1
        launcher = HydraConfig.get().launcher
    n_jobs = launcher.get("n_jobs")
    if n_jobs is None:
        return 1
    cores = os.cpu_count() or 1
    jobs = cores + 1 + n_jobs if n_jobs < 0 else n_jobs
    if n_jobs == 0 or jobs < 1:
        raise ValueError(
            f"hydra.launcher.n_jobs={n_jobs} runs no job on this {cores}-core machine; give "
            "the number of jobs to run at once, e.g. hydra.launcher.n_jobs=2 (-1: one per core)"
        )
    return jobs
