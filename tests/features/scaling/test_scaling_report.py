"""The scaling law in a sweep's report (features/scaling/report.py), built from hand-written
records: the section, the figures drawn once each, the page; no section for a sweep that
varies no size or no compute; the ``scaling`` group recorded and checked."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from analysis.report import build_report
from analysis.run_record import read_record, write_record
from analysis.sweep_summary import write_summary_files
from conf.features import pages
from conf.hydra_runtime import parse_settings
from features.scaling import law
from features.scaling import report as report_module
from features.scaling.config import ScalingConfig
from modes.report import refresh
from tests.conftest import compose_config

LAW = {"E": 2.0, "A": 60.0, "B": 300.0, "alpha": 0.3, "beta": 0.3}
SIZES = {"32": 2e4, "64": 8e4, "96": 1.8e5, "128": 3.2e5}
BUDGETS = ("1e12", "4e12", "1.6e13")
QUICK = {"flops": 1e15, "bootstrap": 20, "grid": "coarse"}


@pytest.fixture(autouse=True)
def few_starts(monkeypatch: pytest.MonkeyPatch) -> None:
    """27 starts for scaling.grid=coarse: these tests check the report, test_law.py the fit
    (on this machine ~0.3 s instead of ~3 s a fit)."""
    monkeypatch.setitem(law.GRIDS, "coarse", law.COARSE[::9])


def write_sweep(
    root: Path,
    sizes: dict[str, float] = SIZES,
    budgets: tuple[str, ...] = BUDGETS,
    seeds: tuple[int, ...] = (1,),
    scaling: dict[str, Any] | None = None,
) -> Path:
    """A sweep over model.hidden_size x trainer.budget.flops (x seed) whose final validation
    losses follow LAW (N non-embedding, 1% noise); tinylm's FLOPs per token are 1.3 x 6N."""
    settings = dataclasses.asdict(ScalingConfig(**(QUICK if scaling is None else scaling)))
    rng, job = np.random.default_rng(0), 0
    for hidden, n in sizes.items():
        for budget in budgets:
            for seed in seeds:
                per_token = 1.3 * 6 * n
                tokens = float(budget) / per_token
                exact = LAW["E"] + LAW["A"] / n ** LAW["alpha"] + LAW["B"] / tokens ** LAW["beta"]
                loss = float(exact * np.exp(rng.normal(0, 0.01)))
                overrides = {"model.hidden_size": hidden, "trainer.budget.flops": budget}
                if len(seeds) > 1:
                    overrides["seed"] = str(seed)
                write_record(
                    root / str(job),
                    {
                        "status": "completed",
                        "best_val_loss": loss - 0.01,
                        "val_loss": loss,
                        "params": int(n),
                        "params_with_embeddings": int(n + 300 * int(hidden)),
                        "consumed": {"tokens": tokens, "flops": float(budget)},
                        "flops_per_token": per_token,
                        "overrides": overrides,
                        "settings": {
                            "trainer": {
                                "budget": {"flops": float(budget), "tokens": None, "seconds": None},
                                "max_steps": 100,
                            },
                            "scaling": settings,
                        },
                    },
                )
                job += 1
    write_record(root / str(job), {"status": "failed", "error": "boom", "overrides": overrides})
    return root


def section(root: Path) -> str:
    text = (root / "summary.md").read_text(encoding="utf-8")
    return text.split("## Scaling law")[1].split("## Runs")[0] if "## Scaling law" in text else ""


def test_a_sweep_over_sizes_and_budgets_gets_the_fit_and_its_figures(tmp_path: Path) -> None:
    root = write_sweep(tmp_path)
    report = build_report(root)
    written = {path.name for path in write_summary_files(report)}
    assert {"isoflop.png", "scaling_law.png"} <= written
    titles = [figure.title for figure in report.figures]
    assert sum(t.startswith("IsoFLOP parabolas") for t in titles) == 1
    assert sum(t.startswith("Scaling law (Approach 3)") for t in titles) == 1
    text = section(root)
    assert "12 completed runs, each a point" in text
    assert "N is the non-embedding parameters (`params`, scaling.parameters=non_embedding" in text
    assert "27 starts (coarse grid" in text and "20 bootstrap resamples (seed 0" in text
    assert "Compute-optimal for C = 1e+15 FLOPs (scaling.flops; C ≈ 6ND): N_opt = " in text
    assert "tinylm counts 1.3× 6N FLOPs per token" in text
    rows = {line.split("|")[1].strip(): line for line in text.splitlines() if line[:2] == "| "}
    assert set(rows) >= {"E", "A", "B", "α", "β", "1e+12", "4e+12", "1.6e+13"}
    for name, symbol in (("alpha", "α"), ("beta", "β")):
        low, high = (float(v) for v in rows[symbol].split("[")[1].split("]")[0].split(","))
        assert low <= LAW[name] <= high, (name, low, high)
    assert "N* ∝ C^" in text and "Approach 3's exponent β/(α+β) is" in text
    if pages():  # the report feature's page, where it is installed: the figures' captions
        refresh(root, report=report)
        html = (root / "report.html").read_text(encoding="utf-8")
        assert html.count("IsoFLOP parabolas (Approach 2)") >= 1
        assert "compute-optimal for C = 1e+15 FLOPs: N = " in html


