"""Optuna searches (``hydra/sweeper=optuna``): the objective is each job's best_val_loss, a
failed trial is recorded and the search goes on, a search where every trial failed ends in one
line with its summary written, a seeded search is reproduced (and so resumed) in its sweep
directory, and bad settings are answered in one line before any trial."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from omegaconf import DictConfig, OmegaConf

from analysis.records import write_metrics
from analysis.sweep_summary import write_sweep_summary
from conf.command_line import check_command_line
from modes.sweep import OPTUNA_SWEEPER, check_search
from tests.conftest import TINY, train_py

optuna = pytest.importorskip("optuna")

# A few steps a trial: the search's machinery is under test, not the loss it finds. Without
# TINY's learning rate and heads: the plugin drops a searched key that is also given one value.
SEARCH = [
    "-m",
    *(a for a in TINY if not a.startswith(("optim.lr=", "model.num_heads="))),
    "trainer.max_steps=4",
    "trainer.val_check_interval=2",
    "trainer.limit_val_batches=1",
    "hydra/sweeper=optuna",
]
LR, DROPOUT = (1e-4, 1e-2), (0.0, 0.3)
LR_AND_DROPOUT = [
    f"optim.lr=tag(log,interval({LR[0]},{LR[1]}))",
    f"model.dropout=interval({DROPOUT[0]},{DROPOUT[1]})",
]


def _rows(path: Path) -> list[dict[str, str]]:
    with open(path) as f:
        return list(csv.DictReader(f))


def _metrics(sweep: Path, run: str) -> dict:
    return json.loads((sweep / run / "metrics.json").read_text())


def _error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("tinylm: error:")]


# --------------------------------------------------------------------------- searches


@pytest.mark.slow
def test_a_seeded_search_lists_its_trials_and_is_reproduced_in_its_directory(
    tmp_path: Path,
) -> None:
    sweep = tmp_path / "sweep"
    args = [
        *SEARCH,
        "hydra.sweeper.n_trials=3",
        "hydra.sweeper.sampler.seed=0",
        "model.num_heads=2",
        *LR_AND_DROPOUT,
        f"hydra.sweep.dir={sweep}",
    ]
    proc = train_py(*args, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    runs = _rows(sweep / "runs.csv")
    assert [r["run"] for r in runs] == ["0", "1", "2"]  # one row per trial, in trial order
    assert all(r["status"] == "completed" for r in runs)
    jobs = [_metrics(sweep, r["run"]) for r in runs]
    lrs = [float(j["overrides"]["optim.lr"]) for j in jobs]
    dropouts = [float(j["overrides"]["model.dropout"]) for j in jobs]
    assert all(LR[0] <= x <= LR[1] for x in lrs) and all(
        DROPOUT[0] <= x <= DROPOUT[1] for x in dropouts
    )
    assert len(set(lrs)) == 3  # drawn, not a grid
    # Each trial its own configuration (the seed is the replicate key: none here).
    configurations = _rows(sweep / "summary.csv")
    assert sorted(float(c["optim.lr"]) for c in configurations) == sorted(lrs)
    assert all(c["n"] == "1" for c in configurations)
    # Optuna minimised what the jobs returned: their best_val_loss.
    result = OmegaConf.load(sweep / "optimization_results.yaml")
    losses = [j["best_val_loss"] for j in jobs]
    best = losses.index(min(losses))
    assert result.best_value == pytest.approx(min(losses))
    assert result.best_params["optim.lr"] == pytest.approx(lrs[best])
    assert result.best_params["model.dropout"] == pytest.approx(dropouts[best])
    summary = (sweep / "summary.md").read_text()
    assert f"Optuna's best trial: run {best} (" in summary
    assert not (sweep / "heatmap_val_loss.png").exists()  # a search fills no grid
    assert (sweep / "curves_val_loss.png").is_file()
    assert "setup plugin alembic" not in proc.stdout + proc.stderr

    # The same command in the same directory: the seeded sampler proposes the same trials,
    # so every finished one is skipped (other values would stop the sweep) and the study ends
    # where it ended.
    assert f"re-run the same command with hydra.sweep.dir={sweep}" in proc.stdout
    again = train_py(*args, cwd=tmp_path)
    assert again.returncode == 0, again.stderr[-3000:]
    assert again.stdout.count("already completed, skipping it") == 3
    assert OmegaConf.load(sweep / "optimization_results.yaml") == result


@pytest.mark.slow
def test_a_failed_trial_is_recorded_and_the_search_goes_on(tmp_path: Path) -> None:
    sweep = tmp_path / "sweep"
    # TINY's width 32 takes 2 heads, not 3. The seeded random sampler draws 3, 2, 3: the
    # study must carry on past a failed trial, and one trial at a time (n_jobs=1) the next
    # trial is asked after the failure is told. The search space comes from a config file.
    preset = tmp_path / "conf" / "experiment" / "heads.yaml"
    preset.parent.mkdir(parents=True)
    preset.write_text(
        "# @package _global_\nhydra:\n  sweeper:\n    params:\n      model.num_heads: choice(2,3)\n"
    )
    proc = train_py(
        "--config-dir",
        str(tmp_path / "conf"),
        *SEARCH,
        "experiment=heads",
        "hydra/sweeper/sampler=random",
        "hydra.sweeper.sampler.seed=0",
        "hydra.sweeper.n_trials=3",
        "hydra.sweeper.n_jobs=1",
        "logger=tensorboard",
        f"hydra.sweep.dir={sweep}",
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    runs = _rows(sweep / "runs.csv")
    heads = [r["model.num_heads"] for r in runs]
    assert heads == ["3", "2", "3"], "the seeded draws this test relies on changed"
    assert [r["status"] for r in runs] == ["failed", "completed", "failed"]
    assert "not divisible by num_heads=3" in runs[0]["error"]
    by_heads = {c["model.num_heads"]: c for c in _rows(sweep / "summary.csv")}
    assert (by_heads["3"]["n"], by_heads["3"]["failed"]) == ("0", "2")
    assert (by_heads["2"]["n"], by_heads["2"]["failed"]) == ("1", "0")
    # The failed trials were no value to Optuna: its best is the completed one.
    result = OmegaConf.load(sweep / "optimization_results.yaml")
    assert result.best_params == {"model.num_heads": 2}
    assert result.best_value == pytest.approx(_metrics(sweep, "1")["best_val_loss"])
    # The run is named by the searched key alone (multirun.yaml's search space), as a swept
    # key names the runs of other sweeps.
    (run_dir,) = (sweep / "1" / "tensorboard").iterdir()
    assert run_dir.name == "model.num_heads=2"


def test_a_search_whose_every_trial_failed_ends_in_one_line_with_its_summary(
    tmp_path: Path,
) -> None:
    sweep = tmp_path / "sweep"
    proc = train_py(
        *SEARCH,
        "model.num_heads=3",  # every trial fails at its configuration check: no training
        "hydra.sweeper.n_trials=2",
        "optim.lr=interval(1e-4,1e-2)",
        f"hydra.sweep.dir={sweep}",
        cwd=tmp_path,
    )
    assert proc.returncode == 1
    # Unseeded: the start says that a re-run would not resume it.
    assert "has no hydra.sweeper.sampler.seed, so a re-run draws other trials" in proc.stdout
    assert "No trials are completed yet" not in proc.stderr  # the plugin's, answered here
    (line,) = _error_lines(proc.stderr)
    assert "all 2 trials of the Optuna search failed" in line
    assert str(sweep / "summary.md") in line
    assert proc.stderr.rstrip().endswith(line)  # the last word, no traceback after it
    runs = _rows(sweep / "runs.csv")
    assert [r["status"] for r in runs] == ["failed", "failed"]
    assert "Optuna's best trial" not in (sweep / "summary.md").read_text()
    assert not (sweep / "optimization_results.yaml").exists()


def test_the_summary_of_a_search_names_its_best_trial_and_draws_no_heatmap(
    tmp_path: Path,
) -> None:
    for job, (lr, loss) in enumerate([("0.001", 2.5), ("0.003", 2.25), ("0.002", 2.75)]):
        overrides = {"optim.lr": lr, "logger": "none"}
        record = {"status": "completed", "best_val_loss": loss, "overrides": overrides}
        write_metrics(tmp_path / str(job), record)
    OmegaConf.save({"hydra": {"sweeper": {"_target_": OPTUNA_SWEEPER}}}, tmp_path / "multirun.yaml")
    results = {"name": "optuna", "best_params": {"optim.lr": 0.003}, "best_value": 2.25}
    OmegaConf.save(results, tmp_path / "optimization_results.yaml")
    written = {p.name for p in write_sweep_summary(tmp_path)}
    assert written == {"summary.md", "summary.csv", "runs.csv"}  # no heatmap; no curves logged
    summary = (tmp_path / "summary.md").read_text()
    assert "Optuna's best trial: run 1 (optim.lr=0.003), best_val_loss 2.25" in summary
    assert "add seeds" not in summary  # a trial is one run: seeds would be searched, not replicates
    # The same sweep by the basic sweeper: a heatmap, no best trial.
    OmegaConf.save({"hydra": {"sweeper": {"_target_": "BasicSweeper"}}}, tmp_path / "multirun.yaml")
    assert "heatmap_val_loss.png" in {p.name for p in write_sweep_summary(tmp_path)}
    assert "Optuna's best trial" not in (tmp_path / "summary.md").read_text()


# --------------------------------------------------------------------------- bad settings


@pytest.mark.parametrize(
    ("override", "message"),
    [
        (
            "optim.lrr=interval(1e-4,1e-2)",
            "unknown key(s) optim.lrr (did you mean optim.lr?)",
        ),
        (
            "hydra.sweeper.params.optim.lrr=interval(1e-4,1e-2)",
            "unknown key(s) hydra.sweeper.params.optim.lrr (did you mean "
            "hydra.sweeper.params.optim.lr?)",
        ),
        (
            "hydra.sweeper.params.modle.dropout=interval(0,0.3)",
            "hydra.sweeper.params.modle (did you mean hydra.sweeper.params.model?)",
        ),
        (
            # A known key: Hydra cannot set it from the command line (quoted or not).
            "hydra.sweeper.params.optim.lr='interval(1e-4,1e-2)'",
            "give the search space as optim.lr=interval(1e-4,1e-2)",
        ),
        ("hydra.sweeper.params.model=choice(gtp,bert)", "did you mean model=gpt?"),
    ],
)
def test_a_search_space_is_checked_on_the_command_line(override: str, message: str) -> None:
    with pytest.raises(ValueError) as raised:
        check_command_line(["-m", "hydra/sweeper=optuna", override])
    assert message in str(raised.value)


def test_a_known_search_space_passes_the_command_line_check() -> None:
    check_command_line(["-m", "hydra/sweeper=optuna", *LR_AND_DROPOUT, "model=choice(gpt,bert)"])


def _search(*overrides: str, **settings: object) -> DictConfig:
    """The Hydra config of an Optuna search with ``settings`` and command-line ``overrides``."""
    sweeper = {"_target_": OPTUNA_SWEEPER, "direction": "minimize", "storage": None, **settings}
    return OmegaConf.create({"sweeper": sweeper, "overrides": {"task": list(overrides)}})


def test_search_space_in_a_config_file_is_checked() -> None:
    check_search(_search(params={"optim.lr": "interval(1e-4,1e-2)"}))
    with pytest.raises(ValueError, match=r"hydra.sweeper.params: .*did you mean optim.lr\?"):
        check_search(_search(params={"optim.lrr": "interval(1e-4,1e-2)"}))


def test_a_group_of_the_config_dir_may_be_searched(tmp_path: Path) -> None:
    for choice in ("small", "large"):
        (tmp_path / "size" / f"{choice}.yaml").parent.mkdir(exist_ok=True)
        (tmp_path / "size" / f"{choice}.yaml").write_text("# @package _global_\n")
    search = _search(params={"size": "choice(small,large)"})
    with pytest.raises(ValueError, match="unknown key"):
        check_search(search)  # conf/ alone has no group size
    sources = [{"path": str(tmp_path), "schema": "file", "provider": "command-line"}]
    search.runtime = {"config_sources": sources}
    check_search(search)


def test_a_key_searched_and_fixed_on_the_command_line_is_refused() -> None:
    check_search(_search("optim.lr=interval(1e-4,1e-2)", "model.dropout=0.1"))
    with pytest.raises(
        ValueError, match=r"optim.lr=3e-3 and optim.lr=interval\(.*not search optim"
    ):
        check_search(_search("optim.lr=3e-3", "optim.lr=interval(1e-4,1e-2)"))


def test_the_storage_check_agrees_with_optuna(tmp_path: Path) -> None:
    """A database storage is refused exactly when this install of Optuna cannot open it."""
    url = f"sqlite:///{tmp_path / 'study.db'}"
    try:
        check_search(_search(storage=url))
        refused = False
    except ValueError as err:
        assert "leave hydra.sweeper.storage at null" in str(err)
        refused = True
    try:
        optuna.create_study(storage=url, study_name="probe")
        opened = True
    except Exception:
        opened = False
    assert refused != opened
    check_search(_search(storage=None))


@pytest.mark.parametrize(
    ("overrides", "files", "message"),
    [
        (["hydra.sweeper.direction=maximize"], {}, "a loss to minimise"),
        (
            ["experiment=search"],
            {
                "experiment/search.yaml": "# @package _global_\n"
                "hydra:\n  sweeper:\n    params:\n      optim.lrr: interval(1e-4,1e-2)\n"
            },
            "hydra.sweeper.params: unknown key(s) optim.lrr (did you mean optim.lr?)",
        ),
    ],
)
def test_bad_search_settings_give_one_line_before_any_trial(
    tmp_path: Path, overrides: list[str], files: dict[str, str], message: str
) -> None:
    for name, text in files.items():
        (tmp_path / "conf" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "conf" / name).write_text(text)
    proc = train_py(
        *(["--config-dir", str(tmp_path / "conf")] if files else []),
        *SEARCH,
        *overrides,
        "optim.lr=interval(1e-4,1e-2)",
        f"hydra.sweep.dir={tmp_path / 's'}",
        cwd=tmp_path,
        timeout=120,
    )
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr
    (line,) = _error_lines(proc.stderr)
    assert message in line, proc.stderr[-2000:]
    assert not (tmp_path / "s" / "0").exists()  # no trial started