def test_seed_replicates_are_points_and_total_parameters_are_named(tmp_path: Path) -> None:
    sizes = dict(list(SIZES.items())[:3])
    root = write_sweep(
        tmp_path,
        sizes=sizes,
        budgets=BUDGETS[:2],
        seeds=(1, 2),
        scaling={"parameters": "total", "bootstrap": 0, "grid": "coarse"},
    )
    report = build_report(root)
    write_summary_files(report)
    text = section(root)
    assert "12 completed runs, each a point" in text
    assert "N is the all parameters (`params_with_embeddings`, scaling.parameters=total" in text
    # no scaling.flops: the split of the sweep's largest 6ND
    assert "FLOPs (the sweep's largest 6ND; C ≈ 6ND)" in text and "(no bootstrap)" in text
    assert text.count("| 1e+12 | 6 |") == 1  # the seeds' points in the parabola


def test_the_fit_is_kept_and_fitted_again_when_a_point_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = write_sweep(tmp_path, scaling={"bootstrap": 3, "grid": "coarse"})
    write_summary_files(build_report(root))
    first = section(root)
    assert "The fit is kept in `scaling_fit.json`" in first

    def no_fit(*args: object, **kwargs: object) -> None:
        raise AssertionError("fitted again")

    monkeypatch.setattr(report_module, "fit_law", no_fit)
    write_summary_files(build_report(root))
    assert section(root) == first  # read back, its time included
    record = read_record(root / "0")
    write_record(root / "0", {**record, "val_loss": record["val_loss"] + 0.01})
    with pytest.raises(AssertionError, match="fitted again"):
        build_report(root)
    (root / "scaling_fit.json").write_text("{", encoding="utf-8")  # damaged: fitted again
    monkeypatch.undo()
    monkeypatch.setitem(law.GRIDS, "coarse", law.COARSE[::9])
    write_summary_files(build_report(root))
    assert "12 completed runs" in section(root)


@pytest.mark.parametrize(
    ("sizes", "budgets"),
    [({"64": 8e4}, BUDGETS), (SIZES, ("1e12",))],
    ids=["one size", "one budget"],
)
def test_a_sweep_of_one_size_or_one_compute_has_no_section(
    tmp_path: Path, sizes: dict[str, float], budgets: tuple[str, ...]
) -> None:
    root = write_sweep(tmp_path, sizes=sizes, budgets=budgets)
    report = build_report(root)
    written = {path.name for path in write_summary_files(report)}
    assert section(root) == "" and not {"isoflop.png", "scaling_law.png"} & written


def test_the_group_is_recorded_with_the_settings() -> None:
    overrides = ("scaling.flops=1e18", "scaling.parameters=total", "output_dir=unused")
    settings = parse_settings(compose_config(*overrides))
    recorded = settings.plain()["scaling"]
    assert recorded["flops"] == 1e18 and recorded["parameters"] == "total"
    assert recorded["grid"] == "replication" and recorded["bootstrap"] == 200


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"flops": 0.0}, "scaling.flops=0.0 must be > 0"),
        ({"parameters": "all"}, "scaling.parameters='all' must be one of non_embedding, total"),
        ({"bootstrap": -1}, "scaling.bootstrap=-1 must be >= 0"),
        ({"level": 1.0}, "scaling.level=1.0 must be in (0, 1)"),
        ({"grid": "fine"}, "scaling.grid='fine' must be one of replication, coarse"),
        ({"bootstrap": "many"}, "scaling.bootstrap='many' has type str; expected int"),
    ],
)
def test_bad_settings_are_refused(values: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        ScalingConfig(**values)


def test_a_mode_that_fits_nothing_refuses_the_settings() -> None:
    ScalingConfig(flops=1e18).check_mode("train")
    ScalingConfig().check_mode("eval")
    with pytest.raises(ValueError, match="scaling.flops is read by the report of a training"):
        ScalingConfig(flops=1e18).check_mode("eval")
